//! API keys, workspaces and permissions. Keys are stored only as SHA-256 hashes and
//! are never logged; a key belongs to exactly one workspace.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::http::Request;

macro_rules! permissions {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A permission an API key may carry; one per endpoint family (the spec's table).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Permission {
            $(
                #[doc = $name]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl Permission {
            /// Every permission, for "all".
            pub const ALL: &'static [Permission] = &[$(Permission::$variant),*];

            /// The permission's name as the platform writes it.
            pub fn as_str(self) -> &'static str {
                match self { $(Permission::$variant => $name),* }
            }

            /// Parses a permission name.
            pub fn parse(name: &str) -> Option<Permission> {
                match name { $($name => Some(Permission::$variant),)* _ => None }
            }
        }
    };
}

permissions! {
    UsersTrack => "users.track",
    UsersTrackSync => "users.track.sync",
    UsersIdentify => "users.identify",
    UsersMerge => "users.merge",
    UsersDelete => "users.delete",
    UsersAliasNew => "users.alias.new",
    UsersAliasUpdate => "users.alias.update",
    UsersExportIds => "users.export.ids",
    SubscriptionStatusSet => "subscription.status.set",
    SubscriptionGroupsGet => "subscription.groups.get",
    SubscriptionStatusGet => "subscription.status.get",
    EmailStatus => "email.status",
    EmailBlacklist => "email.blacklist",
    PreferenceCenterUpdate => "preference_center.update",
    PreferenceCenterList => "preference_center.list",
    PreferenceCenterGet => "preference_center.get",
    CdiIntegrationList => "cdi.integration_list",
    CdiIntegrationJobStatus => "cdi.integration_job_status",
    Scim => "scim",
}

/// A workspace name: 1 to 64 of letters, digits, `-`, `_`, `.`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkspaceName(String);

impl WorkspaceName {
    /// Parses a workspace name. The restricted alphabet keeps store keys unambiguous.
    pub fn parse(text: &str) -> Option<WorkspaceName> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        ok.then(|| WorkspaceName(text.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

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

/// Parses a comma-separated permission list, or `all`.
pub fn parse_permission_list(text: &str) -> Result<Vec<Permission>, String> {
    if text.trim() == "all" {
        return Ok(Permission::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match Permission::parse(name) {
            Some(p) if !out.contains(&p) => out.push(p),
            Some(_) => {}
            None => return Err(format!("unknown permission '{name}'")),
        }
    }
    if out.is_empty() {
        return Err("no permissions given".into());
    }
    Ok(out)
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
    fn permission_names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(*p));
        }
        assert_eq!(parse_permission_list("users.track, users.export.ids").unwrap().len(), 2);
        assert!(parse_permission_list("users.fly").is_err());
        assert_eq!(parse_permission_list("all").unwrap().len(), Permission::ALL.len());
    }

    #[test]
    fn hashes_hide_the_secret() {
        let h = key_hash("secret");
        assert_eq!(h.len(), 64);
        assert!(!h.contains("secret"));
    }
}
