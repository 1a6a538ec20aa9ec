//! POST /_engage/reset and `engage reset`: a test suite's fresh start without a
//! restart. Removed: every profile (with its attributes, events, purchases, aliases
//! and subscription states), email address state, preference center, sync job and
//! set-aside queued job; with no workspace named, the SCIM dashboard users too.
//! Kept unless `keep=none`: workspaces, API keys, subscription groups, SCIM tokens
//! and warehouse integrations (reset to "never run"), so the suite's credentials
//! and ids still hold. The engine first applies everything queued, in its turn at
//! the queue's gate, so no acknowledged write is half-applied or applied after the
//! reset.
//!
//! Documents are removed [`CHUNK`] to a unit of work: a reset of up to that many is
//! all or nothing; a larger one that fails part-way (a crash) is finished by
//! running it again.

use serde::Serialize;

use crate::auth::KeyRecord;
use crate::cdi::integration::{Integration, INTEGRATION_TABLE};
use crate::error::ApiError;
use crate::http::Request;
use crate::ids::WorkspaceName;
use crate::repo::codec::{decode, encode};
use crate::repo::keys::{workspace_prefix, SEP};
use crate::store::{ChangeSet, Expect, Op, Store, StoreError, Table, MAX_SCAN};

/// Most documents removed in one unit of work.
pub const CHUNK: usize = 1000;

/// What a reset keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Workspaces, keys, groups, SCIM tokens and integrations (`keep=keys`, the default).
    Setup,
    /// Nothing (`keep=none`).
    Nothing,
}

/// A checked reset request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// One workspace, or the whole deployment.
    pub workspace: Option<WorkspaceName>,
    /// What stays.
    pub keep: Keep,
}

/// What a reset removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Documents removed.
    pub removed: usize,
    /// Integrations set back to "never run".
    pub integrations_reset: usize,
}

impl Scope {
    /// From `?workspace=NAME&keep=keys|none`.
    pub fn from_query(req: &Request) -> Result<Scope, ApiError> {
        let mut scope = Scope { workspace: None, keep: Keep::Setup };
        let pairs = req.query_pairs();
        // A parameter given twice is refused, not read as its last value: which of
        // two workspaces a reset removes must never be a guess.
        if let Some((k, _)) = pairs.iter().enumerate().find_map(|(i, (k, _))| pairs[..i].iter().find(|(x, _)| x == k)) {
            return Err(ApiError::bad(format!("'{k}' is given more than once: give it once")));
        }
        for (k, v) in pairs {
            match k.as_str() {
                "workspace" => {
                    let ws = WorkspaceName::parse(&v)
                        .ok_or_else(|| ApiError::bad(format!("'workspace' must be {}", WorkspaceName::RULE)))?;
                    scope.workspace = Some(ws);
                }
                "keep" => {
                    scope.keep = match v.as_str() {
                        "keys" => Keep::Setup,
                        "none" => Keep::Nothing,
                        other => return Err(ApiError::bad(format!("'keep' is 'keys' or 'none', not '{other}'"))),
                    }
                }
                other => return Err(ApiError::bad(format!("unknown parameter '{other}': use workspace and keep"))),
            }
        }
        Ok(scope)
    }
}

/// The tables of data (not setup) kept per workspace, under the workspace's prefix.
/// Index entries go before the documents they name: a profile written meanwhile by
/// a writer outside the queue's turn keeps its entries if its document stays.
const DATA: [Table; 6] =
    [Table::Ident, Table::Address, Table::PreferenceCenterName, Table::PreferenceCenter, Table::CdiJob, Table::Profile];

/// Removes every document of `table` whose key starts with `prefix` and that `keep`
/// (given its key and value) does not keep, [`CHUNK`] to a unit of work.
async fn remove<S: Store>(
    store: &S,
    table: Table,
    prefix: &str,
    removes: impl Fn(&str, &[u8]) -> Result<bool, StoreError>,
) -> Result<usize, ApiError> {
    let mut doomed = Vec::new();
    for (key, entry) in store.scan(table, prefix, MAX_SCAN).await? {
        if removes(&key, &entry.value)? {
            doomed.push(key);
        }
    }
    let n = doomed.len();
    for chunk in doomed.chunks(CHUNK) {
        let ops = chunk.iter().map(|key| Op::Delete { table, key: key.clone(), expect: Expect::Any }).collect();
        store.commit(ChangeSet { ops, ack: None }).await?;
    }
    Ok(n)
}

fn all(_: &str, _: &[u8]) -> Result<bool, StoreError> {
    Ok(true)
}

/// Removes what `scope` names (the caller has applied the queue first).
pub async fn reset<S: Store>(store: &S, scope: &Scope) -> Result<Report, ApiError> {
    let mut report = Report::default();
    let prefix = scope.workspace.as_ref().map(workspace_prefix).unwrap_or_default();
    let in_scope = |ws: &WorkspaceName| scope.workspace.as_ref().is_none_or(|w| w == ws);
    for table in DATA {
        report.removed += remove(store, table, &prefix, all).await?;
    }
    // The large-profile registry: its entries went with the profiles; the mark that
    // a workspace's registry is complete stays true of an empty workspace.
    report.removed += remove(store, Table::LargeProfile, &prefix, |key, _| Ok(!key.ends_with(SEP))).await?;
    // A fixtures file's part loaded before (marked under the file's digest and the
    // workspace) loads again after a reset of what it loaded into.
    let part = scope.workspace.as_ref().map(|ws| format!("{SEP}{}", ws.as_str()));
    // Not counted in the report: it is bookkeeping, not the deployment's data.
    remove(store, Table::Seed, "", |key, _| Ok(part.as_ref().is_none_or(|p| key.ends_with(p.as_str())))).await?;
    if scope.workspace.is_none() {
        for table in [Table::ScimUser, Table::ScimUserName, Table::SetAside, Table::QueueEarly] {
            report.removed += remove(store, table, "", all).await?;
        }
    }
    match scope.keep {
        Keep::Nothing => {
            // The on-demand run requests of the integrations removed, named before they go.
            let mut removed_integrations = Vec::new();
            for (key, entry) in store.scan(INTEGRATION_TABLE, "", MAX_SCAN).await? {
                if in_scope(&decode::<Integration>(&entry.value)?.workspace) {
                    removed_integrations.push(key);
                }
            }
            for table in [Table::CdiRequest, Table::CdiBatches] {
                report.removed +=
                    remove(store, table, "", |key, _| Ok(removed_integrations.iter().any(|k| k == key))).await?;
            }
            report.removed +=
                remove(store, Table::ApiKey, "", |_, v| Ok(in_scope(&decode::<KeyRecord>(v)?.workspace))).await?;
            report.removed +=
                remove(store, INTEGRATION_TABLE, "", |_, v| Ok(in_scope(&decode::<Integration>(v)?.workspace))).await?;
            let named = |key: &str, _: &[u8]| Ok(scope.workspace.as_ref().is_none_or(|w| w.as_str() == key));
            for table in [Table::Workspace, Table::LinkSecret, Table::CdiSecret] {
                report.removed += remove(store, table, "", named).await?;
            }
            report.removed += remove(store, Table::Group, &prefix, all).await?;
            report.removed += remove(store, Table::LargeProfile, &prefix, all).await?;
            if scope.workspace.is_none() {
                report.removed += remove(store, Table::ScimToken, "", all).await?;
            }
        }
        Keep::Setup => report.integrations_reset = rewind_integrations(store, &in_scope).await?,
    }
    Ok(report)
}

/// Sets the integrations in scope back to "never run": their jobs are gone.
async fn rewind_integrations<S: Store>(
    store: &S,
    in_scope: &dyn Fn(&WorkspaceName) -> bool,
) -> Result<usize, ApiError> {
    let mut ops = Vec::new();
    for (key, entry) in store.scan(INTEGRATION_TABLE, "", MAX_SCAN).await? {
        let mut i: Integration = decode(&entry.value)?;
        if !in_scope(&i.workspace) || (i.cursor.is_none() && i.jobs == 0 && i.last_job.is_none()) {
            continue;
        }
        (i.cursor, i.jobs, i.last_job) = (None, 0, None);
        ops.push(Op::Put { table: INTEGRATION_TABLE, key, value: encode(&i)?, expect: Expect::Version(entry.version) });
        ops.push(Op::Delete { table: Table::CdiRequest, key: i.id.clone(), expect: Expect::Any });
    }
    let n = ops.len() / 2;
    for chunk in ops.chunks(CHUNK) {
        store.commit(ChangeSet { ops: chunk.to_vec(), ack: None }).await?;
    }
    Ok(n)
}
