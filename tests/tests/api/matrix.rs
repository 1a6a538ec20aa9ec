//! Tables over every API-key endpoint of `core/src/routes/mod.rs`: permissions, SCIM
//! tokens versus API keys, workspace isolation. Failures are reported together, each
//! naming the endpoint and the permission (or the request) at fault.

use engage_tests::{send, Api, Reply, Scim};
use serde_json::{json, Value};

use crate::scim::{ERROR_URN, USER_URN};

/// Every permission an API key may carry (`core/src/permission.rs`).
const PERMISSIONS: &str = "users.track users.track.sync users.identify users.merge users.delete users.alias.new \
    users.alias.update users.export.ids subscription.status.set subscription.groups.get subscription.status.get \
    email.status email.blacklist preference_center.update preference_center.list preference_center.get \
    preference_center.user.get cdi.integration_list cdi.integration_job_status scim";

fn permissions() -> Vec<&'static str> {
    PERMISSIONS.split_whitespace().collect()
}

/// Every API-key endpoint of the route table: (method and path, the permission it
/// needs, the request: the query of a GET, the body of others), valid in a workspace
/// holding a [`Fixture`]: `{group}`, `{preferenceCenterExternalID}` and
/// `{integration_id}` stand for its objects, `{external_id}` for its user `u1`.
const ENDPOINTS: [(&str, &str, &str); 22] = [
    ("POST /users/track", "users.track", r#"{"attributes":[{"external_id":"t1","a":1}]}"#),
    ("POST /users/track/sync", "users.track.sync", r#"{"attributes":[{"external_id":"t2","a":1}]}"#),
    ("POST /users/export/ids", "users.export.ids", r#"{"external_ids":["u1"]}"#),
    (
        "POST /users/identify",
        "users.identify",
        r#"{"aliases_to_identify":[{"external_id":"i1","user_alias":{"alias_name":"a","alias_label":"b"}}]}"#,
    ),
    (
        "POST /users/merge",
        "users.merge",
        r#"{"merge_updates":[{"identifier_to_merge":{"external_id":"m1"},"identifier_to_keep":{"external_id":"m2"}}]}"#,
    ),
    ("POST /users/delete", "users.delete", r#"{"external_ids":["d1"]}"#),
    ("POST /users/alias/new", "users.alias.new", r#"{"user_aliases":[{"alias_name":"n","alias_label":"crm"}]}"#),
    (
        "POST /users/alias/update",
        "users.alias.update",
        r#"{"alias_updates":[{"alias_label":"crm","old_alias_name":"old","new_alias_name":"new"}]}"#,
    ),
    (
        "POST /subscription/status/set",
        "subscription.status.set",
        r#"{"subscription_group_id":"{group}","subscription_state":"subscribed","external_id":["u1"]}"#,
    ),
    (
        "POST /v2/subscription/status/set",
        "subscription.status.set",
        r#"{"subscription_groups":[{"subscription_group_id":"{group}","subscription_state":"subscribed","external_ids":["u1"]}]}"#,
    ),
    ("GET /subscription/user/status", "subscription.groups.get", "?external_id=u1"),
    ("GET /subscription/status/get", "subscription.status.get", "?subscription_group_id={group}&external_id=u1"),
    ("POST /email/status", "email.status", r#"{"email":"u1@example.com","subscription_state":"subscribed"}"#),
    ("POST /email/blacklist", "email.blacklist", r#"{"email":"b1@example.com"}"#),
    ("POST /email/blocklist", "email.blacklist", r#"{"email":"b2@example.com"}"#),
    (
        "POST /preference_center/v1",
        "preference_center.update",
        r#"{"name":"m","preference_center_page_html":"<p>A</p>","confirmation_page_html":"<p>B</p>"}"#,
    ),
    ("GET /preference_center/v1/list", "preference_center.list", ""),
    ("GET /preference_center/v1/{preferenceCenterExternalID}", "preference_center.get", ""),
    (
        "PUT /preference_center/v1/{preferenceCenterExternalID}",
        "preference_center.update",
        r#"{"preference_center_page_html":"<p>C</p>","confirmation_page_html":"<p>D</p>"}"#,
    ),
    ("GET /preference_center/v1/{preferenceCenterExternalID}/url/{external_id}", "preference_center.user.get", ""),
    ("GET /cdi/integrations", "cdi.integration_list", ""),
    ("GET /cdi/integrations/{integration_id}/job_sync_status", "cdi.integration_job_status", ""),
];

/// The objects the endpoints' requests name.
struct Fixture {
    group: String,
    center: String,
    integration: String,
}

/// Makes user `u1`, a group, a center and an integration with an all-permissions key.
async fn fixture(api: &Api) -> Fixture {
    let r =
        api.post("/users/track/sync", json!({"attributes": [{"external_id": "u1", "email": "u1@example.com"}]})).await;
    assert_eq!(r.status, 201, "fixture user: {}", r.body);
    let group = api.group("News", "email").await;
    let r = api.post("/preference_center/v1", center_body("fixture", "<p>{{${email_address}}}</p>")).await;
    assert_eq!(r.status, 201, "fixture center: {}", r.body);
    let center = r.body["preference_center_api_id"].as_str().expect("center id").to_string();
    let integration = api.integration("fixture", "sqlite:/tmp/none.db", "T", "users").await;
    Fixture { group, center, integration }
}

fn center_body(name: &str, page: &str) -> Value {
    json!({"name": name, "preference_center_page_html": page, "confirmation_page_html": "<p>Saved</p>"})
}

/// One endpoint's request, ready to send.
struct Endpoint {
    route: &'static str,
    permission: &'static str,
    method: &'static str,
    path: String,
    body: Option<Vec<u8>>,
}

fn endpoints(f: &Fixture) -> Vec<Endpoint> {
    let fill = |text: &str| {
        text.replace("{group}", &f.group)
            .replace("{preferenceCenterExternalID}", &f.center)
            .replace("{integration_id}", &f.integration)
            .replace("{external_id}", "u1")
    };
    let rows = ENDPOINTS.iter().map(|&(route, permission, request)| {
        let (method, path) = route.split_once(' ').expect("method and path");
        let (query, body) = if method == "GET" { (request, None) } else { ("", Some(fill(request).into_bytes())) };
        Endpoint { route, permission, method, path: fill(&format!("{path}{query}")), body }
    });
    rows.collect()
}

fn denied(permission: &str) -> Value {
    json!({"message": format!("Access Denied: this API key lacks the '{permission}' permission")})
}

fn report(what: &str, failures: Vec<String>) {
    assert!(failures.is_empty(), "{} {what}:\n{}", failures.len(), failures.join("\n"));
}

#[tokio::test]
async fn every_endpoint_needs_exactly_its_own_permission() {
    let permissions = permissions();
    assert_eq!(permissions.len(), 20);
    for p in permissions.iter().filter(|p| **p != "scim") {
        assert!(ENDPOINTS.iter().any(|e| e.1 == *p), "no endpoint of the table needs '{p}'");
    }
    let all = Api::new().await;
    let f = fixture(&all).await;
    // One key per permission, each holding only it, all in the fixture's workspace.
    let mut keys = Vec::new();
    for &p in &permissions {
        let ws = all.workspace.clone();
        keys.push(tokio::spawn(async move { Api::in_workspace(&ws, json!([p])).await }));
    }
    let mut apis = Vec::new();
    for k in keys {
        apis.push(k.await.expect("key task"));
    }
    let mut failures = Vec::new();
    for e in endpoints(&f) {
        // Each endpoint with every key at once; the one allowed call changes the
        // fixture in no way another endpoint's request depends on.
        let e = std::sync::Arc::new(e);
        let calls: Vec<_> = apis
            .iter()
            .map(|api| {
                let (api, e) = (api.clone(), e.clone());
                tokio::spawn(async move { api.call(e.method, &e.path, e.body.clone()).await })
            })
            .collect();
        for (p, call) in permissions.iter().zip(calls) {
            let r = call.await.expect("call task");
            let who = format!("{} (needs '{}') with a key holding only '{p}'", e.route, e.permission);
            if *p == e.permission {
                // Allowed: not 401/403 and, the request being valid, a success.
                if !(200..300).contains(&r.status) {
                    failures.push(format!("{who}: expected a success, got {} {}", r.status, r.body));
                }
            } else if r.status != 403 || r.body != denied(e.permission) {
                failures.push(format!("{who}: expected 403 {}, got {} {}", denied(e.permission), r.status, r.body));
            }
        }
    }
    report("permission-matrix failures", failures);
}

/// Every `/scim/v2` route: (method, path, body).
fn scim_routes() -> Vec<(&'static str, &'static str, Option<Value>)> {
    let name = json!({"givenName": "A", "familyName": "B"});
    let user = json!({"schemas": [USER_URN], "userName": "m@example.com", "name": name, "department": "pm"});
    let search =
        json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": "userName eq \"m\""});
    let op = json!([{"op": "replace", "path": "department", "value": "x"}]);
    let patch = json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": op});
    let id = "/scim/v2/Users/00000000-0000-4000-8000-000000000000";
    vec![
        ("GET", "/scim/v2/Users?filter=userName%20eq%20%22m%40example.com%22", None),
        ("POST", "/scim/v2/Users", Some(user.clone())),
        ("POST", "/scim/v2/Users/.search", Some(search.clone())),
        ("POST", "/scim/v2/.search", Some(search)),
        ("GET", id, None),
        ("PUT", id, Some(user)),
        ("DELETE", id, None),
        ("PATCH", id, Some(patch)),
        ("GET", "/scim/v2/ServiceProviderConfig", None),
        ("GET", "/scim/v2/ResourceTypes", None),
        ("GET", "/scim/v2/ResourceTypes/User", None),
        ("GET", "/scim/v2/Schemas", None),
        ("GET", "/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:User", None),
        ("GET", "/scim/v2/Me", None),
        ("POST", "/scim/v2/Bulk", Some(json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"]}))),
    ]
}

/// Sends a request with a bearer credential and an `X-Request-Origin`.
async fn bearer(method: &str, path: &str, credential: &str, origin: &str, body: Option<Vec<u8>>) -> Reply {
    let media = if path.starts_with("/scim/") { "application/scim+json" } else { "application/json" };
    let auth = format!("Bearer {credential}");
    send(method, path, &[("Authorization", auth.as_str()), ("X-Request-Origin", origin), ("Content-Type", media)], body)
        .await
}

#[tokio::test]
async fn scim_tokens_are_not_api_keys_and_api_keys_are_not_scim_tokens() {
    // The token itself calls only discovery, which counts in no daily limit: the SCIM
    // family's own sequence measures that limit and then spends it.
    let scim = Scim::new().await;
    let ok = scim.get("/scim/v2/ServiceProviderConfig").await;
    assert_eq!(ok.status, 200, "the SCIM token works on /scim/v2: {}", ok.body);
    let all = Api::new().await;
    let f = fixture(&all).await;
    let mut failures = Vec::new();
    for e in endpoints(&f) {
        let r = bearer(e.method, &e.path, &scim.token, &scim.origin, e.body.clone()).await;
        if r.status != 401 || r.body != json!({"message": format!("Invalid API key: {}", scim.token)}) {
            let (route, status, body) = (e.route, r.status, &r.body);
            failures.push(format!("{route} with a SCIM token: expected 401 Invalid API key, got {status} {body}"));
        }
    }
    for (method, path, body) in scim_routes() {
        let body = body.map(|b| b.to_string().into_bytes());
        let r = bearer(method, path, &all.key, &scim.origin, body.clone()).await;
        // What an unknown SCIM token gets.
        let unknown = bearer(method, path, "scim_00000000000000000000000000000000", &scim.origin, body).await;
        let shaped = r.status == 401
            && r.body["schemas"] == json!([ERROR_URN])
            && r.body["status"] == json!(401)
            && r.body["detail"].is_string()
            && r.header("content-type") == Some("application/scim+json");
        if !shaped || r.body != unknown.body {
            let (status, body) = (r.status, &r.body);
            failures.push(format!(
                "{method} {path} with an all-permissions API key: expected 401 {}, got {status} {body}",
                unknown.body
            ));
        }
    }
    report("credential mix-ups", failures);
}

const EMAIL: &str = "iso.a@example.com";
const EMAIL2: &str = "iso.a2@example.com";
const PHONE: &str = "+14155550123";
const BAD_GROUP: &str = "'subscription_group_id' must be a valid subscription group UUID";
const UNKNOWN_GROUP: &str = "Invalid subscription group ID";
const NO_CENTER: &str = "Preference center not found";
const NO_INTEGRATION: &str = "Invalid integration ID";

/// A page naming a subscription group (a form field and its state).
fn group_page(group: &str) -> String {
    format!(
        "<input name=\"{{% form_field_name :subscription_group {group} %}}\" value=\"{{{{subscribed_state.${{{group}}}}}}}\">"
    )
}

fn alias(name: &str, label: &str) -> Value {
    json!({"alias_name": name, "alias_label": label})
}

/// Workspace A's users, group, email state, center, integration and job; returns them,
/// u1's service id and values B never sends, which none of B's answers may show.
async fn workspace_a(a: &Api) -> (Fixture, String, Vec<String>) {
    let tag = a.workspace.clone();
    let [red, calm, title, name, news] = ["red", "calm", "title", "integration", "news"].map(|s| format!("{s}-{tag}"));
    let group = a.group(&news, "email").await;
    let sub = json!([{"subscription_group_id": group, "subscription_state": "subscribed"}]);
    let u1 = json!({"external_id": "u1", "email": EMAIL, "phone": PHONE, "color": red, "subscription_groups": sub});
    let r = a.post("/users/track/sync", json!({"attributes": [u1]})).await;
    assert_eq!(r.status, 201, "A's u1: {}", r.body);
    let anon = json!({"user_alias": alias("anon", "device"), "_update_existing_only": false, "mood": calm});
    a.track(json!({"attributes": [{"external_id": "u2", "email": EMAIL2, "size": 2}, anon]})).await;
    let crm = json!({"user_aliases": [{"external_id": "u1", "alias_name": "crm-1", "alias_label": "crm"}]});
    let r = a.post("/users/alias/new", crm).await;
    assert_eq!(r.status, 201, "A's alias: {}", r.body);
    let r = a.post("/email/status", json!({"email": EMAIL, "subscription_state": "opted_in"})).await;
    assert_eq!(r.status, 201, "A's email state: {}", r.body);
    let mut body = center_body("prefs", &group_page(&group));
    body["preference_center_title"] = json!(title);
    let r = a.post("/preference_center/v1", body).await;
    assert_eq!(r.status, 201, "A's center: {}", r.body);
    let center = r.body["preference_center_api_id"].as_str().expect("id").to_string();
    let integration = a.integration(&name, "sqlite:/nonexistent/warehouse.db", "USERS_SYNC", "users").await;
    a.sync(&integration).await;
    let sid = a.user("u1").await["service_id"].as_str().expect("service id").to_string();
    (Fixture { group, center, integration }, sid, vec![red, calm, title, name, news, tag])
}

/// A's data as A reads it: (request, [status, body]).
async fn snapshot(a: &Api, f: &Fixture, sid: &str) -> Vec<(String, Value)> {
    let export = |body: Value| ("POST", "/users/export/ids".to_string(), Some(body));
    let reads = [
        export(json!({"external_ids": ["u1", "u2"], "user_aliases": [alias("anon", "device")]})),
        export(json!({"email_address": EMAIL})),
        export(json!({"phone": PHONE})),
        export(json!({"service_id": sid})),
        ("GET", "/subscription/user/status?external_id=u1&external_id=u2".into(), None),
        ("GET", format!("/subscription/status/get?subscription_group_id={}&external_id=u1", f.group), None),
        ("GET", "/preference_center/v1/list".into(), None),
        ("GET", format!("/preference_center/v1/{}", f.center), None),
        ("GET", "/cdi/integrations".into(), None),
        ("GET", format!("/cdi/integrations/{}/job_sync_status", f.integration), None),
    ];
    let mut out = Vec::new();
    for (method, path, body) in reads {
        let r = a.call(method, &path, body.as_ref().map(|b| b.to_string().into_bytes())).await;
        out.push((format!("{method} {path} {}", body.unwrap_or_default()), json!([r.status, r.body])));
    }
    out
}

/// A request of B naming A's objects: what B must get (status, values at JSON pointers).
struct Probe {
    label: String,
    body: Option<Value>,
    status: u16,
    expect: Vec<(&'static str, Value)>,
}

/// A probe of `request` ("METHOD path").
fn probe(request: impl Into<String>, body: Value, status: u16, expect: &[(&'static str, Value)]) -> Probe {
    let (label, body) = (request.into(), (!body.is_null()).then_some(body));
    Probe { label, body, status, expect: expect.to_vec() }
}

/// Sends a probe with B's key; returns what was wrong with the answer.
async fn check(b: &Api, p: &Probe, secrets: &[String]) -> Vec<String> {
    let (method, path) = p.label.split_once(' ').expect("method and path");
    let r = b.call(method, path, p.body.as_ref().map(|v| v.to_string().into_bytes())).await;
    let label = format!("{} {}", p.label, p.body.clone().unwrap_or_default());
    let mut wrong = Vec::new();
    if r.status != p.status {
        wrong.push(format!("B's {label}: expected {}, got {} {}", p.status, r.status, r.body));
    }
    for (pointer, want) in &p.expect {
        if r.body.pointer(pointer) != Some(want) {
            wrong.push(format!("B's {label}: expected {pointer} = {want}, got {}", r.body));
        }
    }
    for s in secrets.iter().filter(|s| r.text().contains(s.as_str())) {
        wrong.push(format!("B's {label} shows A's '{s}': {}", r.body));
    }
    wrong
}

#[tokio::test]
async fn a_workspace_never_sees_or_changes_another_workspaces_data() {
    let a = Api::new().await;
    let (f, sid, secrets) = workspace_a(&a).await;
    let (g, c, i) = (&f.group, &f.center, &f.integration);
    let b = Api::new().await;
    let bg = b.group("News", "email").await;
    let none = || json!([]);
    let users = [("/users", none()), ("/message", json!("success"))];
    let export = |body: Value| probe("POST /users/export/ids", body, 201, &users);
    let no_users = [("/users", none()), ("/total_count", json!(0))];
    let get = |path: String, status: u16, expect: &[(&'static str, Value)]| probe(path, Value::Null, status, expect);
    let [no_center, no_integration] = [NO_CENTER, NO_INTEGRATION].map(|m| [("/message", json!(m))]);
    let (bad_group, success) = ([("/message", json!(UNKNOWN_GROUP))], [("/message", json!("success"))]);
    let status_get = "GET /subscription/status/get?subscription_group_id";
    let reads = [
        export(json!({"external_ids": ["u1", "u2"]})),
        export(json!({"user_aliases": [alias("anon", "device"), alias("crm-1", "crm")]})),
        export(json!({"service_id": sid})),
        export(json!({"braze_id": sid})),
        export(json!({"service_ids": [sid]})),
        export(json!({"email_address": EMAIL})),
        export(json!({"phone": PHONE})),
        get("GET /subscription/user/status?external_id=u1&external_id=u2".into(), 200, &no_users),
        get("GET /subscription/user/status?email=iso.a%40example.com".into(), 200, &no_users),
        get("GET /subscription/user/status?phone=%2B14155550123".into(), 200, &no_users),
        get(format!("{status_get}={g}&external_id=u1"), 400, &bad_group),
        get(format!("{status_get}={bg}&external_id=u1"), 200, &[("/status/u1", json!("Unknown"))]),
        get(
            format!("{status_get}={bg}&email=iso.a%40example.com"),
            200,
            &[("/status/iso.a@example.com", json!("Unknown"))],
        ),
        get("GET /preference_center/v1/list".into(), 200, &[("/preference_centers", none())]),
        get(format!("GET /preference_center/v1/{c}"), 404, &no_center),
        get(format!("GET /preference_center/v1/{c}/url/u1"), 404, &no_center),
        get("GET /cdi/integrations".into(), 200, &[("/results", none())]),
        get(format!("GET /cdi/integrations?integration_id={i}"), 400, &no_integration),
        get(format!("GET /cdi/integrations/{i}/job_sync_status"), 400, &no_integration),
    ];
    let unsub =
        |key: &str, ids: Value| json!({"subscription_group_id": g, "subscription_state": "unsubscribed", key: ids});
    let prio = |key: &str, v: &str| json!({key: v, "prioritization": ["identified"]});
    let merge = |from: Value, to: Value| json!({"identifier_to_merge": from, "identifier_to_keep": to});
    let (u1, u2, anon) = (json!({"external_id": "u1"}), json!({"external_id": "u2"}), alias("anon", "device"));
    let delete = json!({"external_ids": ["u1", "u2"], "service_ids": [sid], "braze_ids": [sid],
        "user_aliases": [anon, alias("crm-1", "crm")], "email_addresses": [prio("email", EMAIL)],
        "phone_numbers": [prio("phone", PHONE)]});
    let merges = json!({"merge_updates": [merge(u2, u1.clone()), merge(json!({"user_alias": anon}), u1),
        merge(prio("email", EMAIL2), prio("phone", PHONE))]});
    let identify = json!({"aliases_to_identify": [{"external_id": "u1", "user_alias": anon}],
        "emails_to_identify": [{"external_id": "u2", "email": EMAIL, "prioritization": ["unidentified"]}]});
    let rename =
        json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "crm-1", "new_alias_name": "stolen"}]});
    let new_alias = json!({"user_aliases": [{"external_id": "u1", "alias_name": "b", "alias_label": "b"}]});
    let mine = json!({"subscription_group_id": bg, "subscription_state": "unsubscribed", "emails": [EMAIL]});
    let existing_only = json!({"attributes": [{"external_id": "u1", "_update_existing_only": true, "color": "x"}]});
    let a_group = json!([{"subscription_group_id": g, "subscription_state": "unsubscribed"}]);
    let track = json!({
        "attributes": [
            {"external_id": "u1", "color": "blue", "subscription_groups": a_group},
            {"service_id": sid, "color": "blue"}, {"phone": PHONE, "color": "blue"},
            {"user_alias": anon, "_update_existing_only": true, "mood": "angry"},
            {"email": EMAIL, "email_subscribe": "unsubscribed"}],
        "events": [{"external_id": "u2", "name": "b-event", "time": "2024-01-01T00:00:00Z"}]});
    let writes = [
        // First, while B has no users: nothing of A's may count as deleted.
        probe("POST /users/delete", delete, 201, &[("/deleted", json!(0))]),
        probe("POST /users/merge", merges, 202, &success),
        probe("POST /users/identify", identify, 201, &[]),
        probe("POST /users/alias/update", rename, 201, &success),
        probe("POST /users/alias/new", new_alias, 201, &[]),
        probe("POST /subscription/status/set", unsub("external_id", json!(["u1"])), 400, &bad_group),
        probe("POST /subscription/status/set", unsub("email", json!(EMAIL)), 400, &bad_group),
        probe(
            "POST /v2/subscription/status/set",
            json!({"subscription_groups": [unsub("external_ids", json!(["u1"]))]}),
            400,
            &bad_group,
        ),
        probe("POST /v2/subscription/status/set", json!({"subscription_groups": [mine]}), 201, &[]),
        probe("POST /email/status", json!({"email": EMAIL, "subscription_state": "unsubscribed"}), 201, &[]),
        probe("POST /email/blocklist", json!({"email": EMAIL}), 201, &[]),
        probe("POST /email/blacklist", json!({"email": [EMAIL2]}), 201, &[]),
        probe("POST /users/track/sync", existing_only, 201, &[("/users", none())]),
        probe("POST /users/track", track, 201, &[("/errors/0/type", json!(BAD_GROUP))]),
        probe("POST /users/track/sync", json!({"attributes": [{"external_id": "u2", "size": 99}]}), 201, &[]),
        probe(format!("PUT /preference_center/v1/{c}"), center_body("prefs", "<p>B</p>"), 404, &no_center),
        probe("POST /preference_center/v1", center_body("other", &group_page(g)), 400, &[]),
        // Names are unique per workspace: A's does not stop B's.
        probe("POST /preference_center/v1", center_body("prefs", "<p>B</p>"), 201, &[]),
        get(format!("GET /preference_center/v1/{c}/url/u1"), 404, &no_center),
        // B's writes landed in B, and B's reads of its own u1 show none of A's.
        probe(
            "POST /users/export/ids",
            json!({"external_ids": ["u1"]}),
            201,
            &[("/users/0/custom_attributes/color", json!("blue"))],
        ),
        get("GET /subscription/user/status?external_id=u1".into(), 200, &[("/users/0/subscription_groups", none())]),
    ];
    // A's data, read back after each of B's requests: a change names the one that made it.
    let mut failures = Vec::new();
    let mut before = snapshot(&a, &f, &sid).await;
    for p in reads.iter().chain(&writes) {
        failures.extend(check(&b, p, &secrets).await);
        let after = snapshot(&a, &f, &sid).await;
        for ((what, was), (_, now)) in before.iter().zip(&after) {
            if was != now {
                failures.push(format!(
                    "after B's {} {}: A's {what} changed from {was} to {now}",
                    p.label,
                    p.body.clone().unwrap_or_default()
                ));
            }
        }
        before = after;
    }
    report("isolation failures", failures);
}
