//! What acknowledged jobs will add to each user once applied: the ledger that lets
//! `/users/track` refuse, at acknowledgement, a request that would take a profile
//! over a bound on its size ([`crate::profile::Profile::size_error`]) counting
//! what is already queued for that user, so that a job acknowledged with `201` is
//! always applied whole and never set aside.
//!
//! Growth is kept per target identifier (external id, alias, service id, or an
//! email's or phone's index prefix), by name: a custom attribute, event name or
//! product counts once however many queued operations name it (a user everyone
//! writes the same few attributes and events to no longer looks, after a thousand
//! queued jobs, as if it gained a thousand names), and a value's bytes count as its
//! largest replacing update plus every appending one. Added when a request is acknowledged
//! (before its job is queued, so the applier can never see a job whose growth is
//! not counted), taken off when its operations are committed, in order or early.
//! At its first use an engine counts the jobs already queued (they survive a restart).
//!
//! What it does not see: requests naming one profile by two different identifiers
//! (an alias and an external id, an email and an external id) are counted apart.
//! The applier applies such a job anyway: a profile may then pass a bound by one
//! request's growth, which later requests are refused for.

use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use foldhash::fast::RandomState;
use foldhash::HashMap;

use super::growth::{count_name, growth, NameCount};
pub use super::growth::{Growth, Names};
use super::parse::{TrackJob, TrackOp};
use super::partition::user_key;
use super::record;
use crate::ids::WorkspaceName;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// Jobs read at a time while counting the queue at first use.
const LOAD_CHUNK: usize = 1000;

/// After this long a count of the queued jobs begun by another request is presumed
/// abandoned ([`Ledger::load_unless_loading`]): the edge's lane presumes a silent
/// holder gone after as long.
const STALE_CLAIM_MS: i64 = 10_000;

/// A target's key, hashed (keyed as names are: see [`Ledger`]): the ledger keeps
/// one small entry per user with queued operations, whatever the backlog's length.
/// Two users sharing a hash are counted together, which can only refuse more,
/// never less.
type Slot = u64;

/// Every target's pending names: per target, one entry per name a queued operation
/// adds to it, in hash order (no empty entries), so the ledger stays the size of
/// what is pending. A hash map of small vectors, not one B-tree of (target, name):
/// with a backlog of a million users each lookup descended levels that were not in
/// the CPU's caches, and the ledger's lock is held for a request's every lookup
/// (perf, the suite's closed track load on 1M profiles: 18% of the request threads'
/// cycles in the B-tree's range search, and its lock where they slept most).
#[derive(Default)]
struct State {
    slots: HashMap<Slot, Vec<(u64, NameCount)>>,
    /// Counts the hand-overs taken in: a snapshot is of the state at one of them.
    epoch: u64,
    /// Live snapshots by the epoch they were taken at.
    readers: BTreeMap<u64, usize>,
    /// Committed operations, taken off `slots`, kept per target with the epoch
    /// they were taken in at (in that order) while a snapshot taken before then
    /// lives: a request reads its users' profiles after its snapshot and may read
    /// them before an operation pending then (or acknowledged since) is committed,
    /// so such an operation still counts when that request reserves (twice, at
    /// worst, for one its read did see). Empty while no snapshot lives. By target,
    /// so that a reservation looks only at its own targets' (under a skewed load the
    /// same users are in every batch committed).
    held: HashMap<Slot, Vec<(u64, Names)>>,
    /// The targets of each hand-over kept in `held`, by its epoch (in order): what
    /// to forget once no live snapshot predates it.
    held_order: VecDeque<(u64, Vec<Slot>)>,
}

/// Releases an applier hands over before it takes them off itself.
const RELEASED_MAX: usize = 16;

/// A map this much larger than what it holds gives its memory back.
const SHRINK_BELOW: usize = 4;

impl State {
    /// The names pending for `slot`, in hash order.
    fn of(&self, slot: Slot) -> &[(u64, NameCount)] {
        self.slots.get(&slot).map_or(&[], Vec::as_slice)
    }

    fn add(&mut self, slot: Slot, names: &Names) {
        if names.0.is_empty() {
            // Standard attributes only: nothing to count, and no empty entry.
            return;
        }
        // Sized for its first operation's names: most targets have one or two
        // pending, and a vector's first growth would hold four.
        let pending = self.slots.entry(slot).or_insert_with(|| Vec::with_capacity(names.0.len()));
        for n in &names.0 {
            count_name(pending, n);
        }
    }

    fn sub(&mut self, slot: Slot, names: &Names) {
        let Some(pending) = self.slots.get_mut(&slot) else { return };
        for n in &names.0 {
            let Ok(i) = pending.binary_search_by_key(&n.hash, |&(h, _)| h) else { continue };
            let c = &mut pending[i].1;
            c.ops -= 1;
            c.appended = c.appended.saturating_sub(n.appended);
            // A name's largest replacing value stays until its last operation goes.
            if c.ops == 0 {
                pending.remove(i);
            }
        }
        if pending.is_empty() {
            self.slots.remove(&slot);
        }
    }

    /// `sub` for each of `ops`.
    fn sub_all(&mut self, ops: &[(Slot, Names)]) {
        for (s, names) in ops {
            self.sub(*s, names);
        }
    }

    /// Takes committed operations off, keeping them in `held` while a snapshot
    /// taken before now lives, and forgets what no live snapshot predates.
    fn take_in(&mut self, released: Vec<Applied>) {
        let oldest = self.readers.keys().next().copied();
        if !released.is_empty() {
            self.epoch += 1;
            let at = self.epoch;
            for applied in released {
                self.sub_all(&applied.0);
                // Every live snapshot was taken before this hand-over.
                if oldest.is_some() {
                    let mut targets = Vec::with_capacity(applied.0.len());
                    for (s, names) in applied.0 {
                        targets.push(s);
                        self.held.entry(s).or_default().push((at, names));
                    }
                    self.held_order.push_back((at, targets));
                }
            }
            self.shrink();
        }
        while self.held_order.front().is_some_and(|(at, _)| oldest.is_none_or(|e| *at <= e)) {
            let Some((at, targets)) = self.held_order.pop_front() else { break };
            for s in targets {
                if let Some(kept) = self.held.get_mut(&s) {
                    let seen = kept.partition_point(|(a, _)| *a <= at);
                    kept.drain(..seen);
                    if kept.is_empty() {
                        self.held.remove(&s);
                    }
                }
            }
        }
    }

    /// The growth pending for `slot` as a request that took its snapshot at
    /// `epoch` must count it: pending now (`now`, as [`State::of`] gives it), and
    /// committed since the snapshot, each name once (with the larger replacing value
    /// and both appended sizes).
    fn pending_since(&self, slot: Slot, now: &[(u64, NameCount)], epoch: u64) -> Growth {
        // Held in the order taken in: those since the snapshot are the last ones.
        let since = self.held.get(&slot).map_or(&[][..], |kept| &kept[kept.partition_point(|(at, _)| *at <= epoch)..]);
        if since.is_empty() {
            return growth(now.iter().map(|(_, c)| c));
        }
        let mut names = now.to_vec();
        for (_, ns) in since {
            for n in &ns.0 {
                count_name(&mut names, n);
            }
        }
        growth(names.iter().map(|(_, c)| c))
    }

    /// Gives back the memory of a map that held many more targets than it does now.
    fn shrink(&mut self) {
        if self.slots.capacity() > 1024 && self.slots.len() * SHRINK_BELOW < self.slots.capacity() {
            self.slots.shrink_to(self.slots.len() * 2);
        }
        if self.held.capacity() > 1024 && self.held.len() * SHRINK_BELOW < self.held.capacity() {
            self.held.shrink_to(self.held.len() * 2);
        }
    }
}

/// What one request's operations add: each one's target slot and names.
pub struct Request(Vec<(Slot, Names)>);

/// A request's reservation, until its job is queued or refused.
#[derive(Debug)]
pub struct Reservation(Vec<(Slot, Names)>);

/// Taken before a request reads the stored profiles: while it lives, operations
/// committed after it was taken still count ([`State::held`]), so that what the
/// ledger holds when the request reserves covers everything its read may have missed.
pub struct Snapshot<'a> {
    ledger: &'a Ledger,
    epoch: u64,
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        let mut state = self.ledger.lock();
        if let Some(n) = state.readers.get_mut(&self.epoch) {
            *n -= 1;
            if *n == 0 {
                state.readers.remove(&self.epoch);
            }
        }
        state.take_in(Vec::new());
    }
}

/// What applied operations added, to take off the ledger once they are committed.
#[derive(Debug, Default)]
pub struct Applied(Vec<(Slot, Names)>);

/// The pending growth of every user with queued jobs, for one engine. Added when a
/// request is acknowledged (before its job is queued, so it is never applied before
/// it is counted); taken off when its operations are committed, by whoever applies
/// them ([`Applied`]).
///
/// Names are kept as 64-bit hashes keyed at random for each engine (as a `HashMap`
/// keys its own): two names of one user sharing a hash would be counted once, which
/// nobody can arrange without the key; the applier's exact check would still set
/// such a job aside rather than store a profile over a bound.
///
/// Appliers do not take committed operations off themselves: they hand them over
/// ([`Ledger::release`]) and the next request to use the ledger takes them off.
/// A native host runs its applier in the idle scheduling class, which any request
/// thread preempts: an applier preempted while it held the ledger's lock kept every
/// acknowledgement waiting until both cores fell idle (perf's `sched_switch`, the
/// suite's closed track load: the ledger's lock was where request threads slept
/// most after the queue's fsync). Handing over holds a lock only for a push.
#[derive(Default)]
pub struct Ledger {
    state: Mutex<State>,
    /// Committed operations not yet taken off `state`: whoever next takes its lock
    /// does ([`Ledger::lock`]). Lock order: `state`, then this.
    released: Mutex<Vec<Applied>>,
    /// Whether the queued jobs are counted ([`Ledger::load`]): read without the
    /// lock, since appliers ask at every turn.
    loaded: AtomicBool,
    loading: tokio::sync::Mutex<()>,
    /// When a request of a host without background threads began counting the
    /// queued jobs (ms since the epoch; 0 when none is), see [`Ledger::load_unless_loading`].
    claimed_at: AtomicI64,
    hasher: RandomState,
}

impl Ledger {
    /// The ledger's state, with everything released so far taken off.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        Self::take_off(self.state.lock().unwrap_or_else(|e| e.into_inner()), &self.released)
    }

    fn take_off<'a>(
        mut state: std::sync::MutexGuard<'a, State>,
        released: &Mutex<Vec<Applied>>,
    ) -> std::sync::MutexGuard<'a, State> {
        let released = std::mem::take(&mut *released.lock().unwrap_or_else(|e| e.into_inner()));
        state.take_in(released);
        state
    }

    /// The slot of a target's key.
    fn slot(&self, key: &str) -> Slot {
        self.hasher.hash_one(key)
    }

    /// The names operation `op` adds to its profile.
    pub fn names(&self, op: &TrackOp) -> Names {
        Names::of(op, &self.hasher)
    }

    /// What the operations of `jobs` added, to release once they are committed.
    pub fn applied(&self, jobs: &[(u64, TrackJob)]) -> Applied {
        Applied(
            jobs.iter()
                .flat_map(|(_, job)| {
                    job.ops.iter().map(|op| (self.slot(&user_key(&job.workspace, &op.target().ident)), self.names(op)))
                })
                .collect(),
        )
    }

    /// Counts the jobs already queued, once per engine. Acknowledging and applying
    /// both wait for it (the backlog loads it), so nothing is taken off before it
    /// was counted.
    pub async fn load<S: Store>(&self, store: &S) -> Result<(), StoreError> {
        if self.loaded.load(Ordering::Acquire) {
            return Ok(());
        }
        let _loading = self.loading.lock().await;
        if self.loaded.load(Ordering::Acquire) {
            return Ok(());
        }
        let found = self.count_queued(store).await?;
        self.install(&found);
        Ok(())
    }

    /// [`Ledger::load`] for a host that runs every request on one thread (the edge):
    /// false, with nothing done, while another request is counting the queued jobs.
    /// Waiting for that request here would be waiting on another request, which the
    /// edge's runtime cancels as hung (measured: 48 concurrent `/users/track` on a
    /// fresh isolate, 500s); the host runs the request again after a pause instead.
    /// A count begun [`STALE_CLAIM_MS`] ago is presumed abandoned (its request
    /// cancelled) and begun again; two counts of one queue find the same jobs
    /// (nothing is reserved or taken off before the ledger is loaded), and only the
    /// first to finish is kept.
    pub async fn load_unless_loading<S: Store>(&self, store: &S, now: Timestamp) -> Result<bool, StoreError> {
        if self.loaded.load(Ordering::Acquire) {
            return Ok(true);
        }
        let claimed = self.claimed_at.load(Ordering::Acquire);
        if claimed != 0 && now.0.saturating_sub(claimed) < STALE_CLAIM_MS {
            return Ok(false);
        }
        let mine = now.0.max(1);
        self.claimed_at.store(mine, Ordering::Release);
        let counted = self.count_queued(store).await;
        // Unless a later count took the claim over (this one was presumed abandoned).
        let _ = self.claimed_at.compare_exchange(mine, 0, Ordering::AcqRel, Ordering::Acquire);
        self.install(&counted?);
        Ok(true)
    }

    /// Every queued operation's target and names, except those applied early.
    async fn count_queued<S: Store>(&self, store: &S) -> Result<Vec<(Slot, Names)>, StoreError> {
        let early = super::early::read_early(store).await?;
        let mut found: Vec<(Slot, Names)> = Vec::new();
        let mut after = 0;
        loop {
            let jobs = store.queued(after, LOAD_CHUNK).await?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for q in jobs {
                let Ok(job) = record::decode(&q.job) else { continue };
                for (i, op) in job.ops.iter().enumerate() {
                    if !early.contains(&(q.seq, i as u32)) {
                        found.push((self.slot(&user_key(&job.workspace, &op.target().ident)), self.names(op)));
                    }
                }
            }
            after = last;
        }
        Ok(found)
    }

    /// Counts `found` in, unless a count was already kept.
    fn install(&self, found: &[(Slot, Names)]) {
        let mut state = self.lock();
        if self.loaded.load(Ordering::Acquire) {
            return;
        }
        for (slot, names) in found {
            state.add(*slot, names);
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// What `ops` (of one request in `ws`) add, per operation: its target's slot and
    /// its names, computed once for the snapshot and every try at reserving.
    pub fn request(&self, ws: &WorkspaceName, ops: &[TrackOp]) -> Request {
        Request(ops.iter().map(|op| (self.slot(&user_key(ws, &op.target().ident)), self.names(op))).collect())
    }

    /// Taken before the stored profiles are read, so that an operation committed in
    /// between is counted twice rather than not at all. Only a mark: nothing is
    /// copied (copying each target's pending names was 7% of an acknowledgement's
    /// CPU under the suite's closed track load, perf).
    pub fn snapshot(&self) -> Snapshot<'_> {
        let mut state = self.lock();
        let epoch = state.epoch;
        *state.readers.entry(epoch).or_default() += 1;
        Snapshot { ledger: self, epoch }
    }

    /// Reserves `request`'s names when `fits(pending, own)` holds for every target:
    /// its pending growth (everything pending since `snapshot` was taken, each name
    /// once) and this request's (each name once); `None` when it does not.
    pub fn reserve(
        &self,
        snapshot: &Snapshot<'_>,
        request: &Request,
        fits: impl Fn(Growth, Growth) -> bool,
    ) -> Option<Reservation> {
        // The request's own names, each (slot, name) once, as `State::add` would
        // count them: sorted, so each target's are together (no map built).
        let mut own: Vec<(Slot, u64, NameCount)> = request
            .0
            .iter()
            .flat_map(|(s, names)| {
                names
                    .0
                    .iter()
                    .map(|n| (*s, n.hash, NameCount { kind: n.kind, ops: 1, set: n.set, appended: n.appended }))
            })
            .collect();
        own.sort_unstable_by_key(|&(s, hash, _)| (s, hash));
        own.dedup_by(|later, kept| {
            let same = later.0 == kept.0 && later.1 == kept.1;
            if same {
                kept.2.set = kept.2.set.max(later.2.set);
                kept.2.appended = kept.2.appended.saturating_add(later.2.appended);
            }
            same
        });
        // Every target, those with no names of their own too (a request checked
        // exactly wants nothing pending for any).
        let mut slots: Vec<Slot> = request.0.iter().map(|(s, _)| *s).collect();
        slots.sort_unstable();
        slots.dedup();
        let mut state = self.lock();
        // The snapshot keeps what was committed since it was taken counted.
        debug_assert!(state.readers.first_key_value().is_some_and(|(e, _)| *e <= snapshot.epoch));
        // Every target's pending names found first, in a loop of lookups alone: each
        // is a cache miss or two in a map of up to a million targets, and these
        // overlap where a lookup followed by its check would wait for each in turn
        // (the lookups were 9% of an acknowledgement's CPU under the suite's closed
        // track load, perf).
        let pending: Vec<&[(u64, NameCount)]> = slots.iter().map(|s| state.of(*s)).collect();
        for (s, now) in slots.iter().zip(pending) {
            let start = own.partition_point(|(o, _, _)| o < s);
            let end = start + own[start..].partition_point(|(o, _, _)| o == s);
            let mine = growth(own[start..end].iter().map(|(_, _, c)| c));
            if !fits(state.pending_since(*s, now, snapshot.epoch), mine) {
                return None;
            }
        }
        for (s, n) in &request.0 {
            state.add(*s, n);
        }
        Some(Reservation(request.0.clone()))
    }

    /// The reserved job could not be queued: nothing of it is pending.
    pub fn cancel(&self, reservation: Reservation) {
        self.lock().sub_all(&reservation.0);
    }

    /// These operations are committed: no longer pending. Handed over, and taken off
    /// by the next use of the ledger; until then they still count, which can only
    /// refuse more, never less.
    pub fn release(&self, applied: Applied) {
        if applied.0.is_empty() {
            return;
        }
        let waiting = {
            let mut released = self.released.lock().unwrap_or_else(|e| e.into_inner());
            released.push(applied);
            released.len()
        };
        // No request has used the ledger for a while (a backlog applied after the
        // load that left it): taken off here, unless a request holds the lock, so
        // that they do not pile up beside the names they release (the suite's 10M
        // uniform scale phase peaked at 237 MiB without this, 196 with it).
        if waiting >= RELEASED_MAX {
            let state = match self.state.try_lock() {
                Ok(state) => state,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            drop(Self::take_off(state, &self.released));
        }
    }

    /// Takes off everything released so far: for an applier that found the queue
    /// empty, so that an idle server does not keep the names of applied jobs.
    pub fn settle(&self) {
        drop(self.lock());
    }
}
