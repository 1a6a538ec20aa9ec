//! A unit of work's bookkeeping of changed profiles: each is listed once however
//! often it changes, and a listing is cleared by what consumes it.

use pollster::block_on;

use super::Tx;
use crate::ids::{ExternalId, Identifier, ServiceId, WorkspaceName};
use crate::profile::{Profile, MAX_CUSTOM_ATTRIBUTES};
use crate::store::memory::MemoryStore;
use crate::time::Timestamp;

fn external(x: &str) -> Identifier {
    Identifier::External(ExternalId::parse(x).unwrap())
}

/// A new profile with external id `x`.
fn user(tx: &mut Tx<'_, MemoryStore>, id: &str, x: &str) -> ServiceId {
    let id = ServiceId::parse(id).unwrap();
    let mut p = Profile::new(id.clone(), Timestamp(0));
    p.external_id = ExternalId::parse(x);
    tx.insert_profile(p);
    id
}

/// Gives profile `id` `n` more custom attributes, one change each.
fn grow(tx: &mut Tx<'_, MemoryStore>, id: &ServiceId, n: usize) {
    for _ in 0..n {
        let p = block_on(tx.profile_mut(id)).unwrap().unwrap();
        let k = format!("a{}", p.custom.len());
        p.custom.insert(k, serde_json::json!(1));
    }
}

#[test]
fn a_profile_changed_many_times_is_checked_until_its_check_is_taken_and_again_once_changed() {
    let store = MemoryStore::new();
    let mut tx = Tx::new(&store, WorkspaceName::parse("w").unwrap());
    let id = user(&mut tx, "s1", "u1");
    grow(&mut tx, &id, MAX_CUSTOM_ATTRIBUTES + 1);
    let why = tx.take_oversized().expect("over the bound");
    assert!(why.contains("'u1'") && why.contains("custom attributes"), "{why}");
    assert_eq!(tx.take_oversized(), None, "a check is taken once");
    grow(&mut tx, &id, 1);
    assert!(tx.take_oversized().is_some(), "changed again: checked again");
    grow(&mut tx, &id, 1);
    tx.untouch();
    assert_eq!(tx.take_oversized(), None, "forgotten by untouch");
    grow(&mut tx, &id, 1);
    assert!(tx.take_oversized().is_some(), "changed after untouch: checked");
}

#[test]
fn identifiers_changed_after_a_lookup_are_found_by_their_new_value_only() {
    let store = MemoryStore::new();
    let mut tx = Tx::new(&store, WorkspaceName::parse("w").unwrap());
    let id = user(&mut tx, "s1", "old");
    assert_eq!(block_on(tx.resolve(&external("old"))).unwrap(), vec![id.clone()]);
    // Changed several times between lookups: the last value is the one indexed.
    for x in ["mid", "new"] {
        block_on(tx.profile_mut(&id)).unwrap().unwrap().external_id = ExternalId::parse(x);
    }
    assert_eq!(block_on(tx.resolve(&external("new"))).unwrap(), vec![id.clone()]);
    assert!(block_on(tx.resolve(&external("old"))).unwrap().is_empty());
    assert!(block_on(tx.resolve(&external("mid"))).unwrap().is_empty());
    // Settled (as if committed), then changed again: found by the newest value.
    let _ = tx.settle().unwrap();
    block_on(tx.profile_mut(&id)).unwrap().unwrap().external_id = ExternalId::parse("last");
    assert_eq!(block_on(tx.resolve(&external("last"))).unwrap(), vec![id.clone()]);
    assert!(block_on(tx.delete_profile(&id)).unwrap());
    assert!(block_on(tx.resolve(&external("last"))).unwrap().is_empty(), "a deleted profile is found by nothing");
}

#[test]
fn identifiers_taken_as_new_without_a_read_are_checked_at_commit() {
    use crate::store::{CommitError, Expect, Op, Store, Table};

    let store = MemoryStore::new();
    let ws = WorkspaceName::parse("w").unwrap();
    let mut setup = Tx::new(&store, ws.clone());
    let held = user(&mut setup, "s1", "held");
    block_on(store.commit(setup.into_changes().unwrap())).unwrap();
    let assuming = || {
        let mut tx = Tx::new(&store, ws.clone());
        tx.assume_new(true);
        tx
    };

    // Taken as absent, not read: a second profile for a stored identifier is refused.
    let mut tx = assuming();
    block_on(tx.prefetch(&[external("held"), external("fresh")])).unwrap();
    assert_eq!(tx.take_lookups(), (0, 0), "nothing was read");
    assert!(block_on(tx.resolve(&external("held"))).unwrap().is_empty());
    user(&mut tx, "s2", "held");
    assert_eq!(block_on(store.commit(tx.into_changes().unwrap())), Err(CommitError::Conflict));

    // Taken as absent and not written (an update of existing users only, a delete):
    // checked all the same.
    let mut tx = assuming();
    block_on(tx.prefetch(&[external("held")])).unwrap();
    let set = tx.into_changes().unwrap();
    let key = super::keys::external_key(&ws, &ExternalId::parse("held").unwrap());
    assert_eq!(set.ops, vec![Op::Delete { table: Table::Ident, key, expect: Expect::Absent }]);
    assert_eq!(block_on(store.commit(set)), Err(CommitError::Conflict));

    // A profile read by its service id gives up an identifier taken as absent while a
    // new profile claims it: the check comes before that entry's removal.
    let mut tx = assuming();
    block_on(tx.prefetch(&[external("held"), Identifier::Service(held.clone())])).unwrap();
    user(&mut tx, "s3", "held");
    block_on(tx.profile_mut(&held)).unwrap().unwrap().external_id = ExternalId::parse("renamed");
    assert_eq!(block_on(store.commit(tx.into_changes().unwrap())), Err(CommitError::Conflict));

    // Not assuming: read, found, counted; and a new identifier is written with no check.
    let mut tx = Tx::new(&store, ws.clone());
    block_on(tx.prefetch(&[external("held"), external("fresh")])).unwrap();
    assert_eq!(tx.take_lookups(), (2, 1));
    assert_eq!(block_on(tx.resolve(&external("held"))).unwrap(), vec![held.clone()]);
    let mut tx = assuming();
    block_on(tx.prefetch(&[external("fresh")])).unwrap();
    user(&mut tx, "s4", "fresh");
    let set = tx.into_changes().unwrap();
    assert!(set.ops.iter().all(|op| matches!(op, Op::Put { expect: Expect::Absent, .. })), "{:?}", set.ops);
    block_on(store.commit(set)).unwrap();
}
