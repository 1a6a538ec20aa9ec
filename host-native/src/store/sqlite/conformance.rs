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
