//! The backlog: the operations of queued track jobs not yet applied, indexed by the
//! identifiers they name, so that a request can have applied, first, just the queued
//! operations that concern the users it reads or writes ([`Backlog::concerning`]
//! then [`super::queue::apply_early`]) instead of waiting for the whole backlog.
//!
//! Why that is safe: the operations applied early are closed under "may touch the
//! same profile". Starting from the request's identifiers, the set takes in every
//! pending operation naming one of them, every identifier those operations name or
//! give (an email or phone set by an attribute), and every identifier of every
//! stored profile one of them resolves to, until nothing new comes in. No operation
//! outside the set can read or write a profile inside it, so applying the set ahead
//! of the queue, in queue order, gives each of those profiles exactly the state
//! in-order application would have given it. The unit is the operation, not the job:
//! one track request names up to 75 users, and closing over whole jobs would join
//! every user of a busy workspace into one set. A read naming several users sees
//! each one's part of a request whole.
//!
//! Operations applied early are recorded ([`crate::store::Table::QueueEarly`]) in the same commit
//! as their effects; the in-order applier skips them and deletes the records when
//! the queue cursor passes them.
//!
//! One backlog belongs to one engine, behind its gate (see `engine::Gate`): only
//! its holder applies queued jobs, so early and in-order application never race.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::parse::{TrackJob, TrackOp};
use super::partition::{name, named, user_key};
use super::record;
use crate::http::Request;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
use crate::repo::Tx;
use crate::store::{QueuedJob, Store, StoreError};

/// Jobs read from the queue per call while the index catches up with it.
const INDEX_CHUNK: usize = 1000;

/// Operations applied early that the backlog of a store several servers share
/// remembers before it first looks for those whose jobs are gone
/// ([`Backlog::prune_early`]).
const EARLY_KEPT_MIN: usize = 1024;

/// Most strings of one request considered as identifiers: a request names a few
/// hundred users at most (75 objects a track request, 50 ids an export).
const MAX_SEEDS: usize = 4096;

pub use super::early::{early_key, OpKey};

/// A pending operation as the index keeps it: its workspace, the identifiers it
/// names, and the partition of the queue its job is in.
struct Pending {
    ws: WorkspaceName,
    idents: Vec<Identifier>,
    part: u16,
}

/// The pending operations this engine knows of, by identifier, and those applied early.
#[derive(Default)]
pub struct Backlog {
    /// The early-applied records have been read from the store.
    loaded: bool,
    /// The queue's partitions (read from the store at the first load).
    parts: u16,
    /// The store is shared with other servers' appliers (PostgreSQL): what they
    /// applied, in order or early, is read from the store, not known here.
    shared: bool,
    /// Highest sequence number indexed (or known applied).
    indexed: u64,
    ops: BTreeMap<OpKey, Pending>,
    by_key: HashMap<String, BTreeSet<OpKey>>,
    /// Pending operations indexed, by partition.
    by_part: HashMap<u16, BTreeSet<OpKey>>,
    /// Pending operations indexed, by workspace: a workspace without any needs no lookups.
    per_ws: HashMap<WorkspaceName, usize>,
    /// Applied ahead of the queue cursor; the in-order applier skips them.
    early: BTreeSet<OpKey>,
    /// On a shared store, the size of `early` at which it is next pruned.
    early_prune_at: usize,
    /// On a store only this engine applies: for a name, the queue's tail through
    /// which every operation naming it is applied ([`Backlog::handled`]), so that
    /// reading the same user again decodes only the jobs queued since (a user of a
    /// busy workspace is named by hundreds of jobs, all still queued after their
    /// operations for that user were applied early).
    handled: HashMap<i64, u64>,
    /// The size of `handled` at which it is next pruned.
    handled_prune_at: usize,
    /// Told what is applied, so it stops counting it.
    ledger: std::sync::Arc<super::ledger::Ledger>,
    /// Told where the queue cursor is.
    pressure: std::sync::Arc<super::pressure::Pressure>,
}

impl Backlog {
    /// A backlog that tells `ledger` what is applied and `pressure` where the cursor
    /// is; `shared`: other servers apply the same store's queue.
    pub fn with(
        ledger: std::sync::Arc<super::ledger::Ledger>,
        pressure: std::sync::Arc<super::pressure::Pressure>,
        shared: bool,
    ) -> Backlog {
        Backlog { ledger, pressure, shared, ..Backlog::default() }
    }

    /// The ledger to tell what is committed.
    pub fn ledger(&self) -> &super::ledger::Ledger {
        &self.ledger
    }

    /// True when other servers apply the same store's queue.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Reads the records of jobs applied early, once per engine (they survive a
    /// restart), and has the ledger count what is queued before anything is applied.
    pub async fn load<S: Store>(&mut self, store: &S) -> Result<(), StoreError> {
        self.ledger.load(store).await?;
        if !self.loaded {
            self.early = super::early::read_early(store).await?;
            self.parts = store.partitions();
            self.loaded = true;
        }
        Ok(())
    }

    /// On a shared store, reads again the records of operations applied early among
    /// jobs `first..=last` (another server's request may have applied some since):
    /// true when one is new here.
    pub async fn reload_early<S: Store>(&mut self, store: &S, first: u64, last: u64) -> Result<bool, StoreError> {
        if !self.shared {
            return Ok(false);
        }
        let mut new = false;
        for key in super::early::read_early_between(store, first, last).await? {
            if self.early.insert(key) {
                self.remove(key);
                new = true;
            }
        }
        self.prune_early(store).await?;
        Ok(new)
    }

    /// On a store several servers share, forgets the operations applied early whose
    /// jobs are no longer queued (those before the oldest job queued). The in-order
    /// applier that passes such a record deletes it and tells its own backlog
    /// ([`Backlog::early_passed`]); every other server's backlog was never told, and
    /// its set grew for as long as it ran. Looks once the set has doubled since it
    /// last did: one read of the queue's head.
    pub async fn prune_early<S: Store>(&mut self, store: &S) -> Result<(), StoreError> {
        if !self.shared || self.early.len() < self.early_prune_at.max(EARLY_KEPT_MIN) {
            return Ok(());
        }
        // The set holds only jobs seen queued: one numbered below the oldest job
        // queued now has left the queue, and an applier never meets it again.
        match store.queued(0, 1).await?.first() {
            Some(oldest) => self.early = self.early.split_off(&(oldest.seq, 0)),
            None => self.early.clear(),
        }
        self.early_prune_at = 2 * self.early.len();
        Ok(())
    }

    /// The records of these operations applied early were deleted (the in-order
    /// applier passed them).
    pub fn early_passed(&mut self, keys: &[OpKey]) {
        for key in keys {
            self.early.remove(key);
        }
    }

    /// The operations of job `seq` applied early: the in-order applier skips them.
    pub fn early_ops(&self, seq: u64) -> Vec<u32> {
        self.early.range((seq, 0)..=(seq, u32::MAX)).map(|(_, op)| *op).collect()
    }

    /// Indexes every job queued so far (everything acknowledged before this call).
    pub async fn refresh<S: Store>(&mut self, store: &S) -> Result<(), StoreError> {
        self.load(store).await?;
        let tail = store.queue_tail().await?;
        while self.indexed < tail {
            let jobs = store.queued(self.indexed, INDEX_CHUNK).await?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for q in jobs {
                // A job that cannot be decoded names nobody: the applier sets it aside.
                if let Ok(job) = record::decode(&q.job) {
                    for (i, op) in job.ops.iter().enumerate() {
                        let key = (q.seq, i as u32);
                        if !self.early.contains(&key) {
                            self.insert(key, &job.workspace, op, q.part);
                        }
                    }
                }
            }
            self.indexed = last;
        }
        // What other servers' appliers applied since is no longer pending.
        if let Some(cursors) = store.applied_cursors().await? {
            for (part, through) in cursors.into_iter().enumerate() {
                self.applied_through(part as u16, through);
            }
        }
        Ok(())
    }

    fn insert(&mut self, key: OpKey, ws: &WorkspaceName, op: &TrackOp, part: u16) {
        let idents = named(ws, op);
        for ident in &idents {
            self.by_key.entry(user_key(ws, ident)).or_default().insert(key);
        }
        *self.per_ws.entry(ws.clone()).or_default() += 1;
        self.by_part.entry(part).or_default().insert(key);
        self.ops.insert(key, Pending { ws: ws.clone(), idents, part });
    }

    fn remove(&mut self, seq: OpKey) {
        if let Some(p) = self.ops.remove(&seq) {
            if let Some(keys) = self.by_part.get_mut(&p.part) {
                keys.remove(&seq);
            }
            if let Some(n) = self.per_ws.get_mut(&p.ws) {
                *n -= 1;
                if *n == 0 {
                    self.per_ws.remove(&p.ws);
                }
            }
            for ident in &p.idents {
                let key = user_key(&p.ws, ident);
                if let Some(seqs) = self.by_key.get_mut(&key) {
                    seqs.remove(&seq);
                    if seqs.is_empty() {
                        self.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// The cursor of partition `part` passed `through`: forget what it applied or
    /// skipped.
    pub fn applied_through(&mut self, part: u16, through: u64) {
        let done: Vec<OpKey> = match self.by_part.get(&part) {
            Some(keys) => keys.range(..=(through, u32::MAX)).copied().collect(),
            None => Vec::new(),
        };
        for key in done {
            self.remove(key);
        }
        if self.parts <= 1 {
            // One order: every job through `through` is applied, indexed or not.
            self.early = self.early.split_off(&(through + 1, 0));
            self.indexed = self.indexed.max(through);
        }
        self.pressure.applied_through(through);
    }

    /// Job `seq` is no longer queued: applied (by another server's applier, on a
    /// store several share), with every job of its partition before it.
    pub fn job_gone(&mut self, seq: u64) {
        let part = self.ops.range((seq, 0)..=(seq, u32::MAX)).next().map(|(_, p)| p.part);
        match part {
            Some(part) => self.applied_through(part, seq),
            None if self.parts <= 1 => self.applied_through(0, seq),
            None => {}
        }
    }

    /// These operations were applied early (committed with their records).
    pub fn applied_early(&mut self, keys: &[OpKey]) {
        for &key in keys {
            self.remove(key);
            self.early.insert(key);
        }
    }

    /// The pending operations of workspace `ws` that may touch a profile `seeds`
    /// name, closed as the module comment says, in queue order. Call
    /// [`Backlog::refresh`] first.
    pub async fn concerning<S: Store>(
        &self,
        store: &S,
        ws: &WorkspaceName,
        seeds: Vec<Identifier>,
    ) -> Result<Vec<OpKey>, StoreError> {
        let mut found: BTreeSet<OpKey> = BTreeSet::new();
        if !self.per_ws.contains_key(ws) {
            return Ok(Vec::new());
        }
        let mut tx = Tx::new(store, ws.clone());
        let mut seen: HashSet<String> = HashSet::new();
        let mut todo = seeds;
        while let Some(ident) = todo.pop() {
            let ident_key = user_key(ws, &ident);
            if !seen.insert(ident_key.clone()) {
                continue;
            }
            for &key in self.by_key.get(&ident_key).into_iter().flatten() {
                if found.insert(key) {
                    todo.extend(self.ops.get(&key).into_iter().flat_map(|p| p.idents.iter().cloned()));
                }
            }
            todo.extend(stored_idents(&mut tx, &ident).await?);
        }
        Ok(found.into_iter().collect())
    }

    /// As [`Backlog::concerning`], for a store that finds queued jobs by the users
    /// they name ([`Store::finds_by_name`]): the same closure, each round asking
    /// the store for the jobs naming the identifiers new to it, with nothing indexed
    /// here. An operation of a job found is taken when it names an identifier of the
    /// set; one that names none of them now is looked at again if a later round
    /// brings one of its identifiers in (the store then finds its job again).
    /// Returned with the jobs of the operations found, as read.
    pub async fn concerning_named<S: Store>(
        &mut self,
        store: &S,
        ws: &WorkspaceName,
        seeds: Vec<Identifier>,
    ) -> Result<Named, StoreError> {
        self.load(store).await?;
        // Every job through this tail was visible to each lookup below.
        let tail = if self.shared { None } else { Some(store.queue_tail().await?) };
        let mut all_names: Vec<i64> = Vec::new();
        let mut found: BTreeSet<OpKey> = BTreeSet::new();
        // The jobs read, by sequence number, each decoded once however many rounds
        // find it again (a user of a busy workspace is named by hundreds of jobs):
        // the caller applies from them.
        let mut jobs: BTreeMap<u64, (QueuedJob, TrackJob)> = BTreeMap::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut todo = seeds;
        loop {
            let mut fresh = Vec::new();
            while let Some(ident) = todo.pop() {
                if seen.insert(user_key(ws, &ident)) {
                    fresh.push(ident);
                }
            }
            if fresh.is_empty() {
                let held: Vec<(QueuedJob, TrackJob)> = jobs
                    .into_values()
                    .filter(|(q, _)| found.range((q.seq, 0)..=(q.seq, u32::MAX)).next().is_some())
                    .collect();
                let handled = tail.map(|tail| Handled { names: all_names, tail });
                return Ok(Named { keys: found.into_iter().collect(), jobs: held, handled });
            }
            let names: Vec<i64> = fresh.iter().map(|i| name(ws, i)).collect();
            // A job through this names none of these users' pending operations.
            let done = names.iter().map(|n| self.handled.get(n).copied().unwrap_or(0)).min().unwrap_or(0);
            all_names.extend(&names);
            for q in store.queued_naming(&names).await? {
                let seq = q.seq;
                if seq <= done {
                    continue;
                }
                let (_, job) = match jobs.entry(seq) {
                    std::collections::btree_map::Entry::Occupied(known) => known.into_mut(),
                    std::collections::btree_map::Entry::Vacant(new) => {
                        // A job that cannot be decoded names nobody: the applier sets it aside.
                        let Ok(job) = record::decode(&q.job) else { continue };
                        new.insert((q, job))
                    }
                };
                if job.workspace != *ws {
                    continue;
                }
                for (i, op) in job.ops.iter().enumerate() {
                    let key = (seq, i as u32);
                    if self.early.contains(&key) || found.contains(&key) {
                        continue;
                    }
                    let idents = named(ws, op);
                    if idents.iter().any(|i| seen.contains(&user_key(ws, i))) {
                        found.insert(key);
                        todo.extend(idents);
                    }
                }
            }
            // The stored profiles are read after the queue, each round anew: an
            // operation linking two identifiers that was applied (and left the
            // queue) before the lookup above is in what these reads see.
            let mut tx = Tx::new(store, ws.clone());
            for ident in &fresh {
                todo.extend(stored_idents(&mut tx, ident).await?);
            }
        }
    }
}

/// What [`Backlog::concerning_named`] found: the pending operations of the closure,
/// their jobs as read, and what [`Backlog::handled`] notes once they are applied.
pub struct Named {
    /// The operations, in queue order.
    pub keys: Vec<OpKey>,
    /// Their jobs.
    pub jobs: Vec<(QueuedJob, TrackJob)>,
    /// What to note once they are applied (on a store only this engine applies).
    pub handled: Option<Handled>,
}

/// Every name of a closure, and the queue's tail before its first lookup.
pub struct Handled {
    names: Vec<i64>,
    tail: u64,
}

/// Entries of [`Backlog::handled`] kept before the first prune.
const HANDLED_KEPT_MIN: usize = 1024;

/// Most entries of [`Backlog::handled`]: past this (after a prune) it starts over,
/// which costs only decoding again.
const HANDLED_KEPT_MAX: usize = 1 << 20;

impl Backlog {
    /// The operations a closure found were applied (committed): every operation
    /// naming one of its names, through the tail it was found at, is applied.
    pub fn handled(&mut self, handled: Option<Handled>) {
        let Some(Handled { names, tail }) = handled else { return };
        for n in names {
            let through = self.handled.entry(n).or_insert(0);
            *through = (*through).max(tail);
        }
        if self.handled.len() >= self.handled_prune_at.max(HANDLED_KEPT_MIN) {
            // Those the in-order applier passed say nothing more than the cursor.
            let applied = if self.parts <= 1 { self.indexed } else { 0 };
            self.handled.retain(|_, through| *through > applied);
            if self.handled.len() > HANDLED_KEPT_MAX {
                self.handled.clear();
            }
            self.handled_prune_at = 2 * self.handled.len();
        }
    }
}

/// Every identifier of the stored profiles `ident` names now.
async fn stored_idents<S: Store>(tx: &mut Tx<'_, S>, ident: &Identifier) -> Result<Vec<Identifier>, StoreError> {
    let mut out = Vec::new();
    for id in tx.resolve(ident).await? {
        if let Some(p) = tx.profile(&id).await? {
            out.extend(profile_idents(p));
        }
    }
    Ok(out)
}

/// Every identifier of a stored profile: queued operations naming any of them land
/// on it (by a deprecated external id too).
fn profile_idents(p: &crate::profile::Profile) -> Vec<Identifier> {
    let mut out = vec![Identifier::Service(p.id.clone())];
    out.extend(p.external_id.clone().map(Identifier::External));
    out.extend(p.deprecated_external_ids.iter().cloned().map(Identifier::External));
    out.extend(p.alias_list().into_iter().map(Identifier::Alias));
    out.extend(p.email.clone().map(Identifier::Email));
    out.extend(p.phone.clone().map(Identifier::Phone));
    out
}

/// Every identifier a request may name, read without knowing its endpoint: each
/// string of its JSON body, query and path taken as each kind of identifier it
/// parses as, and each object with `alias_name` and `alias_label` as an alias.
/// Taking too many only applies a few more jobs early; missing one would break
/// read-your-writes, hence no per-endpoint list to keep in step.
pub fn seeds(req: &Request) -> Vec<Identifier> {
    let mut texts: Vec<String> = Vec::new();
    let mut aliases: Vec<UserAlias> = Vec::new();
    if let Ok(body) = serde_json::from_slice::<Value>(&req.body) {
        walk(&body, &mut texts, &mut aliases);
    }
    texts.extend(req.query_pairs().into_iter().map(|(_, v)| v));
    texts.extend(req.path.split('/').filter(|s| !s.is_empty()).map(crate::http::percent_decode));
    texts.truncate(MAX_SEEDS);
    let mut out: Vec<Identifier> = aliases.into_iter().map(Identifier::Alias).collect();
    for t in &texts {
        out.extend(ExternalId::parse(t).map(Identifier::External));
        out.extend(Email::parse(t).map(Identifier::Email));
        out.extend(Phone::parse(t).map(Identifier::Phone));
        out.extend(ServiceId::parse(t).map(Identifier::Service));
    }
    out
}

fn walk(v: &Value, texts: &mut Vec<String>, aliases: &mut Vec<UserAlias>) {
    if texts.len() >= MAX_SEEDS {
        return;
    }
    match v {
        Value::String(s) => texts.push(s.clone()),
        // A whole number may name a user too (the platform reads `"external_id": 7`).
        Value::Number(n) if n.is_u64() || n.is_i64() => texts.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| walk(i, texts, aliases)),
        Value::Object(map) => {
            if let (Some(Value::String(name)), Some(Value::String(label))) =
                (map.get("alias_name"), map.get("alias_label"))
            {
                aliases.push(UserAlias { alias_name: name.clone(), alias_label: label.clone() });
            }
            map.values().for_each(|i| walk(i, texts, aliases));
        }
        _ => {}
    }
}
