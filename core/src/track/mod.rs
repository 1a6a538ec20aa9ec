//! `/users/track` and `/users/track/sync`. A request is parsed without reading the
//! store ([`parse`]); the groups it names are looked up and the job queued durably
//! (async) or applied in one unit of work (sync) by [`apply`]; [`queue`] applies
//! queued jobs in batches, through the same [`apply::apply_op`].

pub mod apply;
pub mod backlog;
pub mod barrier;
pub mod early;
mod growth;
pub mod hold;
pub mod ledger;
pub mod parse;
pub mod partition;
pub mod pressure;
pub mod queue;
pub mod record;
pub mod schema;
mod sync;
pub mod waiting;

#[cfg(test)]
mod early_tests;
#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod partition_tests;
#[cfg(test)]
mod size_tests;

pub use sync::track_sync;

use self::apply::look_up_groups;
use self::ledger::{Growth, Ledger};
use self::parse::{nothing_valid, TrackJob};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Response, Then};
use crate::ids::Identifier;
use crate::ids::{IdGen, ServiceId, WorkspaceName};
use crate::profile::{MAX_CUSTOM_ATTRIBUTES, MAX_CUSTOM_BYTES, MAX_NAMES};
use crate::repo::index::index_value;
use crate::repo::keys::{profile_key, shared_prefix, unique_key};
use crate::repo::large;
use crate::repo::Tx;
use crate::repo::MAX_SHARED;
use crate::store::{Store, StoreError, Table};

/// Refuses (400, naming the bound) a job that would take a profile over the bound
/// on a profile's size, as the profiles are stored now: the job is applied to a unit
/// of work that is never committed. Callers first have the queued jobs of its users
/// applied, so that "stored now" includes everything acknowledged for them.
async fn refuse_oversized<S: Store>(store: &S, job: &TrackJob, ctx: Ctx) -> Result<(), ApiError> {
    let mut tx = Tx::new(store, job.workspace.clone());
    let mut ids = IdGen::derive(ctx.seed, "size check", 0);
    let idents: Vec<_> = job.ops.iter().map(|op| op.target().ident.clone()).collect();
    tx.prefetch(&idents).await?;
    for op in &job.ops {
        apply::apply_op(&mut tx, op, job.at, &mut ids).await?;
    }
    match tx.take_oversized() {
        Some(message) => Err(ApiError::bad(message)),
        None => Ok(()),
    }
}

/// An upper bound of the stored size, in bytes of compact JSON, of every profile
/// `job` names (0 for one not stored yet), read cheaply: a profile outside the
/// registry of large ones ([`crate::repo::large`]) counts as the registry's
/// threshold when `trust_registry` and the workspace's registry is complete;
/// every other profile is read, and every profile an email or phone target names.
async fn largest_stored<S: Store>(store: &S, job: &TrackJob, trust_registry: bool) -> Result<usize, StoreError> {
    // Each unique target's registry key, and whether it is a service id (a profile key).
    let mut targets: Vec<(String, bool)> = Vec::with_capacity(job.ops.len());
    let mut profile_keys = Vec::new();
    for op in &job.ops {
        let ident = &op.target().ident;
        match (ident, unique_key(&job.workspace, ident), shared_prefix(&job.workspace, ident)) {
            (Identifier::Service(id), _, _) => targets.push((profile_key(&job.workspace, id), true)),
            (_, Some(key), _) => targets.push((key, false)),
            (_, None, Some(prefix)) => {
                for (key, _) in store.scan(Table::Ident, &prefix, MAX_SHARED).await? {
                    if let Some(id) = ServiceId::parse(&key[prefix.len()..]) {
                        profile_keys.push(profile_key(&job.workspace, &id));
                    }
                }
            }
            (_, None, None) => {}
        }
    }
    targets.sort_unstable();
    targets.dedup();
    let keys: Vec<&str> = targets.iter().map(|(k, _)| k.as_str()).collect();
    let (complete, registered) = large::registered(store, &job.workspace, &keys).await?;
    let trusted = trust_registry && complete;
    let unread: Vec<&(String, bool)> =
        targets.iter().zip(&registered).filter(|(_, large)| !trusted || **large).map(|(t, _)| t).collect();
    let mut largest = if unread.len() < targets.len() { large::LARGE_PROFILE_BYTES } else { 0 };
    let mut ident_keys = Vec::new();
    for (key, is_profile) in unread {
        if *is_profile {
            profile_keys.push(key.clone());
        } else {
            ident_keys.push(key.clone());
        }
    }
    for (entry, profile) in store.get_named(&ident_keys, |_| false).await?.into_iter().flatten() {
        // A corrupt entry fails here, as it would when the job is applied.
        index_value(&entry.value)?;
        largest = largest.max(profile.map_or(0, |p| p.value.len()));
    }
    profile_keys.sort_unstable();
    profile_keys.dedup();
    if !profile_keys.is_empty() {
        let stored = store.get_many(Table::Profile, &profile_keys).await?;
        largest = largest.max(stored.iter().flatten().map(|e| e.value.len()).max().unwrap_or(0));
    }
    Ok(largest)
}

/// True when a profile of at most `largest` bytes stays within every bound of
/// [`Profile::size_error`] after `growth`: a stored profile of `L` bytes of compact
/// JSON holds at most `(L + 1) / 5` entries in any of its maps (an entry takes at
/// least 5 bytes, `"":0,`) and at most `L` bytes of custom attributes.
fn fits(largest: usize, growth: Growth) -> bool {
    let entries = (largest + 1) / 5;
    entries + growth.custom <= MAX_CUSTOM_ATTRIBUTES
        && largest.saturating_add(growth.bytes) <= MAX_CUSTOM_BYTES
        && entries + growth.events <= MAX_NAMES
        && entries + growth.purchases <= MAX_NAMES
}

/// What `/users/track` did with a request.
pub enum Tracked {
    /// Answered (201); the last of the jobs queued is numbered this.
    Done(Response, u64),
    /// Whether it fits its users' bounds cannot be told until the jobs queued for
    /// them are applied: the engine applies them (in its turn) and asks again.
    CatchUp(Vec<Identifier>),
}

/// POST /users/track: parse, look up the groups named, check the bounds on its
/// users' profiles counting what is queued for them ([`ledger`]), queue durably,
/// answer 201; the host is asked to apply the queue soon. `caught_up`: the queued
/// jobs of the request's users were just applied.
pub async fn track<S: Store>(
    store: &S,
    ledger: &Ledger,
    ws: &WorkspaceName,
    body: &[u8],
    ctx: Ctx,
    caught_up: bool,
    dialect: crate::dialect::Dialect,
) -> Result<Tracked, ApiError> {
    let obj = parse::body_object(body)?;
    let arrays = parse::arrays(&obj, parse::MAX_OBJECTS)?;
    let parsed = look_up_groups(store, ws, parse::parse(&arrays, ctx.now, dialect)).await?;
    if parsed.ops.is_empty() {
        return Err(nothing_valid(&parsed.errors));
    }
    let body = parsed.success_body();
    let ops = parsed.ops.into_iter().map(|(_, op)| op).collect();
    let job = TrackJob { workspace: ws.clone(), at: ctx.now, ops, barrier: None };
    let encoded = partition::encode(store, &job)?;
    ledger.load(store).await?;
    let seeds = || job.ops.iter().map(|op| op.target().ident.clone()).collect();
    let request = ledger.request(ws, &job.ops);
    let snapshot = ledger.snapshot();
    let reservation = if caught_up {
        // Checked exactly against the store, which (just caught up) holds every job
        // acknowledged for these users; one acknowledged since for one of them
        // means catching up again.
        refuse_oversized(store, &job, ctx).await?;
        ledger.reserve(&snapshot, &request, |pending, _| pending == Growth::default())
    } else {
        let mut reserved = None;
        for trust_registry in [true, false] {
            let largest = largest_stored(store, &job, trust_registry).await?;
            let fast = |pending: Growth, own: Growth| fits(largest, pending.plus(own));
            reserved = ledger.reserve(&snapshot, &request, fast);
            if reserved.is_some() || largest > large::LARGE_PROFILE_BYTES {
                break;
            }
        }
        reserved
    };
    // What was committed since the snapshot no longer needs counting for this request.
    drop(snapshot);
    let Some(reservation) = reservation else { return Ok(Tracked::CatchUp(seeds())) };
    let seqs = match store.enqueue_parts(encoded).await {
        Ok(seqs) => seqs,
        Err(e) => {
            ledger.cancel(reservation);
            return Err(e.into());
        }
    };
    let last = seqs.into_iter().max().unwrap_or(0);
    Ok(Tracked::Done(Response::json(201, &body).then(Then::ApplyQueue), last))
}
