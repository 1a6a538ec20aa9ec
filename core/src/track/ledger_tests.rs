//! The ledger on its own: what a reservation counts, and when what an applier
//! releases stops counting.

use serde_json::{json, Value};

use super::apply::look_up_groups;
use super::ledger::{Growth, Ledger};
use super::parse::{self, TrackJob, TrackOp};
use crate::ids::WorkspaceName;
use crate::store::memory::MemoryStore;
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
    let parsed =
        pollster::block_on(look_up_groups(&MemoryStore::default(), &ws(), parse::parse(&arrays, Timestamp(0))))
            .expect("groups");
    parsed.ops.into_iter().map(|(_, op)| op).collect()
}

/// Reserves `ops` when `fits(pending, own)`, as an acknowledgement does.
fn reserve_if(ledger: &Ledger, ops: &[TrackOp], fits: impl Fn(Growth, Growth) -> bool) -> bool {
    let request = ledger.request(&ws(), ops);
    let snapshot = ledger.snapshot(&request);
    ledger.reserve(&snapshot, &request, fits).is_some()
}

/// Reserves `ops` when the target's pending custom attributes and its own stay
/// within `bound`.
fn reserve(ledger: &Ledger, ops: &[TrackOp], bound: usize) -> bool {
    reserve_if(ledger, ops, |pending, own| pending.custom + own.custom <= bound)
}

fn job(ops: Vec<TrackOp>) -> (u64, TrackJob) {
    (1, TrackJob { workspace: ws(), at: Timestamp(0), ops })
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
