//! POST /preference_center/v1: every field's rule.

use engage_tests::Api;
use serde_json::{json, Value};

use super::body;

fn is_seconds_time(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T'
}

#[tokio::test]
async fn create_answers_the_id_the_liquid_tag_and_the_time_and_stores_every_field() {
    let api = Api::new().await;
    let r = api.post("/preference_center/v1", body("My_Center-1")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["message"], "success");
    assert_eq!(r.body["liquid_tag"], "{{preference_center.${My_Center-1}}}");
    assert!(is_seconds_time(&r.body["created_at"]), "{}", r.body);
    let id = r.body["preference_center_api_id"].as_str().expect("id");
    assert!(r.header("x-ratelimit-limit").is_some_and(|l| l == "10"));

    let got = api.get(&format!("/preference_center/v1/{id}")).await;
    assert_eq!(got.status, 200);
    let g = &got.body;
    assert_eq!(g["name"], "My_Center-1");
    assert_eq!(g["preference_center_api_id"], id);
    assert_eq!(g["created_at"], r.body["created_at"]);
    assert_eq!(g["updated_at"], r.body["created_at"]);
    assert_eq!(g["preference_center_title"], "Email Preferences", "the default title");
    assert_eq!(g["preference_center_page_html"], "<p>{{${email_address}}}</p>");
    assert_eq!(g["confirmation_page_html"], "<p>Saved</p>");
    assert_eq!(g["redirect_page_html"], Value::Null);
    assert_eq!(g["preference_center_options"], json!({}));
    assert_eq!(g["state"], "active", "the default state");
    assert_eq!(got.header("x-ratelimit-limit"), Some("1000"));
}

#[tokio::test]
async fn title_state_and_options_are_kept_as_sent() {
    let api = Api::new().await;
    let options = json!({
        "meta-viewport-content": "width=device-width, initial-scale=1",
        "links-tags": [
            {"rel": "icon", "href": "https://x.test/f.png", "type": "image/png", "sizes": "32x32"},
            {"rel": "shortcut icon", "href": "/f.ico", "type": "image/x-icon"},
            {"rel": "apple-touch-icon", "href": "/t.png"},
            {"rel": "icon", "href": "/m.svg", "type": "mask-icon", "color": "#5bbad5"}
        ]
    });
    let mut b = body("styled");
    b["preference_center_title"] = json!("Your emails");
    b["state"] = json!("draft");
    b["options"] = options.clone();
    let id = super::create(&api, b).await;
    let g = api.get(&format!("/preference_center/v1/{id}")).await.body;
    assert_eq!(g["preference_center_title"], "Your emails");
    assert_eq!(g["state"], "draft");
    assert_eq!(g["preference_center_options"], options);
}

/// Each case in a workspace of its own: creation is limited to 10 a minute.
async fn refused(b: Value) -> Value {
    let api = Api::new().await;
    let r = api.post("/preference_center/v1", b.clone()).await;
    assert_eq!(r.status, 400, "{b} gave {} {}", r.status, r.body);
    let list = api.get("/preference_center/v1/list").await;
    assert_eq!(list.body["preference_centers"], json!([]), "nothing stored for {b}");
    r.body
}

fn with(key: &str, value: Value) -> Value {
    let mut b = body("c");
    b[key] = value;
    b
}

fn without(key: &str) -> Value {
    let mut b = body("c");
    b.as_object_mut().expect("object").remove(key);
    b
}

#[tokio::test]
async fn every_field_is_checked() {
    let cases: Vec<(Value, &str)> = vec![
        (without("name"), "'name' is required"),
        (with("name", json!("my center")), "'name' must be 1 to 255 letters, digits, hyphens or underscores"),
        (with("name", json!("café")), "letters, digits, hyphens or underscores"),
        (with("name", json!("")), "letters, digits, hyphens or underscores"),
        (with("name", json!(7)), "'name' must be a string"),
        (without("preference_center_page_html"), "'preference_center_page_html' is required"),
        (without("confirmation_page_html"), "'confirmation_page_html' is required"),
        (with("preference_center_title", json!(["t"])), "'preference_center_title' must be a string"),
        (with("state", json!("published")), "'state' must be 'active' or 'draft'"),
        (with("options", json!("x")), "'options' must be an object"),
        (with("options", json!({"favicon": "x"})), "'options' has an unknown field 'favicon'"),
        (with("options", json!({"meta-viewport-content": 1})), "'options.meta-viewport-content' must be a string"),
        (with("options", json!({"links-tags": {}})), "'options.links-tags' must be an array of objects"),
        (with("options", json!({"links-tags": [{"href": "/f"}]})), "'options.links-tags[0].rel' is required"),
        (
            with("options", json!({"links-tags": [{"rel": "favicon", "href": "/f"}]})),
            "'options.links-tags[0].rel' must be one of",
        ),
        (with("options", json!({"links-tags": [{"rel": "icon"}]})), "'options.links-tags[0].href' is required"),
        (
            with("options", json!({"links-tags": [{"rel": "icon", "href": "/f", "type": "image/jpeg"}]})),
            "'options.links-tags[0].type' must be one of",
        ),
        (
            with("options", json!({"links-tags": [{"rel": "icon", "href": "/f", "sizes": 16}]})),
            "'options.links-tags[0].sizes' must be a string",
        ),
        (with("redirect_page_html", json!("x")), "unknown field 'redirect_page_html'"),
    ];
    for (b, message) in cases {
        let body = refused(b.clone()).await;
        let got = body["message"].as_str().unwrap_or("");
        assert!(got.contains(message), "{b}: {got}");
    }
    let api = Api::new().await;
    let r = api.call("POST", "/preference_center/v1", Some(b"{".to_vec())).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn a_template_that_does_not_parse_or_names_an_unknown_group_is_a_400_with_line_and_column() {
    let page = "<p>\n  {% iff x %}\n</p>";
    let e = refused(with("preference_center_page_html", json!(page))).await;
    assert_eq!(
        e["errors"][0],
        json!({"field": "preference_center_page_html", "line": 2, "column": 3, "message": "unknown tag 'iff'"})
    );
    assert!(e["message"].as_str().unwrap().contains("line 2, column 3"), "{e}");

    let confirmation = "ok {{ subscribed_state.${no-such-group} }}";
    let e = refused(with("confirmation_page_html", json!(confirmation))).await;
    assert_eq!(e["errors"][0]["field"], "confirmation_page_html");
    assert_eq!((e["errors"][0]["line"].clone(), e["errors"][0]["column"].clone()), (json!(1), json!(4)));
    assert_eq!(e["errors"][0]["message"], "unknown subscription group 'no-such-group'");

    let field = "<input name=\"{% form_field_name :subscription_group nope %}\">";
    let e = refused(with("preference_center_page_html", json!(field))).await;
    assert_eq!(e["errors"][0]["message"], "unknown subscription group 'nope'");

    for (page, message) in [
        ("{{ ${shoe_size} }}", "unknown attribute '${shoe_size}'"),
        ("{% if true %}", "'{% if %}' is not closed"),
        ("{{ x | shout }}", "unknown variable 'x'"),
        ("{{ ${first_name} | shout }}", "unknown filter 'shout'"),
        ("{{ open", "is not closed with '}}'"),
    ] {
        let e = refused(with("preference_center_page_html", json!(page))).await;
        assert!(e["message"].as_str().unwrap().contains(message), "{page}: {e}");
    }
}

#[tokio::test]
async fn a_known_group_may_be_named_and_names_are_unique_per_workspace() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    let page =
        format!("{{{{subscribed_state.${{{g}}}}}}}<input name=\"{{% form_field_name :subscription_group {g} %}}\">");
    super::create(&api, with("preference_center_page_html", json!(page))).await;
    let again = api.post("/preference_center/v1", body("c")).await;
    assert_eq!(again.status, 400);
    assert_eq!(again.body["message"], "a preference center named 'c' already exists");
    // Another workspace may use the name.
    super::create(&Api::new().await, body("c")).await;
}

#[tokio::test]
async fn writes_are_limited_to_ten_a_minute_and_need_their_permission() {
    // The eleven requests must fall in one minute's window: a window that turns over
    // while they are sent (a slow host) would let the eleventh through, so start in
    // a fresh workspace once the current window has at least 20 s left.
    let mut api = Api::new().await;
    let mut first = api.post("/preference_center/v1", body("c0")).await;
    let left: u64 = first.header("x-ratelimit-reset").and_then(|r| r.parse().ok()).unwrap_or(60);
    if left < 20 {
        tokio::time::sleep(std::time::Duration::from_secs(left + 1)).await;
        api = Api::new().await;
        first = api.post("/preference_center/v1", body("c0")).await;
    }
    assert_eq!(first.status, 201, "{}", first.body);
    let mut last = None;
    for i in 1..11 {
        last = Some(api.post("/preference_center/v1", body(&format!("c{i}"))).await);
    }
    let last = last.expect("sent");
    assert_eq!(last.status, 429, "{}", last.body);
    assert!(last.header("x-ratelimit-retry-after").is_some());
    assert_eq!(
        api.get("/preference_center/v1/list").await.body["preference_centers"].as_array().map(Vec::len),
        Some(10)
    );

    let reader = Api::with_permissions(json!(["preference_center.get", "preference_center.list"])).await;
    let r = reader.post("/preference_center/v1", body("x")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["message"], "Access Denied: this API key lacks the 'preference_center.update' permission");
}
