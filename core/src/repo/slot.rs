//! A profile as a unit of work holds it: what the store had (version, identity)
//! and what it is now.

use super::codec::decode;
use super::index::Identity;
use super::large;
use crate::profile::Profile;
use crate::store::{Entry, StoreError};

pub(super) struct Slot {
    /// Version read from the store (None: absent when read).
    pub(super) version: Option<u64>,
    /// Identity as stored when read (None: absent when read).
    pub(super) stored: Option<Identity>,
    /// Current content (None: absent or deleted).
    pub(super) doc: Option<Profile>,
    pub(super) dirty: bool,
    /// True when the stored document is large: its entries are in the registry of
    /// large profiles ([`large`]).
    pub(super) stored_large: bool,
    /// Listed in the unit of work's `stale` (its overlay entries are to be
    /// refreshed) and `touched` (its size is to be checked). Marked here so that a
    /// profile changed once per attribute is listed once and found by one lookup:
    /// the sets' five hashings per change were 3% of a warehouse sync's building
    /// thread (callgrind).
    pub(super) stale: bool,
    pub(super) touched: bool,
}

impl Slot {
    /// A slot for what the store holds for a profile.
    pub(super) fn read(entry: Option<Entry>) -> Result<Slot, StoreError> {
        Ok(match entry {
            Some(e) => {
                let doc: Profile = decode(&e.value)?;
                Slot {
                    version: Some(e.version),
                    stored: Some(Identity::of(&doc)),
                    doc: Some(doc),
                    dirty: false,
                    stored_large: large::is_large(e.value.len()),
                    stale: false,
                    touched: false,
                }
            }
            None => Slot::absent(),
        })
    }

    /// A slot for a profile the store does not hold.
    pub(super) fn absent() -> Slot {
        Slot { version: None, stored: None, doc: None, dirty: false, stored_large: false, stale: false, touched: false }
    }

    /// True when the store's index entries for this profile are still right.
    pub(super) fn identity_unchanged(&self) -> bool {
        match (&self.stored, &self.doc) {
            (Some(stored), Some(p)) => stored.same_as(p),
            (None, None) => true,
            _ => false,
        }
    }
}
