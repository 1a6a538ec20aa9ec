//! Typed access to the document store, and [`Tx`], the unit of work every endpoint
//! uses: it caches what it read (with versions), collects changes, and turns them
//! into one [`ChangeSet`] whose expectations make concurrent requests retry instead
//! of losing each other's updates.

pub mod codec;
pub mod index;
pub mod keys;
pub mod large;
mod slot;
pub mod transact;

use std::collections::{BTreeMap, BTreeSet};

// foldhash, not std's SipHash: these maps live for one unit of work and hold at most
// its batch's profiles and identifiers (a key chosen to collide could slow only that
// batch), and SipHash was 7% of a warehouse sync's instructions (callgrind).
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use serde::de::DeserializeOwned;
use serde::Serialize;

use self::codec::{decode, encode};
use self::index::{index_entries, index_value, matches, Identity};
use self::keys::{profile_key, shared_prefix, unique_key};
use self::slot::Slot;
use crate::ids::{Identifier, ServiceId, WorkspaceName};
use crate::profile::Profile;
use crate::store::{next_version, ChangeSet, Expect, Op, Store, StoreError, Table};

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
    /// Profiles handed out for change since the overlay was last refreshed.
    stale: HashSet<ServiceId>,
    /// Profiles handed out for change since [`Tx::take_touched`] (the queue applier
    /// checks each job's against the bound on a profile's size).
    touched: HashSet<ServiceId>,
    /// Unique-identifier index entries already read from the store.
    unique_read: HashMap<String, Option<ServiceId>>,
    /// Shared index entries (emails, phones) of the profiles whose identifiers changed
    /// in the change set last settled ([`Tx::settle`]): that commit may not have
    /// landed, so the store's index may not show them yet (removed entries need
    /// nothing: `resolve` checks every candidate against the profile itself). Unique
    /// entries that changed are in `unique_read`.
    settled: BTreeMap<String, BTreeSet<ServiceId>>,
}

/// Takes `map`, leaving an empty one with room for as many entries: the next batch
/// fills it about as far, without rehashing its keys as it grows.
fn take_sized<K, V>(map: &mut HashMap<K, V>) -> HashMap<K, V> {
    let room = map.len();
    std::mem::replace(map, HashMap::with_capacity(room))
}

/// What [`Tx::settle_retiring`] let go of, only held: dropping it frees it.
pub struct Retired {
    _slots: Vec<(ServiceId, Slot)>,
    _unique_read: HashMap<String, Option<ServiceId>>,
    _settled: BTreeMap<String, BTreeSet<ServiceId>>,
    _overlay: BTreeMap<String, BTreeSet<ServiceId>>,
    _overlay_unique: HashMap<String, Vec<ServiceId>>,
    _overlay_keys: HashMap<ServiceId, Vec<(String, bool)>>,
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
            stale: HashSet::new(),
            touched: HashSet::new(),
            unique_read: HashMap::new(),
            settled: BTreeMap::new(),
        }
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
        if !self.stale.contains(id) {
            self.stale.insert(id.clone());
        }
        if !self.touched.contains(id) {
            self.touched.insert(id.clone());
        }
        Ok(self.profiles.get_mut(id).and_then(|s| {
            if s.doc.is_some() {
                s.dirty = true;
            }
            s.doc.as_mut()
        }))
    }

    /// Adds a new profile.
    pub fn insert_profile(&mut self, p: Profile) {
        let id = p.id.clone();
        self.stale.insert(id.clone());
        self.touched.insert(id.clone());
        let slot = self.profiles.entry(id).or_insert(Slot {
            version: None,
            stored: None,
            doc: None,
            dirty: true,
            stored_large: false,
        });
        // A new profile must not exist: should its id collide with a stored profile,
        // the commit conflicts instead of overwriting it.
        slot.version = None;
        slot.doc = Some(p);
        slot.dirty = true;
    }

    /// Removes a profile and, at commit, all its index entries.
    pub async fn delete_profile(&mut self, id: &ServiceId) -> Result<bool, StoreError> {
        self.load(id).await?;
        self.stale.insert(id.clone());
        match self.profiles.get_mut(id) {
            Some(slot) if slot.doc.is_some() => {
                slot.doc = None;
                slot.dirty = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Every profile the identifier names (at most one for unique identifiers).
    pub async fn resolve(&mut self, ident: &Identifier) -> Result<Vec<ServiceId>, StoreError> {
        let mut candidates: BTreeSet<ServiceId> = BTreeSet::new();
        // The identifier's index key (unique identifiers) or key prefix (shared ones).
        let lookup = unique_key(&self.ws, ident).or_else(|| shared_prefix(&self.ws, ident));
        match (ident, &lookup) {
            (Identifier::Service(id), _) => {
                candidates.insert(id.clone());
            }
            (Identifier::External(_) | Identifier::Alias(_), Some(key)) => {
                let found = match self.unique_read.get(key) {
                    Some(cached) => cached.clone(),
                    None => {
                        let e = self.store.get(Table::Ident, key).await?;
                        let id = e.map(|e| index_value(&e.value)).transpose()?;
                        self.unique_read.insert(key.clone(), id.clone());
                        id
                    }
                };
                candidates.extend(found);
            }
            (Identifier::Email(_) | Identifier::Phone(_), Some(prefix)) => {
                for (key, _) in self.store.scan(Table::Ident, prefix, MAX_SHARED).await? {
                    if let Some(id) = ServiceId::parse(&key[prefix.len()..]) {
                        candidates.insert(id);
                    }
                }
            }
            _ => {}
        }
        // Profiles changed in this unit of work may match already (the ones that stopped
        // matching are filtered out below).
        self.refresh_overlay();
        match (ident, lookup) {
            (Identifier::External(_) | Identifier::Alias(_), Some(k)) => {
                candidates.extend(self.overlay_unique.get(&k).into_iter().flatten().cloned());
            }
            (_, Some(k)) => {
                for map in [&self.overlay, &self.settled] {
                    for (_, ids) in map.range(k.clone()..).take_while(|(key, _)| key.starts_with(&k)) {
                        candidates.extend(ids.iter().cloned());
                    }
                }
            }
            (_, None) => {}
        }
        let mut out = Vec::new();
        for id in candidates {
            if self.profile(&id).await?.is_some_and(|p| matches(p, ident)) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Reads, in a round trip or two, the profiles that unique identifiers (external
    /// ids, aliases) and service ids name, so that applying a batch of queued jobs does
    /// not pay one store read per object.
    pub async fn prefetch(&mut self, idents: &[Identifier]) -> Result<(), StoreError> {
        let mut keys: Vec<String> = idents
            .iter()
            .filter_map(|i| unique_key(&self.ws, i))
            .filter(|k| !self.unique_read.contains_key(k))
            .collect();
        keys.sort();
        keys.dedup();
        let profiles = &self.profiles;
        let found = self.store.get_named(&keys, |id| profiles.contains_key(id)).await?;
        for (key, found) in keys.iter().zip(found) {
            let Some((entry, profile)) = found else {
                self.unique_read.insert(key.clone(), None);
                continue;
            };
            let id = index_value(&entry.value)?;
            // A profile this unit of work holds already is as it left it, not as stored
            // (and was not read).
            if !self.profiles.contains_key(&id) {
                self.profiles.insert(id.clone(), Slot::read(profile)?);
            }
            self.unique_read.insert(key.clone(), Some(id));
        }
        let mut ids: BTreeSet<ServiceId> = BTreeSet::new();
        for i in idents {
            if let Identifier::Service(id) = i {
                ids.insert(id.clone());
            }
        }
        let ids: Vec<ServiceId> = ids.into_iter().filter(|id| !self.profiles.contains_key(id)).collect();
        let profile_keys: Vec<String> = ids.iter().map(|id| profile_key(&self.ws, id)).collect();
        for (id, entry) in ids.into_iter().zip(self.store.get_many(Table::Profile, &profile_keys).await?) {
            self.profiles.insert(id, Slot::read(entry)?);
        }
        Ok(())
    }

    fn refresh_overlay(&mut self) {
        for id in std::mem::take(&mut self.stale) {
            for (k, unique) in self.overlay_keys.remove(&id).unwrap_or_default() {
                if unique {
                    if let Some(ids) = self.overlay_unique.get_mut(&k) {
                        ids.retain(|other| other != &id);
                        if ids.is_empty() {
                            self.overlay_unique.remove(&k);
                        }
                    }
                } else if let Some(set) = self.overlay.get_mut(&k) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.overlay.remove(&k);
                    }
                }
            }
            // Only profiles whose identity differs from the stored one need to be in
            // the overlay: the store's index finds the others.
            let keys: Vec<(String, bool)> = match self.profiles.get(&id) {
                Some(slot @ Slot { doc: Some(p), .. }) if !slot.identity_unchanged() => {
                    index_entries(&self.ws, p).into_iter().collect()
                }
                _ => Vec::new(),
            };
            if keys.is_empty() {
                continue;
            }
            for (k, unique) in &keys {
                if *unique {
                    self.overlay_unique.entry(k.clone()).or_default().push(id.clone());
                } else {
                    self.overlay.entry(k.clone()).or_default().insert(id.clone());
                }
            }
            self.overlay_keys.insert(id, keys);
        }
    }

    /// The one profile a unique identifier names, if any.
    pub async fn resolve_one(&mut self, ident: &Identifier) -> Result<Option<ServiceId>, StoreError> {
        Ok(self.resolve(ident).await?.into_iter().next())
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
        let touched = std::mem::take(&mut self.touched);
        touched.iter().find_map(|id| self.profiles.get(id).and_then(|s| s.doc.as_ref()).and_then(Profile::size_error))
    }

    /// Forgets which profiles were changed (for a unit of work whose bounds were
    /// checked before: the queue applier's).
    pub fn untouch(&mut self) {
        self.touched.clear();
    }

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
        Ok(self.settle_retiring()?.0)
    }

    /// [`Tx::settle`], handing back what it lets go of (the profiles the batch
    /// before settled, and what is remembered of it) instead of freeing it, so a
    /// caller with a spare thread frees it there: freeing a batch's profiles and
    /// their attribute maps was a tenth of a warehouse sync's building thread (perf).
    pub fn settle_retiring(&mut self) -> Result<(ChangeSet, Retired), StoreError> {
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
        let slots: Vec<(ServiceId, Slot)> = self.profiles.extract_if(|_, slot| !slot.dirty).collect();
        for (id, slot) in &mut self.profiles {
            slot.version = slot.doc.as_ref().map(|_| next_version(slot.version));
            slot.stored = slot.doc.as_ref().map(Identity::of);
            slot.stored_large = large_now.contains(id);
            slot.dirty = false;
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
        let retired = Retired {
            _slots: slots,
            _unique_read: std::mem::replace(&mut self.unique_read, unique_read),
            _settled: std::mem::replace(&mut self.settled, settled),
            _overlay: std::mem::take(&mut self.overlay),
            _overlay_unique: take_sized(&mut self.overlay_unique),
            _overlay_keys: take_sized(&mut self.overlay_keys),
        };
        self.stale.clear();
        self.touched.clear();
        Ok((changes, retired))
    }

    /// The change set, the profiles it stores large, and the index entries of the
    /// profiles whose identifiers it changes.
    fn changes(&self) -> Result<Changes, StoreError> {
        let mut ops = Vec::new();
        let mut large_now = HashSet::new();
        let mut moved = Vec::new();
        // By service id, so a change set does not depend on hashing.
        let mut dirty: Vec<(&ServiceId, &Slot)> = self.profiles.iter().filter(|(_, slot)| slot.dirty).collect();
        dirty.sort_unstable_by(|a, b| a.0.cmp(b.0));
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
