//! Provisioning: workspaces and their API keys, and bulk profiles for benchmarks.
//! Used by the hosts' command lines, the operator routes and the playground, never
//! reachable through the platform's API.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::{key_hash, KeyRecord};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::{ExternalId, IdGen, WorkspaceName};
use crate::permission::Permission;
use crate::profile::Profile;
use crate::repo::codec::encode;
use crate::repo::Tx;
use crate::store::{ChangeSet, Expect, Op, Store, Table};
use crate::subscriptions::groups::{self, Channel, Group};

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
    let secret = made_up_key(ctx);
    let mut ops = vec![new_key(workspace, permissions, &secret, ctx.now.0)?];
    ops.extend(new_workspace(store, workspace, ctx.now.0).await?);
    store.commit(ChangeSet { ops, ack: None }).await?;
    Ok(secret)
}

/// The write that makes `secret` a new key of `workspace` with `permissions`, made
/// at `now` (ms): only its hash is stored, and no key may have that hash yet.
pub fn new_key(
    workspace: &WorkspaceName,
    permissions: Vec<Permission>,
    secret: &str,
    now: i64,
) -> Result<Op, ApiError> {
    let record = KeyRecord {
        workspace: workspace.clone(),
        permissions,
        hint: secret.chars().take(8).collect(),
        created_at: now,
        last_used_at: None,
    };
    Ok(Op::Put { table: Table::ApiKey, key: key_hash(secret), value: encode(&record)?, expect: Expect::Absent })
}

/// A new key's secret: the host's 128 random bits themselves (nothing derived,
/// nothing shared with other ids), spelled as a UUID is.
pub fn made_up_key(ctx: Ctx) -> String {
    let h: String = ctx.seed.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// The writes that make `workspace` if it does not exist yet (none if it does): it
/// is made with its first key (and keeps that creation time), by a version that
/// registers its large profiles from the start.
pub async fn new_workspace<S: Store>(store: &S, workspace: &WorkspaceName, now: i64) -> Result<Vec<Op>, ApiError> {
    if store.get(Table::Workspace, workspace.as_str()).await?.is_some() {
        return Ok(Vec::new());
    }
    let ws = WorkspaceRecord { name: workspace.clone(), created_at: now };
    Ok(vec![
        Op::Put {
            table: Table::Workspace,
            key: workspace.as_str().to_string(),
            value: encode(&ws)?,
            expect: Expect::Absent,
        },
        Op::Put {
            table: Table::LargeProfile,
            key: crate::repo::large::complete_key(workspace),
            value: Vec::new(),
            expect: Expect::Any,
        },
    ])
}

/// The change set that creates identified profiles `external_ids` (each with the
/// custom attributes `custom`) in one go, for seeding benchmark databases through
/// the store's own commit. Commit it with [`Store::commit`].
pub fn seed_profiles<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    external_ids: impl IntoIterator<Item = String>,
    custom: &Map<String, Value>,
    ctx: Ctx,
) -> Result<ChangeSet, ApiError> {
    let mut ids = IdGen::new(ctx.seed);
    let mut tx = Tx::new(store, ws.clone());
    for x in external_ids {
        let mut p = Profile::new(ids.service_id(ctx.now), ctx.now);
        p.external_id = Some(ExternalId::parse(&x).ok_or_else(|| ApiError::bad(format!("invalid external id '{x}'")))?);
        p.custom = custom.clone();
        tx.insert_profile(p);
    }
    Ok(tx.into_changes()?)
}

/// Creates a subscription group (the API has no endpoint for it) and returns it.
pub async fn create_group<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    name: &str,
    channel: Channel,
    ctx: Ctx,
) -> Result<Group, ApiError> {
    groups::create(store, ws, name, channel, ctx.now, &mut IdGen::new(ctx.seed)).await
}
