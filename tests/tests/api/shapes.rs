//! The response shapes of every endpoint, success and error, as reviewed snapshots
//! (`snapshots/`): a change of shape shows up as a snapshot diff. Values that differ
//! between runs (ids, times, group ids) are redacted. The same snapshots must hold
//! on every host.

use engage_tests::{redact, send, Api, Reply};
use serde_json::{json, Value};

/// Status and redacted body (plus the `Allow` header where there is one).
fn shape(r: &Reply) -> Value {
    let mut v = json!({"status": r.status, "body": redact(r.body.clone())});
    if let Some(allow) = r.header("allow") {
        v["allow"] = json!(allow);
    }
    v
}

/// Replaces a group id wherever it appears in a body.
fn without(v: Value, id: &str) -> Value {
    serde_json::from_str(&v.to_string().replace(id, "[group]")).unwrap_or(v)
}

#[tokio::test]
async fn track_shapes() {
    let api = Api::new().await;
    let ok = api
        .post("/users/track", json!({
            "attributes": [{"external_id": "s1", "first_name": "Ann"}, {"first_name": "no identifier"}],
            "events": [{"external_id": "s1", "name": "e", "time": "2024-01-01T00:00:00Z"}],
            "purchases": [{"external_id": "s1", "product_id": "p", "currency": "USD", "price": 1, "time": "2024-01-01T00:00:00Z"}]
        }))
        .await;
    let fatal = api.post("/users/track", json!({"attributes": "nope"})).await;
    let nothing = api.post("/users/track", json!({"attributes": [{"first_name": "x"}]})).await;
    let bad_json = api.call("POST", "/users/track", Some(b"{".to_vec())).await;
    insta::assert_json_snapshot!(
        "track",
        json!({"success": shape(&ok), "fatal": shape(&fatal), "nothing_valid": shape(&nothing), "bad_json": shape(&bad_json)})
    );
}

#[tokio::test]
async fn track_sync_shapes() {
    let api = Api::new().await;
    let ok = api.post("/users/track/sync", json!({"attributes": [{"external_id": "s1", "color": "blue"}]})).await;
    let event = api
        .post(
            "/users/track/sync",
            json!({"events": [{"external_id": "s1", "name": "e", "time": "2024-01-01T00:00:00Z"}]}),
        )
        .await;
    let two = api.post("/users/track/sync", json!({"attributes": [{"external_id": "a"}, {"external_id": "b"}]})).await;
    insta::assert_json_snapshot!(
        "track_sync",
        json!({"attribute": shape(&ok), "event": shape(&event), "two_objects": shape(&two)})
    );
}

#[tokio::test]
async fn export_shapes() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "s1", "first_name": "Ann", "email": "s1@example.com", "n": 1}]}))
        .await;
    let ok = api.post("/users/export/ids", json!({"external_ids": ["s1", "missing"]})).await;
    let bad = api.post("/users/export/ids", json!({"external_ids": "s1"})).await;
    insta::assert_json_snapshot!("export", json!({"success": shape(&ok), "error": shape(&bad)}));
}

#[tokio::test]
async fn identity_shapes() {
    let api = Api::new().await;
    let alias = json!({"alias_name": "a1", "alias_label": "web"});
    api.track(json!({"attributes": [{"user_alias": alias, "_update_existing_only": false, "n": 1}]})).await;
    let identify =
        api.post("/users/identify", json!({"aliases_to_identify": [{"external_id": "s1", "user_alias": alias}]})).await;
    let identify_bad = api.post("/users/identify", json!({"aliases_to_identify": "x"})).await;
    api.track(json!({"attributes": [{"external_id": "s2"}]})).await;
    let merge = api
        .post("/users/merge", json!({"merge_updates": [{"identifier_to_merge": {"external_id": "s2"}, "identifier_to_keep": {"external_id": "s1"}}]}))
        .await;
    let merge_bad = api
        .post("/users/merge", json!({"merge_updates": [{"identifier_to_merge": {"x": 1}, "identifier_to_keep": {}}]}))
        .await;
    let alias_new = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [{"external_id": "s1", "alias_name": "b1", "alias_label": "app"}]}),
        )
        .await;
    let alias_update = api
        .post(
            "/users/alias/update",
            json!({"alias_updates": [{"alias_label": "app", "old_alias_name": "b1", "new_alias_name": "b2"}]}),
        )
        .await;
    let alias_bad = api.post("/users/alias/new", json!({"user_aliases": [{}]})).await;
    let delete = api.post("/users/delete", json!({"external_ids": ["s1", "missing"]})).await;
    let delete_bad = api.post("/users/delete", json!({"external_ids": [""]})).await;
    insta::assert_json_snapshot!(
        "identity",
        json!({
            "identify": shape(&identify), "identify_error": shape(&identify_bad),
            "merge": shape(&merge), "merge_error": shape(&merge_bad),
            "alias_new": shape(&alias_new), "alias_update": shape(&alias_update), "alias_error": shape(&alias_bad),
            "delete": shape(&delete), "delete_error": shape(&delete_bad)
        })
    );
}

#[tokio::test]
async fn subscription_shapes() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    api.track(json!({"attributes": [{"external_id": "s1", "email": "s1@example.com"}]})).await;
    let set_v1 = api
        .post(
            "/subscription/status/set",
            json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["s1", "missing"]}),
        )
        .await;
    let set_v1_bad = api
        .post("/subscription/status/set", json!({"subscription_group_id": g, "subscription_state": "subscribed", "email": "a@b.co", "phone": "+14155550100"}))
        .await;
    let set_v2 = api
        .post("/v2/subscription/status/set", json!({"subscription_groups": [{"subscription_group_id": g, "subscription_state": "unsubscribed", "emails": ["s1@example.com"]}]}))
        .await;
    let set_v2_bad = api.post("/v2/subscription/status/set", json!({"subscription_groups": []})).await;
    let user_status = api.get("/subscription/user/status?external_id[]=s1").await;
    let user_status_bad = api.get("/subscription/user/status?limit=1").await;
    let status_get = api.get(&format!("/subscription/status/get?subscription_group_id={g}&external_id=s1")).await;
    let status_get_bad = api.get("/subscription/status/get?external_id=s1").await;
    let email_status =
        api.post("/email/status", json!({"email": "s1@example.com", "subscription_state": "opted_in"})).await;
    let email_status_bad =
        api.post("/email/status", json!({"email": "s1@example.com", "subscription_state": "maybe"})).await;
    let blocklist = api.post("/email/blocklist", json!({"email": ["s1@example.com"]})).await;
    let blacklist_bad = api.post("/email/blacklist", json!({"email": "not an address"})).await;
    let all = json!({
        "set_v1": shape(&set_v1), "set_v1_error": shape(&set_v1_bad),
        "set_v2": shape(&set_v2), "set_v2_error": shape(&set_v2_bad),
        "user_status": shape(&user_status), "user_status_error": shape(&user_status_bad),
        "status_get": shape(&status_get), "status_get_error": shape(&status_get_bad),
        "email_status": shape(&email_status), "email_status_error": shape(&email_status_bad),
        "blocklist": shape(&blocklist), "blacklist_error": shape(&blacklist_bad)
    });
    insta::assert_json_snapshot!("subscriptions", without(all, &g));
}

/// The email and SMS lists and their removals, as the platform's clients read them.
#[tokio::test]
async fn list_shapes() {
    let api = Api::new().await;
    let file = json!({"workspaces": {&api.workspace: {
        "invalid_phone_numbers": [{"phone": "+12183095514", "invalid_detected_at": "2026-03-01T10:00:00Z"}],
        "hard_bounces": [{"email": "l1@example.com", "hard_bounced_at": "2026-02-01T00:00:00Z"}],
        "unsubscribes": [{"email": "l1@example.com", "unsubscribed_at": "2026-02-01T00:00:00Z"}]}}});
    assert_eq!(engage_tests::admin("POST", "/_engage/seed", file).await.status, 200);
    let hard_bounces = api.get("/email/hard_bounces?email=l1@example.com").await;
    let unsubscribes = api.get("/email/unsubscribes?email=l1@example.com&sort_direction=asc").await;
    let list_error = api.get("/email/unsubscribes?start_date=2026-01-01").await;
    let sms = api.get("/sms/invalid_phone_numbers?start_date=2026-03-01&end_date=2026-03-01").await;
    let sms_error = api.get("/sms/invalid_phone_numbers").await;
    let bounce_remove = api.post("/email/bounce/remove", json!({"email": "l1@example.com"})).await;
    let sms_remove = api.post("/sms/invalid_phone_numbers/remove", json!({"phone_numbers": ["12183095514"]})).await;
    let sms_remove_error = api.post("/sms/invalid_phone_numbers/remove", json!({"phone_numbers": ["nope"]})).await;
    let all = json!({
        "hard_bounces": shape(&hard_bounces), "unsubscribes": shape(&unsubscribes), "list_error": shape(&list_error),
        "sms": shape(&sms), "sms_error": shape(&sms_error), "bounce_remove": shape(&bounce_remove),
        "sms_remove": shape(&sms_remove), "sms_remove_error": shape(&sms_remove_error)
    });
    insta::assert_json_snapshot!("lists", all);
}

#[tokio::test]
async fn preference_center_shapes() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let body =
        json!({"name": "c", "preference_center_page_html": "<p>{{${first_name}}}</p>", "confirmation_page_html": "ok"});
    let create = api.post("/preference_center/v1", body.clone()).await;
    let id = create.body["preference_center_api_id"].as_str().unwrap_or("").to_string();
    let bad_template = api
        .post(
            "/preference_center/v1",
            json!({"name": "d", "preference_center_page_html": "{% nope %}", "confirmation_page_html": "ok"}),
        )
        .await;
    let duplicate = api.post("/preference_center/v1", body.clone()).await;
    let update = api.put(&format!("/preference_center/v1/{id}"), body.clone()).await;
    let renamed = api
        .put(
            &format!("/preference_center/v1/{id}"),
            json!({"name": "e", "preference_center_page_html": "x", "confirmation_page_html": "y"}),
        )
        .await;
    let list = api.get("/preference_center/v1/list").await;
    let get = api.get(&format!("/preference_center/v1/{id}")).await;
    let missing = api.get("/preference_center/v1/nope").await;
    let url = api.get(&format!("/preference_center/v1/{id}/url/u1")).await;
    let no_user = api.get(&format!("/preference_center/v1/{id}/url/ghost")).await;
    let all = json!({
        "create": shape(&create), "bad_template": shape(&bad_template), "duplicate": shape(&duplicate),
        "update": shape(&update), "renamed": shape(&renamed), "list": shape(&list), "get": shape(&get),
        "missing": shape(&missing), "url": shape(&url), "no_user": shape(&no_user),
    });
    let text = all.to_string().replace(&id, "[center]");
    let text = match url.body["preference_center_url"].as_str() {
        Some(u) => text.replace(u, "[url]"),
        None => text,
    };
    insta::assert_json_snapshot!("preference_center", serde_json::from_str::<Value>(&text).unwrap_or(all));
}

#[tokio::test]
async fn cdi_shapes() {
    let api = Api::new().await;
    let empty = api.get("/cdi/integrations").await;
    let id = api.integration("users", "sqlite:/tmp/warehouse.db", "USERS_SYNC", "users").await;
    let list = api.get("/cdi/integrations").await;
    let jobs = api.get(&format!("/cdi/integrations/{id}/job_sync_status")).await;
    let bad_cursor = api.get("/cdi/integrations?cursor=x").await;
    let bad_id = api.get("/cdi/integrations/x/job_sync_status").await;
    let all = json!({
        "empty": shape(&empty), "list": shape(&list), "jobs": shape(&jobs),
        "invalid_cursor": shape(&bad_cursor), "invalid_integration": shape(&bad_id),
    });
    let text = all.to_string().replace(&id, "[integration]").replace(&api.workspace, "[workspace]");
    insta::assert_json_snapshot!("cdi", serde_json::from_str::<Value>(&text).unwrap_or(all));
}

#[tokio::test]
async fn routing_and_credential_error_shapes() {
    let api = Api::new().await;
    let limited = Api::with_permissions(json!(["users.track"])).await;
    let not_found = api.get("/users/nope").await;
    let wrong_method = api.get("/users/track").await;
    let no_key = send("POST", "/users/track", &[], Some(b"{}".to_vec())).await;
    let bad_key = send("POST", "/users/track", &[("Authorization", "Bearer nope")], Some(b"{}".to_vec())).await;
    let forbidden = limited.post("/users/export/ids", json!({"external_ids": ["x"]})).await;
    let too_large = api.call("POST", "/users/track", Some(vec![b' '; 4 * 1024 * 1024 + 1])).await;
    insta::assert_json_snapshot!(
        "routing_and_credentials",
        json!({
            "not_found": shape(&not_found), "method_not_allowed": shape(&wrong_method),
            "missing_key": shape(&no_key), "invalid_key": shape(&bad_key),
            "missing_permission": shape(&forbidden), "payload_too_large": shape(&too_large)
        })
    );
}

#[tokio::test]
async fn kit_shapes() {
    use engage_tests::{admin, unique_workspace};
    let ws = unique_workspace();
    let made = admin("POST", "/_engage/workspaces", json!({"name": ws})).await;
    let key = made.body["api_key"].as_str().unwrap_or_default().to_string();
    let taken = admin("POST", "/_engage/workspaces", json!({"name": ws})).await;
    let bad = admin("POST", "/_engage/workspaces", json!({"name": format!("{ws}-x"), "api_key": "short"})).await;
    let auth = format!("Bearer {key}");
    let body = json!({"attributes": [{"external_id": "shape-1"}]}).to_string().into_bytes();
    send("POST", "/users/track", &[("Authorization", &auth), ("Content-Type", "application/json")], Some(body)).await;
    let saved = admin("POST", &format!("/_engage/snapshots/shape?workspace={ws}"), Value::Null).await;
    let listed = admin("GET", &format!("/_engage/snapshots?workspace={ws}"), Value::Null).await;
    let restored = admin("POST", &format!("/_engage/snapshots/shape/restore?workspace={ws}"), Value::Null).await;
    let missing = admin("POST", &format!("/_engage/snapshots/none/restore?workspace={ws}"), Value::Null).await;
    let bad_name = admin("POST", &format!("/_engage/snapshots/a%20b?workspace={ws}"), Value::Null).await;
    let state = admin("GET", &format!("/_engage/state?workspace={ws}"), Value::Null).await;
    // The state's documents by table (their keys and values hold ids and times).
    let tables: Vec<Value> = state.body["workspaces"][&ws]["documents"]
        .as_array()
        .map(|d| d.iter().map(|d| json!([d["table"], d.get("value").map_or("text", |_| "value")])).collect())
        .unwrap_or_default();
    let all = json!({
        "workspace": shape(&made), "workspace_taken": shape(&taken), "workspace_bad_key": shape(&bad),
        "snapshot": shape(&saved), "snapshots": shape(&listed), "restore": shape(&restored),
        "restore_unknown": shape(&missing), "snapshot_bad_name": shape(&bad_name),
        "state": {"status": state.status, "tables": tables},
    });
    let mut text = all.to_string().replace(&ws, "[workspace]");
    if !key.is_empty() {
        text = text.replace(&key, "[key]");
    }
    let mut v: Value = serde_json::from_str(&text).unwrap_or(all);
    for path in ["/snapshot/body", "/snapshots/body/snapshots/0"] {
        if let Some(s) = v.pointer_mut(path) {
            s["taken_at"] = json!("[time]");
            s["bytes"] = json!("[bytes]");
        }
    }
    insta::assert_json_snapshot!("kit", v);
}
