//! What acknowledged jobs will add to each user once applied: the ledger that lets
//! `/users/track` refuse, at acknowledgement, a request that would take a profile
//! over a bound on its size ([`crate::users::profile::Profile::size_error`]) counting
//! what is already queued for that user, so that a job acknowledged with `201` is
//! always applied whole and never set aside.
//!
//! Growth is kept per target identifier (external id, alias, service id, or an
//! email's or phone's index prefix), summed: added when a request is acknowledged
//! (before its job is queued, so the applier can never see a job whose growth is
//! not counted), taken off when its operations are committed, in order or early.
//! At its first use an engine counts the jobs already queued (they survive a restart).
//!
//! What it does not see: requests naming one profile by two different identifiers
//! (an alias and an external id, an email and an external id) are counted apart.
//! The applier applies such a job anyway: a profile may then pass a bound by one
//! request's growth, which later requests are refused for.

use std::collections::HashMap;
use std::sync::Mutex;

use super::parse::{AttrUpdate, TrackJob, TrackOp};
use crate::ids::{Identifier, WorkspaceName};
use crate::repo::codec::decode;
use crate::repo::keys::{profile_key, shared_prefix, unique_key};
use crate::store::{Store, StoreError};
use crate::users::custom::encoded_len;

/// Jobs read at a time while counting the queue at first use.
const LOAD_CHUNK: usize = 1000;

/// Bytes counted for a custom update besides its value: the key's JSON and an
/// increment's growth of at most 20 digits.
const PER_UPDATE_BYTES: usize = 40;

/// What operations may add to one profile, as upper bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Growth {
    /// Custom attributes (one per custom update).
    pub custom: usize,
    /// Bytes of custom attributes.
    pub bytes: usize,
    /// Custom event names (one per event).
    pub events: usize,
    /// Purchased products (one per purchase).
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

    fn minus(self, o: Growth) -> Growth {
        Growth {
            custom: self.custom.saturating_sub(o.custom),
            bytes: self.bytes.saturating_sub(o.bytes),
            events: self.events.saturating_sub(o.events),
            purchases: self.purchases.saturating_sub(o.purchases),
        }
    }

    /// What one operation may add to its target.
    pub fn of(op: &TrackOp) -> Growth {
        match op {
            TrackOp::Attributes { updates, .. } => {
                let mut g = Growth::default();
                for u in updates {
                    if let AttrUpdate::Custom(key, value) = u {
                        g.custom += 1;
                        g.bytes =
                            g.bytes.saturating_add(key.len() + PER_UPDATE_BYTES).saturating_add(encoded_len(value));
                    }
                }
                g
            }
            TrackOp::Event { .. } => Growth { events: 1, ..Growth::default() },
            TrackOp::Purchase { .. } => Growth { purchases: 1, ..Growth::default() },
        }
    }
}

/// The ledger key of an operation's target: the identifier index's key, or its
/// prefix for an email or phone (every operation naming the address counts there).
pub fn target_key(ws: &WorkspaceName, ident: &Identifier) -> String {
    match ident {
        Identifier::Service(id) => profile_key(ws, id),
        other => unique_key(ws, other).or_else(|| shared_prefix(ws, other)).unwrap_or_default(),
    }
}

/// One key's counts: what is pending, and everything added since the entry was
/// made (to tell what was added between a snapshot and a reservation).
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    pending: Growth,
    added: Growth,
    /// Which entry this is: a key's entry is dropped when nothing is pending for
    /// it, and a later one starts its `added` again. 0: no entry.
    born: u64,
}

/// A target's key, hashed: the ledger keeps one small entry per user with queued
/// operations, whatever the backlog's length. Two users sharing a hash are counted
/// together, which can only refuse more, never less.
type Slot = u64;

fn slot(key: &str) -> Slot {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

#[derive(Default)]
struct State {
    loaded: bool,
    keys: HashMap<Slot, Counts>,
    births: u64,
}

/// A request's reservation, until its job is queued or refused.
#[derive(Debug)]
pub struct Reservation(Vec<(Slot, Growth)>);

/// Each target's counts as seen before the stored profiles were read.
pub struct Snapshot(Vec<(Slot, Counts)>);

/// What applied operations added, to take off the ledger once they are committed.
#[derive(Debug, Default)]
pub struct Applied(Vec<(Slot, Growth)>);

impl Applied {
    /// The operations of `jobs`.
    pub fn of(jobs: &[(u64, TrackJob)]) -> Applied {
        Applied(
            jobs.iter()
                .flat_map(|(_, job)| {
                    job.ops.iter().map(|op| (slot(&target_key(&job.workspace, &op.target().ident)), Growth::of(op)))
                })
                .collect(),
        )
    }
}

/// The pending growth of every user with queued jobs, for one engine. Added when a
/// request is acknowledged (before its job is queued, so it is never applied before
/// it is counted); taken off when its operations are committed, by whoever applies
/// them ([`Applied`]).
#[derive(Default)]
pub struct Ledger {
    state: Mutex<State>,
    loading: futures_util::lock::Mutex<()>,
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts the jobs already queued, once per engine. Acknowledging and applying
    /// both wait for it (the backlog loads it), so nothing is taken off before it
    /// was counted.
    pub async fn load<S: Store>(&self, store: &S) -> Result<(), StoreError> {
        if self.lock().loaded {
            return Ok(());
        }
        let _loading = self.loading.lock().await;
        if self.lock().loaded {
            return Ok(());
        }
        let early = super::early::read_early(store).await?;
        let mut found: Vec<(Slot, Growth)> = Vec::new();
        let mut after = 0;
        loop {
            let jobs = store.queued(after, LOAD_CHUNK).await?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for q in jobs {
                let Ok(job) = decode::<TrackJob>(&q.job) else { continue };
                for (i, op) in job.ops.iter().enumerate() {
                    if !early.contains(&(q.seq, i as u32)) {
                        found.push((slot(&target_key(&job.workspace, &op.target().ident)), Growth::of(op)));
                    }
                }
            }
            after = last;
        }
        let mut state = self.lock();
        for (slot, growth) in found {
            state.add(slot, growth);
        }
        state.loaded = true;
        Ok(())
    }

    /// The counts of `keys` now: taken before the stored profiles are read, so that
    /// an operation applied in between is counted twice rather than not at all.
    pub fn snapshot(&self, keys: &[String]) -> Snapshot {
        let state = self.lock();
        Snapshot(keys.iter().map(|k| slot(k)).map(|s| (s, state.keys.get(&s).copied().unwrap_or_default())).collect())
    }

    /// Reserves `growth` (per target key) when `fits(pending, own)` holds for every
    /// key: its pending growth (as of the snapshot, plus whatever was added since)
    /// and this request's; `None` when it does not.
    pub fn reserve(
        &self,
        snapshot: &Snapshot,
        growth: Vec<(String, Growth)>,
        fits: impl Fn(Growth, Growth) -> bool,
    ) -> Option<Reservation> {
        let growth: Vec<(Slot, Growth)> = growth.into_iter().map(|(k, g)| (slot(&k), g)).collect();
        let mut state = self.lock();
        let mut mine: HashMap<Slot, Growth> = HashMap::new();
        for (s, g) in &growth {
            let sum = mine.entry(*s).or_default();
            *sum = sum.plus(*g);
        }
        for (s, then) in &snapshot.0 {
            let now = state.keys.get(s).copied().unwrap_or_default();
            let since = if now.born == then.born { now.added.minus(then.added) } else { now.added };
            let pending = then.pending.plus(since);
            let own = mine.get(s).copied().unwrap_or_default();
            if !fits(pending, own) {
                return None;
            }
        }
        for (s, g) in &growth {
            state.add(*s, *g);
        }
        Some(Reservation(growth))
    }

    /// The reserved job could not be queued: nothing of it is pending.
    pub fn cancel(&self, reservation: Reservation) {
        self.release(&Applied(reservation.0));
    }

    /// These operations are committed: no longer pending.
    pub fn release(&self, applied: &Applied) {
        let mut state = self.lock();
        for (s, growth) in &applied.0 {
            state.sub(*s, *growth);
        }
    }
}

impl State {
    fn add(&mut self, slot: Slot, growth: Growth) {
        let births = &mut self.births;
        let counts = self.keys.entry(slot).or_insert_with(|| {
            *births += 1;
            Counts { born: *births, ..Counts::default() }
        });
        counts.pending = counts.pending.plus(growth);
        counts.added = counts.added.plus(growth);
    }

    fn sub(&mut self, slot: Slot, growth: Growth) {
        if let Some(counts) = self.keys.get_mut(&slot) {
            counts.pending = counts.pending.minus(growth);
            if counts.pending == Growth::default() {
                // Forgotten once nothing is pending (the map stays the size of the
                // set of users with queued work); a reservation against an older
                // snapshot sees a new entry.
                self.keys.remove(&slot);
            }
        }
    }
}
