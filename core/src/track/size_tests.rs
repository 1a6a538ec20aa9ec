//! The bound on a profile's size: a request that would take a profile over it,
//! counting the jobs already queued for that user, is refused whole (400, naming the
//! bound); a job acknowledged is always applied whole, never set aside.

use serde_json::{json, Map, Value};

use crate::http::Method;
use crate::profile::{MAX_CUSTOM_ATTRIBUTES, MAX_NAMES};
use crate::testkit::Kit;

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
fn a_request_that_fits_only_without_the_jobs_queued_before_it_is_refused_at_acknowledgement() {
    let kit = Kit::new();
    // Both fit the stored (empty) profile; together they do not: the second is refused.
    kit.track(json!({"attributes": [object("race", 0, 600)]}));
    let second = object("race", 600, 600);
    let events = json!([{"external_id": "race", "name": "from_the_second", "time": "2026-11-01T10:00:00Z"}]);
    let (status, body) = kit.post("/users/track", json!({"attributes": [second], "events": events}));
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("would have 1200 custom attributes"), "{body}");
    apply_all(&kit);
    assert_eq!(custom_count(&kit, "race"), 600);
    assert!(kit.user("race").get("custom_events").is_none(), "nothing of the refused request");
    let (_, body) = kit.operator(Method::Get, "/_engage/queue/set-aside");
    assert_eq!(body["count"], json!(0), "{body}");
}

#[test]
fn every_201_on_one_profile_filled_to_its_bound_is_applied_and_nothing_is_set_aside() {
    let kit = Kit::new();
    // Acknowledged one after another with nothing applied between: each answer counts
    // what the earlier ones queued.
    let mut accepted = Vec::new();
    for i in 0..15 {
        let (status, body) = kit.post("/users/track", json!({"attributes": [object("filled", i * 100, 100)]}));
        match status {
            201 => accepted.push(i),
            400 => assert!(body["message"].as_str().unwrap().contains("at most 1000"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(accepted, (0..10).collect::<Vec<_>>());
    for (name, field) in [("e", "events"), ("p", "purchases")] {
        let mut taken = 0;
        for chunk in 0..15 {
            let objects: Vec<Value> = (0..75)
                .map(|i| {
                    let n = format!("{name}{}", chunk * 75 + i);
                    json!({"external_id": "filled", "name": n, "product_id": n, "price": 1, "currency": "USD",
                           "time": "2026-11-01T10:00:00Z"})
                })
                .collect();
            let (status, _) = kit.post("/users/track", json!({ field: objects }));
            if status == 201 {
                taken += 75;
            }
        }
        assert!(taken <= MAX_NAMES && taken > MAX_NAMES - 75, "{field}: {taken}");
    }
    apply_all(&kit);
    let user = kit.user("filled");
    assert_eq!(custom_count(&kit, "filled"), MAX_CUSTOM_ATTRIBUTES);
    let (_, body) = kit.operator(Method::Get, "/_engage/queue/set-aside");
    assert_eq!(body["count"], json!(0), "{body}");
    assert!(user["custom_events"].as_array().is_some_and(|e| e.len() > MAX_NAMES - 75), "{user}");
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

/// The registry of large profiles ([`crate::repo::large`]) holds exactly the unique
/// identifiers and profile keys of the profiles stored over its threshold, and the
/// workspace's completeness entry.
fn assert_registry_matches_profiles(kit: &Kit) {
    use crate::profile::Profile;
    use crate::repo::index::Identity;
    use crate::repo::large;
    use crate::store::{Store, Table};
    let store = kit.engine().store();
    let ws = crate::ids::WorkspaceName::parse("test").unwrap();
    let mut expected = vec![large::complete_key(&ws)];
    for (_, entry) in pollster::block_on(store.scan(Table::Profile, "", 1 << 20)).unwrap() {
        if large::is_large(entry.value.len()) {
            let p: Profile = serde_json::from_slice(&entry.value).unwrap();
            expected.extend(large::entries(&ws, &Identity::of(&p), &p.id));
        }
    }
    expected.sort();
    let held: Vec<String> =
        pollster::block_on(store.scan(Table::LargeProfile, "", 1 << 20)).unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(held, expected);
}

/// A profile stays registered under every identifier it gains, and the registry
/// follows it through aliases, merges and deletion: a request naming it by any of
/// them is checked against its real size (were an entry missing, the acknowledgement
/// would take it for a small profile and accept what the bound refuses).
#[test]
fn large_profiles_stay_registered_through_identity_changes() {
    let kit = Kit::new();
    assert_registry_matches_profiles(&kit);
    kit.track(json!({"attributes": [object("big", 0, 995), object("small", 0, 3)]}));
    apply_all(&kit);
    assert_registry_matches_profiles(&kit);
    let over = |ident: Value, n: usize| {
        let mut o = object("", 2000, n);
        let o = o.as_object_mut().unwrap();
        o.remove("external_id");
        o.extend(ident.as_object().unwrap().clone());
        kit.post("/users/track", json!({"attributes": [o]})).0
    };
    assert_eq!(over(json!({"external_id": "big"}), 6), 400);

    let (status, body) = kit.post(
        "/users/alias/new",
        json!({"user_aliases": [{"external_id": "big", "alias_name": "b", "alias_label": "crm"}]}),
    );
    assert_eq!(status, 201, "{body}");
    assert_registry_matches_profiles(&kit);
    let alias = json!({"user_alias": {"alias_name": "b", "alias_label": "crm"}});
    assert_eq!(over(alias.clone(), 6), 400);
    let service_id = kit.user("big")["braze_id"].as_str().map(str::to_string);
    let service_id = service_id.or_else(|| kit.user("big")["service_id"].as_str().map(str::to_string)).unwrap();
    assert_eq!(over(json!({"braze_id": service_id}), 6), 400);

    // `small` keeps its own attributes and gains big's other 992, and big's alias.
    let (status, body) = kit.post(
        "/users/merge",
        json!({"merge_updates": [{"identifier_to_merge": {"external_id": "big"}, "identifier_to_keep": {"external_id": "small"}}]}),
    );
    assert_eq!(status, 202, "{body}");
    apply_all(&kit);
    assert_registry_matches_profiles(&kit);
    assert_eq!(custom_count(&kit, "small"), 995);
    assert_eq!(over(json!({"external_id": "small"}), 6), 400);
    assert_eq!(over(alias.clone(), 6), 400);
    assert_eq!(over(json!({"external_id": "small"}), 5), 201);
    apply_all(&kit);

    let (status, body) = kit.post("/users/delete", json!({"external_ids": ["small"]}));
    assert_eq!(status, 201, "{body}");
    apply_all(&kit);
    assert_registry_matches_profiles(&kit);
    assert_eq!(over(json!({"external_id": "small"}), 6), 201, "a new, empty profile");
    apply_all(&kit);
    assert_registry_matches_profiles(&kit);
}

/// A workspace made before the registry existed (no completeness entry) has every
/// profile a request names read: nothing is taken for small.
#[test]
fn a_workspace_without_a_complete_registry_reads_every_profile() {
    use crate::store::{ChangeSet, Op, Store, Table};
    let kit = Kit::new();
    kit.track(json!({"attributes": [object("big", 0, 995)]}));
    apply_all(&kit);
    // As if the profile had been written by an earlier version: unregistered.
    let store = kit.engine().store();
    let held = pollster::block_on(store.scan(Table::LargeProfile, "", 100)).unwrap();
    let ops = held
        .into_iter()
        .map(|(key, _)| Op::Delete { table: Table::LargeProfile, key, expect: crate::store::Expect::Any })
        .collect();
    pollster::block_on(store.commit(ChangeSet { ops, ack: None })).unwrap();
    let attrs = json!({"attributes": [object("big", 2000, 6)]});
    let (status, body) = kit.post("/users/track", attrs);
    assert_eq!(status, 400, "{body}");
}

/// A registry too large to read whole in one range read is read entry by entry
/// for the users a request names: a large profile is still found, and a request
/// taking it over the bound refused.
#[test]
fn a_registry_larger_than_one_range_read_is_read_by_key() {
    use crate::repo::large::READ_WHOLE_UP_TO;
    use crate::store::{Store, Table};
    let kit = Kit::new();
    // Each large profile has two entries (external id and profile key).
    let many = READ_WHOLE_UP_TO / 2 + 10;
    let objects: Vec<Value> = (0..many).map(|i| object(&format!("large-{i:03}"), 0, 300)).collect();
    for chunk in objects.chunks(50) {
        kit.track(json!({"attributes": chunk}));
        apply_all(&kit);
    }
    kit.track(json!({"attributes": [object("big", 0, 995)]}));
    apply_all(&kit);
    let held = pollster::block_on(kit.engine().store().scan(Table::LargeProfile, "", 1 << 20)).unwrap();
    assert!(held.len() > READ_WHOLE_UP_TO + 1, "{} entries", held.len());
    assert_registry_matches_profiles(&kit);
    let (status, body) = kit.post("/users/track", json!({"attributes": [object("big", 2000, 6)]}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = kit.post("/users/track", json!({"attributes": [object("big", 2000, 5)]}));
    assert_eq!(status, 201, "{body}");
    let (status, body) = kit.post("/users/track", json!({"attributes": [object("large-000", 2000, 6)]}));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn a_user_every_request_names_by_the_same_names_is_acknowledged_without_catching_up() {
    let kit = Kit::configured(crate::store::memory::MemoryStore::new(), |c| c.applies_in_background = true);
    let jobs = MAX_NAMES + 500;
    let time = "2026-11-01T10:00:00Z";
    for _ in 0..jobs {
        let (status, body) = kit.post(
            "/users/track",
            json!({
                "attributes": [{"external_id": "hot", "visits": {"inc": 1}, "tier": "t1"}],
                "events": [{"external_id": "hot", "name": "viewed", "time": time}],
                "purchases": [{"external_id": "hot", "product_id": "sku", "price": 1, "currency": "USD", "time": time}],
            }),
        );
        assert_eq!(status, 201, "{body}");
    }
    // Each name counts once however many queued jobs name it: no request had to have
    // the hot user's queued jobs applied first.
    let store = kit.engine().store();
    assert_eq!(pollster::block_on(crate::store::Store::queued(store, 0, jobs * 2)).unwrap().len(), jobs);
    let early = pollster::block_on(crate::store::Store::scan(store, crate::store::Table::QueueEarly, "", 10)).unwrap();
    assert!(early.is_empty(), "nothing applied early");
    apply_all(&kit);
    assert_eq!(kit.user("hot")["custom_attributes"]["visits"], json!(jobs));
    let (_, body) = kit.operator(Method::Get, "/_engage/queue/set-aside");
    assert_eq!(body["count"], json!(0), "{body}");
}

#[test]
fn what_appending_updates_add_to_one_name_accumulates() {
    let kit = Kit::new();
    // Each request appends 100 strings of 255 characters to each of 9 lists: about
    // 231 KB, under the bound alone; five of them, queued, hold about 1.16 MB.
    let long: Vec<String> = (0..500).map(|i| format!("{i:0>255}")).collect();
    let mut statuses = Vec::new();
    for chunk in long.chunks(100) {
        let mut obj = Map::new();
        obj.insert("external_id".into(), json!("appender"));
        for i in 0..9 {
            obj.insert(format!("list{i}"), json!({"add": chunk}));
        }
        let (status, body) = kit.post("/users/track", json!({"attributes": [obj]}));
        assert!(status == 201 || body["message"].as_str().unwrap().contains("bytes of custom attributes"), "{body}");
        statuses.push(status);
    }
    assert!(statuses.contains(&400), "the queued appends are counted together: {statuses:?}");
    apply_all(&kit);
    let (_, body) = kit.operator(Method::Get, "/_engage/queue/set-aside");
    assert_eq!(body["count"], json!(0), "{body}");
}

/// A request answered `CatchUpFirst` (nothing done) is counted against the rate
/// limit once: its second pass, once the host caught up, is not counted again and
/// answers with the first count's headers.
#[test]
fn a_request_handed_back_to_catch_up_first_is_counted_against_the_rate_limit_once() {
    let kit = Kit::configured(crate::store::memory::MemoryStore::new(), |c| c.rate_limits = true);
    // 500 attributes stored: by its size alone such a profile may hold 1,000
    // entries, too many for the fast check to tell.
    for n in 0..5 {
        kit.track(json!({"attributes": [object("u", n * 100, 100)]}));
    }
    apply_all(&kit);
    let post = |body: Value| kit.request(Method::Post, "/users/track", body);
    let remaining = |r: &crate::http::Response| {
        r.header_value("X-RateLimit-Remaining").and_then(|v| v.parse::<u64>().ok()).expect("the header")
    };
    // One instant for every request below: one rate-limit window.
    let ctx = kit.ctx();
    let request = post(json!({"attributes": [object("u", 500, 100)]}));
    let first = pollster::block_on(kit.engine().handle(request.clone(), ctx));
    assert!(matches!(first.then, crate::http::Then::CatchUpFirst), "{first:?}");
    apply_all(&kit);
    let again = pollster::block_on(kit.engine().handle_caught_up(request, ctx, &first));
    assert_eq!(again.status, 201, "{}", String::from_utf8_lossy(&again.body));
    assert_eq!(remaining(&again), remaining(&first));
    let next = pollster::block_on(kit.engine().handle(post(json!({"attributes": [object("v", 0, 1)]})), ctx));
    assert_eq!(next.status, 201);
    assert_eq!(remaining(&next), remaining(&first) - 1, "counted once");
    apply_all(&kit);
    assert_eq!(custom_count(&kit, "u"), 600);
}
