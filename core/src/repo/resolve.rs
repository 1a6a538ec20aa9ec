//! Identifier resolution within a unit of work: which profiles an identifier names,
//! as the store holds them and as this unit of work has changed them (its overlay of
//! index entries written but not committed), with what was read prefetched in one
//! round trip.

use std::collections::BTreeSet;

use super::index::{index_entries, index_value, matches};
use super::keys::{profile_key, shared_prefix, unique_key};
use super::slot::Slot;
use super::{Tx, MAX_SHARED};
use crate::ids::{Identifier, ServiceId};
use crate::store::{Store, StoreError, Table};

impl<'s, S: Store> Tx<'s, S> {
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
        let found = if self.assume_new {
            // Checked at commit instead ([`Tx::assume_new`]).
            self.assumed.extend(keys.iter().cloned());
            keys.iter().map(|_| None).collect()
        } else {
            let profiles = &self.profiles;
            let found = self.store.get_named(&keys, |id| profiles.contains_key(id)).await?;
            self.lookups.0 += keys.len();
            self.lookups.1 += found.iter().filter(|f| f.is_some()).count();
            found
        };
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
        // Emptied, not replaced: the list keeps its room for the next changes (a new
        // list for each row of a warehouse batch was an allocation and a free a row).
        let mut stale = std::mem::take(&mut self.stale);
        for id in stale.drain(..) {
            // Only profiles whose identity differs from the stored one need to be in
            // the overlay: the store's index finds the others.
            let keys: Vec<(String, bool)> = match self.profiles.get_mut(&id) {
                Some(slot) => {
                    slot.stale = false;
                    match &slot.doc {
                        Some(p) if !slot.identity_unchanged() => index_entries(&self.ws, p).into_iter().collect(),
                        _ => Vec::new(),
                    }
                }
                None => Vec::new(),
            };
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
        self.stale = stale;
    }

    /// The one profile a unique identifier names, if any.
    pub async fn resolve_one(&mut self, ident: &Identifier) -> Result<Option<ServiceId>, StoreError> {
        Ok(self.resolve(ident).await?.into_iter().next())
    }
}
