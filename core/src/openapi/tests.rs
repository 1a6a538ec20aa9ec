use std::collections::BTreeSet;

use serde_json::Value;

use super::{describe, document, endpoint_of, errors, path_of};
use crate::admin::workspace;
use crate::ctx::Ctx;
use crate::describe::op::In;
use crate::engine::{Config, Engine};
use crate::http::{Method, Request};
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::routes::{Auth, Endpoint, Family, Scim, ROUTES};
use crate::store::memory::MemoryStore;
use crate::testkit::Kit;
use crate::time::Timestamp;

fn operation<'a>(doc: &'a Value, route: &crate::routes::Route) -> &'a Value {
    &doc["paths"][path_of(route)][route.method.as_str().to_ascii_lowercase()]
}

#[test]
fn every_route_is_in_the_document_with_its_method_summary_and_credentials() {
    let doc = document();
    let mut operations = 0;
    for route in ROUTES {
        let op = operation(&doc, route);
        let name = format!("{} {}", route.method.as_str(), route.pattern);
        assert!(op.is_object(), "{name} is not in the document");
        assert!(!route.summary.trim().is_empty(), "{name} has no summary");
        assert_eq!(op["summary"], route.summary, "{name}");
        assert_eq!(op["x-engage-pattern"], route.pattern, "{name}");
        assert!(op["description"].as_str().is_some_and(|d| d.len() > 40), "{name} is not described");
        // Every route answers some success, but those SCIM defines and this server
        // does not offer, which answer 501 and nothing else.
        let not_offered = matches!(endpoint_of(route), Endpoint::Scim(Scim::NotOffered(_)));
        let statuses: Vec<&String> = op["responses"].as_object().map(|r| r.keys().collect()).unwrap_or_default();
        if not_offered {
            assert!(statuses.iter().any(|s| *s == "501"), "{name}");
        } else {
            assert!(statuses.iter().any(|s| s.starts_with('2') || s.starts_with('3')), "{name}");
        }
        match route.auth {
            Auth::Key(permission, bucket) => {
                assert_eq!(op["security"][0]["apiKey"][0], permission.as_str(), "{name} lists its permission");
                assert_eq!(op["x-engage-permission"], permission.as_str(), "{name}");
                assert_eq!(op["x-engage-rate-limit"]["limit"], bucket.limit().0, "{name}");
                assert_eq!(op["responses"]["429"]["$ref"], "#/components/responses/RateLimited", "{name}");
            }
            Auth::Scim => assert!(op["security"][0].get("scimOrigin").is_some(), "{name}"),
            Auth::Admin | Auth::SignIn => {
                assert!(op["security"][0].get("adminToken").is_some(), "{name}");
                let tag = if route.family == Family::Kit { "Engage test kit" } else { "Engage operator" };
                assert_eq!(op["tags"][0], tag, "{name}");
                assert_eq!(op["x-engage-route"], "operator", "{name}");
            }
            Auth::Public => assert_eq!(op["security"], serde_json::json!([]), "{name}"),
        }
        operations += 1;
    }
    let documented: usize =
        doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();
    assert_eq!(documented, operations, "the document has operations that no route has");
}

#[test]
fn every_path_parameter_is_named_once_and_described_by_that_name() {
    for route in ROUTES {
        let name = format!("{} {}", route.method.as_str(), route.pattern);
        let holes = route.pattern.split('/').filter(|s| *s == "{}" || *s == "{..}").count();
        assert_eq!(holes, route.params.len(), "{name}: one name per path parameter");
        let unique: BTreeSet<_> = route.params.iter().collect();
        assert_eq!(unique.len(), route.params.len(), "{name}: parameter names repeat");
        for p in describe(&endpoint_of(route)).params.iter().filter(|p| p.at == In::Path) {
            assert!(route.params.contains(&p.name), "{name} describes a path parameter '{}' it does not have", p.name);
        }
    }
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r.clone());
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves_and_operation_ids_are_unique() {
    let doc = document();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').expect("a local reference");
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    let mut ids = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()), "{} twice", op["operationId"]);
        }
    }
}

#[test]
fn the_engine_serves_the_document() {
    let (status, body) = Kit::new().call(Method::Get, "/openapi.json", Value::Null);
    assert_eq!(status, 200);
    assert_eq!(body["openapi"], "3.1.0");
    assert_eq!(body, document());
}

#[test]
fn the_documented_rate_limit_headers_are_the_ones_answers_carry() {
    let engine = Engine::new(MemoryStore::new(), Config::default());
    let ctx = Ctx::new(Timestamp(1_700_000_000_000), [3; 16]);
    let ws = WorkspaceName::parse("w").expect("name");
    let key = pollster::block_on(workspace::create_key(engine.store(), &ws, vec![Permission::UsersExportIds], ctx))
        .expect("key");
    let req = Request::new(Method::Post, "/users/export/ids")
        .header("Authorization", &format!("Bearer {key}"))
        .body(r#"{"external_ids": ["nobody"]}"#);
    let resp = pollster::block_on(engine.handle(req, ctx));
    assert_eq!(resp.status, 201);
    let sent: BTreeSet<String> = resp
        .headers
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k.to_ascii_lowercase().starts_with("x-ratelimit"))
        .collect();
    let documented: BTreeSet<String> = errors::RATE_LIMIT_HEADERS.iter().map(|h| h.to_string()).collect();
    assert_eq!(sent, documented);
    let doc = document();
    let limited = &doc["components"]["responses"]["RateLimited"]["headers"];
    assert!(limited.get("X-Ratelimit-Retry-After").is_some(), "{limited}");
    let answer = &doc["paths"]["/users/export/ids"]["post"]["responses"]["201"]["headers"];
    for h in &documented {
        assert!(answer.get(h).is_some(), "{h} is not documented: {answer}");
        assert!(doc["components"]["headers"].get(h).is_some(), "{h}");
    }
}

/// Every request body and every success answer with a body carries an example
/// (`tests/openapi/examples.py` sends the bodies and checks each example against its
/// schema, on a running server).
#[test]
fn every_request_body_and_success_answer_has_an_example() {
    let doc = document();
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let name = format!("{} {path}", method.to_ascii_uppercase());
            for (media, content) in op["requestBody"]["content"].as_object().into_iter().flatten() {
                if content.get("example").is_none() {
                    missing.push(format!("{name}: request body {media}"));
                }
            }
            for (status, answer) in op["responses"].as_object().into_iter().flatten() {
                if !(status.starts_with('2') || status.starts_with('3')) {
                    continue;
                }
                for (media, content) in answer["content"].as_object().into_iter().flatten() {
                    if content["examples"].as_object().is_none_or(|e| e.is_empty()) {
                        missing.push(format!("{name}: {status} {media}"));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "no example: {missing:#?}");
}

#[test]
fn the_schemas_blank_class_is_what_the_server_trims() {
    use crate::describe::schema::{not_blank, string, BLANK};
    // Read by another engine than the generators' (the class is explicit, so every
    // dialect reads it alike): "not blank" matches a character exactly when the
    // server does not trim it.
    let not_blank = regex::Regex::new(not_blank(string(""))["pattern"].as_str().unwrap()).unwrap();
    let blank = regex::Regex::new(&format!("^[{BLANK}]$")).unwrap();
    let mut buf = [0; 4];
    for c in (0..=0x10FFFF).filter_map(char::from_u32) {
        let text = c.encode_utf8(&mut buf);
        assert_eq!(blank.is_match(text), c.is_whitespace(), "U+{:04X}", c as u32);
        assert_eq!(not_blank.is_match(text), !text.trim().is_empty(), "U+{:04X}", c as u32);
    }
    // And no pattern says `\s` or `\S` for white space, whose meaning differs
    // between dialects (END's `[\s\S]` is any character in all of them).
    fn patterns(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("pattern", Value::String(p)) => out.push(p.clone()),
                        _ => patterns(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| patterns(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    patterns(&document(), &mut found);
    assert!(found.len() > 10, "{found:?}");
    for p in found {
        let rest = p.replace(crate::describe::schema::END, "");
        assert!(!rest.contains("\\s") && !rest.contains("\\S"), "{p}");
    }
}
