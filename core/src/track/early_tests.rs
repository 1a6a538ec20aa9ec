//! Requests that catch up while a background applier owns the backlog: they apply
//! ahead of the queue just the jobs concerning their users, and the applier then
//! skips those jobs, so nothing is applied twice or lost, across a restart too.

use serde_json::{json, Value};

use crate::http::Method;
use crate::store::memory::MemoryStore;
use crate::store::{Store, Table};
use crate::testkit::Kit;

fn pending(kit: &Kit) -> usize {
    pollster::block_on(kit.engine().store().queued(0, 1000)).unwrap().len()
}

fn early_records(kit: &Kit) -> usize {
    pollster::block_on(kit.engine().store().scan(Table::QueueEarly, "", 1000)).unwrap().len()
}

fn inc(external_id: &str) -> Value {
    json!({"attributes": [{"external_id": external_id, "n": {"inc": 1}}]})
}

fn apply_all(kit: &Kit) -> usize {
    let mut applied = 0;
    loop {
        let run = pollster::block_on(kit.engine().apply_queued(kit.ctx())).unwrap();
        if run.is_empty() {
            return applied;
        }
        applied += run.applied;
    }
}

#[test]
fn a_read_applies_first_only_the_queued_jobs_of_the_users_it_names() {
    let kit = Kit::over(MemoryStore::new(), true);
    for _ in 0..5 {
        kit.track(inc("a"));
    }
    kit.track(inc("b"));
    kit.track(inc("b"));
    for _ in 0..3 {
        kit.track(inc("a"));
    }
    assert_eq!(kit.user("b")["custom_attributes"]["n"], json!(2));
    assert_eq!(early_records(&kit), 2, "b's two jobs were applied ahead of the queue");
    assert_eq!(pending(&kit), 10, "the queue itself has not moved");

    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(8));
    assert_eq!(early_records(&kit), 10);

    // The in-order applier finds every job applied already: it applies none again.
    assert_eq!(apply_all(&kit), 0);
    assert_eq!(pending(&kit), 0);
    assert_eq!(early_records(&kit), 0, "records go when the cursor passes them");
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(8));
    assert_eq!(kit.user("b")["custom_attributes"]["n"], json!(2));
}

#[test]
fn jobs_reaching_a_user_by_another_identifier_are_applied_first_too() {
    let kit = Kit::over(MemoryStore::new(), true);
    // Stored: d has a shared address. Queued: an update by that address, and a new
    // user whose address a later job names.
    kit.track(json!({"attributes": [{"external_id": "d", "email": "shared@example.com"}]}));
    apply_all(&kit);
    kit.track(json!({"attributes": [{"email": "shared@example.com", "picked": true}]}));
    kit.track(json!({"attributes": [{"external_id": "e", "email": "e@example.com"}]}));
    kit.track(json!({"attributes": [{"email": "e@example.com", "k": 5}]}));
    kit.track(inc("unrelated"));

    assert_eq!(kit.user("d")["custom_attributes"]["picked"], json!(true));
    assert_eq!(kit.user("e")["custom_attributes"]["k"], json!(5));
    assert_eq!(early_records(&kit), 3, "the unrelated job waits for the applier");
    assert_eq!(apply_all(&kit), 1);
    assert_eq!(kit.user("unrelated")["custom_attributes"]["n"], json!(1));
}

#[test]
fn writes_catch_up_the_same_way_before_they_apply() {
    let kit = Kit::over(MemoryStore::new(), true);
    kit.track(json!({"attributes": [{"external_id": "k", "kept": true}]}));
    apply_all(&kit);
    kit.track(inc("m"));
    kit.track(inc("m"));
    let (status, body) = kit.post(
        "/users/merge",
        json!({"merge_updates": [{"identifier_to_merge": {"external_id": "m"}, "identifier_to_keep": {"external_id": "k"}}]}),
    );
    assert_eq!(status, 202, "{body}");
    apply_all(&kit);
    assert_eq!(kit.user("m"), Value::Null);
    // The merge came after m's queued jobs: the kept user has what they gave, once.
    assert_eq!(kit.user("k")["custom_attributes"], json!({"kept": true, "n": 2}));
}

#[test]
fn after_a_restart_jobs_applied_early_are_still_skipped() {
    let kit = Kit::over(MemoryStore::new(), true);
    kit.track(inc("r"));
    kit.track(inc("s"));
    assert_eq!(kit.user("s")["custom_attributes"]["n"], json!(1));
    let kit = Kit::over(kit.into_store(), true);
    assert_eq!(apply_all(&kit), 1, "only r's job is left to apply");
    assert_eq!(kit.user("s")["custom_attributes"]["n"], json!(1));
    assert_eq!(kit.user("r")["custom_attributes"]["n"], json!(1));
}

#[test]
fn a_request_naming_nobody_applies_nothing_early() {
    let kit = Kit::over(MemoryStore::new(), true);
    kit.track(json!({"attributes": [{"external_id": "p", "first_name": "Pat"}]}));
    let (status, body) = kit.call(Method::Get, "/users/export/ids", Value::Null);
    assert!(status >= 400, "{body}");
    assert_eq!(early_records(&kit), 0, "a request naming nobody applies nothing early");
}

#[test]
fn a_request_naming_many_users_is_applied_early_only_for_the_users_read() {
    let kit = Kit::over(MemoryStore::new(), true);
    let pair = |a: &str, b: &str| json!({"attributes": [{"external_id": a, "n": {"inc": 1}}, {"external_id": b, "n": {"inc": 1}}]});
    kit.track(pair("x", "y"));
    kit.track(pair("y", "z"));
    assert_eq!(kit.user("x")["custom_attributes"]["n"], json!(1));
    assert_eq!(early_records(&kit), 1, "only x's operation: y and z are not joined to x by a shared request");
    assert_eq!(kit.user("y")["custom_attributes"]["n"], json!(2));
    assert_eq!(early_records(&kit), 3);
    assert_eq!(apply_all(&kit), 1, "the second job's operation on z is left");
    assert_eq!(early_records(&kit), 0);
    for (u, n) in [("x", 1), ("y", 2), ("z", 1)] {
        assert_eq!(kit.user(u)["custom_attributes"]["n"], json!(n), "{u}");
    }
}

/// On a store that finds queued jobs by name and that only this engine applies, a
/// read notes its users' names as handled through the queue's tail: reading them
/// again skips the jobs already applied for them, and still finds every one queued
/// since, by any identifier of theirs.
#[test]
fn a_user_read_again_sees_what_was_queued_since_and_nothing_twice() {
    let kit = Kit::over(MemoryStore::with_partitions(4), true);
    assert!(kit.engine().store().finds_by_name());
    kit.track(json!({"attributes": [{"external_id": "a", "email": "a@example.com", "n": 0}]}));
    kit.track(inc("a"));
    kit.track(inc("b"));
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(1));
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(1), "read again: nothing applied twice");
    kit.track(inc("a"));
    kit.track(json!({"attributes": [{"email": "a@example.com", "n": {"inc": 10}}]}));
    kit.track(json!({"attributes": [{"external_id": "b", "email": "b@example.com"}]}));
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(12), "queued since the first read");
    assert_eq!(kit.user("b")["custom_attributes"]["n"], json!(1));
    kit.track(json!({"attributes": [{"email": "b@example.com", "n": {"inc": 100}}]}));
    kit.track(json!({"attributes": [{"email": "a@example.com", "n": {"inc": 100}}]}));
    // By an identifier the first reads did not know of yet.
    assert_eq!(kit.user("b")["custom_attributes"]["n"], json!(101));
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(112));
    assert_eq!(kit.user("a")["custom_attributes"]["n"], json!(112), "read again: nothing applied twice");
    assert_eq!(kit.user("b")["custom_attributes"]["n"], json!(101));
}
