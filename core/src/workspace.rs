//! Provisioning: workspaces and their API keys. Used by the hosts' command lines
//! (and the playground), never reachable through the public API.

use serde::{Deserialize, Serialize};

use crate::auth::{key_hash, KeyRecord, Permission, WorkspaceName};
use crate::error::ApiError;
use crate::repo::encode;
use crate::store::{ChangeSet, Expect, Op, Store, Table};
use crate::Ctx;

/// What is stored for a workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRecord {
    /// Name.
    pub name: WorkspaceName,
    /// Creation time (ms).
    pub created_at: i64,
}

/// Creates an API key for a workspace (creating the workspace if needed) and
/// returns the secret. Only its hash is stored.
pub async fn create_key<S: Store>(
    store: &S,
    workspace: &WorkspaceName,
    permissions: Vec<Permission>,
    ctx: Ctx,
) -> Result<String, ApiError> {
    // The secret is the host's 128 random bits themselves: nothing derived, nothing
    // shared with other ids.
    let h: String = ctx.seed.iter().map(|b| format!("{b:02x}")).collect();
    let secret = format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]);
    let record = KeyRecord { workspace: workspace.clone(), permissions, hint: secret[..8].to_string(), created_at: ctx.now.0 };
    let ws = WorkspaceRecord { name: workspace.clone(), created_at: ctx.now.0 };
    let ops = vec![
        Op::Put { table: Table::ApiKey, key: key_hash(&secret), value: encode(&record), expect: Expect::Absent },
        Op::Put { table: Table::Workspace, key: workspace.as_str().to_string(), value: encode(&ws), expect: Expect::Any },
    ];
    store.commit(ChangeSet { ops, ack: None }).await?;
    Ok(secret)
}
