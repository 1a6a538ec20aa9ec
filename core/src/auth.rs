//! API keys: stored only as SHA-256 hashes and never logged; a key belongs to
//! exactly one workspace and carries [`Permission`]s.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::http::Request;
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::repo::codec::{decode, encode};
use crate::store::{ChangeSet, CommitError, Expect, Op, Store, StoreError, Table};
use crate::time::Timestamp;

/// What is stored for one API key (under the key's hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The workspace the key acts on.
    pub workspace: WorkspaceName,
    /// What the key may do.
    pub permissions: Vec<Permission>,
    /// A short, non-secret prefix of the key for humans to recognise it.
    pub hint: String,
    /// When it was created (ms since epoch).
    pub created_at: i64,
    /// When it last authenticated a request (ms since epoch), noted at most hourly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<i64>,
}

impl KeyRecord {
    /// True when the key carries the permission.
    pub fn allows(&self, p: Permission) -> bool {
        self.permissions.contains(&p)
    }
}

/// The store key of an API key: the hex SHA-256 of the secret.
pub fn key_hash(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The record of the API key with hash `hash` ([`key_hash`]) and its version, or
/// 401 when the key is unknown.
pub async fn key_record<S: Store>(store: &S, hash: &str) -> Result<(KeyRecord, u64), ApiError> {
    let entry = store.get(Table::ApiKey, hash).await?.ok_or(ApiError::InvalidKey)?;
    Ok((decode(&entry.value)?, entry.version))
}

/// Notes that the key with hash `hash` was used at `now` (a conflict means another
/// request noted it first, or the key was revoked: either way nothing to do).
pub async fn note_use<S: Store>(
    store: &S,
    hash: &str,
    mut record: KeyRecord,
    version: u64,
    now: Timestamp,
) -> Result<(), StoreError> {
    record.last_used_at = Some(now.0);
    let op = Op::Put {
        table: Table::ApiKey,
        key: hash.to_string(),
        value: encode(&record)?,
        expect: Expect::Version(version),
    };
    match store.commit(ChangeSet { ops: vec![op], ack: None }).await {
        Ok(()) | Err(CommitError::Conflict) => Ok(()),
        Err(CommitError::Store(e)) => Err(e),
    }
}

/// The bearer token of a request, if any.
pub fn bearer_token(req: &Request) -> Result<&str, ApiError> {
    let value = req.header_value("authorization").ok_or(ApiError::MissingKey)?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::InvalidKey)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(ApiError::InvalidKey);
    }
    Ok(token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_hide_the_secret() {
        let h = key_hash("secret");
        assert_eq!(h.len(), 64);
        assert!(!h.contains("secret"));
    }
}
