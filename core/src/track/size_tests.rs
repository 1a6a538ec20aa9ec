//! The bound on a profile's size: a request that would take a profile over it is
//! refused whole (400, naming the bound); a queued job that no longer fits when
//! applied is set aside whole, never half-applied.

use serde_json::{json, Map, Value};

use crate::http::Method;
use crate::testkit::Kit;
use crate::users::profile::{MAX_CUSTOM_ATTRIBUTES, MAX_NAMES};

fn object(external_id: &str, from: usize, count: usize) -> Value {
    let mut m = Map::new();
    m.insert("external_id".into(), json!(external_id));
    for i in from..from + count {
        m.insert(format!("a{i}"), json!(i));
    }
    Value::Object(m)
}

fn apply_all(kit: &Kit) {
    while !pollster::block_on(kit.engine().apply_queued(kit.ctx())).unwrap().is_empty() {}
}

fn custom_count(kit: &Kit, external_id: &str) -> usize {
    kit.user(external_id)["custom_attributes"].as_object().map_or(0, |m| m.len())
}

#[test]
fn one_object_over_the_bound_is_refused_and_nothing_is_stored() {
    let kit = Kit::new();
    let (status, body) = kit.post("/users/track", json!({"attributes": [object("big", 0, MAX_CUSTOM_ATTRIBUTES + 1)]}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        json!("Profile too large: user 'big' would have 1001 custom attributes; a profile keeps at most 1000")
    );
    apply_all(&kit);
    assert_eq!(kit.user("big"), Value::Null);
}

#[test]
fn a_profile_at_the_bound_takes_no_new_attribute_but_updates_its_own() {
    let kit = Kit::new();
    for i in 0..10 {
        kit.track(json!({"attributes": [object("full", i * 100, 100)]}));
        apply_all(&kit);
    }
    assert_eq!(custom_count(&kit, "full"), MAX_CUSTOM_ATTRIBUTES);
    let (status, body) = kit.post(
        "/users/track",
        json!({"attributes": [{"external_id": "full", "a0": "changed", "new_one": 1}, {"external_id": "other", "x": 1}]}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("at most 1000"), "{body}");
    apply_all(&kit);
    assert_eq!(kit.user("full")["custom_attributes"]["a0"], json!(0), "nothing of the request applied");
    assert_eq!(kit.user("other"), Value::Null, "nothing of the request applied");
    kit.track(json!({"attributes": [{"external_id": "full", "a0": "changed"}]}));
    assert_eq!(kit.user("full")["custom_attributes"]["a0"], json!("changed"));

    let (status, body) = kit.post("/users/track/sync", json!({"attributes": [{"external_id": "full", "more": 1}]}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(custom_count(&kit, "full"), MAX_CUSTOM_ATTRIBUTES);
}

#[test]
fn a_queued_job_that_no_longer_fits_is_set_aside_whole() {
    let kit = Kit::new();
    // Both fit the stored (empty) profile when accepted; together they do not.
    kit.track(json!({"attributes": [object("race", 0, 600)]}));
    let second = object("race", 600, 600);
    let events = json!([{"external_id": "race", "name": "from_the_second", "time": "2026-11-01T10:00:00Z"}]);
    kit.track(json!({"attributes": [second], "events": events}));
    apply_all(&kit);
    let user = kit.user("race");
    assert_eq!(custom_count(&kit, "race"), 600);
    assert!(user.get("custom_events").is_none(), "the second job's event was not applied either: {user}");
    let (status, body) = kit.operator(Method::Get, "/_engage/queue/set-aside");
    assert_eq!(status, 200);
    assert_eq!(body["count"], json!(1), "{body}");
    assert!(body["jobs"][0]["error"].as_str().unwrap().contains("would have 1200 custom attributes"), "{body}");
}

#[test]
fn bytes_and_event_names_are_bounded_too() {
    let kit = Kit::new();
    let long: Vec<String> = (0..500).map(|i| format!("{i:0>255}")).collect();
    let mut obj = Map::new();
    obj.insert("external_id".into(), json!("wide"));
    for i in 0..9 {
        obj.insert(format!("list{i}"), json!(long));
    }
    let (status, body) = kit.post("/users/track", json!({"attributes": [obj]}));
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("bytes of custom attributes"), "{body}");

    let events: Vec<Value> = (0..=MAX_NAMES)
        .map(|i| json!({"external_id": "busy", "name": format!("e{i}"), "time": "2026-11-01T10:00:00Z"}))
        .collect();
    for chunk in events.chunks(75) {
        let (status, _) = kit.post("/users/track", json!({"events": chunk}));
        apply_all(&kit);
        if status == 400 {
            break;
        }
    }
    let user = kit.user("busy");
    assert_eq!(user["custom_events"].as_array().unwrap().len(), 975, "whole requests only: {user}");
}

/// The acknowledgement's shortcut (a job proved to fit from stored sizes alone) never
/// accepts what the exact check refuses: around each bound, with the smallest
/// entries a profile can hold (short names, small values: the most entries per stored
/// byte), a request is refused exactly when a profile would pass the bound.
#[test]
fn the_shortcut_refuses_exactly_what_the_exact_check_refuses() {
    let kit = Kit::new();
    for (n, stored) in [0usize, 600, 925, 990, 1000].into_iter().enumerate() {
        let user = format!("u{n}");
        let mut m = Map::new();
        m.insert("external_id".into(), json!(user));
        for i in 0..stored {
            m.insert(format!("{i:x}"), json!(0));
        }
        let event = |name: String| json!({"external_id": user, "name": name, "time": "2026-11-01T10:00:00Z"});
        let events: Vec<Value> = (0..stored).map(|i| event(format!("{i:x}"))).collect();
        if stored > 0 {
            kit.track(json!({"attributes": [m]}));
            for chunk in events.chunks(75) {
                kit.track(json!({"events": chunk}));
            }
            apply_all(&kit);
        }
        // Event names cannot be removed: those accepted stay (the same names each round).
        let mut names_kept = 0;
        for added in [1usize, 10, 75] {
            let attrs: Vec<Value> = (0..added).map(|i| json!({"external_id": user, format!("new{i}"): 1})).collect();
            let (status, body) = kit.post("/users/track", json!({"attributes": attrs}));
            let fits = stored + added <= MAX_CUSTOM_ATTRIBUTES;
            assert_eq!(status, if fits { 201 } else { 400 }, "{stored} + {added} attributes: {body}");
            let names: Vec<Value> = (0..added).map(|i| event(format!("new-event-{i}"))).collect();
            let (status, body) = kit.post("/users/track", json!({"events": names}));
            let fits = stored + names_kept.max(added) <= MAX_NAMES;
            if fits {
                names_kept = names_kept.max(added);
            }
            assert_eq!(
                status,
                if fits { 201 } else { 400 },
                "{stored} + {names_kept}, then {added} event names: {body}"
            );
            // Undo what was accepted, so the next round starts from `stored` again.
            apply_all(&kit);
            let undo: Vec<Value> = (0..added).map(|i| json!({"external_id": user, format!("new{i}"): null})).collect();
            kit.track(json!({"attributes": undo}));
            apply_all(&kit);
        }
    }
}
