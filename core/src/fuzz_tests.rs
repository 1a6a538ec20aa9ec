//! Property-based robustness of the whole request path: for every route of the
//! table ([`ROUTES`]), whatever the body, query string, path parameters and
//! headers, [`crate::Engine::handle`] answers (never panics), never with a 5xx, never
//! with an internal note for the host's log, and every refusal is in the shape its
//! clients expect: `{"message": ..}` on the platform's and the operator's routes,
//! SCIM's error (`schemas`, `status`, `detail`) under `/scim/v2`; the public pages
//! (preference pages, playground) are checked for their status only.
//!
//! Each case builds a fresh world (a [`Kit`] with users, groups, a preference
//! center and a link to it, a SCIM token and user, integrations with jobs and page
//! cursors) and sends its input to every route in table order, so a case is also a
//! sequence of writes that later routes read. Strings such as `§center` in the
//! generated input are replaced by the world's ids, so inputs reach existing
//! objects as well as missing ones.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::cdi::integration::{DataKind, JobStatus, Spec};
use crate::cdi::rows::Row;
use crate::http::{Method, Request, Response};
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::routes::{self, Auth, Route, ROUTES};
use crate::scim::error::ERROR_URN;
use crate::scim::protocol::{ENTERPRISE_URN, PATCH_URN, SEARCH_URN, USER_URN};
use crate::subscriptions::groups::Channel;
use crate::testkit::{Kit, ADMIN_TOKEN};
use crate::time::Timestamp;

/// The origin the world's SCIM token is made for.
const ORIGIN: &str = "https://idp.example.com";

/// Cases per property: six properties, each sending every case to every route.
const CASES: u32 = 256;

// ---------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------

/// A fresh engine with something to find: see the module's documentation.
struct World {
    kit: Kit,
    key: String,
    scim_token: String,
    /// `(placeholder, value)`: what `§...` strings in an input stand for.
    ids: Vec<(&'static str, String)>,
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

/// The `cursor` of a `Link` header's first entry.
fn cursor_of(resp: &Response) -> String {
    let link = resp.header_value("Link").unwrap_or_else(|| panic!("a Link header: {resp:?}"));
    let start = link.find("cursor=").expect("a cursor") + "cursor=".len();
    let end = link[start..].find('>').expect("the end of the URL") + start;
    link[start..end].to_string()
}

impl World {
    fn new() -> World {
        let kit = Kit::new();
        let store = kit.engine().store();
        let ws = WorkspaceName::parse("test").expect("name");
        let key = block_on(crate::admin::workspace::create_key(store, &ws, Permission::ALL.to_vec(), kit.ctx()))
            .expect("key");
        let email_group = kit.group(Channel::Email);
        let sms_group = kit.group(Channel::Sms);
        kit.track(json!({
            "attributes": [
                {"external_id": "u1", "email": "a@x.test", "phone": "+14155550100", "first_name": "Ann",
                 "dob": "1990-01-02", "color": "red", "tags": ["a", "b"], "visits": 3,
                 "pets": [{"id": 1, "type": "dog"}], "address": {"city": "X", "since": {"$time": "2020-01-01"}},
                 "subscription_groups": [
                     {"subscription_group_id": email_group, "subscription_state": "subscribed"},
                     {"subscription_group_id": sms_group, "subscription_state": "subscribed"}]},
                {"external_id": "u2", "email": "a@x.test", "email_subscribe": "opted_in"},
                {"user_alias": {"alias_name": "n1", "alias_label": "crm"}, "_update_existing_only": false,
                 "email": "b@x.test"},
                {"email": "c@x.test", "phone": "+14155550101"}
            ],
            "events": [{"external_id": "u1", "name": "play", "time": "2024-01-01T00:00:00Z", "properties": {"level": 1}}],
            "purchases": [{"external_id": "u1", "product_id": "sku", "currency": "USD", "price": 9.99,
                           "time": "2024-01-01T00:00:00Z"}]
        }));
        // Reading catches up with the queue.
        let service_id = kit.user("u1")["service_id"].as_str().expect("u1 exists").to_string();

        let page = center_body(Some("prefs"));
        let page = World::resolve_with(&[("§email_group", email_group.clone())], page);
        let (status, created) = kit.post("/preference_center/v1", page);
        assert_eq!(status, 201, "{created}");
        let center = created["preference_center_api_id"].as_str().expect("center id").to_string();
        let (status, link) = kit.call(Method::Get, &format!("/preference_center/v1/{center}/url/u1"), Value::Null);
        assert_eq!(status, 200, "{link}");
        let url = link["preference_center_url"].as_str().expect("url");
        let token = url.split_once("/preferences/").expect("a page URL").1.to_string();

        let scim_token = block_on(crate::scim::token::create(store, ORIGIN, kit.ctx())).expect("scim token");
        let req = Request::new(Method::Post, "/scim/v2/Users")
            .header("Authorization", &format!("Bearer {scim_token}"))
            .header("X-Request-Origin", ORIGIN)
            .header("Content-Type", "application/scim+json")
            .body(scim_user("ada@example.com").to_string());
        let resp = block_on(kit.engine().handle(req, kit.ctx()));
        assert_eq!(resp.status, 201, "{}", String::from_utf8_lossy(&resp.body));
        let scim_user_id = resp.json_body()["id"].as_str().expect("scim id").to_string();

        // Eleven integrations (one page is ten), the first with eleven jobs: both
        // lists have a next page, so a valid cursor of each exists.
        let spec = |n: usize| Spec {
            name: format!("i{n}"),
            source: "sqlite:/tmp/w.db".into(),
            table: "USERS_SYNC".into(),
            kind: DataKind::Users,
            schedule_secs: (n % 2 == 0).then_some(3600),
            contact_emails: vec!["ops@x.test".into()],
        };
        let mut integration = String::new();
        for n in 0..11 {
            let i = block_on(crate::cdi::manage::create(store, &ws, &spec(n), kit.ctx())).expect("integration");
            if n == 0 {
                integration = i.id;
            }
        }
        for n in 0..11 {
            let begun = block_on(crate::cdi::sync::begin(store, &integration, kit.ctx())).expect("begin");
            if n == 0 {
                let rows = [
                    Row {
                        updated_at: Timestamp(1000),
                        external_id: Some("u1".into()),
                        payload: Some(r#"{"color":"blue"}"#.into()),
                        ..Row::default()
                    },
                    Row { updated_at: Timestamp(2000), external_id: Some("u9".into()), ..Row::default() },
                ];
                block_on(crate::cdi::sync::commit_batch(store, &begun, None, &rows, kit.ctx())).expect("batch");
            }
            let failure = (n == 5).then(|| (JobStatus::ConfigError, "no such table".to_string()));
            block_on(crate::cdi::sync::finish(store, &begun, failure, kit.ctx())).expect("finish");
        }
        let cursor_i = cursor_of(&kit.send(Method::Get, "/cdi/integrations", Value::Null));
        let jobs = format!("/cdi/integrations/{integration}/job_sync_status");
        let cursor_j = cursor_of(&kit.send(Method::Get, &jobs, Value::Null));

        let ids = vec![
            ("§email_group", email_group),
            ("§sms_group", sms_group),
            ("§center", center),
            ("§token", token),
            ("§scim_user", scim_user_id),
            ("§integration", integration),
            ("§service_id", service_id),
            ("§cursor_i", cursor_i),
            ("§cursor_j", cursor_j),
        ];
        World { kit, key, scim_token, ids }
    }

    fn id(&self, name: &str) -> String {
        self.ids.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    /// Replaces every placeholder in `s` by the world's value.
    fn resolve(&self, s: &str) -> String {
        World::resolve_str(&self.ids, s)
    }

    fn resolve_str(ids: &[(&'static str, String)], s: &str) -> String {
        if !s.contains('§') {
            return s.to_string();
        }
        let mut out = s.to_string();
        for (name, value) in ids {
            out = out.replace(name, value);
        }
        out
    }

    fn resolve_with(ids: &[(&'static str, String)], v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(World::resolve_str(ids, &s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|i| World::resolve_with(ids, i)).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter().map(|(k, v)| (World::resolve_str(ids, &k), World::resolve_with(ids, v))).collect(),
            ),
            other => other,
        }
    }

    fn resolve_json(&self, v: Value) -> Value {
        World::resolve_with(&self.ids, v)
    }

    /// The credential headers a route expects.
    fn credentials(&self, auth: Auth) -> Vec<(String, String)> {
        let bearer = |t: &str| ("Authorization".to_string(), format!("Bearer {t}"));
        match auth {
            Auth::Key(..) => vec![bearer(&self.key)],
            Auth::Scim => vec![bearer(&self.scim_token), ("X-Request-Origin".into(), ORIGIN.into())],
            Auth::Admin => vec![bearer(ADMIN_TOKEN)],
            Auth::Public => Vec::new(),
        }
    }

    /// Ids that exist for parameter `slot` of a route pattern.
    fn known(&self, pattern: &str, slot: usize) -> Vec<String> {
        let one = |name: &str| vec![self.id(name)];
        match (pattern, slot) {
            ("/preference_center/v1/{}" | "/preference_center/v1/{}/url/{}", 0) => one("§center"),
            ("/preference_center/v1/{}/url/{}", _) => vec!["u1".into(), "u2".into(), "nobody".into()],
            ("/preferences/{}", _) => one("§token"),
            ("/scim/v2/Users/{}", _) => one("§scim_user"),
            ("/scim/v2/ResourceTypes/{}", _) => vec!["User".into()],
            ("/scim/v2/Schemas/{}", _) => vec![USER_URN.into(), USER_URN.to_uppercase()],
            ("/cdi/integrations/{}/job_sync_status" | "/_engage/cdi/integrations/{}/sync", _)
            | ("/_engage/cdi/integrations/{}", _) => one("§integration"),
            ("/playground/{..}", _) => {
                vec![String::new(), "index.html".into(), "pkg/engage_bg.wasm".into(), "a%20b/".into()]
            }
            _ => self.ids.iter().map(|(_, v)| v.clone()).collect(),
        }
    }

    /// A path parameter as it goes into the path.
    fn param(&self, pattern: &str, slot: usize, p: &Param) -> String {
        let known = self.known(pattern, slot);
        let pick = |i: usize| known[i % known.len()].clone();
        match p {
            Param::Known(i) => enc(&pick(*i)),
            Param::Tweaked(i, tweak, c) => {
                let mut s = pick(*i);
                match tweak % 5 {
                    0 => s.push(*c),
                    1 => {
                        s.pop();
                    }
                    2 => s = s.to_uppercase(),
                    3 => {
                        if !s.is_empty() {
                            s.remove(0);
                        }
                        s.insert(0, *c);
                    }
                    _ => s = format!(" {s} "),
                }
                enc(&s)
            }
            Param::Text(s) => enc(&self.resolve(s)),
            Param::Raw(s) => self.resolve(s),
        }
    }

    /// A route's path with its parameters filled in.
    fn path(&self, route: &Route, params: &[Param], trailing_slash: bool) -> String {
        let mut slot = 0;
        let mut segments = Vec::new();
        for seg in route.pattern.split('/') {
            if seg == "{}" || seg == "{..}" {
                let p = params.get(slot).cloned().unwrap_or(Param::Known(0));
                segments.push(self.param(route.pattern, slot, &p));
                slot += 1;
            } else {
                segments.push(seg.to_string());
            }
        }
        let mut path = segments.join("/");
        if trailing_slash {
            path.push('/');
        }
        path
    }

    /// Handles one request and checks the answer.
    fn send(&self, req: Request) -> Result<Response, TestCaseError> {
        let desc = describe(&req);
        let (method, path) = (req.method, req.path.clone());
        let resp = block_on(self.kit.engine().handle(req, self.kit.ctx()));
        if let Err(why) = check(method, &path, &resp) {
            return Err(TestCaseError::fail(format!(
                "{why}\n  request: {desc}\n  response: {} {:?} {}",
                resp.status,
                resp.headers,
                truncated(&String::from_utf8_lossy(&resp.body), 600)
            )));
        }
        Ok(resp)
    }
}

/// Percent-encodes everything but unreserved characters: any text as one segment.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn truncated(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}… ({} bytes)", s.chars().take(n).collect::<String>(), s.len())
    }
}

fn describe(req: &Request) -> String {
    format!(
        "{} {}{}{} headers={:?} origin={:?} body={:?}",
        req.method.as_str(),
        req.path,
        if req.query.is_empty() { "" } else { "?" },
        req.query,
        req.headers,
        req.origin,
        truncated(&String::from_utf8_lossy(&req.body), 2000)
    )
}

/// The invariants of every answer.
fn check(method: Method, path: &str, resp: &Response) -> Result<(), String> {
    if resp.status >= 500 {
        return Err(format!("a {} answer", resp.status));
    }
    if let Some(note) = &resp.internal {
        return Err(format!("an internal note for the host's log: {note}"));
    }
    if (200..300).contains(&resp.status) {
        return Ok(());
    }
    // The public pages answer in HTML (the playground's 404 is for its host).
    if matches!(routes::find(method, path), Ok((route, _)) if route.auth == Auth::Public) {
        return Ok(());
    }
    let body: Value = serde_json::from_slice(&resp.body)
        .map_err(|e| format!("a {} answer whose body is not JSON ({e})", resp.status))?;
    if crate::scim::owns(path) {
        let schemas = body["schemas"].as_array().is_some_and(|s| s.iter().any(|u| u == ERROR_URN));
        if !schemas || body["status"] != json!(resp.status) || !body["detail"].is_string() {
            return Err(format!("a {} answer not in SCIM's error shape: {body}", resp.status));
        }
    } else if !body["message"].is_string() {
        return Err(format!("a {} answer without a string 'message': {body}", resp.status));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// What each route is sent when it is sent something valid
// ---------------------------------------------------------------------------

/// A body as generated: JSON, an urlencoded form, or nothing.
#[derive(Clone, Debug)]
enum Body {
    None,
    Json(Value),
    Form(Vec<(String, String)>),
}

/// A valid request of a route: its query pairs and body.
#[derive(Clone, Debug)]
struct Example {
    query: Vec<(String, String)>,
    body: Body,
}

fn center_body(name: Option<&str>) -> Value {
    let page = "<html><head><meta charset=\"utf-8\"></head><body>\
        <p>Hi {{ ${first_name} | default: 'there' | capitalize }}</p>\
        <form method=\"post\" action=\"{{preference_center_submit_url}}\">\
        <input name=\"{% form_field_name :email_global_state %}\" value=\"opted_in\" \
        {% if subscribed_state.${email_global} != 'unsubscribed' %}checked{% endif %}>\
        <input name=\"{% form_field_name :subscription_group §email_group %}\" value=\"subscribed\" \
        {% if subscribed_state.${§email_group} == 'subscribed' %}checked{% endif %}>\
        </form></body></html>";
    let mut body = json!({
        "preference_center_title": "Prefs",
        "preference_center_page_html": page,
        "confirmation_page_html": "<p>Saved, {{subscribed_state.${email_global}}} {{ ${email_address} }}</p>",
        "state": "active",
        "options": {"meta-viewport-content": "width=device-width",
                    "links-tags": [{"rel": "icon", "href": "/f.png", "type": "image/png", "sizes": "32x32"}]},
    });
    if let Some(n) = name {
        body["name"] = json!(n);
    }
    body
}

fn scim_user(name: &str) -> Value {
    json!({
        "schemas": [USER_URN],
        "userName": name,
        "externalId": "x-1",
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "department": "engineering",
        "permissions": {
            "companyPermissions": ["manage_company_settings"],
            "appGroup": [{"appGroupName": "W", "appGroupPermissions": ["basic_access"],
                          "team": [{"teamName": "T", "teamPermissions": ["basic_access"]}]}]
        }
    })
}

fn track_body() -> Value {
    json!({
        "attributes": [
            {"external_id": "u1", "first_name": "B", "email": "a@x.test", "phone": "+14155550100",
             "gender": "f", "country": "de", "time_zone": "Etc/GMT+5", "current_location": {"latitude": 1, "longitude": 2},
             "date_of_last_session": "2024-01-01", "email_subscribe": "unsubscribed", "push_subscribe": "opted_in",
             "visits": {"inc": 2}, "tags": {"add": ["c"], "remove": ["a"]}, "since": {"$time": "2020-01-01"},
             "address": {"zip": "1"}, "_merge_objects": true,
             "pets": {"$update": [{"$identifier_key": "id", "$identifier_value": 1, "$new_object": {"age": 2}}]},
             "subscription_groups": [{"subscription_group_id": "§email_group", "subscription_state": "unsubscribed"}]},
            {"user_alias": {"alias_name": "n1", "alias_label": "crm"}, "color": null},
            {"braze_id": "§service_id", "pets": {"$remove": [{"$identifier_key": "type", "$identifier_value": "dog"}]}},
            {"email": "d@x.test", "last_name": "C"}
        ],
        "events": [{"external_id": "u1", "app_id": "a", "name": "play", "time": "2024-01-01T00:00:00Z",
                    "properties": {"level": 2, "nested": {"a": [1, 2]}}},
                   {"phone": "+14155550101", "name": "call", "time": "2099-01-01T00:00:00+02:00"}],
        "purchases": [{"external_id": "u2", "product_id": "sku", "currency": "EUR", "price": 1.5, "quantity": 3,
                       "time": "2024-01-01T00:00:00Z", "properties": {"size": "L"}}]
    })
}

/// The valid request of every route; `None` for a route this file does not know
/// (which [`every_route_has_an_example`] refuses).
fn example(route: &Route) -> Option<Example> {
    let json = |v: Value| Example { query: Vec::new(), body: Body::Json(v) };
    let query = |pairs: &[(&str, &str)]| Example {
        query: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        body: Body::None,
    };
    let alias = json!({"alias_name": "n1", "alias_label": "crm"});
    Some(match (route.method, route.pattern) {
        (Method::Post, "/users/track") => json(track_body()),
        (Method::Post, "/users/track/sync") => {
            json(json!({"attributes": [{"external_id": "u1", "first_name": "S", "visits": {"inc": 1}}]}))
        }
        (Method::Post, "/users/export/ids") => json(json!({
            "external_ids": ["u1", "u2", "nobody"], "user_aliases": [alias], "email_address": "a@x.test",
            "fields_to_export": ["email", "custom_attributes", "custom_events", "purchases", "subscription_groups",
                                 "total_revenue", "user_aliases", "braze_id"]
        })),
        (Method::Post, "/users/identify") => json(json!({
            "aliases_to_identify": [{"external_id": "u3", "user_alias": alias}],
            "emails_to_identify": [{"external_id": "u4", "email": "c@x.test",
                                    "prioritization": ["unidentified", "most_recently_updated"]}],
            "phone_numbers_to_identify": [{"external_id": "u5", "phone": "+14155550101",
                                           "prioritization": ["least_recently_updated"]}]
        })),
        (Method::Post, "/users/merge") => json(json!({"merge_updates": [
            {"identifier_to_merge": {"external_id": "u2"}, "identifier_to_keep": {"external_id": "u1"}},
            {"identifier_to_merge": {"email": "c@x.test", "prioritization": ["unidentified"]},
             "identifier_to_keep": {"user_alias": alias}}
        ]})),
        (Method::Post, "/users/delete") => json(json!({
            "external_ids": ["u2"], "user_aliases": [{"alias_name": "n9", "alias_label": "crm"}],
            "email_addresses": [{"email": "c@x.test", "prioritization": ["unidentified"]}],
            "phone_numbers": [{"phone": "+14155550102", "prioritization": ["identified"]}],
            "braze_ids": ["0123456789abcdef01234567"]
        })),
        (Method::Post, "/users/alias/new") => json(json!({"user_aliases": [
            {"alias_name": "n2", "alias_label": "web", "external_id": "u1"},
            {"alias_name": "n3", "alias_label": "web"}
        ]})),
        (Method::Post, "/users/alias/update") => {
            json(json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "n1", "new_alias_name": "n4"}]}))
        }
        (Method::Post, "/subscription/status/set") => json(json!({
            "subscription_group_id": "§email_group", "subscription_state": "unsubscribed",
            "external_id": "u1", "email": ["a@x.test"], "use_double_opt_in_logic": false
        })),
        (Method::Post, "/v2/subscription/status/set") => json(json!({"subscription_groups": [
            {"subscription_group_id": "§sms_group", "subscription_state": "subscribed", "phones": ["+14155550100"]},
            {"subscription_group_id": "§email_group", "subscription_state": "subscribed", "external_ids": ["u1"],
             "use_double_opt_in_logic": true}
        ]})),
        (Method::Get, "/subscription/user/status") => {
            query(&[("external_id", "u1"), ("email", "a@x.test"), ("limit", "10"), ("offset", "0")])
        }
        (Method::Get, "/subscription/status/get") => {
            query(&[("subscription_group_id", "§email_group"), ("external_id[]", "u1"), ("phone", "+14155550100")])
        }
        (Method::Post, "/email/status") => json(json!({"email": "a@x.test", "subscription_state": "opted_in"})),
        (Method::Post, "/email/blacklist" | "/email/blocklist") => json(json!({"email": ["a@x.test", "B@x.test"]})),
        (Method::Post, "/preference_center/v1") => json(center_body(Some("second"))),
        (Method::Put, "/preference_center/v1/{}") => json(center_body(None)),
        (Method::Get, "/preference_center/v1/{}/url/{}") => query(&[("expires_in", "60")]),
        (Method::Post, "/preferences/{}") => Example {
            query: Vec::new(),
            body: Body::Form(vec![
                ("email_global_state".into(), "opted_in".into()),
                ("subscription_group_§email_group".into(), "unsubscribed".into()),
                ("subscription_group_§email_group".into(), "subscribed".into()),
            ]),
        },
        (Method::Get, "/scim/v2/Users") => query(&[
            ("filter", "userName eq \"ada@example.com\""),
            ("startIndex", "1"),
            ("count", "10"),
            ("attributes", "userName,name.givenName"),
        ]),
        (Method::Post, "/scim/v2/Users") => json(scim_user("grace@example.com")),
        (Method::Post, "/scim/v2/Users/.search" | "/scim/v2/.search") => json(json!({
            "schemas": [SEARCH_URN], "filter": "userName eq \"ada@example.com\"", "startIndex": 1, "count": 5,
            "excludedAttributes": ["permissions"]
        })),
        (Method::Get, "/scim/v2/Users/{}") => query(&[("excludedAttributes", "permissions")]),
        (Method::Put, "/scim/v2/Users/{}") => {
            let mut u = scim_user("ada@example.com");
            u["schemas"] = json!([USER_URN, ENTERPRISE_URN]);
            u["department"] = json!("finance");
            json(u)
        }
        (Method::Patch, "/scim/v2/Users/{}") => json(json!({"schemas": [PATCH_URN], "Operations": [
            {"op": "replace", "path": "name.givenName", "value": "Grace"},
            {"op": "add", "value": {"department": "finance", "permissions": {"companyPermissions": ["admin"]}}},
            {"op": "remove", "path": "externalId"}
        ]})),
        (Method::Get, "/cdi/integrations") => query(&[("cursor", "§cursor_i")]),
        (Method::Get, "/cdi/integrations/{}/job_sync_status") => query(&[("cursor", "§cursor_j")]),
        (Method::Post, "/_engage/keys") => {
            json(json!({"workspace": "test", "permissions": ["users.track", "users.export.ids"]}))
        }
        (Method::Post, "/_engage/groups") => json(json!({"workspace": "test", "name": "g2", "channel": "whatsapp"})),
        (Method::Post, "/_engage/scim-tokens") => json(json!({"origin": "https://other.example.com/"})),
        (Method::Post, "/_engage/cdi/integrations") => json(json!({
            "workspace": "test", "name": "n", "source": "postgres://db/x", "table": "public.users",
            "kind": "events", "schedule_secs": 3600, "contact_emails": ["ops@x.test"]
        })),
        (Method::Get, "/_engage/groups") => query(&[("workspace", "test")]),
        (Method::Get, "/preference_center/v1/list" | "/preference_center/v1/{}" | "/preferences/{}")
        | (Method::Get, "/scim/v2/ServiceProviderConfig" | "/scim/v2/ResourceTypes")
        | (Method::Get, "/scim/v2/ResourceTypes/{}" | "/scim/v2/Schemas" | "/scim/v2/Schemas/{}")
        | (Method::Get, "/_engage/cdi/integrations/{}" | "/_engage/queue/set-aside")
        | (Method::Delete, "/scim/v2/Users/{}")
        | (Method::Post, "/_engage/cdi/integrations/{}/sync" | "/_engage/conformance")
        | (Method::Get | Method::Head, "/playground/{..}" | "/playground") => query(&[]),
        _ => return None,
    })
}

/// The media type a route's body is sent with.
fn right_content_type(route: &Route) -> &'static str {
    match route.auth {
        Auth::Scim => "application/scim+json",
        Auth::Public => "application/x-www-form-urlencoded",
        Auth::Key(..) | Auth::Admin => "application/json",
    }
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

/// Every body field some parser reads (track, export, identity, subscriptions,
/// preference centers, operator routes, SCIM resources, PATCH and search bodies).
const FIELDS: &[&str] = &[
    "attributes",
    "events",
    "purchases",
    "external_id",
    "user_alias",
    "alias_name",
    "alias_label",
    "braze_id",
    "service_id",
    "email",
    "phone",
    "_update_existing_only",
    "_merge_objects",
    "push_token_import",
    "email_subscribe",
    "push_subscribe",
    "subscription_groups",
    "subscription_group_id",
    "subscription_state",
    "first_name",
    "last_name",
    "home_city",
    "image_url",
    "gender",
    "dob",
    "country",
    "language",
    "time_zone",
    "email_open_tracking_disabled",
    "email_click_tracking_disabled",
    "date_of_first_session",
    "date_of_last_session",
    "marked_email_as_spam_at",
    "current_location",
    "latitude",
    "longitude",
    "name",
    "time",
    "app_id",
    "properties",
    "product_id",
    "currency",
    "price",
    "quantity",
    "inc",
    "add",
    "remove",
    "$time",
    "$add",
    "$remove",
    "$update",
    "$identifier_key",
    "$identifier_value",
    "$new_object",
    "external_ids",
    "user_aliases",
    "service_ids",
    "braze_ids",
    "email_address",
    "fields_to_export",
    "aliases_to_identify",
    "emails_to_identify",
    "phone_numbers_to_identify",
    "prioritization",
    "merge_updates",
    "identifier_to_merge",
    "identifier_to_keep",
    "email_addresses",
    "phone_numbers",
    "alias_updates",
    "old_alias_name",
    "new_alias_name",
    "use_double_opt_in_logic",
    "emails",
    "phones",
    "preference_center_title",
    "preference_center_page_html",
    "confirmation_page_html",
    "state",
    "options",
    "meta-viewport-content",
    "links-tags",
    "rel",
    "href",
    "type",
    "sizes",
    "color",
    "workspace",
    "permissions",
    "origin",
    "source",
    "table",
    "kind",
    "schedule_secs",
    "contact_emails",
    "channel",
    "schemas",
    "id",
    "externalId",
    "meta",
    "userName",
    "givenName",
    "familyName",
    "department",
    "createdAt",
    "lastSignInAt",
    "active",
    "displayName",
    "formatted",
    "middleName",
    "companyPermissions",
    "roles",
    "appGroup",
    "roleId",
    "roleName",
    "appGroupId",
    "appGroupName",
    "appGroupPermissions",
    "appGroupPermissionSets",
    "appGroupPermissionSetId",
    "appGroupPermissionSetName",
    "team",
    "teamId",
    "teamName",
    "teamPermissions",
    "Operations",
    "op",
    "path",
    "value",
    "excludedAttributes",
    "filter",
    "startIndex",
    "count",
    "sortBy",
    "sortOrder",
    "USERNAME",
    "Active",
];

/// Every query parameter some route reads, and near misses.
const QUERY_KEYS: &[&str] = &[
    "external_id",
    "external_id[]",
    "email",
    "email[]",
    "phone",
    "phone[]",
    "limit",
    "offset",
    "subscription_group_id",
    "cursor",
    "integration_id",
    "filter",
    "startIndex",
    "startindex",
    "count",
    "attributes",
    "excludedAttributes",
    "sortBy",
    "sortOrder",
    "expires_in",
    "workspace",
    "FILTER",
    "",
];

/// Values that mean something to some parser, placeholders for the world's ids,
/// and edge cases of each kind of value.
const STRINGS: &[&str] = &[
    "",
    " ",
    "u1",
    "u2",
    "u3",
    "nobody",
    "n1",
    "crm",
    "a@x.test",
    "b@x.test",
    "c@x.test",
    "A@X.TEST",
    "not-an-email",
    "a@",
    "+14155550100",
    "+14155550101",
    " 14155550100",
    "+0",
    "+1234567890123456",
    "subscribed",
    "unsubscribed",
    "opted_in",
    "Subscribed",
    "active",
    "draft",
    "identified",
    "unidentified",
    "most_recently_updated",
    "least_recently_updated",
    "2024-01-01T00:00:00Z",
    "2024-01-01T00:00:00+23:59",
    "2016-12-31T23:59:60Z",
    "+262143-12-31T23:59:59Z",
    "-9999-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999999999Z",
    "2020-02-29",
    "1900-02-29",
    "99999-01-01",
    "-0001-01-01",
    "USD",
    "usd",
    "EU",
    "M",
    "f",
    "DE",
    "en",
    "UTC",
    "America/New_York",
    "Etc/GMT+5",
    "/",
    "all",
    "users.track",
    "scim",
    "email",
    "sms",
    "whatsapp",
    "line",
    "users",
    "events",
    "purchases",
    "deletes",
    "sqlite:/tmp/x.db",
    "sqlite:",
    "postgres://db/x",
    "a.b",
    "a.b.c",
    "$x",
    "https://idp.example.com",
    "https://IDP.example.com/",
    "engineering",
    "icon",
    "shortcut icon",
    "image/png",
    "§email_group",
    "§sms_group",
    "§center",
    "§token",
    "§scim_user",
    "§integration",
    "§service_id",
    "§cursor_i",
    "§cursor_j",
    USER_URN,
    PATCH_URN,
    SEARCH_URN,
    ENTERPRISE_URN,
    "userName eq \"ada@example.com\"",
    "userName eq \"x\" and userName eq \"y\"",
    "userName pr",
    "USERNAME EQ \"ADA@EXAMPLE.COM\"",
    "emails[type eq \"work\"].value",
    "userName eq \"\\u12\"",
    "replace",
    "add",
    "remove",
    "name.givenName",
    "name",
    "permissions.appGroup",
    "permissions.companyPermissions",
    "urn:ietf:params:scim:schemas:core:2.0:User:userName",
    "admin",
    "basic_access",
    "view_pii",
    "{{ ${first_name} }}",
    "{% if x %}",
    "{{",
    "{% form_field_name :subscription_group §email_group %}",
    "{% form_field_name :subscription_group nope %}",
    "{{subscribed_state.${nope}}}",
    "$time",
    "{\"a\":1}",
    "null",
    "true",
    "0",
    "-1",
    "1e400",
    "18446744073709551616",
    "NaN",
    "é",
    "日本語",
    "\u{0}",
    "\u{1f}",
    "\u{feff}",
    "\\u0000",
    "<script>",
    "%",
    "%zz",
    "%00",
    "%2F",
    "../..",
    "*",
    "W/\"1\"",
    "W/\"2\"",
    "a,b",
    "email_global_state",
    "subscription_group_§email_group",
    "0123456789abcdef01234567",
];

/// Numbers at the edges of the ranges parsers check.
const NUMBERS: &[f64] = &[
    0.0,
    -0.0,
    0.5,
    1.0,
    1.5,
    -1.5,
    49.0,
    50.0,
    51.0,
    59.0,
    60.0,
    75.0,
    76.0,
    100.0,
    101.0,
    255.0,
    256.0,
    1e15,
    1e15 + 1.0,
    -1e15,
    1e16,
    1e300,
    -1e300,
    5e-324,
    9.2e18,
    1.8446744073709552e19,
];

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        5 => prop::sample::select(STRINGS).prop_map(str::to_string),
        3 => ".{0,24}",
        1 => "[ -~]{0,40}",
        1 => prop::sample::select(vec![255usize, 256, 987, 988, 1024, 1025, 5000])
            .prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        (-3i64..130).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(NUMBERS).prop_map(Value::from),
    ]
    .boxed()
}

/// A value nested `n` deep, inside arrays or objects.
fn deep(n: usize, objects: bool) -> Value {
    let mut v = json!("bottom");
    for _ in 0..n {
        v = if objects { json!({ "a": v }) } else { json!([v]) };
    }
    v
}

/// A long array of one kind of item (past the "at most 50/75" bounds).
fn long_array(kind: usize, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| match kind % 4 {
                0 => json!(format!("u{i}")),
                1 => json!({"external_id": format!("u{i}"), "name": "e", "time": "2024-01-01T00:00:00Z"}),
                2 => json!({"alias_name": format!("n{i}"), "alias_label": "crm"}),
                _ => json!(i),
            })
            .collect(),
    )
}

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => number(),
        6 => text().prop_map(Value::String),
        1 => (0usize..4, 45usize..90).prop_map(|(k, n)| long_array(k, n)),
        1 => (1usize..140, any::<bool>()).prop_map(|(n, o)| deep(n, o)),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![5 => prop::sample::select(FIELDS).prop_map(str::to_string), 1 => text()].boxed()
}

/// Arbitrary JSON whose object keys are mostly the fields parsers read.
fn json_value() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                2 => prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                3 => prop::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
            ]
        })
        .boxed()
}

/// A whole body: mostly an object, as nearly every endpoint wants.
fn json_body() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => json_value(),
        4 => prop::collection::vec((key(), json_value()), 0..8)
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
    ]
    .boxed()
}

/// Arbitrary bytes for a body, mostly made from the route's valid body.
#[derive(Clone, Debug)]
enum Bytes {
    Random(Vec<u8>),
    Text(String),
    /// The valid body cut after this many bytes.
    Truncated(usize),
    /// The valid body with a token inserted at a byte offset.
    Spliced(usize, Vec<u8>),
    /// The valid body with bytes replaced.
    Flipped(Vec<(usize, u8)>),
}

const SPLICES: &[&[u8]] = &[
    b"1e400",
    b"-0",
    b"1E+2",
    b"123456789012345678901234567890",
    b"NaN",
    b"Infinity",
    b"\"\\ud800\"",
    b"\"\\u0000\"",
    b"\0",
    b"\xef\xbb\xbf",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"null",
    b"0x10",
    b"01",
    b"-",
    b"1.",
    b"\x7f",
    b"\"a\":1,",
    b"\xff\xfe",
    b"\xc3",
    b"%",
    b"&",
    b"=",
    b"+",
    b"%zz",
    b"%ff",
];

fn bytes() -> BoxedStrategy<Bytes> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::Random),
        ".{0,80}".prop_map(Bytes::Text),
        any::<usize>().prop_map(Bytes::Truncated),
        (any::<usize>(), prop::sample::select(SPLICES)).prop_map(|(i, s)| Bytes::Spliced(i, s.to_vec())),
        prop::collection::vec((any::<usize>(), any::<u8>()), 1..4).prop_map(Bytes::Flipped),
    ]
    .boxed()
}

/// A change to a valid body (or, for a route without one, its query).
#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the n-th node (pre-order) by a value.
    Replace(usize, Value),
    /// Remove the n-th node from its parent.
    Remove(usize),
    /// Insert a field (object) or an item (array) into the n-th node.
    Insert(usize, String, Value),
    /// Repeat the n-th node's items (array) or fields (object) this many times.
    Grow(usize, usize),
}

fn mutation() -> BoxedStrategy<Mutation> {
    let small = prop_oneof![4 => leaf(), 1 => json_value()].boxed();
    prop_oneof![
        4 => (any::<usize>(), small.clone()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        2 => (any::<usize>(), key(), small).prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
        1 => (any::<usize>(), 2usize..90).prop_map(|(i, n)| Mutation::Grow(i, n)),
    ]
    .boxed()
}

/// One step from a node to a child.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn nodes(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Step::Index(i));
                nodes(item, at, out);
                at.pop();
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                at.push(Step::Key(k.clone()));
                nodes(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(mut v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn mutate_json(mut v: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let mut all = Vec::new();
        nodes(&v, &mut Vec::new(), &mut all);
        let pick = |i: usize| all[i % all.len()].clone();
        match m {
            Mutation::Replace(i, with) => {
                if let Some(n) = node_mut(&mut v, &pick(*i)) {
                    *n = with.clone();
                }
            }
            Mutation::Remove(i) => {
                let path = pick(*i);
                let Some((last, parent)) = path.split_last() else {
                    v = Value::Null;
                    continue;
                };
                match (node_mut(&mut v, parent), last) {
                    (Some(Value::Object(m)), Step::Key(k)) => {
                        m.remove(k);
                    }
                    (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            Mutation::Insert(i, k, with) => match node_mut(&mut v, &pick(*i)) {
                Some(Value::Object(m)) => {
                    m.insert(k.clone(), with.clone());
                }
                Some(Value::Array(a)) => {
                    let at = k.len() % (a.len() + 1);
                    a.insert(at, with.clone());
                }
                Some(other) => *other = json!({ k.clone(): with.clone() }),
                None => {}
            },
            Mutation::Grow(i, n) => match node_mut(&mut v, &pick(*i)) {
                Some(Value::Array(a)) if !a.is_empty() => {
                    let items = a.clone();
                    while a.len() < *n {
                        a.push(items[a.len() % items.len()].clone());
                    }
                }
                Some(Value::Object(m)) if !m.is_empty() => {
                    let fields: Vec<(String, Value)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    for j in 0..*n {
                        let (k, v) = &fields[j % fields.len()];
                        m.insert(format!("{k}{j}"), v.clone());
                    }
                }
                Some(other) => *other = Value::Array(vec![other.clone(); *n]),
                None => {}
            },
        }
    }
    v
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The same changes to a list of pairs (a form or a query string).
fn mutate_pairs(mut pairs: Vec<(String, String)>, mutations: &[Mutation]) -> Vec<(String, String)> {
    for m in mutations {
        match m {
            Mutation::Replace(i, with) if !pairs.is_empty() => {
                let n = pairs.len();
                pairs[i % n].1 = as_text(with);
            }
            Mutation::Remove(i) if !pairs.is_empty() => {
                let n = pairs.len();
                pairs.remove(i % n);
            }
            Mutation::Insert(i, k, with) => {
                let at = i % (pairs.len() + 1);
                pairs.insert(at, (k.clone(), as_text(with)));
            }
            Mutation::Grow(i, n) if !pairs.is_empty() => {
                let one = pairs[i % pairs.len()].clone();
                pairs.extend(std::iter::repeat_n(one, (*n).min(60)));
            }
            _ => {}
        }
    }
    pairs
}

/// A path parameter.
#[derive(Clone, Debug)]
enum Param {
    /// An id that exists (the n-th known one for the slot).
    Known(usize),
    /// A known id changed a little (a character added, removed, replaced; case; spaces).
    Tweaked(usize, u8, char),
    /// Any text, percent-encoded into one segment.
    Text(String),
    /// Any text as it is (it may hold `/`, `%`, ...).
    Raw(String),
}

fn param() -> BoxedStrategy<Param> {
    prop_oneof![
        4 => any::<usize>().prop_map(Param::Known),
        2 => (any::<usize>(), any::<u8>(), any::<char>()).prop_map(|(i, t, c)| Param::Tweaked(i, t, c)),
        3 => text().prop_map(Param::Text),
        1 => "[^?#]{0,20}".prop_map(Param::Raw),
    ]
    .boxed()
}

/// One part of a query string.
#[derive(Clone, Debug)]
enum QueryPart {
    /// `key=value`, percent-encoded or not.
    Pair(String, String, bool),
    /// A key without `=`.
    Bare(String),
    /// Any text.
    Raw(String),
}

fn query_part() -> BoxedStrategy<QueryPart> {
    let qkey = prop_oneof![4 => prop::sample::select(QUERY_KEYS).prop_map(str::to_string), 1 => text()].boxed();
    let qvalue = prop_oneof![
        4 => text(),
        2 => number().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec!["a,b", "userName,name.givenName", "permissions", "meta,id", "x.y.z"])
            .prop_map(str::to_string),
    ];
    prop_oneof![
        6 => (qkey.clone(), qvalue, any::<bool>()).prop_map(|(k, v, e)| QueryPart::Pair(k, v, e)),
        1 => qkey.prop_map(QueryPart::Bare),
        1 => ".{0,30}".prop_map(QueryPart::Raw),
    ]
    .boxed()
}

fn query_string(world: &World, parts: &[QueryPart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            QueryPart::Pair(k, v, true) => format!("{}={}", enc(&world.resolve(k)), enc(&world.resolve(v))),
            QueryPart::Pair(k, v, false) => format!("{}={}", world.resolve(k), world.resolve(v)),
            QueryPart::Bare(k) => enc(&world.resolve(k)),
            QueryPart::Raw(s) => world.resolve(s),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn pairs_string(world: &World, pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(&world.resolve(k)), enc(&world.resolve(v))))
        .collect::<Vec<_>>()
        .join("&")
}

/// The `Content-Type` of a request.
#[derive(Clone, Debug)]
enum ContentType {
    Right,
    Missing,
    Some(String),
}

fn content_type() -> BoxedStrategy<ContentType> {
    prop_oneof![
        4 => Just(ContentType::Right),
        2 => Just(ContentType::Missing),
        3 => prop::sample::select(vec![
            "application/json", "application/scim+json", "application/x-www-form-urlencoded",
            "APPLICATION/X-WWW-FORM-URLENCODED; charset=utf-8", "application/json; charset=utf-8", "text/plain",
            "multipart/form-data; boundary=x", ";", "",
        ])
        .prop_map(|s| ContentType::Some(s.to_string())),
        1 => ".{0,30}".prop_map(ContentType::Some),
    ]
    .boxed()
}

/// The `Authorization` (and `X-Request-Origin`) of a request.
#[derive(Clone, Debug)]
enum Credentials {
    /// What the route expects.
    Right,
    /// No `Authorization` at all.
    Missing,
    /// The right token under another scheme (`Basic`, `Token`, `bearer`, ...).
    Scheme(String),
    /// `Bearer` and this text as the token.
    Bearer(String),
    /// Another kind's valid credential (API key, admin token, SCIM token), the n-th.
    Other(usize),
    /// The header's whole value.
    Value(String),
    /// A wrong `Authorization` first, then the right one.
    WrongThenRight(String),
}

fn credentials() -> BoxedStrategy<Credentials> {
    prop_oneof![
        2 => Just(Credentials::Right),
        2 => Just(Credentials::Missing),
        3 => prop_oneof![
            prop::sample::select(vec![
                "Basic", "Token", "bearer", "BEARER", "Bearer:", "Digest", "", " ", "Bearer\t", "Bearer Bearer",
            ])
            .prop_map(str::to_string),
            "[ -~]{0,10}",
        ]
        .prop_map(Credentials::Scheme),
        2 => text().prop_map(Credentials::Bearer),
        2 => any::<usize>().prop_map(Credentials::Other),
        2 => ".{0,40}".prop_map(Credentials::Value),
        1 => text().prop_map(Credentials::WrongThenRight),
    ]
    .boxed()
}

/// The `X-Request-Origin` of a request.
#[derive(Clone, Debug)]
enum RequestOrigin {
    /// The one the route expects (only SCIM expects one).
    Right,
    Missing,
    Some(String),
}

fn request_origin() -> BoxedStrategy<RequestOrigin> {
    prop_oneof![
        3 => Just(RequestOrigin::Right),
        1 => Just(RequestOrigin::Missing),
        1 => prop::sample::select(vec![
            "HTTPS://IDP.EXAMPLE.COM", "https://idp.example.com/", " https://idp.example.com ",
            "https://idp.example.com//", "https://other.example.com", "",
        ])
        .prop_map(|s| RequestOrigin::Some(s.to_string())),
        1 => ".{0,30}".prop_map(RequestOrigin::Some),
    ]
    .boxed()
}

/// Every header of a request, as generated.
#[derive(Clone, Debug)]
struct Headers {
    credentials: Credentials,
    content_type: ContentType,
    request_origin: RequestOrigin,
    /// Other headers (`If-Match`, `Host`, `Content-Length`, ...).
    extra: Vec<(String, String)>,
    /// The origin the host saw.
    origin: Option<String>,
    /// Header names in lower case (true) or as written.
    lower_names: bool,
}

fn headers() -> BoxedStrategy<Headers> {
    let name = prop_oneof![
        4 => prop::sample::select(vec![
            "If-Match", "Host", "Content-Length", "Accept", "content-type", "authorization", "x-request-origin",
            "Cookie", "Transfer-Encoding",
        ])
        .prop_map(str::to_string),
        1 => ".{0,12}",
    ];
    let value = prop_oneof![
        2 => prop::sample::select(vec![
            "*", "W/\"1\"", "W/\"2\"", "\"1\"", "W/\"1\", W/\"2\"", "W/", "0", "99999999999999999999", "-1",
            "example.com", "exa mple.com:99999",
        ])
        .prop_map(str::to_string),
        1 => text(),
    ];
    (
        credentials(),
        content_type(),
        request_origin(),
        prop::collection::vec((name, value), 0..4),
        prop::option::of(prop_oneof!["https?://[a-z.]{1,12}(:[0-9]{1,6})?", ".{0,20}"]),
        any::<bool>(),
    )
        .prop_map(|(credentials, content_type, request_origin, extra, origin, lower_names)| Headers {
            credentials,
            content_type,
            request_origin,
            extra,
            origin,
            lower_names,
        })
        .boxed()
}

// ---------------------------------------------------------------------------
// Building requests
// ---------------------------------------------------------------------------

impl World {
    /// A request of `route` with the right credentials, `Content-Type` and body.
    fn request(&self, route: &Route, path: String, query: String, body: Vec<u8>, ct: &ContentType) -> Request {
        let mut req = Request::new(route.method, "");
        req.path = path;
        req.query = query;
        req.headers = self.credentials(route.auth);
        match ct {
            ContentType::Right => req.headers.push(("Content-Type".into(), right_content_type(route).into())),
            ContentType::Missing => {}
            ContentType::Some(s) => req.headers.push(("Content-Type".into(), s.clone())),
        }
        req.body = body;
        req
    }

    /// The valid body of a route, as bytes (empty when it takes none).
    fn body_bytes(&self, body: &Body) -> Vec<u8> {
        match body {
            Body::None => Vec::new(),
            Body::Json(v) => self.resolve_json(v.clone()).to_string().into_bytes(),
            Body::Form(pairs) => pairs_string(self, pairs).into_bytes(),
        }
    }

    /// A route's example, or a small object for routes that take no body.
    fn example_or_default(route: &Route) -> Example {
        example(route).unwrap_or(Example { query: Vec::new(), body: Body::None })
    }

    /// A route's valid path (known ids) and query.
    fn valid_path_and_query(&self, route: &Route) -> (String, String) {
        let ex = World::example_or_default(route);
        (self.path(route, &[Param::Known(0), Param::Known(0)], false), pairs_string(self, &ex.query))
    }

    /// Sends `make(route)` for every route, in table order.
    fn every_route(&self, mut make: impl FnMut(&World, &Route) -> Request) -> Result<(), TestCaseError> {
        for route in ROUTES {
            let req = make(self, route);
            self.send(req)?;
        }
        Ok(())
    }
}

fn apply_headers(world: &World, route: &Route, req: &mut Request, h: &Headers) {
    let right = world.credentials(route.auth);
    let right_auth = right.iter().find(|(k, _)| k == "Authorization").map(|(_, v)| v.clone());
    let right_token = right_auth.as_deref().and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("t").to_string();
    let mut headers: Vec<(String, String)> = Vec::new();
    let auth = |v: String| ("Authorization".to_string(), v);
    match &h.credentials {
        Credentials::Right => headers.extend(right_auth.clone().map(auth)),
        Credentials::Missing => {}
        Credentials::Scheme(s) => headers.push(auth(format!("{s} {right_token}"))),
        Credentials::Bearer(t) => headers.push(auth(format!("Bearer {}", world.resolve(t)))),
        Credentials::Other(i) => {
            let all = [world.key.clone(), ADMIN_TOKEN.to_string(), world.scim_token.clone(), format!("{}x", world.key)];
            headers.push(auth(format!("Bearer {}", all[i % all.len()])));
        }
        Credentials::Value(v) => headers.push(auth(world.resolve(v))),
        Credentials::WrongThenRight(t) => {
            headers.push(auth(format!("Bearer {t}")));
            headers.extend(right_auth.clone().map(auth));
        }
    }
    match &h.request_origin {
        RequestOrigin::Right => headers.push(("X-Request-Origin".into(), ORIGIN.into())),
        RequestOrigin::Missing => {}
        RequestOrigin::Some(s) => headers.push(("X-Request-Origin".into(), s.clone())),
    }
    match &h.content_type {
        ContentType::Right => headers.push(("Content-Type".into(), right_content_type(route).into())),
        ContentType::Missing => {}
        ContentType::Some(s) => headers.push(("Content-Type".into(), s.clone())),
    }
    headers.extend(h.extra.iter().map(|(k, v)| (k.clone(), world.resolve(v))));
    if h.lower_names {
        for (k, _) in &mut headers {
            *k = k.to_ascii_lowercase();
        }
    }
    req.headers = headers;
    req.origin = h.origin.clone();
}

fn bytes_of(world: &World, route: &Route, b: &Bytes) -> Vec<u8> {
    let valid = match World::example_or_default(route).body {
        Body::None => world.body_bytes(&Body::Json(json!({"external_id": "u1"}))),
        body => world.body_bytes(&body),
    };
    match b {
        Bytes::Random(v) => v.clone(),
        Bytes::Text(s) => s.clone().into_bytes(),
        Bytes::Truncated(n) => valid[..n % (valid.len() + 1)].to_vec(),
        Bytes::Spliced(n, token) => {
            let at = n % (valid.len() + 1);
            [&valid[..at], token.as_slice(), &valid[at..]].concat()
        }
        Bytes::Flipped(flips) => {
            let mut v = valid;
            if !v.is_empty() {
                for (i, b) in flips {
                    let n = v.len();
                    v[i % n] = *b;
                }
            }
            v
        }
    }
}

/// A path made of the table's own segments, ids and arbitrary text.
#[derive(Clone, Debug)]
enum Segment {
    Literal(usize),
    Param(Param),
}

fn literal_segments() -> Vec<&'static str> {
    let mut all: Vec<&'static str> =
        ROUTES.iter().flat_map(|r| r.pattern.split('/')).filter(|s| !s.is_empty() && !s.starts_with('{')).collect();
    all.sort_unstable();
    all.dedup();
    all.extend(["", ".", "..", "v1", "v3", "%2F", "users%2Ftrack", "Users"]);
    all
}

fn method_of(i: u8) -> Method {
    [
        Method::Get,
        Method::Post,
        Method::Put,
        Method::Patch,
        Method::Delete,
        Method::Head,
        Method::Options,
        Method::Other,
    ][usize::from(i) % 8]
}

// ---------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------

proptest! {
    // No regression files in the source tree: a failure prints its minimal case.
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// (a) Any bytes as the body of every route, with the route's credentials.
    #[test]
    fn any_bytes_as_a_body_is_answered(body in bytes(), ct in content_type()) {
        let world = World::new();
        world.every_route(|w, route| {
            let (path, query) = w.valid_path_and_query(route);
            w.request(route, path, query, bytes_of(w, route, &body), &ct)
        })?;
    }

    /// (b) Any JSON value as the body of every route, its object keys mostly the
    /// fields the parsers read, with the route's credentials and media type.
    #[test]
    fn any_json_as_a_body_is_answered(body in json_body()) {
        let world = World::new();
        let bytes = world.resolve_json(body).to_string().into_bytes();
        world.every_route(|w, route| {
            let (path, query) = w.valid_path_and_query(route);
            w.request(route, path, query, bytes.clone(), &ContentType::Right)
        })?;
    }

    /// (b') Each route's valid body (or, without one, its valid query) with a few
    /// changes anywhere in it: this reaches the validation deep inside bodies.
    #[test]
    fn changed_valid_requests_are_answered(mutations in prop::collection::vec(mutation(), 1..5)) {
        let world = World::new();
        world.every_route(|w, route| {
            let ex = World::example_or_default(route);
            let path = w.path(route, &[Param::Known(0), Param::Known(0)], false);
            let (query, body) = match ex.body {
                Body::None => (mutate_pairs(ex.query, &mutations), Body::None),
                Body::Json(v) => (ex.query, Body::Json(mutate_json(v, &mutations))),
                Body::Form(pairs) => (ex.query, Body::Form(mutate_pairs(pairs, &mutations))),
            };
            w.request(route, path, pairs_string(w, &query), w.body_bytes(&body), &ContentType::Right)
        })?;
    }

    /// (c) Any query string and any path parameters (ids that exist, ids changed a
    /// little, arbitrary text), with the route's valid body and credentials.
    #[test]
    fn any_query_and_path_ids_are_answered(
        parts in prop::collection::vec(query_part(), 0..6),
        params in prop::collection::vec(param(), 2),
        trailing_slash in any::<bool>(),
    ) {
        let world = World::new();
        let query = query_string(&world, &parts);
        world.every_route(|w, route| {
            let path = w.path(route, &params, trailing_slash);
            let body = w.body_bytes(&World::example_or_default(route).body);
            w.request(route, path, query.clone(), body, &ContentType::Right)
        })?;
    }

    /// (d) Missing, wrong and arbitrary headers: credentials (wrong schemes, other
    /// kinds' tokens, arbitrary values), media types, `X-Request-Origin`,
    /// `If-Match`, `Host`, and the origin the host saw.
    #[test]
    fn any_headers_are_answered(h in headers(), json_body in prop::option::of(json_body())) {
        let world = World::new();
        world.every_route(|w, route| {
            let (path, query) = w.valid_path_and_query(route);
            let body = match &json_body {
                Some(v) => w.resolve_json(v.clone()).to_string().into_bytes(),
                None => w.body_bytes(&World::example_or_default(route).body),
            };
            let mut req = w.request(route, path, query, body, &ContentType::Right);
            apply_headers(w, route, &mut req, &h);
            req
        })?;
    }

    /// Any method on any path made of the table's segments, ids and arbitrary text:
    /// 404s and 405s in the shape of the path's family.
    #[test]
    fn any_method_and_path_is_answered(
        requests in prop::collection::vec((
            any::<u8>(),
            prop::collection::vec(prop_oneof![
                3 => any::<usize>().prop_map(Segment::Literal),
                1 => param().prop_map(Segment::Param),
            ], 0..6),
            any::<bool>(),
            prop::option::of(json_body()),
        ), 1..24),
    ) {
        let world = World::new();
        let literals = literal_segments();
        for (method, segments, trailing_slash, body) in requests {
            let mut path = String::new();
            for s in &segments {
                path.push('/');
                match s {
                    Segment::Literal(i) => path.push_str(literals[i % literals.len()]),
                    Segment::Param(p) => path.push_str(&world.param("", 0, p)),
                }
            }
            if trailing_slash || path.is_empty() {
                path.push('/');
            }
            let auth = if crate::scim::owns(&path) {
                Auth::Scim
            } else if path.starts_with("/_engage") {
                Auth::Admin
            } else {
                Auth::Key(Permission::Scim, crate::ratelimit::Bucket::Admin)
            };
            let mut req = Request::new(method_of(method), "");
            req.path = path;
            req.headers = world.credentials(auth);
            if let Some(b) = body {
                req.headers.push(("Content-Type".into(), "application/json".into()));
                req.body = world.resolve_json(b).to_string().into_bytes();
            }
            world.send(req)?;
        }
    }
}

/// Every route of the table has a valid request here, so a new route is fuzzed (and
/// this file updated) from the day it is added; and each valid request is valid.
#[test]
fn every_route_has_an_example() {
    let world = World::new();
    // Deletes last, so that the routes after them still find what they change.
    let mut routes: Vec<&Route> = ROUTES.iter().collect();
    routes.sort_by_key(|r| r.method == Method::Delete);
    for route in routes {
        let ex = example(route).unwrap_or_else(|| {
            panic!("no example for {} {}: add one to fuzz_tests.rs", route.method.as_str(), route.pattern)
        });
        let (path, query) = world.valid_path_and_query(route);
        let body = world.body_bytes(&ex.body);
        let req = world.request(route, path.clone(), query, body, &ContentType::Right);
        let resp = world.send(req).unwrap_or_else(|e| panic!("{e}"));
        // The examples are meant to succeed (the playground's files are the host's
        // to serve; the conformance run is the host's to do; this host runs no syncs).
        let host_only = matches!(route.pattern, "/playground/{..}" | "/_engage/conformance")
            || route.pattern == "/_engage/cdi/integrations/{}/sync";
        if !host_only {
            assert!(
                resp.status < 400,
                "{} {path}: {} {}",
                route.method.as_str(),
                resp.status,
                String::from_utf8_lossy(&resp.body)
            );
        }
    }
}
