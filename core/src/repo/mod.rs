//! Typed access to the document store, and [`Tx`], the unit of work every endpoint
//! uses: it caches what it read (with versions) and collects changes (here), resolves
//! identifiers to profiles ([`resolve`]), and turns its changes into one
//! [`ChangeSet`] whose expectations make concurrent requests retry instead of losing
//! each other's updates ([`changes`]).

mod changes;
pub mod codec;
pub mod index;
pub mod keys;
pub mod large;
mod resolve;
mod slot;
#[cfg(test)]
mod tests;
pub mod transact;

use std::collections::{BTreeMap, BTreeSet};

// foldhash, not std's SipHash: these maps live for one unit of work and hold at most
// its batch's profiles and identifiers (a key chosen to collide could slow only that
// batch), and SipHash was 7% of a warehouse sync's instructions (callgrind).
use foldhash::{HashMap, HashMapExt};

use serde::de::DeserializeOwned;
use serde::Serialize;

use self::codec::{decode, encode};
use self::keys::profile_key;
use self::slot::Slot;
use crate::ids::{ServiceId, WorkspaceName};
use crate::profile::Profile;
use crate::store::{Store, StoreError, Table};

/// Most documents a scan of one shared identifier returns (users sharing an email).
pub const MAX_SHARED: usize = 1000;

/// A unit of work over one workspace.
pub struct Tx<'s, S: Store> {
    store: &'s S,
    ws: WorkspaceName,
    /// Hashed, not ordered: a batch of queued jobs touches thousands of profiles, each
    /// looked up several times; `changes` puts them in order.
    profiles: HashMap<ServiceId, Slot>,
    docs: BTreeMap<(Table, String), DocSlot>,
    /// Shared index entries (emails, phones) of the profiles changed in this unit of
    /// work, so `resolve` finds identifiers they gained without scanning every loaded
    /// profile (a batch of queued jobs loads thousands). Ordered: an email is looked
    /// up by the prefix of its entries.
    overlay: BTreeMap<String, BTreeSet<ServiceId>>,
    /// Their unique entries (external ids, aliases), looked up by whole key. Hashed:
    /// every new profile of a warehouse sync has one, and in `overlay` each insert was
    /// a dozen long comparisons of keys that share the workspace's prefix (3.6% of a
    /// sync's instructions with `overlay` holding both, callgrind).
    overlay_unique: HashMap<String, Vec<ServiceId>>,
    /// Entries each changed profile has in the overlay (key, unique?). Hashed, as
    /// `unique_read`: both are only looked up by whole key, and in a B-tree the ids of
    /// one batch (which share their first 18 characters) made each lookup a dozen
    /// long comparisons (perf).
    overlay_keys: HashMap<ServiceId, Vec<(String, bool)>>,
    /// Profiles handed out for change since the overlay was last refreshed, each
    /// once (its slot is marked `stale`).
    stale: Vec<ServiceId>,
    /// Profiles handed out for change since [`Tx::take_oversized`] or
    /// [`Tx::untouch`] (the queue applier checks each job's against the bound on a
    /// profile's size), each once (its slot is marked `touched`).
    touched: Vec<ServiceId>,
    /// Unique-identifier index entries already read from the store.
    unique_read: HashMap<String, Option<ServiceId>>,
    /// Shared index entries (emails, phones) of the profiles whose identifiers changed
    /// in the change set last settled ([`Tx::settle`]): that commit may not have
    /// landed, so the store's index may not show them yet (removed entries need
    /// nothing: `resolve` checks every candidate against the profile itself). Unique
    /// entries that changed are in `unique_read`.
    settled: BTreeMap<String, BTreeSet<ServiceId>>,
    /// Whether [`Tx::prefetch`] takes unique identifiers it does not know as absent
    /// from the store, without reading them ([`Tx::assume_new`]).
    assume_new: bool,
    /// The unique identifiers taken as absent that way: the change set checks each
    /// ([`Tx::settle`]), so a wrong guess is a conflict, never a second profile.
    assumed: Vec<String>,
    /// Unique identifiers [`Tx::prefetch`] read from the store, and how many of
    /// them it found, since [`Tx::take_lookups`].
    lookups: (usize, usize),
}

struct DocSlot {
    /// `None`: never read (a blind write); `Some(v)`: the version read (`Some(None)`: absent).
    read: Option<Option<u64>>,
    value: Option<Vec<u8>>,
    dirty: bool,
}

impl<'s, S: Store> Tx<'s, S> {
    /// Starts a unit of work.
    pub fn new(store: &'s S, ws: WorkspaceName) -> Tx<'s, S> {
        Tx {
            store,
            ws,
            profiles: HashMap::new(),
            docs: BTreeMap::new(),
            overlay: BTreeMap::new(),
            overlay_unique: HashMap::new(),
            overlay_keys: HashMap::new(),
            stale: Vec::new(),
            touched: Vec::new(),
            unique_read: HashMap::new(),
            settled: BTreeMap::new(),
            assume_new: false,
            assumed: Vec::new(),
            lookups: (0, 0),
        }
    }

    /// From now on, takes the unique identifiers (external ids, aliases) that
    /// [`Tx::prefetch`] is asked about, and that this unit of work does not know, as
    /// absent from the store without reading them: for a warehouse sync whose last
    /// batch found none of its users, the next most likely holds new users too.
    /// Nothing is taken on trust: each such identifier is expected absent at commit
    /// (by the write of its entry, or by a check of its own), so a wrong guess fails
    /// the commit as a conflict and the work is done again with reads.
    pub fn assume_new(&mut self, on: bool) {
        self.assume_new = on;
    }

    /// The unique identifiers [`Tx::prefetch`] read from the store since the last
    /// call, and how many of them the store held.
    pub fn take_lookups(&mut self) -> (usize, usize) {
        std::mem::take(&mut self.lookups)
    }

    /// The workspace.
    pub fn workspace(&self) -> &WorkspaceName {
        &self.ws
    }

    /// The store underneath.
    pub fn store(&self) -> &'s S {
        self.store
    }

    async fn load(&mut self, id: &ServiceId) -> Result<(), StoreError> {
        if self.profiles.contains_key(id) {
            return Ok(());
        }
        let entry = self.store.get(Table::Profile, &profile_key(&self.ws, id)).await?;
        self.profiles.insert(id.clone(), Slot::read(entry)?);
        Ok(())
    }

    /// Reads a profile (as changed so far in this unit of work).
    pub async fn profile(&mut self, id: &ServiceId) -> Result<Option<&Profile>, StoreError> {
        self.load(id).await?;
        Ok(self.profiles.get(id).and_then(|s| s.doc.as_ref()))
    }

    /// A profile [`Tx::profile`] has already read, without reading.
    pub fn loaded(&self, id: &ServiceId) -> Option<&Profile> {
        self.profiles.get(id).and_then(|s| s.doc.as_ref())
    }

    /// A profile to change; it is written back at commit.
    pub async fn profile_mut(&mut self, id: &ServiceId) -> Result<Option<&mut Profile>, StoreError> {
        self.load(id).await?;
        let Some(slot) = self.profiles.get_mut(id) else { return Ok(None) };
        mark(slot, id, &mut self.stale, &mut self.touched);
        if slot.doc.is_some() {
            slot.dirty = true;
        }
        Ok(slot.doc.as_mut())
    }

    /// Adds a new profile.
    pub fn insert_profile(&mut self, p: Profile) {
        let id = p.id.clone();
        let slot = self.profiles.entry(id.clone()).or_insert_with(Slot::absent);
        mark(slot, &id, &mut self.stale, &mut self.touched);
        // A new profile must not exist: should its id collide with a stored profile,
        // the commit conflicts instead of overwriting it.
        slot.version = None;
        slot.doc = Some(p);
        slot.dirty = true;
    }

    /// Removes a profile and, at commit, all its index entries.
    pub async fn delete_profile(&mut self, id: &ServiceId) -> Result<bool, StoreError> {
        self.load(id).await?;
        let Some(slot) = self.profiles.get_mut(id) else { return Ok(false) };
        list_once(&mut slot.stale, id, &mut self.stale);
        if slot.doc.is_none() {
            return Ok(false);
        }
        slot.doc = None;
        slot.dirty = true;
        Ok(true)
    }

    /// Reads a plain document (groups, address records, ...).
    pub async fn doc<T: DeserializeOwned>(&mut self, table: Table, key: &str) -> Result<Option<T>, StoreError> {
        let k = (table, key.to_string());
        // A slot is there once the document was read, written, or carried by `settle`.
        if !self.docs.contains_key(&k) {
            let e = self.store.get(table, key).await?;
            let (v, bytes) = match e {
                Some(e) => (Some(e.version), Some(e.value)),
                None => (None, None),
            };
            self.docs.insert(k.clone(), DocSlot { read: Some(v), value: bytes, dirty: false });
        }
        match &self.docs[&k].value {
            Some(bytes) => Ok(Some(decode(bytes)?)),
            None => Ok(None),
        }
    }

    /// Writes a plain document at commit (checked against the version read, if read).
    pub fn put_doc<T: Serialize>(&mut self, table: Table, key: &str, value: &T) -> Result<(), StoreError> {
        let value = encode(value)?;
        let slot =
            self.docs.entry((table, key.to_string())).or_insert(DocSlot { read: None, value: None, dirty: false });
        slot.value = Some(value);
        slot.dirty = true;
        Ok(())
    }

    /// Removes a plain document at commit (checked against the version read, if read).
    pub fn delete_doc(&mut self, table: Table, key: &str) {
        let slot =
            self.docs.entry((table, key.to_string())).or_insert(DocSlot { read: None, value: None, dirty: false });
        slot.value = None;
        slot.dirty = true;
    }

    /// The first profile changed since the last call that is over the bound on a
    /// profile's size ([`Profile::size_error`]), as its message.
    pub fn take_oversized(&mut self) -> Option<String> {
        let mut first = None;
        self.untouch_each(|slot| {
            if first.is_none() {
                first = slot.doc.as_ref().and_then(Profile::size_error);
            }
        });
        first
    }

    /// Forgets which profiles were changed (for a unit of work whose bounds were
    /// checked before: the queue applier's).
    pub fn untouch(&mut self) {
        self.untouch_each(|_| {});
    }

    /// Unlists every touched profile, handing each one's slot to `visit`. The list
    /// is emptied, not replaced: it keeps its room for the next changes.
    fn untouch_each(&mut self, mut visit: impl FnMut(&Slot)) {
        let mut touched = std::mem::take(&mut self.touched);
        for id in touched.drain(..) {
            if let Some(slot) = self.profiles.get_mut(&id) {
                slot.touched = false;
                visit(slot);
            }
        }
        self.touched = touched;
    }
}

/// Lists profile `id` (its slot) as stale and touched, once each.
fn mark(slot: &mut Slot, id: &ServiceId, stale: &mut Vec<ServiceId>, touched: &mut Vec<ServiceId>) {
    list_once(&mut slot.stale, id, stale);
    list_once(&mut slot.touched, id, touched);
}

/// Adds `id` to `list` unless its slot's `flag` says it is there already.
fn list_once(flag: &mut bool, id: &ServiceId, list: &mut Vec<ServiceId>) {
    if !*flag {
        *flag = true;
        list.push(id.clone());
    }
}
