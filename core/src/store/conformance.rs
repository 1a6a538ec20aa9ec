//! The behaviour every [`Store`] backend must have, as plain async checks. A backend
//! whose tests run under `cargo test` gets one test per check from
//! [`crate::store_conformance_tests!`] (the memory store here, SQLite and PostgreSQL
//! in host-native), so a failing check hides none after it; D1 runs them all inside
//! the Worker through [`run_all`] (`POST /_engage/conformance`). A new check added to
//! [`CHECKS`] runs everywhere: the macro's own test fails until it lists it.

use super::{ChangeSet, CommitError, Expect, Op, PartJob, QueueAck, Store, Table};

fn put(table: Table, key: &str, value: &str, expect: Expect) -> Op {
    Op::Put { table, key: key.into(), value: value.as_bytes().to_vec(), expect }
}

fn cs(ops: Vec<Op>) -> ChangeSet {
    ChangeSet { ops, ack: None }
}

async fn value<S: Store>(s: &S, table: Table, key: &str) -> Option<(u64, String)> {
    s.get(table, key).await.unwrap().map(|e| (e.version, String::from_utf8(e.value).unwrap()))
}

/// Versions start at 1 and grow by one per write; expectations are enforced.
async fn versions_and_expectations<S: Store>(s: &S) {
    assert_eq!(value(s, Table::Profile, "k").await, None);
    s.commit(cs(vec![put(Table::Profile, "k", "a", Expect::Absent)])).await.unwrap();
    assert_eq!(value(s, Table::Profile, "k").await, Some((1, "a".into())));
    s.commit(cs(vec![put(Table::Profile, "k", "b", Expect::Version(1))])).await.unwrap();
    assert_eq!(value(s, Table::Profile, "k").await, Some((2, "b".into())));
    assert_eq!(s.commit(cs(vec![put(Table::Profile, "k", "c", Expect::Version(1))])).await, Err(CommitError::Conflict));
    assert_eq!(s.commit(cs(vec![put(Table::Profile, "k", "c", Expect::Absent)])).await, Err(CommitError::Conflict));
    s.commit(cs(vec![put(Table::Profile, "k", "d", Expect::Any)])).await.unwrap();
    assert_eq!(value(s, Table::Profile, "k").await, Some((3, "d".into())));
    assert_eq!(value(s, Table::Group, "k").await, None, "tables are separate");
}

/// A change set with one failing expectation stores nothing at all.
async fn a_failed_commit_stores_nothing<S: Store>(s: &S) {
    s.commit(cs(vec![put(Table::Profile, "x", "1", Expect::Absent)])).await.unwrap();
    let r = s
        .commit(cs(vec![
            put(Table::Profile, "new", "n", Expect::Absent),
            Op::Delete { table: Table::Profile, key: "x".into(), expect: Expect::Any },
            put(Table::Profile, "x", "2", Expect::Version(7)),
        ]))
        .await;
    assert_eq!(r, Err(CommitError::Conflict));
    assert_eq!(value(s, Table::Profile, "new").await, None);
    assert_eq!(value(s, Table::Profile, "x").await, Some((1, "1".into())));
}

/// Deletes honour expectations; deleting a missing key without one is fine.
async fn deletes<S: Store>(s: &S) {
    s.commit(cs(vec![put(Table::Ident, "a", "1", Expect::Absent)])).await.unwrap();
    let del = |expect| cs(vec![Op::Delete { table: Table::Ident, key: "a".into(), expect }]);
    assert_eq!(s.commit(del(Expect::Version(5))).await, Err(CommitError::Conflict));
    s.commit(del(Expect::Version(1))).await.unwrap();
    assert_eq!(value(s, Table::Ident, "a").await, None);
    s.commit(del(Expect::Any)).await.unwrap();
    assert_eq!(s.commit(del(Expect::Version(1))).await, Err(CommitError::Conflict));
}

/// Scans return exactly the keys under a prefix, in key order, up to the limit.
async fn prefix_scans<S: Store>(s: &S) {
    let keys = [
        "w\u{1f}e\u{1f}a@x.io\u{1f}2",
        "w\u{1f}e\u{1f}a@x.io\u{1f}1",
        "w\u{1f}e\u{1f}a@x.iox\u{1f}3",
        "w\u{1f}e\u{1f}b",
        "v\u{1f}e",
    ];
    s.commit(cs(keys.iter().map(|k| put(Table::Ident, k, k, Expect::Absent)).collect())).await.unwrap();
    s.commit(cs(vec![put(Table::Profile, "w\u{1f}e\u{1f}a@x.io\u{1f}9", "p", Expect::Absent)])).await.unwrap();
    let found: Vec<String> =
        s.scan(Table::Ident, "w\u{1f}e\u{1f}a@x.io\u{1f}", 10).await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(found, vec!["w\u{1f}e\u{1f}a@x.io\u{1f}1".to_string(), "w\u{1f}e\u{1f}a@x.io\u{1f}2".to_string()]);
    assert_eq!(s.scan(Table::Ident, "w\u{1f}", 2).await.unwrap().len(), 2);
    assert_eq!(s.scan(Table::Ident, "zzz", 10).await.unwrap().len(), 0);
}

/// `get_many` answers in the order asked, with `None` for missing keys and nothing
/// from other tables.
async fn batched_reads<S: Store>(s: &S) {
    s.commit(cs(vec![put(Table::Profile, "a", "1", Expect::Absent), put(Table::Profile, "c", "3", Expect::Absent)]))
        .await
        .unwrap();
    s.commit(cs(vec![put(Table::Ident, "b", "x", Expect::Absent)])).await.unwrap();
    let keys: Vec<String> = ["c", "b", "a", "c"].iter().map(|k| k.to_string()).collect();
    let got: Vec<Option<String>> = s
        .get_many(Table::Profile, &keys)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.map(|e| String::from_utf8(e.value).unwrap()))
        .collect();
    assert_eq!(got, vec![Some("3".into()), None, Some("1".into()), Some("3".into())]);
    let many: Vec<String> = (0..1200).map(|i| format!("k{i}")).collect();
    assert_eq!(s.get_many(Table::Profile, &many).await.unwrap().len(), 1200);
}

/// The queue hands out increasing sequence numbers, oldest first, and an ack is
/// atomic with the change set and refused when the jobs were already taken.
async fn queue<S: Store>(s: &S) {
    assert_eq!(s.queue_tail().await.unwrap(), 0);
    assert!(s.queued(0, 10).await.unwrap().is_empty());
    assert!(s.nothing_queued().await.unwrap(), "an empty queue");
    let a = s.enqueue(b"a".to_vec()).await.unwrap();
    assert!(!s.nothing_queued().await.unwrap(), "a job queued");
    let b = s.enqueue(b"b".to_vec()).await.unwrap();
    let c = s.enqueue(b"c".to_vec()).await.unwrap();
    assert!(a < b && b < c);
    assert_eq!(s.queue_tail().await.unwrap(), c);
    let jobs = s.queued(0, 2).await.unwrap();
    assert_eq!(jobs.iter().map(|j| j.job.clone()).collect::<Vec<_>>(), vec![b"a".to_vec(), b"b".to_vec()]);
    // Jobs after one still being committed.
    assert_eq!(s.queued(a, 10).await.unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![b, c]);
    assert!(s.queued(c, 10).await.unwrap().is_empty());
    let at: Vec<Vec<u8>> = s.queued_at(&[a, c]).await.unwrap().into_iter().map(|j| j.job).collect();
    assert_eq!(at, vec![b"a".to_vec(), b"c".to_vec()], "by number, in order");
    assert!(s.queued_at(&[c + 1, c + 5]).await.unwrap().is_empty(), "numbers not queued");

    // A failing expectation leaves the queue untouched.
    let failing = ChangeSet {
        ops: vec![put(Table::Profile, "p", "1", Expect::Version(3))],
        ack: Some(QueueAck { part: 0, through: b, count: 2 }),
    };
    assert_eq!(s.commit(failing).await, Err(CommitError::Conflict));
    assert_eq!(s.queued(0, 10).await.unwrap().len(), 3);

    let ok = ChangeSet {
        ops: vec![put(Table::Profile, "p", "1", Expect::Absent)],
        ack: Some(QueueAck { part: 0, through: b, count: 2 }),
    };
    s.commit(ok).await.unwrap();
    assert_eq!(s.queued(0, 10).await.unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![c]);
    assert_eq!(s.queued(a, 10).await.unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![c]);
    assert_eq!(s.queued_at(&[a, b, c]).await.unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![c]);
    assert_eq!(value(s, Table::Profile, "p").await, Some((1, "1".into())));
    assert!(!s.nothing_queued().await.unwrap(), "one job left of three");

    // A second applier acknowledging the same jobs conflicts.
    let again = ChangeSet { ops: vec![], ack: Some(QueueAck { part: 0, through: b, count: 2 }) };
    assert_eq!(s.commit(again).await, Err(CommitError::Conflict));
    assert_eq!(s.queue_tail().await.unwrap(), c);
    let d = s.enqueue(b"d".to_vec()).await.unwrap();
    assert!(d > c);
    // Every job applied: nothing queued, though a store may still hold their records.
    s.commit(ChangeSet { ops: vec![], ack: Some(QueueAck { part: 0, through: d, count: 2 }) }).await.unwrap();
    assert!(s.queued(0, 10).await.unwrap().is_empty());
    assert!(s.nothing_queued().await.unwrap(), "every job applied");
}

/// A store of several partitions ([`Store::partitions`]) keeps each in the order
/// its jobs were queued, enqueues a request's parts all or none, and acknowledges
/// one partition's jobs without touching another's. (A store of one: nothing to check.)
async fn partitions<S: Store>(s: &S) {
    let parts = s.partitions();
    if parts < 2 {
        return;
    }
    let job = |part, job: &[u8], names: &[i64]| PartJob { part, job: job.to_vec(), names: names.to_vec() };
    let seqs = s.enqueue_parts(vec![job(0, b"a0", &[10]), job(1, b"a1", &[11, -12])]).await.unwrap();
    let more = s.enqueue_parts(vec![job(1, b"b1", &[-12])]).await.unwrap();
    let last = s.enqueue_parts(vec![job(0, b"c0", &[])]).await.unwrap();
    assert!(seqs[0] < seqs[1] && seqs[1] < more[0] && more[0] < last[0], "{seqs:?} {more:?} {last:?}");
    assert!(s.enqueue_parts(vec![job(0, b"x", &[]), job(parts, b"y", &[])]).await.is_err());
    let naming = |names: &'static [i64]| async move {
        s.queued_naming(names).await.unwrap().into_iter().map(|j| j.job).collect::<Vec<_>>()
    };
    if s.finds_by_name() {
        assert_eq!(naming(&[-12]).await, vec![b"a1".to_vec(), b"b1".to_vec()], "by a name, in order");
        assert_eq!(naming(&[10, 99]).await, vec![b"a0".to_vec()]);
        assert!(naming(&[99]).await.is_empty());
    }
    assert_eq!(s.queue_tail().await.unwrap(), last[0], "a refused enqueue stores nothing");
    let jobs = |part| async move {
        s.queued_in(part, 0, 10).await.unwrap().into_iter().map(|j| (j.part, j.job)).collect::<Vec<_>>()
    };
    assert_eq!(jobs(0).await, vec![(0, b"a0".to_vec()), (0, b"c0".to_vec())]);
    assert_eq!(jobs(1).await, vec![(1, b"a1".to_vec()), (1, b"b1".to_vec())]);
    let all: Vec<u16> = s.queued(0, 10).await.unwrap().iter().map(|j| j.part).collect();
    assert_eq!(all, vec![0, 1, 1, 0], "every partition in one order");
    assert_eq!(s.queued_count().await.unwrap(), Some(4), "a partitioned queue counts its jobs");
    let every: Vec<u16> = (0..parts).collect();
    assert_eq!(s.busy_partitions(&every).await.unwrap(), vec![0, 1]);
    assert_eq!(s.busy_partitions(&[1]).await.unwrap(), vec![1], "only among those asked of");
    // Partition 1's two jobs, acknowledged: partition 0 keeps its own.
    let ack = |part, through, count| ChangeSet { ops: vec![], ack: Some(QueueAck { part, through, count }) };
    assert_eq!(s.commit(ack(1, more[0], 3)).await, Err(CommitError::Conflict));
    s.commit(ack(1, more[0], 2)).await.unwrap();
    assert!(jobs(1).await.is_empty());
    assert_eq!(jobs(0).await.len(), 2);
    assert_eq!(s.commit(ack(1, more[0], 2)).await, Err(CommitError::Conflict), "taken already");
    assert_eq!(s.busy_partitions(&every).await.unwrap(), vec![0], "partition 1 has nothing queued now");
    if s.finds_by_name() {
        assert!(naming(&[-12]).await.is_empty(), "applied: found no more");
    }
    s.commit(ack(0, seqs[0], 1)).await.unwrap();
    assert_eq!(jobs(0).await, vec![(0, b"c0".to_vec())]);
    assert_eq!(s.queued_count().await.unwrap(), Some(1), "not the span from the oldest to the tail");
    let at: Vec<u64> =
        s.queued_at(&[seqs[0], seqs[1], more[0], last[0]]).await.unwrap().iter().map(|j| j.seq).collect();
    assert_eq!(at, vec![last[0]], "those applied are gone");
    if let Some(cursors) = s.applied_cursors().await.unwrap() {
        assert_eq!((cursors[0], cursors[1]), (seqs[0], more[0]));
    }
}

/// Lists the checks once: their names and the runner that runs each of them.
macro_rules! checks {
    ($($check:ident),* $(,)?) => {
        /// The names of the checks, in the order [`run_all`] runs them.
        pub const CHECKS: &[&str] = &[$(stringify!($check)),*];

        /// Runs every check, each on a store just made by `fresh` (the fixture it
        /// returns lives through the check, and `store` takes the store out of it);
        /// returns the names of the checks run. A failing check panics, as in `cargo test`.
        pub async fn run_all<X, S: Store>(
            mut fresh: impl AsyncFnMut() -> X,
            store: impl Fn(&X) -> &S,
        ) -> Vec<&'static str> {
            $(
                let fixture = fresh().await;
                $check(store(&fixture)).await;
            )*
            CHECKS.to_vec()
        }

        /// Runs the check `name` on a store just made by `fresh` (as [`run_all`]
        /// does each); panics on a name that is no check.
        pub async fn run_one<X, S: Store>(
            name: &str,
            mut fresh: impl AsyncFnMut() -> X,
            store: impl Fn(&X) -> &S,
        ) {
            let fixture = fresh().await;
            match name {
                $(stringify!($check) => $check(store(&fixture)).await,)*
                other => panic!("no conformance check is named {other}"),
            }
        }
    };
}

/// One `#[test]` per conformance check for a backend, in the module it is invoked
/// in: `store_conformance_tests!(async || fresh(), |fixture| &fixture.1);` where
/// `fresh` makes a new store (and whatever must live as long) for each check, and
/// the second closure takes the store out of it; `store_conformance_tests!(when
/// <condition>; ...)` runs the checks only when the condition holds (a backend whose
/// server a machine may lack). A test of the list itself fails
/// when [`store::conformance::CHECKS`](crate::store::conformance::CHECKS) has a
/// check this macro does not name.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:expr, $store:expr) => {
        $crate::store_conformance_tests!(when true; $fresh, $store);
    };
    (when $guard:expr; $fresh:expr, $store:expr) => {
        $crate::store_conformance_tests!(@each $guard, $fresh, $store;
            versions_and_expectations,
            a_failed_commit_stores_nothing,
            deletes,
            prefix_scans,
            batched_reads,
            queue,
            partitions,
            operations_in_order,
            named_profiles
        );
    };
    (@each $guard:expr, $fresh:expr, $store:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                if !$guard {
                    return;
                }
                pollster::block_on($crate::store::conformance::run_one(stringify!($check), $fresh, $store));
            }
        )*

        #[test]
        fn every_conformance_check_has_its_test() {
            assert_eq!($crate::store::conformance::CHECKS, &[$(stringify!($check)),*]);
        }
    };
}

/// A change set's operations take effect in their order: an entry written and then
/// deleted in one change set is gone (a store may reorder writes of different keys).
async fn operations_in_order<S: Store>(s: &S) {
    let k = "w\u{1f}x\u{1f}k".to_string();
    s.commit(cs(vec![
        put(Table::Ident, &k, "id1", Expect::Absent),
        put(Table::Profile, "w\u{1f}id1", "one", Expect::Absent),
        Op::Delete { table: Table::Ident, key: k.clone(), expect: Expect::Any },
    ]))
    .await
    .unwrap();
    assert_eq!(value(s, Table::Ident, &k).await, None);
    s.commit(cs(vec![
        put(Table::Ident, &k, "id1", Expect::Absent),
        Op::Delete { table: Table::Ident, key: k.clone(), expect: Expect::Version(1) },
        put(Table::Ident, &k, "id2", Expect::Absent),
    ]))
    .await
    .unwrap();
    assert_eq!(value(s, Table::Ident, &k).await, Some((1, "id2".into())));
}

/// Identifier entries are read with the profiles they name, whatever became of the
/// profile since the entry was written (a store may remember where it was).
async fn named_profiles<S: Store>(s: &S) {
    let ident = |x: &str| format!("w\u{1f}x\u{1f}{x}");
    let profile = |id: &str| format!("w\u{1f}{id}");
    let named = async |keys: &[&str]| -> Vec<Option<(String, Option<String>)>> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let found = s.get_named(&keys, |id| id == "held").await.unwrap();
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        found.into_iter().map(|f| f.map(|(e, p)| (text(e.value), p.map(|p| text(p.value))))).collect()
    };
    let (a, b, c) = (ident("a"), ident("b"), ident("c"));
    s.commit(cs(vec![
        put(Table::Ident, &a, "id1", Expect::Absent),
        put(Table::Profile, &profile("id1"), "one", Expect::Absent),
        put(Table::Ident, &b, "id2", Expect::Absent),
        put(Table::Profile, &profile("id2"), "two", Expect::Absent),
        // An entry whose profile is gone: the entry alone.
        put(Table::Ident, &c, "id3", Expect::Absent),
    ]))
    .await
    .unwrap();
    let one = Some(("id1".to_string(), Some("one".to_string())));
    let two = Some(("id2".to_string(), Some("two".to_string())));
    assert_eq!(
        named(&[&a, "w\u{1f}x\u{1f}none", &b, &c]).await,
        vec![one.clone(), None, two, Some(("id3".into(), None))]
    );
    assert_eq!(named(&[]).await, vec![]);
    // The profile deleted and made again (elsewhere, for a store with rows) while the
    // entry stays; then the entry moved to another profile written before it.
    s.commit(cs(vec![Op::Delete { table: Table::Profile, key: profile("id1"), expect: Expect::Any }])).await.unwrap();
    s.commit(cs(vec![put(Table::Profile, &profile("filler"), "f", Expect::Absent)])).await.unwrap();
    s.commit(cs(vec![put(Table::Profile, &profile("id1"), "one again", Expect::Absent)])).await.unwrap();
    assert_eq!(named(&[&a]).await, vec![Some(("id1".into(), Some("one again".into())))]);
    s.commit(cs(vec![put(Table::Ident, &a, "id2", Expect::Version(1))])).await.unwrap();
    assert_eq!(named(&[&a, &b]).await, vec![Some(("id2".into(), Some("two".into()))); 2]);
    s.commit(cs(vec![put(Table::Ident, &a, "id1", Expect::Any)])).await.unwrap();
    assert_eq!(named(&[&a]).await, vec![Some(("id1".into(), Some("one again".into())))]);
    // A profile the caller says it holds is not read.
    let d = ident("d");
    s.commit(cs(vec![
        put(Table::Ident, &d, "held", Expect::Absent),
        put(Table::Profile, &profile("held"), "h", Expect::Absent),
    ]))
    .await
    .unwrap();
    assert_eq!(
        named(&[&d, &a]).await,
        vec![Some(("held".into(), None)), Some(("id1".into(), Some("one again".into())))]
    );
}

checks!(
    versions_and_expectations,
    a_failed_commit_stores_nothing,
    deletes,
    prefix_scans,
    batched_reads,
    queue,
    partitions,
    operations_in_order,
    named_profiles
);

/// The answer to `POST /_engage/conformance` once the host ran [`run_all`].
pub fn report(passed: &[&str]) -> crate::Response {
    crate::Response::json(200, &serde_json::json!({ "passed": passed }))
}

#[cfg(test)]
mod memory {
    use crate::store::memory::MemoryStore;

    crate::store_conformance_tests!(async || MemoryStore::new(), |s| s);

    /// The memory store with partitions, as the core's partitioned queue is tested.
    mod partitioned {
        use crate::store::memory::MemoryStore;
        crate::store_conformance_tests!(async || MemoryStore::with_partitions(4), |s| s);
    }
}
