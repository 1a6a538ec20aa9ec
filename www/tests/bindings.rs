//! The JavaScript bindings, run as wasm (under Node by default):
//! `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test -p engage-www --target wasm32-unknown-unknown`.
#![cfg(target_arch = "wasm32")]

use engage_www::bindings::{curl, routes, Playground};
use js_sys::{Array, Object, Reflect};
use serde_json::{json, Value};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn field(o: &Object, name: &str) -> JsValue {
    Reflect::get(o, &JsValue::from_str(name)).expect("the field exists")
}

fn text(o: &Object, name: &str) -> String {
    field(o, name).as_string().expect("a string field")
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

fn send(pg: &Playground, method: &str, path: &str, body: Value) -> Reply {
    let headers = format!("Authorization: Bearer {}\nContent-Type: application/json", pg.key());
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let o = pg.send(method, path, "", &headers, &body).map_err(JsValue::from).expect("sent");
    let headers = Array::from(&field(&o, "headers"))
        .iter()
        .map(|pair| {
            let pair = Array::from(&pair);
            (pair.get(0).as_string().unwrap(), pair.get(1).as_string().unwrap())
        })
        .collect();
    Reply {
        status: field(&o, "status").as_f64().expect("a numeric status") as u16,
        headers,
        body: serde_json::from_str(&text(&o, "body")).unwrap_or(Value::Null),
    }
}

fn track_blue(pg: &Playground) {
    let r =
        send(pg, "POST", "/users/track", json!({"attributes": [{"external_id": "user-1", "favorite_color": "blue"}]}));
    assert_eq!(r.status, 201);
    assert_eq!(r.body["message"], "success");
}

fn favorite_color(pg: &Playground) -> Value {
    let r = send(pg, "POST", "/users/export/ids", json!({"external_ids": ["user-1"]}));
    assert_eq!(r.status, 201);
    r.body["users"][0]["custom_attributes"]["favorite_color"].clone()
}

#[wasm_bindgen_test]
fn a_new_playground_has_an_all_permissions_key_that_tracks_and_exports() {
    let pg = Playground::new(None).map_err(JsValue::from).unwrap();
    assert_eq!(pg.workspace(), "playground");
    assert_eq!(pg.key().len(), 36);
    assert!(pg.restore_error().is_none());
    track_blue(&pg);
    assert_eq!(favorite_color(&pg), json!("blue"));
}

#[wasm_bindgen_test]
fn responses_carry_the_cores_status_headers_and_body() {
    let pg = Playground::new(None).map_err(JsValue::from).unwrap();
    let r = send(&pg, "POST", "/users/export/ids", json!({"external_ids": ["nobody"]}));
    assert_eq!(r.status, 201);
    assert!(r.headers.iter().any(|(k, v)| k == "Content-Type" && v == "application/json"));
    assert!(r.headers.iter().any(|(k, _)| k == "X-RateLimit-Limit"));
    // No key: the core's 401, not a JS error.
    let o = pg.send("POST", "/users/export/ids", "", "", "{}").map_err(JsValue::from).unwrap();
    assert_eq!(field(&o, "status").as_f64(), Some(401.0));
    // An editor mistake is a JS error, not a request.
    assert!(pg.send("POST", "users", "", "", "").is_err());
}

#[wasm_bindgen_test]
fn a_saved_playground_restores_with_its_key_and_data() {
    let pg = Playground::new(None).map_err(JsValue::from).unwrap();
    track_blue(&pg);
    let saved = pg.save().map_err(JsValue::from).unwrap();
    let again = Playground::new(Some(saved)).map_err(JsValue::from).unwrap();
    assert!(again.restore_error().is_none());
    assert_eq!(again.key(), pg.key());
    assert_eq!(favorite_color(&again), json!("blue"));
}

#[wasm_bindgen_test]
fn reset_and_unreadable_snapshots_start_an_empty_store_with_a_new_key() {
    let mut pg = Playground::new(None).map_err(JsValue::from).unwrap();
    track_blue(&pg);
    let old_key = pg.key();
    pg.reset().map_err(JsValue::from).unwrap();
    assert_ne!(pg.key(), old_key);
    assert_eq!(favorite_color(&pg), Value::Null);

    let broken = Playground::new(Some("{not json".into())).map_err(JsValue::from).unwrap();
    assert!(broken.restore_error().is_some());
    assert_eq!(favorite_color(&broken), Value::Null);
}

#[wasm_bindgen_test]
fn routes_and_examples_cover_the_public_api() {
    let list = routes();
    let patterns: Vec<String> = list.iter().map(|r| text(&Object::from(r), "pattern")).collect();
    assert!(patterns.contains(&"/users/track".to_string()));
    assert!(patterns.contains(&"/users/export/ids".to_string()));
    assert!(patterns.iter().all(|p| !p.starts_with("/_engage/")));

    let pg = Playground::new(None).map_err(JsValue::from).unwrap();
    let examples = pg.examples();
    assert_eq!(examples.length(), list.length());
    let track = examples.iter().map(Object::from).find(|e| text(e, "pattern") == "/users/track").unwrap();
    assert!(text(&track, "headers").contains(&pg.key()));
    // The example request works as it is.
    let o = pg
        .send(
            &text(&track, "method"),
            &text(&track, "path"),
            &text(&track, "query"),
            &text(&track, "headers"),
            &text(&track, "body"),
        )
        .map_err(JsValue::from)
        .unwrap();
    assert_eq!(field(&o, "status").as_f64(), Some(201.0));
}

#[wasm_bindgen_test]
fn curl_targets_the_base_url() {
    let cmd = curl("http://127.0.0.1:8080/", "POST", "/users/track", "", "Authorization: Bearer k", "{}")
        .map_err(JsValue::from)
        .unwrap();
    assert!(cmd.starts_with("curl -sS -i -X POST 'http://127.0.0.1:8080/users/track'"));
    assert!(cmd.contains("-H 'Authorization: Bearer k'"));
    assert!(cmd.ends_with("--data-raw '{}'"));
}
