//! Engine-level tests of the subscription and email endpoints on the memory store.

use serde_json::{json, Value};

use crate::auth::{parse_permission_list, WorkspaceName};
use crate::groups::{self, Channel};
use crate::http::{Method, Request};
use crate::ids::IdGen;
use crate::store::memory::MemoryStore;
use crate::time::Timestamp;
use crate::{workspace, Config, Ctx, Engine};

struct World {
    engine: Engine<MemoryStore>,
    key: String,
    ws: WorkspaceName,
    tick: std::cell::Cell<i64>,
}

impl World {
    fn new() -> World {
        let store = MemoryStore::new();
        let ws = WorkspaceName::parse("w").unwrap();
        let ctx = Ctx { now: Timestamp(1_000), seed: [9; 16] };
        let key =
            pollster::block_on(workspace::create_key(&store, &ws, parse_permission_list("all").unwrap(), ctx)).unwrap();
        let engine = Engine::new(store, Config { rate_limits: false, ..Config::default() });
        World { engine, key, ws, tick: std::cell::Cell::new(2_000) }
    }

    fn ctx(&self) -> Ctx {
        let t = self.tick.get() + 1_000;
        self.tick.set(t);
        let mut seed = [0u8; 16];
        seed[..8].copy_from_slice(&t.to_le_bytes());
        Ctx { now: Timestamp(t), seed }
    }

    fn group(&self, channel: Channel) -> String {
        let c = self.ctx();
        let mut ids = IdGen::new(c.seed);
        pollster::block_on(groups::create(self.engine.store(), &self.ws, "g", channel, c.now, &mut ids)).unwrap().id
    }

    fn call(&self, method: Method, path: &str, body: Value) -> (u16, Value) {
        let mut req = Request::new(method, path).header("Authorization", &format!("Bearer {}", self.key));
        if method != Method::Get {
            req = req.body(body.to_string());
        }
        let resp = pollster::block_on(self.engine.handle(req, self.ctx()));
        (resp.status, resp.json_body())
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::Post, path, body)
    }

    fn track(&self, attributes: Value) {
        assert_eq!(self.post("/users/track", json!({"attributes": attributes})).0, 201);
    }

    fn export(&self, body: Value) -> Vec<Value> {
        let (status, body) = self.post("/users/export/ids", body);
        assert_eq!(status, 200, "{body}");
        body["users"].as_array().cloned().unwrap_or_default()
    }

    fn user(&self, external_id: &str) -> Value {
        self.export(json!({"external_ids": [external_id]})).pop().unwrap_or(Value::Null)
    }
}

#[test]
fn email_status_for_an_unlinked_address_applies_when_a_profile_gets_it() {
    let w = World::new();
    let (status, body) =
        w.post("/email/status", json!({"email": "Later@Example.com", "subscription_state": "opted_in"}));
    assert_eq!((status, body), (201, json!({"message": "success"})));
    w.track(json!([{"external_id": "u1", "email": "later@example.com"}]));
    assert_eq!(w.user("u1")["email_subscribe"], "opted_in");
}

#[test]
fn blocklisting_an_unlinked_address_marks_the_profile_that_gets_it() {
    let w = World::new();
    assert_eq!(w.post("/email/blocklist", json!({"email": ["b@example.com"]})).0, 201);
    w.track(json!([{"email": "b@example.com", "first_name": "B"}]));
    let users = w.export(json!({"email_address": "b@example.com"}));
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["email_subscribe"], "unsubscribed");
    assert_eq!(users[0]["email_hard_bounced"], true);
}

#[test]
fn track_email_subscribe_moves_a_remembered_address_state_too() {
    let w = World::new();
    w.post("/email/status", json!({"email": "a@example.com", "subscription_state": "unsubscribed"}));
    w.track(json!([{"external_id": "u1", "email": "a@example.com"}]));
    w.track(json!([{"external_id": "u1", "email_subscribe": "subscribed"}]));
    // A second profile getting the address inherits the latest state, not the older one.
    w.track(json!([{"external_id": "u2", "email": "a@example.com"}]));
    assert_eq!(w.user("u2")["email_subscribe"], "subscribed");
}

#[test]
fn v1_set_by_external_id_updates_every_user_sharing_the_email() {
    let w = World::new();
    let g = w.group(Channel::Email);
    w.track(json!([
        {"external_id": "u1", "email": "s@example.com"},
        {"external_id": "u2", "email": "s@example.com"},
        {"external_id": "u3", "email": "other@example.com"}
    ]));
    let body = json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": "u1"});
    assert_eq!(w.post("/subscription/status/set", body).0, 201);
    for (u, expected) in [("u1", json!("Subscribed")), ("u2", json!("Subscribed")), ("u3", Value::Null)] {
        assert_eq!(w.user(u)["subscription_groups"][0]["status"], expected, "{u}");
    }
}

#[test]
fn v2_with_one_bad_entry_writes_nothing() {
    let w = World::new();
    let g = w.group(Channel::Email);
    w.track(json!([{"external_id": "u1"}]));
    let body = json!({"subscription_groups": [
        {"subscription_group_id": g, "subscription_state": "subscribed", "external_ids": ["u1"]},
        {"subscription_group_id": "no-such-group", "subscription_state": "subscribed", "external_ids": ["u1"]}
    ]});
    let (status, body) = w.post("/v2/subscription/status/set", body);
    assert_eq!((status, body["message"].as_str()), (400, Some(super::BAD_GROUP_ID)));
    assert!(w.user("u1").get("subscription_groups").is_none());
}

#[test]
fn line_groups_change_only_the_named_user() {
    let w = World::new();
    let g = w.group(Channel::Line);
    w.track(json!([{"external_id": "u1", "phone": "+14155550100"}, {"external_id": "u2", "phone": "+14155550100"}]));
    let body = json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1"]});
    assert_eq!(w.post("/subscription/status/set", body).0, 201);
    assert_eq!(w.user("u1")["subscription_groups"][0]["status"], "Subscribed");
    assert!(w.user("u2").get("subscription_groups").is_none());
    let by_phone = json!({"subscription_group_id": g, "subscription_state": "subscribed", "phone": ["+14155550100"]});
    assert_eq!(w.post("/subscription/status/set", by_phone).0, 400);
}

#[test]
fn status_get_decodes_an_unencoded_plus_in_a_phone() {
    let w = World::new();
    let g = w.group(Channel::Sms);
    w.track(json!([{"external_id": "u1", "phone": "+14155550100", "subscription_groups": [
        {"subscription_group_id": g, "subscription_state": "unsubscribed"}
    ]}]));
    let (status, body) = w.call(
        Method::Get,
        &format!("/subscription/status/get?subscription_group_id={g}&phone=+14155550100"),
        Value::Null,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"]["+14155550100"], "Unsubscribed");
}
