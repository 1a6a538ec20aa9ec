//! What track operations add to a profile, as the ledger ([`super::ledger`]) counts
//! it: each operation's names (custom attributes, event names, products) and the
//! bytes their values may take, and a target's growth from its pending names.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use super::parse::{AttrUpdate, TrackOp};
use crate::profile::custom::encoded_len;

/// Bytes counted for a custom update besides its value: the key's JSON and an
/// increment's growth of at most 20 digits.
const PER_UPDATE_BYTES: usize = 40;

/// What operations may add to one profile, as upper bounds: each counts a custom
/// attribute, event name or product once however many pending operations name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Growth {
    /// Custom attributes.
    pub custom: usize,
    /// Bytes of custom attributes.
    pub bytes: usize,
    /// Custom event names.
    pub events: usize,
    /// Purchased products.
    pub purchases: usize,
}

impl Growth {
    /// Both together.
    pub fn plus(self, o: Growth) -> Growth {
        Growth {
            custom: self.custom + o.custom,
            bytes: self.bytes.saturating_add(o.bytes),
            events: self.events + o.events,
            purchases: self.purchases + o.purchases,
        }
    }

    /// One more distinct name of `kind`.
    pub(super) fn count(&mut self, kind: Kind) {
        match kind {
            Kind::Custom => self.custom += 1,
            Kind::Event => self.events += 1,
            Kind::Product => self.purchases += 1,
        }
    }
}

/// What a name adds to a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Custom,
    Event,
    Product,
}

/// One name an operation adds to its profile, and what its value may take: `set`
/// bytes for an update that replaces the value (the largest of a name's pending
/// ones counts), `appended` for one that adds to it (all of them count).
#[derive(Clone, Copy, Debug)]
pub(super) struct Name {
    pub(super) kind: Kind,
    pub(super) hash: u64,
    pub(super) set: u32,
    pub(super) appended: u32,
}

/// The names operations add to their profiles, for the ledger.
#[derive(Clone, Debug, Default)]
pub struct Names(pub(super) Vec<Name>);

/// A byte count kept in 32 bits: past 4 GiB it stays there, still over every bound.
fn bytes32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Names {
    /// The names `op` adds (`hasher` keys the names' hashes: see [`Ledger`]).
    pub(super) fn of(op: &TrackOp, hasher: &RandomState) -> Names {
        let name = |kind: Kind, text: &str, set: usize, appended: usize| Name {
            kind,
            hash: hasher.hash_one((kind, text)),
            set: bytes32(set),
            appended: bytes32(appended),
        };
        match op {
            TrackOp::Attributes { updates, .. } => Names(
                updates
                    .iter()
                    .filter_map(|u| match u {
                        AttrUpdate::Custom(key, value) => {
                            let base = key.len() + PER_UPDATE_BYTES;
                            let len = encoded_len(value);
                            Some(if value.appends() {
                                name(Kind::Custom, key, base, len)
                            } else {
                                name(Kind::Custom, key, base.saturating_add(len), 0)
                            })
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            TrackOp::Event { name: event, .. } => Names(vec![name(Kind::Event, event, 0, 0)]),
            TrackOp::Purchase { product_id, .. } => Names(vec![name(Kind::Product, product_id, 0, 0)]),
        }
    }
}

/// How many pending operations name one name of one target, and the bytes its
/// value may take ([`Name`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct NameCount {
    pub(super) kind: Kind,
    pub(super) ops: u32,
    pub(super) set: u32,
    pub(super) appended: u32,
}

impl NameCount {
    pub(super) fn bytes(&self) -> usize {
        self.set as usize + self.appended as usize
    }
}

/// Counts one more operation naming `n` in a target's names (in hash order): the
/// larger replacing value, the appended sizes summed.
pub(super) fn count_name(names: &mut Vec<(u64, NameCount)>, n: &Name) {
    let i = match names.binary_search_by_key(&n.hash, |&(h, _)| h) {
        Ok(i) => i,
        Err(i) => {
            names.insert(i, (n.hash, NameCount { kind: n.kind, ops: 0, set: 0, appended: 0 }));
            i
        }
    };
    let c = &mut names[i].1;
    c.ops += 1;
    c.set = c.set.max(n.set);
    c.appended = c.appended.saturating_add(n.appended);
}

/// The growth of one target's names: each once, custom bytes summed.
pub(super) fn growth<'a>(names: impl IntoIterator<Item = &'a NameCount>) -> Growth {
    let mut g = Growth::default();
    for c in names {
        g.count(c.kind);
        if c.kind == Kind::Custom {
            g.bytes = g.bytes.saturating_add(c.bytes());
        }
    }
    g
}
