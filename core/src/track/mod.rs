//! `/users/track` and `/users/track/sync`. A request is parsed without reading the
//! store ([`parse`]); the groups it names are looked up and the job queued durably
//! (async) or applied in one unit of work (sync) by [`apply`]; [`queue`] applies
//! queued jobs in batches, through the same [`apply::apply_op`].

pub mod apply;
pub mod backlog;
pub mod parse;
pub mod queue;
pub mod schema;
mod sync;

#[cfg(test)]
mod early_tests;
#[cfg(test)]
mod size_tests;

pub use sync::track_sync;

use self::apply::look_up_groups;
use self::parse::{nothing_valid, AttrUpdate, TrackJob, TrackOp};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Response, Then};
use crate::ids::Identifier;
use crate::ids::{IdGen, WorkspaceName};
use crate::repo::codec::encode;
use crate::repo::index::index_value;
use crate::repo::keys::{profile_key, unique_key};
use crate::repo::large;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table};
use crate::users::profile::{MAX_CUSTOM_ATTRIBUTES, MAX_CUSTOM_BYTES, MAX_NAMES};

/// Refuses (400, naming the bound) a job that would take a profile over the bound
/// on a profile's size, as the profiles are stored now: the job is applied to a unit
/// of work that is never committed. Jobs queued before it are not in the store yet,
/// so the applier checks again and sets aside a job that no longer fits.
///
/// Most jobs are proved to fit first, from the stored documents' sizes alone
/// ([`cannot_outgrow`]), which spares decoding and applying every profile a request
/// names (most of the CPU an acknowledgement took); the answer is the same.
async fn refuse_oversized<S: Store>(store: &S, job: &TrackJob, encoded: usize, ctx: Ctx) -> Result<(), ApiError> {
    if cannot_outgrow(store, job, encoded).await? {
        return Ok(());
    }
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

/// True when no profile `job` names can end up over a bound of
/// [`Profile::size_error`], whatever the job does to it. Each bound is checked
/// against an upper bound of the profile after the job:
/// - a stored profile of `L` bytes of compact JSON holds at most `(L + 1) / 5`
///   entries in any of its maps (custom attributes, event names, products): an entry
///   takes at least 5 bytes (`"":0,`), the last one 4; and at most `L` bytes of
///   custom attributes (their JSON is part of the document);
/// - `L` is read only for profiles in the registry of large ones
///   ([`crate::repo::large`]); any other is at most
///   [`LARGE_PROFILE_BYTES`](crate::repo::large::LARGE_PROFILE_BYTES), or not stored
///   yet (`L = 0`). A workspace whose registry is not known to be complete has every
///   profile read;
/// - the job adds at most one custom attribute per custom update, one event name
///   per event, one product per purchase, to any one profile (counted over the whole
///   job, as if every operation named the same user); and at most its own encoded
///   length plus 40 bytes per custom update to custom attributes (a value written
///   or appended is in the job; an increment grows a number by at most 20 digits).
///
/// Identifiers shared by several profiles (email, phone) are not resolved here:
/// such a job takes the exact check.
async fn cannot_outgrow<S: Store>(store: &S, job: &TrackJob, encoded: usize) -> Result<bool, StoreError> {
    let (mut custom, mut events, mut purchases) = (0usize, 0usize, 0usize);
    // Each target's registry key, and whether it is a service id (a profile key).
    let mut targets: Vec<(String, bool)> = Vec::with_capacity(job.ops.len());
    for op in &job.ops {
        match op {
            TrackOp::Attributes { updates, .. } => {
                custom += updates.iter().filter(|u| matches!(u, AttrUpdate::Custom(..))).count();
            }
            TrackOp::Event { .. } => events += 1,
            TrackOp::Purchase { .. } => purchases += 1,
        }
        match &op.target().ident {
            Identifier::Service(id) => targets.push((profile_key(&job.workspace, id), true)),
            other => match unique_key(&job.workspace, other) {
                Some(key) => targets.push((key, false)),
                None => return Ok(false),
            },
        }
    }
    targets.sort_unstable();
    targets.dedup();
    let fits = |largest: usize| {
        let entries = (largest + 1) / 5;
        entries + custom <= MAX_CUSTOM_ATTRIBUTES
            && largest + encoded + 40 * custom <= MAX_CUSTOM_BYTES
            && entries + events <= MAX_NAMES
            && entries + purchases <= MAX_NAMES
    };
    // Unregistered profiles count as the registry's threshold, unless even that
    // does not fit this job: then every profile is read, for its real size.
    let keys: Vec<&str> = targets.iter().map(|(k, _)| k.as_str()).collect();
    let (complete, registered) = large::registered(store, &job.workspace, &keys).await?;
    let trusted = complete && fits(large::LARGE_PROFILE_BYTES);
    let unread: Vec<&(String, bool)> =
        targets.iter().zip(&registered).filter(|(_, large)| !trusted || **large).map(|(t, _)| t).collect();
    let mut largest = if unread.len() < targets.len() { large::LARGE_PROFILE_BYTES } else { 0 };
    let mut profile_keys = Vec::new();
    let mut ident_keys = Vec::new();
    for (key, is_profile) in unread {
        if *is_profile {
            profile_keys.push(key.clone());
        } else {
            ident_keys.push(key.clone());
        }
    }
    for entry in store.get_many(Table::Ident, &ident_keys).await?.into_iter().flatten() {
        profile_keys.push(profile_key(&job.workspace, &index_value(&entry.value)?));
    }
    profile_keys.sort_unstable();
    profile_keys.dedup();
    if !profile_keys.is_empty() {
        let stored = store.get_many(Table::Profile, &profile_keys).await?;
        largest = largest.max(stored.iter().flatten().map(|e| e.value.len()).max().unwrap_or(0));
    }
    Ok(fits(largest))
}

/// POST /users/track: parse, look up the groups named, queue durably, answer 201;
/// the host is asked to apply the queue soon.
pub async fn track<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let obj = parse::body_object(body)?;
    let arrays = parse::arrays(&obj, parse::MAX_OBJECTS)?;
    let parsed = look_up_groups(store, ws, parse::parse(&arrays, ctx.now)).await?;
    if parsed.ops.is_empty() {
        return Err(nothing_valid(&parsed.errors));
    }
    let body = parsed.success_body();
    let ops = parsed.ops.into_iter().map(|(_, op)| op).collect();
    let job = TrackJob { workspace: ws.clone(), at: ctx.now, ops };
    let encoded = encode(&job)?;
    refuse_oversized(store, &job, encoded.len(), ctx).await?;
    store.enqueue(encoded).await?;
    Ok(Response::json(201, &body).then(Then::ApplyQueue))
}
