//! What acknowledged jobs will add to each user once applied: the ledger that lets
//! `/users/track` refuse, at acknowledgement, a request that would take a profile
//! over a bound on its size ([`crate::users::profile::Profile::size_error`]) counting
//! what is already queued for that user, so that a job acknowledged with `201` is
//! always applied whole and never set aside.
//!
//! Growth is kept per target identifier (external id, alias, service id), per
//! operation: added when a request is acknowledged (before its job is queued, so the
//! applier can never see a job whose growth is not counted), removed when the
//! operation is applied, in order or early. At its first use an engine counts the
//! jobs already queued (they survive a restart).
//!
//! What it does not see: requests naming one profile by two different identifiers
//! (an alias and an external id, an email and an external id) are counted apart.
//! The applier applies such a job anyway: a profile may then pass a bound by one
//! request's growth, which later requests are refused for.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::parse::{AttrUpdate, TrackJob, TrackOp};
use crate::ids::{Identifier, WorkspaceName};
use crate::repo::codec::decode;
use crate::repo::keys::{profile_key, shared_prefix, unique_key};
use crate::store::{Store, StoreError, Table, MAX_SCAN};

/// One operation of a queued job: its sequence number and its index in the job.
pub type OpKey = (u64, u32);

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
            bytes: self.bytes + o.bytes,
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
                        g.bytes += key.len() + json_len(value) + PER_UPDATE_BYTES;
                    }
                }
                g
            }
            TrackOp::Event { .. } => Growth { events: 1, ..Growth::default() },
            TrackOp::Purchase { .. } => Growth { purchases: 1, ..Growth::default() },
        }
    }
}

/// The length of a value's JSON, without keeping it.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing our own values into a counter cannot fail; if it did, count big.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX / 4,
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

#[derive(Default)]
struct State {
    loaded: bool,
    keys: HashMap<String, Counts>,
    /// Pending operations by queue position, with their key and growth.
    ops: BTreeMap<OpKey, (String, Growth)>,
    /// Reserved by requests whose jobs are being queued (no position yet).
    reserved: HashMap<u64, Vec<(u32, String, Growth)>>,
    next_reservation: u64,
    births: u64,
    /// The queue cursor: every job at or before it is applied.
    through: u64,
}

/// A request's reservation, until its job has a queue position.
#[derive(Debug)]
pub struct Reservation(u64);

/// Each target's counts as seen before the stored profiles were read.
pub struct Snapshot(Vec<(String, Counts)>);

/// The pending growth of every user with queued jobs, for one engine.
#[derive(Default)]
pub struct Ledger {
    state: Mutex<State>,
    loading: futures_util::lock::Mutex<()>,
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts the jobs already queued, once per engine.
    pub async fn load<S: Store>(&self, store: &S) -> Result<(), StoreError> {
        if self.lock().loaded {
            return Ok(());
        }
        let _loading = self.loading.lock().await;
        if self.lock().loaded {
            return Ok(());
        }
        let mut early = std::collections::BTreeSet::new();
        for (key, _) in store.scan(Table::QueueEarly, "", MAX_SCAN).await? {
            if let Some((seq, op)) = key.split_once('/') {
                if let (Ok(seq), Ok(op)) = (seq.parse::<u64>(), op.parse::<u32>()) {
                    early.insert((seq, op));
                }
            }
        }
        let mut found: Vec<(OpKey, String, Growth)> = Vec::new();
        let mut after = 0;
        loop {
            let jobs = store.queued(after, LOAD_CHUNK).await?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for q in jobs {
                let Ok(job) = decode::<TrackJob>(&q.job) else { continue };
                for (i, op) in job.ops.iter().enumerate() {
                    let at = (q.seq, i as u32);
                    if !early.contains(&at) {
                        found.push((at, target_key(&job.workspace, &op.target().ident), Growth::of(op)));
                    }
                }
            }
            after = last;
        }
        let mut state = self.lock();
        for (at, key, growth) in found {
            // Applied meanwhile (the applier moved the cursor past it): not pending.
            if at.0 > state.through {
                state.add(key.clone(), growth);
                state.ops.insert(at, (key, growth));
            }
        }
        state.loaded = true;
        Ok(())
    }

    /// The counts of `keys` now: taken before the stored profiles are read, so that
    /// an operation applied in between is counted twice rather than not at all.
    pub fn snapshot(&self, keys: &[String]) -> Snapshot {
        let state = self.lock();
        Snapshot(keys.iter().map(|k| (k.clone(), state.keys.get(k).copied().unwrap_or_default())).collect())
    }

    /// Reserves `growth` (per operation index and key) when `fits(pending, own)`
    /// holds for every key: its pending growth (as of the snapshot, plus whatever
    /// was added since) and this request's; `None` when it does not.
    pub fn reserve(
        &self,
        snapshot: &Snapshot,
        growth: Vec<(u32, String, Growth)>,
        fits: impl Fn(Growth, Growth) -> bool,
    ) -> Option<Reservation> {
        let mut state = self.lock();
        let mut mine: HashMap<&str, Growth> = HashMap::new();
        for (_, key, g) in &growth {
            let sum = mine.entry(key.as_str()).or_default();
            *sum = sum.plus(*g);
        }
        for (key, then) in &snapshot.0 {
            let now = state.keys.get(key).copied().unwrap_or_default();
            let since = if now.born == then.born { now.added.minus(then.added) } else { now.added };
            let pending = then.pending.plus(since);
            let own = mine.get(key.as_str()).copied().unwrap_or_default();
            if !fits(pending, own) {
                return None;
            }
        }
        for (_, key, g) in &growth {
            state.add(key.clone(), *g);
        }
        let id = state.next_reservation;
        state.next_reservation += 1;
        state.reserved.insert(id, growth);
        Some(Reservation(id))
    }

    /// The reserved job was queued at `seq`.
    pub fn queued(&self, reservation: Reservation, seq: u64) {
        let mut state = self.lock();
        let Some(ops) = state.reserved.remove(&reservation.0) else { return };
        for (op, key, growth) in ops {
            if seq <= state.through {
                // Applied before this call: nothing pending.
                state.sub(&key, growth);
            } else {
                state.ops.insert((seq, op), (key, growth));
            }
        }
    }

    /// The reserved job could not be queued: nothing of it is pending.
    pub fn cancel(&self, reservation: Reservation) {
        let mut state = self.lock();
        for (_, key, growth) in state.reserved.remove(&reservation.0).unwrap_or_default() {
            state.sub(&key, growth);
        }
    }

    /// The queue cursor passed `through`.
    pub fn applied_through(&self, through: u64) {
        let mut state = self.lock();
        state.through = state.through.max(through);
        let rest = state.ops.split_off(&(through + 1, 0));
        let done = std::mem::replace(&mut state.ops, rest);
        for (_, (key, growth)) in done {
            state.sub(&key, growth);
        }
    }

    /// These operations were applied ahead of the queue.
    pub fn applied_early(&self, keys: &[OpKey]) {
        let mut state = self.lock();
        for at in keys {
            if let Some((key, growth)) = state.ops.remove(at) {
                state.sub(&key, growth);
            }
        }
    }
}

impl State {
    fn add(&mut self, key: String, growth: Growth) {
        let births = &mut self.births;
        let counts = self.keys.entry(key).or_insert_with(|| {
            *births += 1;
            Counts { born: *births, ..Counts::default() }
        });
        counts.pending = counts.pending.plus(growth);
        counts.added = counts.added.plus(growth);
    }

    fn sub(&mut self, key: &str, growth: Growth) {
        if let Some(counts) = self.keys.get_mut(key) {
            counts.pending = counts.pending.minus(growth);
            if counts.pending == Growth::default() {
                // Forgotten once nothing is pending (the map stays the size of the
                // backlog); a reservation against an older snapshot sees a new entry.
                self.keys.remove(key);
            }
        }
    }
}
