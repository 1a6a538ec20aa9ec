//! The hosted page: shown with the user's states, its form applied, and every way a
//! link or a form can be refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use engage_tests::{open_page, submit_form, Api};
use serde_json::{json, Value};

use super::{create, link};

/// A realistic page: every tag of the platform, the Liquid a real page uses, and
/// every option.
fn realistic(news: &str, offers: &str, tips: &str) -> Value {
    let page = format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><style>body {{ font-family: sans-serif; }}</style></head>
<body>
{{% comment %}} Greeting: first name, else a default {{% endcomment %}}
{{% capture greeting %}}Hello {{{{ ${{first_name}} | default: "friend" }}}}{{% endcapture %}}
<h1>{{{{ greeting }}}}</h1>
<p>Preferences for {{{{${{email_address}}}}}} ({{{{ ${{last_name}} | default: "no last name" | upcase }}}})</p>
<form method="post" action="{{{{preference_center_submit_url}}}}">
  {{% if subscribed_state.${{email_global}} == "unsubscribed" %}}
  <p>You are unsubscribed from all email.</p>
  {{% elsif subscribed_state.${{email_global}} == "opted_in" %}}
  <p>You opted in.</p>
  {{% else %}}
  <p>You are subscribed.</p>
  {{% endif %}}
  <input type="hidden" name="{{% form_field_name :email_global_state %}}" value="unsubscribed">
  <label><input type="checkbox" name="{{% form_field_name :email_global_state %}}" value="opted_in" {{% unless subscribed_state.${{email_global}} == "unsubscribed" %}}checked{{% endunless %}}> All email</label>
  <label><input type="checkbox" name="{{% form_field_name :subscription_group {news} %}}" value="subscribed" {{% if subscribed_state.${{{news}}} == "subscribed" %}}checked{{% endif %}}> News ({{{{subscribed_state.${{{news}}}}}}})</label>
  <label><input type="checkbox" name="{{% form_field_name :subscription_group {offers} %}}" value="subscribed" {{% if subscribed_state.${{{offers}}} == "subscribed" %}}checked{{% endif %}}> Offers ({{{{subscribed_state.${{{offers}}}}}}})</label>
  <label><input type="checkbox" name="{{% form_field_name :subscription_group {tips} %}}" value="subscribed" {{% if subscribed_state.${{{tips}}} == "subscribed" %}}checked{{% endif %}}> Tips ({{{{subscribed_state.${{{tips}}}}}}})</label>
  <button type="submit">Save</button>
</form>
</body>
</html>"#
    );
    let confirmation = format!(
        "<html><body><p>Thanks {{{{ ${{first_name}} | default: 'friend' }}}}: email {{{{subscribed_state.${{email_global}}}}}}, \
         news {{{{subscribed_state.${{{news}}}}}}}, offers {{{{subscribed_state.${{{offers}}}}}}}.</p></body></html>"
    );
    json!({
        "name": "realistic",
        "preference_center_title": "Manage <your> email",
        "preference_center_page_html": page,
        "confirmation_page_html": confirmation,
        "options": {
            "meta-viewport-content": "width=device-width, initial-scale=1",
            "links-tags": [
                {"rel": "icon", "href": "https://cdn.x.test/icon.png?a=1&b=2", "type": "image/png", "sizes": "32x32"},
                {"rel": "apple-touch-icon", "href": "/touch.png"},
                {"rel": "shortcut icon", "href": "/mask.svg", "type": "mask-icon", "color": "#5bbad5"}
            ]
        }
    })
}

struct World {
    api: Api,
    news: String,
    offers: String,
    tips: String,
    center: String,
}

async fn world() -> World {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let offers = api.group("Offers", "email").await;
    let tips = api.group("Tips", "email").await;
    api.track(json!({"attributes": [
        {"external_id": "zoe", "email": "zoe@x.test", "first_name": "Zoë <Z>", "email_subscribe": "subscribed",
         "subscription_groups": [
            {"subscription_group_id": news, "subscription_state": "subscribed"},
            {"subscription_group_id": offers, "subscription_state": "unsubscribed"}]},
        {"external_id": "zoe-work", "email": "zoe@x.test"}
    ]}))
    .await;
    let center = create(&api, realistic(&news, &offers, &tips)).await;
    World { api, news, offers, tips, center }
}

impl World {
    fn redact(&self, html: &str, path: &str) -> String {
        // A link names the server that made it, one of those under test.
        let html = engage_tests::host().bases().fold(html.to_string(), |h, base| h.replace(base.as_str(), "[base]"));
        html.replace(path, "/preferences/[token]")
            .replace(&self.news, "[news]")
            .replace(&self.offers, "[offers]")
            .replace(&self.tips, "[tips]")
    }

    async fn group_statuses(&self, user: &str) -> Value {
        let r = self.api.get(&format!("/subscription/user/status?external_id={user}")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let mut out = json!({});
        for g in r.body["users"][0]["subscription_groups"].as_array().cloned().unwrap_or_default() {
            let name = g["name"].as_str().unwrap_or("").to_string();
            out[name] = g["status"].clone();
        }
        out
    }
}

#[tokio::test]
async fn the_page_renders_every_tag_and_option_for_a_user_with_mixed_states() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let page = open_page(&path).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    // Not to be framed by another site.
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        page.header("content-security-policy"),
        Some("sandbox allow-forms allow-scripts allow-popups allow-popups-to-escape-sandbox; frame-ancestors 'none'")
    );
    insta::assert_snapshot!("realistic_page", w.redact(&page.text(), &path));
    // HEAD: the page's headers, no body.
    let head = engage_tests::send("HEAD", &path, &[], None).await;
    assert_eq!((head.status, head.header("content-type")), (200, Some("text/html; charset=utf-8")));
    assert!(head.text().is_empty(), "{}", head.text());
}

#[tokio::test]
async fn a_submitted_form_changes_the_states_and_shows_the_confirmation() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    // As a browser sends it: the hidden global input, then the ticked boxes (news
    // unticked, offers ticked, tips left out: unsubscribed).
    let form = format!(
        "email_global_state=unsubscribed&email_global_state=opted_in&subscription_group_{}=subscribed",
        w.offers
    );
    let done = submit_form(&path, &form).await;
    // Post/redirect/get: a 303 to the confirmation page, which a reload shows again
    // without sending the form again.
    assert_eq!(done.status, 303, "{}", done.text());
    let location = engage_tests::link_path(done.header("location").expect("a Location"));
    assert_eq!(location, format!("{path}?saved=1"));
    let confirmation = open_page(&location).await;
    assert_eq!(confirmation.status, 200);
    insta::assert_snapshot!("realistic_confirmation", w.redact(&confirmation.text(), &path));

    assert_eq!(
        w.group_statuses("zoe").await,
        json!({"News": "Unsubscribed", "Offers": "Subscribed", "Tips": "Unsubscribed"})
    );
    assert_eq!(w.api.user("zoe").await["email_subscribe"], "opted_in");
    assert_eq!(w.api.user("zoe-work").await["email_subscribe"], "opted_in", "the same address follows");
    assert_eq!(
        w.group_statuses("zoe-work").await["News"],
        "Unsubscribed",
        "an email group's state goes to every user with the address"
    );
    // The page now shows the new states.
    let again = open_page(&path).await.text();
    assert!(again.contains("You opted in."), "{again}");
}

#[tokio::test]
async fn a_bad_form_is_a_400_page_and_changes_nothing() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let before = (w.group_statuses("zoe").await, w.api.user("zoe").await["email_subscribe"].clone());
    let news = format!("subscription_group_{}", w.news);
    for form in [
        "email_global_state=opted_in&hacker=1".to_string(),
        "email_global_state=sometimes".to_string(),
        format!("{news}=opted_in"),
        format!("subscription_group_{}=subscribed", "not/a/group"),
    ] {
        let r = submit_form(&path, &form).await;
        assert_eq!(r.status, 400, "{form}: {}", r.text());
        assert!(r.text().contains("The form could not be saved"), "{}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    }
    let json = engage_tests::send("POST", &path, &[("Content-Type", "application/json")], Some(b"{}".to_vec())).await;
    assert_eq!(json.status, 415);
    assert_eq!((w.group_statuses("zoe").await, w.api.user("zoe").await["email_subscribe"].clone()), before);
}

/// `token` with its character at `at` replaced by another base64url character.
fn flip(token: &str, at: usize) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[tokio::test]
async fn a_link_shows_nothing_of_who_it_is_for() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let token = path.strip_prefix("/preferences/").expect("token");
    let bytes = B64.decode(token).expect("base64url");
    for part in [w.api.workspace.as_str(), w.center.as_str(), "zoe"] {
        assert!(!token.contains(part), "{part} shows in {token}");
        assert!(!bytes.windows(part.len()).any(|b| b == part.as_bytes()), "{part} shows in the decoded token");
    }
    // Two links for the same user differ (a fresh nonce each), and both work.
    let again = link(&w.api, &w.center, "zoe").await;
    assert_ne!(again, path);
    assert_eq!(open_page(&path).await.status, 200);
    assert_eq!(open_page(&again).await.status, 200);
}

#[tokio::test]
async fn tampered_foreign_and_expired_links_get_a_403_page_and_change_nothing() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let token = path.strip_prefix("/preferences/").expect("token");
    let other = Api::new().await;
    other.track(json!({"attributes": [{"external_id": "zoe"}]})).await;
    let theirs = create(&other, super::body("theirs")).await;
    let their_path = link(&other, &theirs, "zoe").await;
    let their_token = their_path.strip_prefix("/preferences/").expect("token");

    let n = token.len();
    let forged = [
        flip(token, 0),
        flip(token, 1),
        flip(token, n / 2),
        flip(token, n - 2),
        token[..n - 4].to_string(),
        format!("{token}AAAA"),
        // Our token's head on their token's tail, and the other way round.
        format!("{}{}", &token[..n / 2], &their_token[n / 2..]),
        format!("{}{}", &their_token[..n / 2], &token[n / 2..]),
        // Made-up tokens of the old (signed) format.
        format!(
            "{}.{}",
            B64.encode(format!("v1\u{1f}{}\u{1f}{}\u{1f}zoe\u{1f}99999999999", w.api.workspace, w.center)),
            B64.encode([0u8; 32])
        ),
        "not-a-token".to_string(),
    ];
    for f in &forged {
        let path = format!("/preferences/{f}");
        let r = open_page(&path).await;
        assert_eq!(r.status, 403, "{f}");
        assert!(r.text().contains("This link is not valid"), "{}", r.text());
        let r = submit_form(&path, "email_global_state=unsubscribed").await;
        assert_eq!(r.status, 403);
    }
    assert_eq!(w.api.user("zoe").await["email_subscribe"], "subscribed");

    let r = w.api.get(&format!("/preference_center/v1/{}/url/zoe?expires_in=1", w.center)).await;
    let short = engage_tests::link_path(r.body["preference_center_url"].as_str().expect("url"));
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let r = open_page(&short).await;
    assert_eq!(r.status, 403);
    assert!(r.text().contains("This link has expired"));
    assert_eq!(submit_form(&short, "email_global_state=unsubscribed").await.status, 403);
    assert_eq!(w.api.user("zoe").await["email_subscribe"], "subscribed");
}

#[tokio::test]
async fn a_draft_center_or_a_deleted_user_is_not_served() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let update = json!({"state": "draft", "preference_center_page_html": "x", "confirmation_page_html": "y"});
    assert_eq!(w.api.put(&format!("/preference_center/v1/{}", w.center), update).await.status, 200);
    let r = open_page(&path).await;
    assert_eq!(r.status, 404);
    assert!(r.text().contains("not published"));
    assert_eq!(submit_form(&path, "").await.status, 404);

    let back = json!({"state": "active", "preference_center_page_html": "hi", "confirmation_page_html": "y"});
    w.api.put(&format!("/preference_center/v1/{}", w.center), back).await;
    assert_eq!(open_page(&path).await.status, 200);
    assert_eq!(w.api.post("/users/delete", json!({"external_ids": ["zoe"]})).await.status, 201);
    let r = open_page(&path).await;
    assert_eq!(r.status, 404);
    assert!(r.text().contains("no longer exists"));
}

#[tokio::test]
async fn submissions_are_limited_per_user_and_center_whichever_link() {
    let w = world().await;
    engage_tests::wait_for_minute_with_secs_left(20).await;
    let path = link(&w.api, &w.center, "zoe").await;
    let other_user = link(&w.api, &w.center, "zoe-work").await;
    let form = "email_global_state=opted_in";
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(submit_form(&path, form).await.status);
    }
    assert!(statuses.iter().all(|s| *s == 303), "{statuses:?}");
    let limited = submit_form(&path, form).await;
    assert_eq!(limited.status, 429, "{statuses:?}");
    assert!(limited.header("x-ratelimit-retry-after").is_some());
    // A new link for the same user and center starts no new count.
    let r = w.api.get(&format!("/preference_center/v1/{}/url/zoe?expires_in=3600", w.center)).await;
    let fresh = engage_tests::link_path(r.body["preference_center_url"].as_str().expect("url"));
    assert_ne!(fresh, path);
    assert_eq!(submit_form(&fresh, form).await.status, 429, "a new link shares the limit");
    assert_eq!(submit_form(&other_user, form).await.status, 303, "another user has their own limit");
}

#[tokio::test]
async fn a_form_shown_before_the_page_changed_keeps_its_opt_out() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    let old_form = format!("email_global_state=unsubscribed&subscription_group_{}=subscribed", w.news);
    // The page changes while the form is open: the News group is taken out of it.
    let update = json!({"preference_center_page_html": "<form>{% form_field_name :email_global_state %}</form>",
        "confirmation_page_html": "<p>Saved</p>"});
    assert_eq!(w.api.put(&format!("/preference_center/v1/{}", w.center), update).await.status, 200);
    let done = submit_form(&path, &old_form).await;
    assert_eq!(done.status, 303, "{}", done.text());
    assert_eq!(w.api.user("zoe").await["email_subscribe"], "unsubscribed", "the opt-out is saved");
}

#[tokio::test]
async fn opt_outs_in_fields_the_page_no_longer_shows_are_saved_and_other_choices_passed_over() {
    let w = world().await;
    let path = link(&w.api, &w.center, "zoe").await;
    // The page now shows only the Tips group: the open form still has the global
    // state, News (subscribed now) and Offers (unsubscribed now).
    let update = json!({"preference_center_page_html": format!("<form>{{% form_field_name :subscription_group {} %}}</form>", w.tips),
        "confirmation_page_html": "<p>Saved</p>"});
    assert_eq!(w.api.put(&format!("/preference_center/v1/{}", w.center), update).await.status, 200);
    let bad = format!("email_global_state=maybe&subscription_group_{}=subscribed", w.tips);
    assert_eq!(submit_form(&path, &bad).await.status, 400, "a bad value in a stale field is still refused");
    let bad = format!("subscription_group_{}=maybe&subscription_group_{}=subscribed", w.news, w.tips);
    assert_eq!(submit_form(&path, &bad).await.status, 400);
    assert_eq!(w.group_statuses("zoe").await["News"], "Subscribed", "a refused form changes nothing");

    let form = format!(
        "email_global_state=unsubscribed&subscription_group_{}=unsubscribed&subscription_group_{}=subscribed&subscription_group_{}=subscribed",
        w.news, w.offers, w.tips
    );
    let done = submit_form(&path, &form).await;
    assert_eq!(done.status, 303, "{}", done.text());
    assert_eq!(w.api.user("zoe").await["email_subscribe"], "unsubscribed", "the stale global opt-out is saved");
    let groups = w.group_statuses("zoe").await;
    assert_eq!(groups["News"], "Unsubscribed", "the stale group opt-out is saved: {groups}");
    assert_eq!(groups["Offers"], "Unsubscribed", "a stale opt-in is passed over: {groups}");
    assert_eq!(groups["Tips"], "Subscribed", "the shown field is saved: {groups}");
}

#[tokio::test]
async fn system_pages_speak_the_center_s_language_or_else_the_browser_s() {
    let w = world().await;
    let german = [("Accept-Language", "de-DE,de;q=0.9,en;q=0.5")];
    // No center is known for a bad link: the browser's language.
    let r = engage_tests::send("GET", "/preferences/not-a-token", &german, None).await;
    assert_eq!(r.status, 403);
    assert!(r.text().contains("<html lang=\"de\">"), "{}", r.text());
    assert!(r.text().contains("Dieser Link ist ungültig"), "{}", r.text());
    assert!(r.text().contains("name=\"viewport\""));
    let r = open_page("/preferences/not-a-token").await;
    assert!(r.text().contains("<html lang=\"en\">") && r.text().contains("This link is not valid"), "{}", r.text());

    // A center whose page is in French: its system pages are French, whatever the browser says.
    let french = create(
        &w.api,
        json!({
            "name": "francais",
            "preference_center_page_html": format!(
                "<!doctype html><html lang=\"fr-CA\"><body><form method=post action=\"{{{{preference_center_submit_url}}}}\">\
                 <input type=checkbox name=\"{{% form_field_name :subscription_group {} %}}\" value=subscribed></form></body></html>",
                w.news
            ),
            "confirmation_page_html": "<html lang=fr><p>Merci</p></html>",
        }),
    )
    .await;
    let path = link(&w.api, &french, "zoe").await;
    let headers = [("Accept-Language", "de"), ("Content-Type", "application/x-www-form-urlencoded")];
    let bad = format!("subscription_group_{}=maybe", w.news);
    let r = engage_tests::send("POST", &path, &headers, Some(bad.into_bytes())).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("<html lang=\"fr\">"), "{}", r.text());
    assert!(r.text().contains("Le formulaire n’a pas pu être enregistré"), "{}", r.text());
    assert!(r.text().contains("Retour à vos préférences"), "a way back: {}", r.text());
    assert!(!r.text().contains("subscription_group"), "no field names: {}", r.text());
    let r = engage_tests::send("POST", &path, &[("Accept-Language", "de")], Some(b"a=b".to_vec())).await;
    assert_eq!(r.status, 415);
    assert!(r.text().contains("<html lang=\"fr\">"), "{}", r.text());
    // The saved form's redirect carries a French page too.
    let form = format!("subscription_group_{}=subscribed", w.news);
    let r = engage_tests::send("POST", &path, &headers, Some(form.into_bytes())).await;
    assert_eq!(r.status, 303);
    assert!(r.text().contains("Vos préférences sont enregistrées."), "{}", r.text());
    // A draft center is not served, in its own language.
    let draft = json!({"state": "draft", "preference_center_page_html": "<html lang=fr><p>x</p></html>",
                       "confirmation_page_html": "<p>y</p>"});
    assert_eq!(w.api.put(&format!("/preference_center/v1/{french}"), draft).await.status, 200);
    let r = engage_tests::send("GET", &path, &german, None).await;
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<html lang=\"fr\">"), "{}", r.text());
    assert!(r.text().contains("Cette page n’est pas disponible"), "{}", r.text());
}

#[tokio::test]
async fn pages_use_liquid_loops_cases_and_dates() {
    let w = world().await;
    let html = "{% assign plans = 'free,pro' | split: ',' %}<ul>{% for p in plans %}<li>{{ forloop.index }}:{{ p | upcase }}</li>{% endfor %}</ul>\
                {% case ${first_name} %}{% when 'Zoë <Z>' %}<b>hello {{ ${first_name} }}</b>{% else %}who{% endcase %}\
                <i>{{ 'now' | date: '%s' }}</i>";
    let center = create(
        &w.api,
        json!({"name": "liquid", "preference_center_page_html": html, "confirmation_page_html": "<p>ok</p>"}),
    )
    .await;
    let r = open_page(&link(&w.api, &center, "zoe").await).await;
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains("<ul><li>1:FREE</li><li>2:PRO</li></ul>"), "{text}");
    assert!(text.contains("<b>hello Zoë &lt;Z&gt;</b>"), "{text}");
    let shown: u64 =
        text.split("<i>").nth(1).and_then(|t| t.split("</i>").next()).and_then(|t| t.parse().ok()).expect("a time");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    assert!(shown.abs_diff(now) < 120, "'now' is the server's time: {shown} against {now}");
    // An unknown filter or tag is refused where it is written.
    let bad = json!({"name": "bad_liquid", "preference_center_page_html": "{% for i in (1..3) %}\n  {{ i | shout }}{% endfor %}",
                     "confirmation_page_html": "<p>ok</p>"});
    let r = w.api.post("/preference_center/v1", bad).await;
    assert_eq!(r.status, 400);
    assert!(r.body.to_string().contains("line 2, column 10: unknown filter 'shout'"), "{}", r.body);
}
