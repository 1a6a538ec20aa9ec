//! The backlog: queued track jobs not yet applied, indexed by the identifiers they
//! name, so that a request can have applied, first, just the queued jobs that concern
//! the users it reads or writes ([`Backlog::concerning`] then
//! [`super::queue::apply_early`]) instead of waiting for the whole backlog.
//!
//! Why that is safe: the jobs applied early are closed under "may touch the same
//! profile". Starting from the request's identifiers, the set takes in every
//! pending job naming one of them, every identifier those jobs name or give (an
//! email or phone set by an attribute), and every identifier of every stored
//! profile one of them resolves to, until nothing new comes in. No job outside the
//! set can read or write a profile inside it, so applying the set ahead of the
//! queue gives each of those profiles exactly the state in-order application
//! would have given it. Jobs applied early are recorded ([`Table::QueueEarly`])
//! in the same commit as their effects; the in-order applier skips them and
//! deletes the record when the queue cursor passes them.
//!
//! One backlog belongs to one engine, behind its gate (see `engine::Gate`): only
//! its holder applies queued jobs, so early and in-order application never race.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::parse::{AttrUpdate, TrackJob, TrackOp};
use crate::http::Request;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
use crate::repo::codec::decode;
use crate::repo::keys::{profile_key, shared_prefix, unique_key};
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table};

/// Jobs read from the queue per call while the index catches up with it.
const INDEX_CHUNK: usize = 1000;

/// Most strings of one request considered as identifiers: a request names a few
/// hundred users at most (75 objects a track request, 50 ids an export).
const MAX_SEEDS: usize = 4096;

/// A pending job as the index keeps it: its workspace and the identifiers it names.
struct Pending {
    ws: WorkspaceName,
    idents: Vec<Identifier>,
}

/// The pending jobs this engine knows of, by identifier, and those applied early.
#[derive(Default)]
pub struct Backlog {
    /// The early-applied records have been read from the store.
    loaded: bool,
    /// Highest sequence number indexed (or known applied).
    indexed: u64,
    jobs: BTreeMap<u64, Pending>,
    by_key: HashMap<String, BTreeSet<u64>>,
    /// Pending jobs indexed, by workspace: a workspace without any needs no lookups.
    per_ws: HashMap<WorkspaceName, usize>,
    /// Applied ahead of the queue cursor; the in-order applier skips them.
    early: BTreeSet<u64>,
}

impl Backlog {
    /// Reads the records of jobs applied early, once per engine (they survive a restart).
    pub async fn load<S: Store>(&mut self, store: &S) -> Result<(), StoreError> {
        if !self.loaded {
            for (key, _) in store.scan(Table::QueueEarly, "", crate::store::MAX_SCAN).await? {
                if let Ok(seq) = key.parse::<u64>() {
                    self.early.insert(seq);
                }
            }
            self.loaded = true;
        }
        Ok(())
    }

    /// True when job `seq` was applied early: the in-order applier skips it.
    pub fn is_early(&self, seq: u64) -> bool {
        self.early.contains(&seq)
    }

    /// Indexes every job queued so far (everything acknowledged before this call).
    pub async fn refresh<S: Store>(&mut self, store: &S) -> Result<(), StoreError> {
        self.load(store).await?;
        let tail = store.queue_tail().await?;
        while self.indexed < tail {
            let jobs = store.queued(self.indexed, INDEX_CHUNK).await?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for q in jobs {
                if self.early.contains(&q.seq) {
                    continue;
                }
                // A job that cannot be decoded names nobody: the applier sets it aside.
                if let Ok(job) = decode::<TrackJob>(&q.job) {
                    self.insert(q.seq, &job);
                }
            }
            self.indexed = last;
        }
        Ok(())
    }

    fn insert(&mut self, seq: u64, job: &TrackJob) {
        let idents = named(job);
        for ident in &idents {
            self.by_key.entry(index_key(&job.workspace, ident)).or_default().insert(seq);
        }
        *self.per_ws.entry(job.workspace.clone()).or_default() += 1;
        self.jobs.insert(seq, Pending { ws: job.workspace.clone(), idents });
    }

    fn remove(&mut self, seq: u64) {
        if let Some(p) = self.jobs.remove(&seq) {
            if let Some(n) = self.per_ws.get_mut(&p.ws) {
                *n -= 1;
                if *n == 0 {
                    self.per_ws.remove(&p.ws);
                }
            }
            for ident in &p.idents {
                let key = index_key(&p.ws, ident);
                if let Some(seqs) = self.by_key.get_mut(&key) {
                    seqs.remove(&seq);
                    if seqs.is_empty() {
                        self.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// The queue cursor passed `through`: forget what it applied or skipped.
    pub fn applied_through(&mut self, through: u64) {
        let done: Vec<u64> = self.jobs.range(..=through).map(|(s, _)| *s).collect();
        for seq in done {
            self.remove(seq);
        }
        self.early = self.early.split_off(&(through + 1));
        self.indexed = self.indexed.max(through);
    }

    /// These jobs were applied early (committed with their records).
    pub fn applied_early(&mut self, seqs: &[u64]) {
        for &seq in seqs {
            self.remove(seq);
            self.early.insert(seq);
        }
    }

    /// The pending jobs of workspace `ws` that may touch a profile `seeds` name,
    /// closed as the module comment says, in queue order. Call [`Backlog::refresh`] first.
    pub async fn concerning<S: Store>(
        &self,
        store: &S,
        ws: &WorkspaceName,
        seeds: Vec<Identifier>,
    ) -> Result<Vec<u64>, StoreError> {
        let mut found: BTreeSet<u64> = BTreeSet::new();
        if !self.per_ws.contains_key(ws) {
            return Ok(Vec::new());
        }
        let mut tx = Tx::new(store, ws.clone());
        let mut seen: HashSet<String> = HashSet::new();
        let mut todo = seeds;
        while let Some(ident) = todo.pop() {
            if !seen.insert(index_key(ws, &ident)) {
                continue;
            }
            for &seq in self.by_key.get(&index_key(ws, &ident)).into_iter().flatten() {
                if found.insert(seq) {
                    todo.extend(self.jobs.get(&seq).into_iter().flat_map(|p| p.idents.iter().cloned()));
                }
            }
            for id in tx.resolve(&ident).await? {
                if let Some(p) = tx.profile(&id).await? {
                    todo.push(Identifier::Service(p.id.clone()));
                    todo.extend(p.external_id.clone().map(Identifier::External));
                    todo.extend(p.alias_list().into_iter().map(Identifier::Alias));
                    todo.extend(p.email.clone().map(Identifier::Email));
                    todo.extend(p.phone.clone().map(Identifier::Phone));
                }
            }
        }
        Ok(found.into_iter().collect())
    }
}

/// The identifiers a job names: each operation's target, and the email addresses
/// and phone numbers its attribute objects give (later jobs may name a user by them).
fn named(job: &TrackJob) -> Vec<Identifier> {
    let mut out: Vec<Identifier> = Vec::new();
    for op in &job.ops {
        out.push(op.target().ident.clone());
        if let TrackOp::Attributes { updates, .. } = op {
            for u in updates {
                match u {
                    AttrUpdate::Email(Some(e)) => out.push(Identifier::Email(e.clone())),
                    AttrUpdate::Phone(Some(p)) => out.push(Identifier::Phone(p.clone())),
                    _ => {}
                }
            }
        }
    }
    out.sort_by_cached_key(|i| index_key(&job.workspace, i));
    out.dedup();
    out
}

/// One text per identifier of a workspace (the identifier index's keys).
fn index_key(ws: &WorkspaceName, ident: &Identifier) -> String {
    match ident {
        Identifier::Service(id) => profile_key(ws, id),
        other => unique_key(ws, other).or_else(|| shared_prefix(ws, other)).unwrap_or_default(),
    }
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
