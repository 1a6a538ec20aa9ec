//! The fixture: the [`World`] every case starts from (an engine with users,
//! groups, a preference center and a link to it, a SCIM token and user,
//! integrations with jobs and page cursors), its ids standing in for `§...`
//! placeholders, the credentials each kind of route expects, path parameters, and
//! [`World::send`], which handles a request and checks the answer.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::checks::{check, describe, truncated};
use super::examples::{center_body, scim_user};
use super::strategies::Param;
use crate::cdi::integration::{DataKind, JobStatus, Spec};
use crate::cdi::rows::Row;
use crate::http::{Method, Request, Response};
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::routes::{Auth, Route};
use crate::scim::protocol::USER_URN;
use crate::subscriptions::groups::Channel;
use crate::testkit::{Kit, ADMIN_TOKEN};
use crate::time::Timestamp;

/// The origin the world's SCIM token is made for.
pub(super) const ORIGIN: &str = "https://idp.example.com";

/// A fresh engine with something to find: see the module's documentation.
pub(super) struct World {
    pub(super) kit: Kit,
    pub(super) key: String,
    pub(super) scim_token: String,
    /// `(placeholder, value)`: what `§...` strings in an input stand for.
    pub(super) ids: Vec<(&'static str, String)>,
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
    pub(super) fn new() -> World {
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

        let scim_token =
            block_on(crate::scim::token::create(store, crate::scim::token::TokenFor::origin(ORIGIN), kit.ctx()))
                .expect("scim token");
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
            schedule_secs: (n < 6).then_some(3600),
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
                block_on(crate::cdi::sync::commit_batch(store, &begun, None, &rows, false, kit.ctx())).expect("batch");
            }
            let failure = (n == 5).then(|| (JobStatus::ConfigError, "no such table".to_string()));
            block_on(crate::cdi::sync::finish(store, &begun, failure, kit.ctx())).expect("finish");
        }
        // A second key, for the revocation route to revoke (the world's own stays).
        let spare = block_on(crate::admin::workspace::create_key(store, &ws, vec![Permission::UsersTrack], kit.ctx()))
            .expect("spare key");
        let spare_key = crate::auth::key_hash(&spare)[..16].to_string();
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
            ("§spare_key", spare_key),
        ];
        World { kit, key, scim_token, ids }
    }

    fn id(&self, name: &str) -> String {
        self.ids.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    /// Replaces every placeholder in `s` by the world's value.
    pub(super) fn resolve(&self, s: &str) -> String {
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

    pub(super) fn resolve_json(&self, v: Value) -> Value {
        World::resolve_with(&self.ids, v)
    }

    /// The credential headers a route expects.
    pub(super) fn credentials(&self, auth: Auth) -> Vec<(String, String)> {
        let bearer = |t: &str| ("Authorization".to_string(), format!("Bearer {t}"));
        match auth {
            Auth::Key(..) => vec![bearer(&self.key)],
            Auth::Scim => vec![bearer(&self.scim_token), ("X-Request-Origin".into(), ORIGIN.into())],
            Auth::Admin | Auth::SignIn => vec![bearer(ADMIN_TOKEN)],
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
            ("/_engage/keys/{}", _) => one("§spare_key"),
            ("/_engage/snapshots/{}" | "/_engage/snapshots/{}/restore", _) => vec!["before".into()],
            ("/scim/v2/ResourceTypes/{}", _) => vec!["User".into()],
            ("/scim/v2/Schemas/{}", _) => vec![USER_URN.into(), USER_URN.to_uppercase()],
            ("/cdi/integrations/{}/job_sync_status" | "/_engage/cdi/integrations/{}/sync", _)
            | ("/_engage/cdi/integrations/{}" | "/_engage/cdi/integrations/{}/jobs", _)
            | ("/_engage/cdi/integrations/{}/rewind", _) => one("§integration"),
            ("/_engage/workspaces/{}/users" | "/_engage/workspaces/{}/preference-centers", _)
            | ("/_engage/workspaces/{}/preference-centers/{}/url/{}", 0) => vec!["test".into()],
            ("/_engage/workspaces/{}/preference-centers/{}/url/{}", 1) => one("§center"),
            ("/_engage/workspaces/{}/preference-centers/{}/url/{}", _) => {
                vec!["u1".into(), "u2".into(), "nobody".into()]
            }
            ("/playground/{..}", _) => {
                vec![String::new(), "index.html".into(), "pkg/engage_bg.wasm".into(), "a%20b/".into()]
            }
            _ => self.ids.iter().map(|(_, v)| v.clone()).collect(),
        }
    }

    /// A path parameter as it goes into the path.
    pub(super) fn param(&self, pattern: &str, slot: usize, p: &Param) -> String {
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
    pub(super) fn path(&self, route: &Route, params: &[Param], trailing_slash: bool) -> String {
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
    pub(super) fn send(&self, req: Request) -> Result<Response, TestCaseError> {
        let desc = describe(&req);
        let (method, path) = (req.method, req.path.clone());
        // As its hosts do: a `/users/track` that must wait for its users' queued
        // jobs runs again once they are applied (its `503 CatchUpFirst` is for the host).
        let resp = self.kit.handle(req);
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
pub(super) fn enc(s: &str) -> String {
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
