//! The store conformance suite on SQLite, one test per check, and the checks only
//! SQLite has (a reopened file, the applier woken by a new job).

use std::time::{Duration, Instant};

use engage_core::store::{ChangeSet, Expect, Op, Store, Table};

use super::SqliteStore;

/// A new store in a directory of its own, removed when the check ends.
fn fresh() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    (dir, store)
}

engage_core::store_conformance_tests!(async || fresh(), |fixture: &(tempfile::TempDir, SqliteStore)| &fixture.1);

/// SQLite's own: what was committed and queued is there after the store is
/// opened again (versions, the queue and its cursor included).
#[test]
fn a_reopened_store_holds_every_commit_and_the_queue() {
    let (dir, store) = fresh();
    let put = |key: &str, value: &str, expect| Op::Put {
        table: Table::Profile,
        key: key.into(),
        value: value.as_bytes().to_vec(),
        expect,
    };
    pollster::block_on(async {
        store.commit(ChangeSet { ops: vec![put("k", "a", Expect::Absent)], ack: None }).await.unwrap();
        store.commit(ChangeSet { ops: vec![put("k", "b", Expect::Version(1))], ack: None }).await.unwrap();
        let first = store.enqueue(b"one".to_vec()).await.unwrap();
        store.enqueue(b"two".to_vec()).await.unwrap();
        let ack = engage_core::store::QueueAck { part: 0, through: first, count: 1 };
        store.commit(ChangeSet { ops: vec![], ack: Some(ack) }).await.unwrap();
    });
    drop(store);
    let again = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    pollster::block_on(async {
        let e = again.get(Table::Profile, "k").await.unwrap().unwrap();
        assert_eq!((e.version, e.value.as_slice()), (2, b"b".as_slice()));
        let left = again.queued(0, 10).await.unwrap();
        assert_eq!(left.iter().map(|j| j.job.as_slice()).collect::<Vec<_>>(), [b"two".as_slice()]);
    });
}

/// SQLite's own: only this process enqueues, so it counts its jobs and an idle
/// applier waiting for one wakes as soon as one is enqueued, not at its timeout.
#[test]
fn an_idle_applier_wakes_when_a_job_is_enqueued() {
    let (_dir, store) = fresh();
    let store = std::sync::Arc::new(store);
    let seen = store.jobs_enqueued();
    let writer = store.clone();
    let enqueue = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        pollster::block_on(writer.enqueue(b"job".to_vec())).unwrap();
    });
    let started = Instant::now();
    store.wait_for_jobs(seen, Duration::from_secs(30));
    assert!(started.elapsed() < Duration::from_secs(10), "woken by the job, not the timeout");
    assert_eq!(store.jobs_enqueued(), seen + 1);
    enqueue.join().unwrap();
    // Nothing new: the wait ends at its timeout.
    let started = Instant::now();
    store.wait_for_jobs(store.jobs_enqueued(), Duration::from_millis(20));
    assert!(started.elapsed() >= Duration::from_millis(20));
}

/// SQLite's own: a request finds the queued jobs naming its users by their names
/// (`names`), those queued before the store was opened again included, and not
/// once they are applied.
#[tokio::test]
async fn queued_jobs_are_found_by_the_users_they_name_across_a_restart() {
    use engage_core::provision::{create_key, Permission, WorkspaceName};
    use engage_core::queue::record_names;
    use engage_core::{Config, Engine, Method, Request};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let engine = Engine::new(SqliteStore::open(&path).unwrap(), Config { rate_limits: false, ..Config::default() });
    assert!(engine.store().finds_by_name(), "the queue's owner names its jobs");
    let ws = WorkspaceName::parse("w").unwrap();
    let key = create_key(engine.store(), &ws, Permission::ALL.to_vec(), crate::ctx()).await.unwrap();
    for users in [["ann", "bob"], ["cy", "ann"]] {
        let body = serde_json::json!({"attributes": users.map(|u| serde_json::json!({"external_id": u, "n": 1}))});
        let request = Request::new(Method::Post, "/users/track")
            .header("Authorization", &format!("Bearer {key}"))
            .body(body.to_string());
        assert_eq!(engine.handle(request, crate::ctx()).await.status, 201);
    }
    let jobs = engine.store().queued(0, 10).await.unwrap();
    assert_eq!(jobs.len(), 2, "the engine applies nothing unless its host asks");
    let (first, second) = (record_names(&jobs[0].job), record_names(&jobs[1].job));
    let bob: Vec<i64> = first.iter().copied().filter(|n| !second.contains(n)).collect();
    let ann: Vec<i64> = first.iter().copied().filter(|n| second.contains(n)).collect();
    assert!(!bob.is_empty() && !ann.is_empty(), "{first:?} {second:?}");
    let found = |store: &SqliteStore, names: Vec<i64>| {
        let found = pollster::block_on(store.queued_naming(&names)).unwrap();
        found.into_iter().map(|j| j.seq).collect::<Vec<_>>()
    };
    let (one, two) = (jobs[0].seq, jobs[1].seq);
    assert_eq!(found(engine.store(), ann.clone()), [one, two]);
    assert_eq!(found(engine.store(), bob.clone()), [one]);
    assert!(found(engine.store(), vec![12345]).is_empty());
    drop(engine);
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(found(&again, ann.clone()), [one, two], "named again from their records");
    let ack = engage_core::store::QueueAck { part: 0, through: one, count: 1 };
    again.commit(ChangeSet { ops: vec![], ack: Some(ack) }).await.unwrap();
    assert_eq!(found(&again, ann), [two], "applied: no longer found");
    assert!(found(&again, bob).is_empty());
}
