//! Listing and revoking API keys, and listing workspaces: for the operator routes
//! and the `engage keys` / `engage workspaces` commands. Nothing here returns a
//! secret: a key is named by its id, the first 16 hex digits of its hash.

use std::collections::BTreeMap;

use serde::Serialize;

use super::workspace::WorkspaceRecord;
use crate::auth::KeyRecord;
use crate::error::ApiError;
use crate::repo::codec::decode;
use crate::store::{ChangeSet, CommitError, Expect, Op, Store, Table, MAX_SCAN};
use crate::time::Timestamp;

/// Hex digits of a key's hash that name it.
pub const ID_LEN: usize = 16;

/// An API key as an operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    /// The first 16 hex digits of the key's SHA-256: names it, reveals nothing.
    pub id: String,
    /// Its workspace.
    pub workspace: String,
    /// What it may do.
    pub permissions: Vec<String>,
    /// Its first characters, for a human to recognise it.
    pub hint: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it last authenticated a request (RFC 3339, to the hour), if ever.
    pub last_used_at: Option<String>,
}

fn rfc3339(ms: i64) -> String {
    Timestamp(ms).to_rfc3339()
}

/// Every API key, by workspace then creation.
pub async fn list<S: Store>(store: &S) -> Result<Vec<KeyInfo>, ApiError> {
    let mut keys = Vec::new();
    for (hash, entry) in store.scan(Table::ApiKey, "", MAX_SCAN).await? {
        let r: KeyRecord = decode(&entry.value)?;
        keys.push(KeyInfo {
            id: hash.chars().take(ID_LEN).collect(),
            workspace: r.workspace.as_str().to_string(),
            permissions: r.permissions.iter().map(|p| p.as_str().to_string()).collect(),
            hint: r.hint,
            created_at: rfc3339(r.created_at),
            last_used_at: r.last_used_at.map(rfc3339),
        });
    }
    keys.sort_by(|a, b| (&a.workspace, &a.created_at, &a.id).cmp(&(&b.workspace, &b.created_at, &b.id)));
    Ok(keys)
}

/// Revokes the key named `id`: false when no key has it. Takes effect for the
/// next request (hosts that cache key records: within their cache's lifetime).
pub async fn revoke<S: Store>(store: &S, id: &str) -> Result<bool, ApiError> {
    let id = id.to_ascii_lowercase();
    if id.len() != ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad(format!("a key id is {ID_LEN} hex digits (see the key list)")));
    }
    let Some((hash, entry)) = store.scan(Table::ApiKey, &id, 1).await?.pop() else { return Ok(false) };
    let op = Op::Delete { table: Table::ApiKey, key: hash, expect: Expect::Version(entry.version) };
    match store.commit(ChangeSet { ops: vec![op], ack: None }).await {
        Ok(()) => Ok(true),
        // Changed meanwhile (its last use noted): the caller may simply retry.
        Err(CommitError::Conflict) => Err(ApiError::Busy),
        Err(CommitError::Store(e)) => Err(e.into()),
    }
}

/// A workspace as an operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkspaceInfo {
    /// Its name.
    pub name: String,
    /// When its first key was made (RFC 3339).
    pub created_at: String,
    /// How many API keys it has.
    pub keys: usize,
}

/// Every workspace, by name.
pub async fn workspaces<S: Store>(store: &S) -> Result<Vec<WorkspaceInfo>, ApiError> {
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    for (_, entry) in store.scan(Table::ApiKey, "", MAX_SCAN).await? {
        let r: KeyRecord = decode(&entry.value)?;
        *keys.entry(r.workspace.as_str().to_string()).or_default() += 1;
    }
    let mut out = Vec::new();
    for (name, entry) in store.scan(Table::Workspace, "", MAX_SCAN).await? {
        let r: WorkspaceRecord = decode(&entry.value)?;
        out.push(WorkspaceInfo {
            keys: keys.get(&name).copied().unwrap_or(0),
            name,
            created_at: rfc3339(r.created_at),
        });
    }
    Ok(out)
}
