//! Typed access to the document store, and [`Tx`], the unit of work every endpoint
//! uses: it caches what it read (with versions), collects changes, and turns them
//! into one [`ChangeSet`] whose expectations make concurrent requests retry instead
//! of losing each other's updates.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::WorkspaceName;
use crate::error::ApiError;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::profile::Profile;
use crate::store::{next_version, ChangeSet, Expect, Op, Store, StoreError, Table};

/// Separates the parts of a store key; identifiers may not contain control characters.
pub const SEP: char = '\u{1f}';

/// The store key of a profile.
pub fn profile_key(ws: &WorkspaceName, id: &ServiceId) -> String {
    format!("{}{SEP}{}", ws.as_str(), id.as_str())
}

/// The index key of a unique identifier (external id or alias).
fn unique_key(ws: &WorkspaceName, ident: &Identifier) -> Option<String> {
    match ident {
        Identifier::External(x) => Some(format!("{}{SEP}x{SEP}{}", ws.as_str(), x.as_str())),
        Identifier::Alias(a) => Some(format!("{}{SEP}a{SEP}{}{SEP}{}", ws.as_str(), a.alias_label, a.alias_name)),
        _ => None,
    }
}

/// The index prefix of a shared identifier (email or phone); entries add the service id.
fn shared_prefix(ws: &WorkspaceName, ident: &Identifier) -> Option<String> {
    match ident {
        Identifier::Email(e) => Some(format!("{}{SEP}e{SEP}{}{SEP}", ws.as_str(), e.as_str())),
        Identifier::Phone(p) => Some(format!("{}{SEP}p{SEP}{}{SEP}", ws.as_str(), p.as_str())),
        _ => None,
    }
}

/// The identifying fields of a profile: everything its index entries derive from.
/// Kept as read, so that a profile whose identity did not change costs no index
/// work (most updates change attributes, not identifiers).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    external_id: Option<ExternalId>,
    aliases: BTreeMap<String, String>,
    email: Option<Email>,
    phone: Option<Phone>,
}

impl Identity {
    fn of(p: &Profile) -> Identity {
        Identity {
            external_id: p.external_id.clone(),
            aliases: p.aliases.clone(),
            email: p.email.clone(),
            phone: p.phone.clone(),
        }
    }

    /// True when `p` has exactly this identity (compared without copying).
    fn same_as(&self, p: &Profile) -> bool {
        self.external_id == p.external_id && self.aliases == p.aliases && self.email == p.email && self.phone == p.phone
    }

    /// The index entries this identity implies for profile `id`: key → unique?
    fn index_entries(&self, ws: &WorkspaceName, id: &ServiceId) -> BTreeMap<String, bool> {
        let mut out = BTreeMap::new();
        if let Some(x) = &self.external_id {
            if let Some(k) = unique_key(ws, &Identifier::External(x.clone())) {
                out.insert(k, true);
            }
        }
        for (label, name) in &self.aliases {
            let a = UserAlias { alias_name: name.clone(), alias_label: label.clone() };
            if let Some(k) = unique_key(ws, &Identifier::Alias(a)) {
                out.insert(k, true);
            }
        }
        if let Some(e) = &self.email {
            if let Some(prefix) = shared_prefix(ws, &Identifier::Email(e.clone())) {
                out.insert(format!("{prefix}{}", id.as_str()), false);
            }
        }
        if let Some(ph) = &self.phone {
            if let Some(prefix) = shared_prefix(ws, &Identifier::Phone(ph.clone())) {
                out.insert(format!("{prefix}{}", id.as_str()), false);
            }
        }
        out
    }
}

/// The index entries a profile implies.
fn index_entries(ws: &WorkspaceName, p: &Profile) -> BTreeMap<String, bool> {
    Identity::of(p).index_entries(ws, &p.id)
}

/// The service id an identifier index entry points to.
fn index_value(bytes: &[u8]) -> Result<ServiceId, StoreError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(ServiceId::parse)
        .ok_or_else(|| StoreError("corrupt identifier index entry".into()))
}

/// Decodes a stored JSON document; a corrupt document is a storage error, not a panic.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError(format!("corrupt document: {e}")))
}

/// Encodes a document.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// Most documents a scan of one shared identifier returns (users sharing an email).
pub const MAX_SHARED: usize = 1000;

struct Slot {
    /// Version read from the store (None: absent when read).
    version: Option<u64>,
    /// Identity as stored when read (None: absent when read).
    stored: Option<Identity>,
    /// Current content (None: absent or deleted).
    doc: Option<Profile>,
    dirty: bool,
}

impl Slot {
    /// True when the store's index entries for this profile are still right.
    fn identity_unchanged(&self) -> bool {
        match (&self.stored, &self.doc) {
            (Some(stored), Some(p)) => stored.same_as(p),
            (None, None) => true,
            _ => false,
        }
    }
}

/// A unit of work over one workspace.
pub struct Tx<'s, S: Store> {
    store: &'s S,
    ws: WorkspaceName,
    /// Hashed, not ordered: a batch of queued jobs touches thousands of profiles, each
    /// looked up several times; `changes` puts them in order.
    profiles: HashMap<ServiceId, Slot>,
    docs: BTreeMap<(Table, String), DocSlot>,
    /// Index entries of the profiles changed in this unit of work, so `resolve` finds
    /// identifiers they gained without scanning every loaded profile (a batch of
    /// queued jobs loads thousands).
    overlay: BTreeMap<String, BTreeSet<ServiceId>>,
    /// Entries each changed profile has in `overlay`.
    overlay_keys: BTreeMap<ServiceId, Vec<String>>,
    /// Profiles handed out for change since the overlay was last refreshed.
    stale: HashSet<ServiceId>,
    /// Unique-identifier index entries already read from the store.
    unique_read: BTreeMap<String, Option<ServiceId>>,
    /// Index entries of the profiles whose identifiers changed in the change set last
    /// settled ([`Tx::settle`]): that commit may not have landed, so the store's index
    /// may not show them yet (removed entries need nothing: `resolve` checks every
    /// candidate against the profile itself).
    settled: BTreeMap<String, BTreeSet<ServiceId>>,
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
            overlay_keys: BTreeMap::new(),
            stale: HashSet::new(),
            unique_read: BTreeMap::new(),
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
        let slot = match entry {
            Some(e) => {
                let doc: Profile = decode(&e.value)?;
                Slot { version: Some(e.version), stored: Some(Identity::of(&doc)), doc: Some(doc), dirty: false }
            }
            None => Slot { version: None, stored: None, doc: None, dirty: false },
        };
        self.profiles.insert(id.clone(), slot);
        Ok(())
    }

    /// Reads a profile (as changed so far in this unit of work).
    pub async fn profile(&mut self, id: &ServiceId) -> Result<Option<&Profile>, StoreError> {
        self.load(id).await?;
        Ok(self.profiles.get(id).and_then(|s| s.doc.as_ref()))
    }

    /// A profile to change; it is written back at commit.
    pub async fn profile_mut(&mut self, id: &ServiceId) -> Result<Option<&mut Profile>, StoreError> {
        self.load(id).await?;
        if !self.stale.contains(id) {
            self.stale.insert(id.clone());
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
        let slot = self.profiles.entry(id).or_insert(Slot { version: None, stored: None, doc: None, dirty: true });
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
        if let Some(k) = lookup {
            for map in [&self.overlay, &self.settled] {
                for (_, ids) in map.range(k.clone()..).take_while(|(key, _)| key.starts_with(&k)) {
                    candidates.extend(ids.iter().cloned());
                }
            }
        }
        let mut out = Vec::new();
        for id in candidates {
            if self.profile(&id).await?.is_some_and(|p| matches(p, ident)) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Reads, in two round trips, the profiles that unique identifiers (external ids,
    /// aliases) and service ids name, so that applying a batch of queued jobs does not
    /// pay one store read per object.
    pub async fn prefetch(&mut self, idents: &[Identifier]) -> Result<(), StoreError> {
        let mut keys: Vec<String> = idents
            .iter()
            .filter_map(|i| unique_key(&self.ws, i))
            .filter(|k| !self.unique_read.contains_key(k))
            .collect();
        keys.sort();
        keys.dedup();
        let mut ids: BTreeSet<ServiceId> = BTreeSet::new();
        for (key, entry) in keys.iter().zip(self.store.get_many(Table::Ident, &keys).await?) {
            let id = entry.map(|e| index_value(&e.value)).transpose()?;
            ids.extend(id.clone());
            self.unique_read.insert(key.clone(), id);
        }
        for i in idents {
            if let Identifier::Service(id) = i {
                ids.insert(id.clone());
            }
        }
        let ids: Vec<ServiceId> = ids.into_iter().filter(|id| !self.profiles.contains_key(id)).collect();
        let profile_keys: Vec<String> = ids.iter().map(|id| profile_key(&self.ws, id)).collect();
        for (id, entry) in ids.into_iter().zip(self.store.get_many(Table::Profile, &profile_keys).await?) {
            let slot = match entry {
                Some(e) => {
                    let doc: Profile = decode(&e.value)?;
                    Slot { version: Some(e.version), stored: Some(Identity::of(&doc)), doc: Some(doc), dirty: false }
                }
                None => Slot { version: None, stored: None, doc: None, dirty: false },
            };
            self.profiles.insert(id, slot);
        }
        Ok(())
    }

    fn refresh_overlay(&mut self) {
        for id in std::mem::take(&mut self.stale) {
            for k in self.overlay_keys.remove(&id).unwrap_or_default() {
                if let Some(set) = self.overlay.get_mut(&k) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.overlay.remove(&k);
                    }
                }
            }
            // Only profiles whose identity differs from the stored one need to be in
            // the overlay: the store's index finds the others.
            let keys: Vec<String> = match self.profiles.get(&id) {
                Some(slot @ Slot { doc: Some(p), .. }) if !slot.identity_unchanged() => {
                    index_entries(&self.ws, p).into_keys().collect()
                }
                _ => Vec::new(),
            };
            if keys.is_empty() {
                continue;
            }
            for k in &keys {
                self.overlay.entry(k.clone()).or_default().insert(id.clone());
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
    pub fn put_doc<T: Serialize>(&mut self, table: Table, key: &str, value: &T) {
        self.set_doc(table, key, Some(encode(value)));
    }

    /// Deletes a plain document at commit.
    pub fn delete_doc(&mut self, table: Table, key: &str) {
        self.set_doc(table, key, None);
    }

    fn set_doc(&mut self, table: Table, key: &str, value: Option<Vec<u8>>) {
        let slot =
            self.docs.entry((table, key.to_string())).or_insert(DocSlot { read: None, value: None, dirty: false });
        slot.value = value;
        slot.dirty = true;
    }

    /// True when something would be written.
    pub fn has_changes(&self) -> bool {
        self.profiles.values().any(|s| s.dirty) || self.docs.values().any(|d| d.dirty)
    }

    /// Turns the collected changes into one change set.
    pub fn into_changes(self) -> ChangeSet {
        self.changes()
    }

    /// Turns the changes collected so far into a change set and carries on as if it
    /// had been committed: written documents stay, with the versions the store gives
    /// them, and everything merely read is forgotten. The queue applier builds its next
    /// batch on top of one still being committed this way; should that commit fail,
    /// this unit of work is void and must be dropped.
    pub fn settle(&mut self) -> ChangeSet {
        let changes = self.changes();
        let ws = &self.ws;
        // Unique identifiers that changed owner: the store's index may not say so until
        // the commit lands, so they are remembered here (removed ones as absent).
        let mut unique_read: BTreeMap<String, Option<ServiceId>> = BTreeMap::new();
        let mut settled: BTreeMap<String, BTreeSet<ServiceId>> = BTreeMap::new();
        self.profiles.retain(|_, slot| slot.dirty);
        for (id, slot) in &mut self.profiles {
            if !slot.identity_unchanged() {
                for (k, unique) in slot.stored.as_ref().map(|s| s.index_entries(ws, id)).unwrap_or_default() {
                    if unique {
                        unique_read.entry(k).or_insert(None);
                    }
                }
                for (k, unique) in slot.doc.as_ref().map(|p| index_entries(ws, p)).unwrap_or_default() {
                    if unique {
                        unique_read.insert(k.clone(), Some(id.clone()));
                    }
                    settled.entry(k).or_default().insert(id.clone());
                }
            }
            slot.version = slot.doc.as_ref().map(|_| next_version(slot.version));
            slot.stored = slot.doc.as_ref().map(Identity::of);
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
        self.unique_read = unique_read;
        self.settled = settled;
        self.overlay.clear();
        self.overlay_keys.clear();
        self.stale.clear();
        changes
    }

    fn changes(&self) -> ChangeSet {
        let mut ops = Vec::new();
        // By service id, so a change set does not depend on hashing.
        let mut dirty: Vec<(&ServiceId, &Slot)> = self.profiles.iter().filter(|(_, slot)| slot.dirty).collect();
        dirty.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (id, slot) in dirty {
            let key = profile_key(&self.ws, id);
            let expect = slot.version.map_or(Expect::Absent, Expect::Version);
            let (stored_index, new_index) = if slot.identity_unchanged() {
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
            match &slot.doc {
                Some(p) => ops.push(Op::Put { table: Table::Profile, key, value: encode(p), expect }),
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
        // profiles in one request does not trip its own uniqueness check.
        ops.sort_by_key(|op| match op {
            Op::Delete { table: Table::Ident, .. } => 0,
            _ => 1,
        });
        ChangeSet { ops, ack: None }
    }

    /// Commits the collected changes.
    pub async fn commit(self) -> Result<(), ApiError> {
        let store = self.store;
        let changes = self.into_changes();
        if changes.is_empty() {
            return Ok(());
        }
        store.commit(changes).await.map_err(ApiError::from)
    }
}

/// Attempts before a request gives up on contention (503).
pub const MAX_ATTEMPTS: u32 = 16;

/// Runs one request's read-compute-commit in a fresh unit of work, again from the
/// start whenever another request committed first (an expectation failed), so
/// concurrent requests never lose each other's updates. `work` gets the unit of work
/// and an id generator unique to the attempt; its value is returned once the changes
/// are committed (nothing is written when it fails or changes nothing).
pub async fn transact<'s, S: Store, T>(
    store: &'s S,
    ws: &WorkspaceName,
    seed: [u8; 16],
    mut work: impl AsyncFnMut(&mut Tx<'s, S>, &mut crate::ids::IdGen) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    for attempt in 0..MAX_ATTEMPTS {
        let mut ids = crate::ids::IdGen::derive(seed, "request", u64::from(attempt));
        let mut tx = Tx::new(store, ws.clone());
        let out = work(&mut tx, &mut ids).await?;
        let changes = tx.into_changes();
        if changes.is_empty() {
            return Ok(out);
        }
        match store.commit(changes).await {
            Ok(()) => return Ok(out),
            Err(crate::store::CommitError::Conflict) => continue,
            Err(crate::store::CommitError::Store(e)) => return Err(e.into()),
        }
    }
    Err(ApiError::Busy)
}

/// True when the profile carries the identifier.
pub fn matches(p: &Profile, ident: &Identifier) -> bool {
    match ident {
        Identifier::External(x) => p.external_id.as_ref() == Some(x),
        Identifier::Alias(a) => p.has_alias(a),
        Identifier::Service(id) => &p.id == id,
        Identifier::Email(e) => p.email.as_ref() == Some(e),
        Identifier::Phone(ph) => p.phone.as_ref() == Some(ph),
    }
}

/// Convenience constructors for identifiers from plain strings (tests, tools).
pub fn external(x: &str) -> Option<Identifier> {
    ExternalId::parse(x).map(Identifier::External)
}

/// An email identifier.
pub fn email(x: &str) -> Option<Identifier> {
    Email::parse(x).map(Identifier::Email)
}

/// A phone identifier.
pub fn phone(x: &str) -> Option<Identifier> {
    Phone::parse(x).map(Identifier::Phone)
}

/// An alias identifier.
pub fn alias(name: &str, label: &str) -> Identifier {
    Identifier::Alias(UserAlias { alias_name: name.into(), alias_label: label.into() })
}
