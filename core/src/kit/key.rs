//! A known API key (`engage serve --api-key KEY`): that exact key exists once the
//! server is ready, for the workspace and permissions given, whatever the database
//! held before, so a CI job or a `.env` file can hold it. Only its hash is stored.

use crate::admin::workspace::new_workspace;
use crate::auth::{key_hash, KeyRecord};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::repo::codec::{decode, encode};
use crate::store::{ChangeSet, Expect, Op, Store, Table};

/// Shortest known key: as hard to guess as the 128-bit keys Engage makes.
pub const MIN_KEY_CHARS: usize = 32;
/// Longest known key.
pub const MAX_KEY_CHARS: usize = 256;

/// What making a known key did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// The key is new.
    Created,
    /// It existed as asked.
    Unchanged,
    /// It existed with another workspace or other permissions, now the ones asked.
    Updated,
}

/// Checks a key chosen by a person: 32 to 256 visible ASCII characters.
pub fn check(secret: &str) -> Result<(), ApiError> {
    let n = secret.chars().count();
    if !(MIN_KEY_CHARS..=MAX_KEY_CHARS).contains(&n) {
        return Err(ApiError::bad(format!(
            "an API key must be {MIN_KEY_CHARS} to {MAX_KEY_CHARS} characters (this one has {n}): a short key is easy to guess"
        )));
    }
    if !secret.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ApiError::bad("an API key must be visible ASCII characters, without spaces"));
    }
    Ok(())
}

/// Makes `secret` an API key of `workspace` with `permissions` (creating the
/// workspace if needed), in one unit of work.
pub async fn ensure<S: Store>(
    store: &S,
    workspace: &WorkspaceName,
    permissions: Vec<Permission>,
    secret: &str,
    ctx: Ctx,
) -> Result<Made, ApiError> {
    check(secret)?;
    let hash = key_hash(secret);
    let mut record = KeyRecord {
        workspace: workspace.clone(),
        permissions,
        hint: secret.chars().take(8).collect(),
        created_at: ctx.now.0,
        last_used_at: None,
    };
    let (expect, made) = match store.get(Table::ApiKey, &hash).await? {
        None => (Expect::Absent, Made::Created),
        Some(entry) => {
            let old: KeyRecord = decode(&entry.value)?;
            if old.workspace == record.workspace && old.permissions == record.permissions {
                return Ok(Made::Unchanged);
            }
            record.created_at = old.created_at;
            (Expect::Version(entry.version), Made::Updated)
        }
    };
    let mut ops = vec![Op::Put { table: Table::ApiKey, key: hash, value: encode(&record)?, expect }];
    ops.extend(new_workspace(store, workspace, ctx.now.0).await?);
    store.commit(ChangeSet { ops, ack: None }).await?;
    Ok(made)
}

/// Makes `workspace`, which must not exist, with one key: `secret` (which must not
/// be a key already), or one made up. Both or neither are stored. Answers the key.
pub async fn create_workspace<S: Store>(
    store: &S,
    workspace: &WorkspaceName,
    permissions: Vec<Permission>,
    secret: Option<&str>,
    ctx: Ctx,
) -> Result<String, ApiError> {
    let taken = || ApiError::Conflict(format!("workspace '{}' exists: name a new one", workspace.as_str()));
    let ops = new_workspace(store, workspace, ctx.now.0).await?;
    if ops.is_empty() {
        return Err(taken());
    }
    let secret = match secret {
        Some(s) => {
            check(s)?;
            s.to_string()
        }
        None => crate::admin::workspace::made_up_key(ctx),
    };
    if store.get(Table::ApiKey, &key_hash(&secret)).await?.is_some() {
        return Err(ApiError::Conflict("this API key exists already: give another, or none to have one made".into()));
    }
    let mut all = vec![crate::admin::workspace::new_key(workspace, permissions, &secret, ctx.now.0)?];
    all.extend(ops);
    match store.commit(ChangeSet { ops: all, ack: None }).await {
        Ok(()) => Ok(secret),
        // Made meanwhile, by another request.
        Err(crate::store::CommitError::Conflict) => Err(taken()),
        Err(crate::store::CommitError::Store(e)) => Err(e.into()),
    }
}
