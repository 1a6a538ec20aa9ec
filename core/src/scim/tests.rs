//! The family through the engine, on the in-memory store.

use serde_json::{json, Value};

use super::token;
use crate::ctx::Ctx;
use crate::engine::{Config, Engine};
use crate::http::{Method, Request};
use crate::store::memory::MemoryStore;
use crate::testkit::Kit;
use crate::time::Timestamp;

const ORIGIN: &str = "https://idp.example.com";

struct Scim {
    kit: Kit,
    token: String,
}

impl Scim {
    fn new() -> Scim {
        let kit = Kit::new();
        let token = pollster::block_on(token::create(kit.engine().store(), token::TokenFor::origin(ORIGIN), kit.ctx()))
            .expect("token");
        Scim { kit, token }
    }

    fn call(&self, method: Method, path: &str, body: Value) -> (u16, Value) {
        let mut req = Request::new(method, path)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("X-Request-Origin", ORIGIN);
        if !body.is_null() {
            req = req.header("Content-Type", "application/scim+json").body(body.to_string());
        }
        let resp = pollster::block_on(self.kit.engine().handle(req, self.kit.ctx()));
        (resp.status, resp.json_body())
    }
}

fn user(name: &str) -> Value {
    json!({
        "schemas": [super::protocol::USER_URN],
        "userName": name,
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "department": "engineering",
    })
}

#[test]
fn create_read_find_replace_delete() {
    let s = Scim::new();
    let (status, created) = s.call(Method::Post, "/scim/v2/Users", user("Ada@Example.com"));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["meta"]["version"], "W/\"1\"");
    assert_eq!(s.call(Method::Get, &format!("/scim/v2/Users/{id}"), Value::Null).1["userName"], "Ada@Example.com");

    let (status, found) =
        s.call(Method::Get, "/scim/v2/Users?filter=userName%20eq%20%22ada%40EXAMPLE.com%22", Value::Null);
    assert_eq!((status, found["totalResults"].clone()), (200, json!(1)));
    assert_eq!(found["Resources"][0]["id"], id.as_str());

    let (status, taken) = s.call(Method::Post, "/scim/v2/Users", user("ADA@example.COM"));
    assert_eq!((status, taken["scimType"].clone()), (409, json!("uniqueness")));

    let mut renamed = user("grace@example.com");
    renamed["department"] = json!("finance");
    let (status, replaced) = s.call(Method::Put, &format!("/scim/v2/Users/{id}"), renamed);
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(
        (replaced["userName"].clone(), replaced["createdAt"].clone()),
        (json!("grace@example.com"), created["createdAt"].clone())
    );
    // The old name is free again; the new one is taken.
    assert_eq!(s.call(Method::Post, "/scim/v2/Users", user("ada@example.com")).0, 201);
    assert_eq!(s.call(Method::Post, "/scim/v2/Users", user("Grace@example.com")).0, 409);

    assert_eq!(s.call(Method::Delete, &format!("/scim/v2/Users/{id}"), Value::Null).0, 204);
    let (status, gone) = s.call(Method::Get, &format!("/scim/v2/Users/{id}"), Value::Null);
    assert_eq!((status, gone["status"].clone(), gone["detail"].clone()), (404, json!(404), json!("User not found")));
    assert_eq!(s.call(Method::Post, "/scim/v2/Users", user("grace@example.com")).0, 201);
}

#[test]
fn permissions_are_checked_against_the_platforms_lists() {
    let s = Scim::new();
    let mut body = user("perm@example.com");
    body["permissions"] =
        json!({"appGroup": [{"appGroupName": "W", "team": [{"teamName": "T", "teamPermissions": ["view_pii"]}]}]});
    let (status, err) = s.call(Method::Post, "/scim/v2/Users", body);
    assert_eq!((status, err["scimType"].clone()), (400, json!("invalidValue")));
    assert!(err["detail"].as_str().unwrap().contains("permissions.appGroup[0].team[0].teamPermissions[0]"), "{err}");
    assert_eq!(
        s.call(Method::Get, "/scim/v2/Users?filter=userName%20eq%20%22perm@example.com%22", Value::Null).1
            ["totalResults"],
        0
    );
}

#[test]
fn a_wrong_origin_is_an_unknown_token() {
    let s = Scim::new();
    let req = Request::new(Method::Get, "/scim/v2/Users")
        .header("Authorization", &format!("Bearer {}", s.token))
        .header("X-Request-Origin", "https://other.example.com");
    let resp = pollster::block_on(s.kit.engine().handle(req, s.kit.ctx()));
    assert_eq!(resp.status, 401);
    assert_eq!(resp.json_body()["schemas"][0], super::error::ERROR_URN);
}

#[test]
fn the_company_gets_five_thousand_user_requests_a_day() {
    let engine = Engine::new(MemoryStore::new(), Config::default());
    let ctx = |i: i64| Ctx::new(Timestamp(86_400_000 * 20_000 + i), [i as u8; 16]);
    let secret =
        pollster::block_on(token::create(engine.store(), token::TokenFor::origin(ORIGIN), ctx(0))).expect("token");
    let call = |path: &str, i: i64| {
        let req = Request::new(Method::Get, path)
            .header("Authorization", &format!("Bearer {secret}"))
            .header("X-Request-Origin", ORIGIN);
        pollster::block_on(engine.handle(req, ctx(i)))
    };
    for i in 0..5_000 {
        let resp = call("/scim/v2/Users/nobody", i);
        assert_eq!(resp.status, 404);
        assert_eq!(resp.header_value("X-RateLimit-Remaining"), Some((4_999 - i).to_string().as_str()));
    }
    let limited = call("/scim/v2/Users", 5_000);
    assert_eq!(limited.status, 429);
    assert!(limited.header_value("X-Ratelimit-Retry-After").is_some());
    assert_eq!(limited.json_body()["status"], 429);
    // Discovery is not counted.
    assert_eq!(call("/scim/v2/ServiceProviderConfig", 5_001).status, 200);
}

#[test]
fn a_deployment_keeps_at_most_max_users_and_a_delete_makes_room() {
    use super::protocol::MAX_USERS;
    use super::write;
    let store = MemoryStore::new();
    let ctx = |i: usize| Ctx::new(Timestamp(1_700_000_000_000 + i as i64), (i as u128).to_le_bytes());
    let create = |i: usize| {
        let body = user(&format!("u{i}@example.com")).to_string();
        pollster::block_on(write::create(&store, body.as_bytes(), None, "http://x", ctx(i)))
    };
    let mut first = String::new();
    for i in 0..MAX_USERS {
        let resp = create(i).unwrap_or_else(|e| panic!("user {i}: {e:?}"));
        if i == 0 {
            first = resp.json_body()["id"].as_str().unwrap().to_string();
        }
    }
    let over = create(MAX_USERS).expect_err("over the bound");
    assert_eq!(over.into_response().status, 400);
    let req = Request::new(Method::Delete, "/");
    pollster::block_on(write::delete(&store, &first, &req, ctx(MAX_USERS + 1))).expect("delete");
    assert_eq!(create(MAX_USERS + 2).expect("room again").status, 201);
}
