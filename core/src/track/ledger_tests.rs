//! The ledger on its own: what a reservation counts, and when what an applier
//! releases stops counting.

use std::future::Future;

use serde_json::{json, Value};

use super::apply::look_up_groups;
use super::ledger::{Growth, Ledger, Snapshot};
use super::parse::{self, TrackJob, TrackOp};
use super::record;
use crate::ids::WorkspaceName;
use crate::store::memory::MemoryStore;
use crate::store::Store;
use crate::testkit::{Held, Hold};
use crate::time::Timestamp;

fn ws() -> WorkspaceName {
    WorkspaceName::parse("w").expect("name")
}

/// The operations of a `/users/track` body setting custom attributes `names` (and a
/// standard one) on `user`.
fn ops(user: &str, names: &[&str]) -> Vec<TrackOp> {
    let mut object = json!({ "external_id": user, "first_name": "F" });
    for name in names {
        object[*name] = Value::from(1);
    }
    let body = serde_json::to_vec(&json!({ "attributes": [object] })).expect("body");
    let obj = parse::body_object(&body).expect("object");
    let arrays = parse::arrays(&obj, parse::MAX_OBJECTS).expect("arrays");
    let parsed = pollster::block_on(look_up_groups(
        &MemoryStore::default(),
        &ws(),
        parse::parse(&arrays, Timestamp(0), crate::dialect::Dialect::Platform),
    ))
    .expect("groups");
    parsed.ops.into_iter().map(|(_, op)| op).collect()
}

/// Reserves `ops` when `fits(pending, own)`, as an acknowledgement does.
fn reserve_if(ledger: &Ledger, ops: &[TrackOp], fits: impl Fn(Growth, Growth) -> bool) -> bool {
    let request = ledger.request(&ws(), ops);
    let snapshot = ledger.snapshot();
    ledger.reserve(&snapshot, &request, fits).is_some()
}

/// Reserves `ops` when the target's pending custom attributes and its own stay
/// within `bound`.
fn reserve(ledger: &Ledger, ops: &[TrackOp], bound: usize) -> bool {
    reserve_if(ledger, ops, |pending, own| pending.custom + own.custom <= bound)
}

fn job(ops: Vec<TrackOp>) -> (u64, TrackJob) {
    (1, TrackJob { workspace: ws(), at: Timestamp(0), ops, barrier: None })
}

/// `ops` acknowledged (within `bound`), then committed by an applier.
fn committed(ledger: &Ledger, ops: Vec<TrackOp>, bound: usize) {
    assert!(reserve(ledger, &ops, bound));
    ledger.release(ledger.applied(&[job(ops)]));
}

#[test]
fn names_count_once_per_target_until_released_and_the_next_use_takes_them_off() {
    let ledger = Ledger::default();
    let (a, bc) = (ops("u", &["a"]), ops("u", &["b", "c"]));
    assert!(reserve(&ledger, &a, 2));
    // Pending, `a` counts once however many queued operations name it.
    assert!(reserve(&ledger, &a, 2));
    assert!(reserve(&ledger, &a, 2));
    assert!(!reserve(&ledger, &bc, 2));
    // Another user is counted apart.
    assert!(reserve(&ledger, &ops("v", &["b", "c"]), 2));
    // Two of the three operations naming `a` are committed: `a` is still pending.
    ledger.release(ledger.applied(&[job(a.clone()), job(a.clone())]));
    assert!(!reserve(&ledger, &bc, 2));
    // All three are: handed over by the applier, taken off by the next request.
    ledger.release(ledger.applied(&[job(a)]));
    assert!(reserve(&ledger, &bc, 2));
}

/// A request reads the stored profiles between its snapshot and its reservation. A
/// job acknowledged after the snapshot and committed before the reservation may be
/// missing from what it read (the read came first): it still counts for that
/// request, and stops counting once no request could have missed it.
#[test]
fn a_job_committed_while_a_request_reads_still_counts_for_that_request() {
    let ledger = Ledger::default();
    let (a, b) = (ops("u", &["a"]), ops("u", &["b"]));
    let request = ledger.request(&ws(), &b);
    let snapshot = ledger.snapshot();
    // Meanwhile `a` is acknowledged, applied and committed.
    assert!(reserve(&ledger, &a, 1));
    ledger.release(ledger.applied(&[job(a.clone())]));
    let within_one = |pending: Growth, own: Growth| pending.custom + own.custom <= 1;
    assert!(
        ledger.reserve(&snapshot, &request, within_one).is_none(),
        "`a` counts for the request that read before it"
    );
    // A request that snapshots now reads after `a`'s commit: `a` is in what it reads.
    let other = ops("v", &["x"]);
    assert!(reserve(&ledger, &other, 1));
    drop(snapshot);
    assert!(reserve(&ledger, &b, 1), "with no earlier request left, `a` is taken off");
    assert!(!reserve(&ledger, &ops("u", &["c"]), 1), "`b` is pending");
}

/// What was committed before a request's snapshot is in what it reads: it does not
/// count for that request, though an older request still counts it.
#[test]
fn a_job_committed_before_a_request_snapshots_counts_only_for_older_requests() {
    let ledger = Ledger::default();
    let older = ledger.snapshot();
    committed(&ledger, ops("u", &["a"]), 1);
    let nothing_pending = |pending: Growth, _| pending == Growth::default();
    assert!(reserve_if(&ledger, &ops("u", &["b"]), nothing_pending), "committed before this request looked");
    let b = ops("u", &["c"]);
    let request = ledger.request(&ws(), &b);
    assert!(ledger.reserve(&older, &request, |pending, own| pending.custom + own.custom <= 2).is_none());
}

/// The custom attributes a reservation for `u` under `snapshot` counts as pending
/// (reserving nothing).
fn custom_pending(ledger: &Ledger, snapshot: &Snapshot<'_>, names: &[&str]) -> usize {
    let request = ledger.request(&ws(), &ops("u", names));
    let seen = std::cell::Cell::new(None);
    ledger.reserve(snapshot, &request, |pending, _| {
        seen.set(Some(pending.custom));
        false
    });
    seen.get().expect("u is a target")
}

/// Two requests reading at once, each holding what was committed after its own
/// snapshot, and letting go of it in turn.
#[test]
fn each_request_counts_what_was_committed_after_its_own_snapshot() {
    let ledger = Ledger::default();
    let first = ledger.snapshot();
    committed(&ledger, ops("u", &["a"]), 9);
    let second = ledger.snapshot();
    committed(&ledger, ops("u", &["b"]), 9);
    assert_eq!(custom_pending(&ledger, &first, &["x"]), 2, "`a` and `b` were committed after the first snapshot");
    assert_eq!(custom_pending(&ledger, &second, &["x"]), 1, "only `b` after the second");
    drop(first);
    assert_eq!(custom_pending(&ledger, &second, &["x"]), 1, "`b` is kept for the second");
    drop(second);
    let now = ledger.snapshot();
    assert_eq!(custom_pending(&ledger, &now, &["x"]), 0, "nothing is pending or kept");
}

#[test]
fn settling_takes_off_everything_released() {
    let ledger = Ledger::default();
    let users: Vec<String> = (0..3000).map(|i| format!("user-{i}")).collect();
    let all: Vec<Vec<TrackOp>> = users.iter().map(|u| ops(u, &["a", "b"])).collect();
    for ops in &all {
        assert!(reserve(&ledger, ops, 2));
    }
    let nothing_pending = |ops: &[TrackOp]| reserve_if(&ledger, ops, |pending, _| pending == Growth::default());
    assert!(!nothing_pending(&all[0]));
    let jobs: Vec<(u64, TrackJob)> = all.iter().map(|ops| job(ops.clone())).collect();
    ledger.release(ledger.applied(&jobs));
    ledger.settle();
    // Every user is free again (the check above reserved `all[0]` once more only when
    // it found nothing pending, which it did not).
    for ops in &all {
        assert!(nothing_pending(ops));
    }
}

#[test]
fn an_operation_on_standard_attributes_only_counts_nothing() {
    let ledger = Ledger::default();
    let standard = ops("u", &[]);
    assert!(reserve(&ledger, &standard, 0));
    assert!(reserve(&ledger, &ops("u", &["a"]), 1));
    assert!(!reserve(&ledger, &ops("u", &["b"]), 1));
    ledger.release(ledger.applied(&[job(standard)]));
    assert!(!reserve(&ledger, &ops("u", &["b"]), 1), "releasing it takes nothing of `a` off");
}

#[test]
fn a_count_of_the_queue_under_way_elsewhere_is_not_waited_for_and_is_kept_once() {
    let store = MemoryStore::default();
    let queued = TrackJob { workspace: ws(), at: Timestamp(0), ops: ops("u", &["a"]), barrier: None };
    let seq = pollster::block_on(store.enqueue(record::encode(&store, &queued).expect("encode"))).expect("enqueue");
    let ledger = Ledger::default();
    let nothing_pending = || reserve_if(&ledger, &ops("u", &["b"]), |pending, _| pending == Growth::default());

    // A request begins counting the queue and waits for its read.
    // Its reads of the queue wait once, as a request's read of D1 does.
    let slow = Held(&store, Hold::QueueReads);
    let mut first = Box::pin(ledger.load_unless_loading(&slow, Timestamp(1_000)));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(first.as_mut().poll(&mut cx).is_pending());
    // Another meanwhile: nothing done, to be run again after a pause.
    assert!(!pollster::block_on(ledger.load_unless_loading(&store, Timestamp(10_999))).expect("load"));
    // Ten seconds on, the first is presumed abandoned and this one counts.
    assert!(pollster::block_on(ledger.load_unless_loading(&store, Timestamp(11_000))).expect("load"));
    assert!(!nothing_pending(), "the queued job counts");
    // The first ends after all; its count is not added a second time: one release
    // takes the one queued operation off.
    assert!(pollster::block_on(first).expect("load"));
    ledger.release(ledger.applied(&[(seq, queued)]));
    assert!(nothing_pending());
}
