//! Building a unit of work's change set: every document and index entry changed, each
//! with the expectation (the version read) that makes a concurrent writer retry
//! instead of losing an update, and what a settled unit of work keeps cached for the
//! next one.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::codec::encode;
use super::index::{index_entries, Identity};
use super::keys::profile_key;
use super::slot::Slot;
use super::{large, Tx};
use crate::ids::ServiceId;
use crate::store::{next_version, ChangeSet, Expect, Op, Store, StoreError, Table};

impl<'s, S: Store> Tx<'s, S> {
    /// Turns the collected changes into one change set.
    pub fn into_changes(self) -> Result<ChangeSet, StoreError> {
        Ok(self.changes()?.set)
    }

    /// Turns the changes collected so far into a change set and carries on as if it
    /// had been committed: written documents stay, with the versions the store gives
    /// them, and everything merely read is forgotten. The queue applier builds its next
    /// batch on top of one still being committed this way; should that commit fail,
    /// this unit of work is void and must be dropped.
    pub fn settle(&mut self) -> Result<ChangeSet, StoreError> {
        let Changes { set: changes, large_now, moved } = self.changes()?;
        // Unique identifiers that changed owner: the store's index may not say so until
        // the commit lands, so they are remembered here (removed ones as absent).
        // The maps a batch fills start at the size the last one reached: grown from
        // empty, each rehashed its keys over and over (rehashing was 3% of a warehouse
        // sync's building thread, perf).
        let mut unique_read: HashMap<String, Option<ServiceId>> = HashMap::with_capacity(self.unique_read.len());
        let mut settled: BTreeMap<String, BTreeSet<ServiceId>> = BTreeMap::new();
        for Moved { id, stored, new } in moved {
            for (k, unique) in stored {
                if unique {
                    unique_read.entry(k).or_insert(None);
                }
            }
            for (k, unique) in new {
                // A unique entry's owner is in `unique_read`, which `resolve` reads
                // first; only shared entries (many owners) need `settled`.
                if unique {
                    unique_read.insert(k, Some(id.clone()));
                } else {
                    settled.entry(k).or_default().insert(id.clone());
                }
            }
        }
        // What the batch before settled is let go of here, on the building thread:
        // freed on a thread of its own, the next batch's allocations came cold from
        // the allocator's arenas, and a 1M-row warehouse sync took longer
        // (docs/performance.md).
        self.profiles.retain(|_, slot| slot.dirty);
        for (id, slot) in &mut self.profiles {
            slot.version = slot.doc.as_ref().map(|_| next_version(slot.version));
            slot.stored = slot.doc.as_ref().map(Identity::of);
            slot.stored_large = large_now.contains(id);
            slot.dirty = false;
            (slot.stale, slot.touched) = (false, false);
        }
        self.docs.retain(|_, d| d.dirty);
        for d in self.docs.values_mut() {
            d.read = match (&d.value, d.read) {
                (Some(_), Some(read)) => Some(Some(next_version(read))),
                // A blind write: its value is known, not the version it got, so a later
                // write of it is blind too.
                (Some(_), None) => None,
                (None, _) => Some(None),
            };
            d.dirty = false;
        }
        self.unique_read = unique_read;
        self.settled = settled;
        self.overlay.clear();
        // Emptied in place: the next batch fills them about as far, without
        // rehashing its keys as they grow.
        self.overlay_unique.clear();
        self.overlay_keys.clear();
        self.stale.clear();
        self.touched.clear();
        self.assumed.clear();
        Ok(changes)
    }

    /// The change set, the profiles it stores large, and the index entries of the
    /// profiles whose identifiers it changes.
    fn changes(&self) -> Result<Changes, StoreError> {
        let mut large_now = HashSet::new();
        let mut moved = Vec::new();
        // By service id, so a change set does not depend on hashing.
        let mut dirty: Vec<(&ServiceId, &Slot)> = self.profiles.iter().filter(|(_, slot)| slot.dirty).collect();
        dirty.sort_unstable_by(|a, b| a.0.cmp(b.0));
        // Room for a profile and an identifier entry each (a new user's), and the
        // documents: a warehouse batch's 4,000 operations, grown from empty, were
        // copied a dozen times over (2% of a sync's building thread, callgrind).
        let mut ops = Vec::with_capacity(dirty.len() * 2 + self.docs.len());
        for (id, slot) in dirty {
            let key = profile_key(&self.ws, id);
            let expect = slot.version.map_or(Expect::Absent, Expect::Version);
            let moves = !slot.identity_unchanged();
            let (stored_index, new_index) = if !moves {
                (BTreeMap::new(), BTreeMap::new())
            } else {
                (
                    slot.stored.as_ref().map(|s| s.index_entries(&self.ws, id)).unwrap_or_default(),
                    slot.doc.as_ref().map(|p| index_entries(&self.ws, p)).unwrap_or_default(),
                )
            };
            for k in stored_index.keys() {
                if !new_index.contains_key(k) {
                    ops.push(Op::Delete { table: Table::Ident, key: k.clone(), expect: Expect::Any });
                }
            }
            for (k, unique) in &new_index {
                if !stored_index.contains_key(k) {
                    // A unique identifier must not exist yet: two requests creating the
                    // same external id race here, and the loser retries and finds it.
                    let expect = if *unique { Expect::Absent } else { Expect::Any };
                    ops.push(Op::Put {
                        table: Table::Ident,
                        key: k.clone(),
                        value: id.as_str().as_bytes().to_vec(),
                        expect,
                    });
                }
            }
            if moves {
                moved.push(Moved { id: id.clone(), stored: stored_index, new: new_index });
            }
            let value = slot.doc.as_ref().map(encode).transpose()?;
            let is_large = value.as_ref().is_some_and(|v| large::is_large(v.len()));
            // The registry follows the document: entries of the stored identity go when
            // the profile stops being large or loses an identifier, entries of the new
            // one come when it is large.
            let registered = match (&slot.stored, slot.stored_large) {
                (Some(stored), true) => large::entries(&self.ws, stored, id),
                _ => Vec::new(),
            };
            let registering = match (&slot.doc, is_large) {
                (Some(p), true) => large::entries(&self.ws, &Identity::of(p), id),
                _ => Vec::new(),
            };
            for k in registered.iter().filter(|k| !registering.contains(k)) {
                ops.push(Op::Delete { table: Table::LargeProfile, key: k.clone(), expect: Expect::Any });
            }
            for k in registering.iter().filter(|k| !registered.contains(k)) {
                let value = id.as_str().as_bytes().to_vec();
                ops.push(Op::Put { table: Table::LargeProfile, key: k.clone(), value, expect: Expect::Any });
            }
            if is_large {
                large_now.insert(id.clone());
            }
            match value {
                Some(value) => ops.push(Op::Put { table: Table::Profile, key, value, expect }),
                None => {
                    if slot.version.is_some() {
                        ops.push(Op::Delete { table: Table::Profile, key, expect });
                    }
                }
            }
        }
        for ((table, key), slot) in &self.docs {
            if !slot.dirty {
                continue;
            }
            let (table, key) = (*table, key.clone());
            let expect = match slot.read {
                None => Expect::Any,
                Some(Some(v)) => Expect::Version(v),
                Some(None) => Expect::Absent,
            };
            match &slot.value {
                Some(v) => ops.push(Op::Put { table, key, value: v.clone(), expect }),
                // Deleting what was read as absent changes nothing.
                None if slot.read == Some(None) => {}
                None => ops.push(Op::Delete { table, key, expect }),
            }
        }
        // Deletes of index entries come first so that an identifier moving between
        // profiles in one request does not trip its own uniqueness check, nor a large
        // profile's registry entry get deleted by the profile it moved from.
        ops.sort_by_key(|op| match op {
            Op::Delete { table: Table::Ident | Table::LargeProfile, .. } => 0,
            _ => 1,
        });
        // A unique identifier taken as absent without a read ([`Tx::assume_new`]) is
        // expected absent at commit, as the store held it before this change set: by
        // the write of its entry when that is the set's only operation on it, or else
        // by a check ahead of everything (a delete of nothing that expects nothing
        // there). A profile that held it, read by another identifier, would
        // otherwise delete its entry first and let that write through.
        if !self.assumed.is_empty() {
            let mut only_written: HashMap<&str, bool> = HashMap::with_capacity(self.assumed.len());
            for op in &ops {
                if let Op::Put { table: Table::Ident, key, expect, .. }
                | Op::Delete { table: Table::Ident, key, expect } = op
                {
                    let alone = matches!(op, Op::Put { .. }) && *expect == Expect::Absent;
                    only_written.entry(key.as_str()).and_modify(|o| *o = false).or_insert(alone);
                }
            }
            let checks: Vec<Op> = self
                .assumed
                .iter()
                .filter(|k| only_written.get(k.as_str()) != Some(&true))
                .map(|k| Op::Delete { table: Table::Ident, key: k.clone(), expect: Expect::Absent })
                .collect();
            ops.splice(0..0, checks);
        }
        Ok(Changes { set: ChangeSet { ops, ack: None }, large_now, moved })
    }
}

/// What [`Tx::changes`] found.
struct Changes {
    set: ChangeSet,
    /// The profiles the change set stores large.
    large_now: HashSet<ServiceId>,
    /// The profiles whose identifiers change, with their index entries.
    moved: Vec<Moved>,
}

/// A profile whose identifiers change: its index entries as stored and as written
/// (key → unique?), computed once for the change set and for [`Tx::settle`].
struct Moved {
    id: ServiceId,
    stored: BTreeMap<String, bool>,
    new: BTreeMap<String, bool>,
}
