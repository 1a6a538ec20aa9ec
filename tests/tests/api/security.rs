//! Security probes every host answers alike (the ones that need a server of their
//! own, a browser or the command line are in host-native/tests/native/security.rs and
//! www/e2e/security.test.mjs; docs/security.md names the attacker of each).

use engage_tests::{admin, host, send, unique_workspace, Api};
use serde_json::{json, Value};

/// Every `/_engage/` answer, success or error, is kept by no cache and read by no
/// browser as anything but what it says.
#[tokio::test]
async fn operator_answers_are_never_cached_or_sniffed() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "private-1", "email": "private@example.com"}]})).await;
    let auth = format!("Bearer {}", host().admin_token);
    let users = format!("/_engage/workspaces/{}/users?q=private-1", api.workspace);
    let paths = ["/_engage/journal", users.as_str(), "/_engage/workspaces", "/_engage/inspector"];
    for path in paths {
        for headers in [vec![("Authorization", auth.as_str())], vec![]] {
            let r = send("GET", path, &headers, None).await;
            assert_eq!(r.header("cache-control"), Some("no-store"), "{path} ({})", r.status);
            assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{path} ({})", r.status);
        }
    }
    let found = send("GET", &users, &[("Authorization", &auth)], None).await;
    assert_eq!(found.body["users"][0]["email"], "private@example.com", "{}", found.body);
}

#[tokio::test]
async fn a_fixtures_file_naming_a_workspace_or_a_key_twice_is_refused_and_loads_nothing() {
    let ws = unique_workspace();
    let key = format!("{ws}-key-0123456789abcdef0123456789");
    let part = json!({"keys": [{"key": key, "permissions": "all"}]});
    // The same workspace twice: JSON keeps only the last, so it is refused.
    let text = format!(r#"{{"workspaces": {{"{ws}": {part}, "{ws}": {{"keys": []}}}}}}"#);
    let auth = format!("Bearer {}", host().admin_token);
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let r = send("POST", "/_engage/seed", &headers, Some(text.into_bytes())).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains(&format!("'{ws}' is named twice")), "{}", r.body);
    // One key in two workspaces.
    let other = unique_workspace();
    let twice = json!({"workspaces": {ws.as_str(): part.clone(), other.as_str(): part.clone()}});
    let r = admin("POST", "/_engage/seed", twice).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains("is already given at"), "{}", r.body);
    // Nothing of either file was loaded.
    let export = [("Authorization", format!("Bearer {key}")), ("Content-Type", "application/json".into())];
    let export: Vec<(&str, &str)> = export.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = send("POST", "/users/export/ids", &export, Some(br#"{"external_ids": ["x"]}"#.to_vec())).await;
    assert_eq!(r.status, 401, "the key was not made");
}

#[tokio::test]
async fn a_reset_naming_a_parameter_twice_or_a_dot_workspace_is_refused() {
    let (a, b) = (unique_workspace(), unique_workspace());
    for query in [format!("workspace={a}&workspace={b}"), format!("workspace={a}&keep=none&keep=keys")] {
        let r = admin("POST", &format!("/_engage/reset?{query}"), Value::Null).await;
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        assert!(r.body["message"].as_str().unwrap().contains("more than once"), "{}", r.body);
    }
    for dots in [".", ".."] {
        let r = admin("POST", &format!("/_engage/reset?workspace={dots}"), Value::Null).await;
        assert_eq!(r.status, 400, "{dots}: {}", r.body);
        let r = admin("POST", "/_engage/keys", json!({"workspace": dots, "permissions": "all"})).await;
        assert_eq!(r.status, 400, "{dots}: {}", r.body);
        let r = admin("POST", "/_engage/seed", json!({"workspaces": {dots: {}}})).await;
        assert_eq!(r.status, 400, "{dots}: {}", r.body);
        assert!(r.body["message"].as_str().unwrap().contains("workspace name"), "{}", r.body);
    }
}

#[tokio::test]
async fn a_signed_out_session_reads_and_changes_nothing() {
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let token = format!("token={}", host().admin_token);
    let signed = send("POST", "/_engage/inspector/login", &form, Some(token.into_bytes())).await;
    assert_eq!(signed.status, 303);
    let cookie = signed.header("set-cookie").expect("cookie").split(';').next().expect("pair").to_string();
    assert_eq!(send("GET", "/_engage/journal", &[("Cookie", &cookie)], None).await.status, 200);
    let with = [("Cookie", cookie.as_str()), ("X-Engage-Inspector", "1")];
    assert_eq!(send("POST", "/_engage/inspector/logout", &with, None).await.status, 303);
    assert_eq!(send("GET", "/_engage/journal", &[("Cookie", &cookie)], None).await.status, 401);
    let reset = format!("/_engage/reset?workspace={}", unique_workspace());
    assert_eq!(send("POST", &reset, &with, None).await.status, 401);
}

/// The page of a center is sandboxed: its scripts get an opaque origin (the
/// browser half of this is www/e2e/security.test.mjs).
#[tokio::test]
async fn a_preference_page_is_sandboxed_and_user_data_cannot_leave_its_attribute() {
    let api = Api::new().await;
    let page = "<form method=\"post\" action=\"{{preference_center_submit_url}}\">\
        <input value={{${last_name}}}><a href=\"{{custom_attribute.${site}}}\">site</a></form>";
    let center = api
        .post(
            "/preference_center/v1",
            json!({"name": "sandboxed", "preference_center_page_html": page, "confirmation_page_html": "<p>ok</p>"}),
        )
        .await;
    let id = center.body["preference_center_api_id"].as_str().expect("id").to_string();
    let evil = json!({"attributes": [{"external_id": "victim", "last_name": "x autofocus onfocus=alert(1)",
        "site": "javascript:fetch('/_engage/keys')"}]});
    assert_eq!(api.track(evil).await.status, 201);
    let link = api.get(&format!("/preference_center/v1/{id}/url/victim")).await;
    let path = engage_tests::link_path(link.body["preference_center_url"].as_str().expect("url"));
    let shown = engage_tests::open_page(&path).await;
    assert_eq!(shown.status, 200);
    let policy = shown.header("content-security-policy").expect("a policy");
    assert!(policy.starts_with("sandbox ") && policy.contains("allow-forms"), "{policy}");
    assert!(!policy.contains("allow-same-origin"), "{policy}");
    let html = shown.text();
    assert!(html.contains("<input value=x&#32;autofocus&#32;onfocus&#61;alert(1)>"), "{html}");
    assert!(html.contains("<a href=\"#\">site</a>") && !html.contains("javascript:"), "{html}");
}
