//! Typed document keys: how each table's keys are spelled. Parts are separated by
//! [`SEP`], which no identifier may contain, so a key prefix never matches a longer
//! identifier by accident.

use crate::ids::{Email, Identifier, ServiceId, WorkspaceName};

/// Separates the parts of a store key; identifiers may not contain control characters.
pub const SEP: char = '\u{1f}';

/// The store key of a profile.
pub fn profile_key(ws: &WorkspaceName, id: &ServiceId) -> String {
    format!("{}{SEP}{}", ws.as_str(), id.as_str())
}

/// The index key of a unique identifier (external id or alias).
pub(crate) fn unique_key(ws: &WorkspaceName, ident: &Identifier) -> Option<String> {
    match ident {
        Identifier::External(x) => Some(format!("{}{SEP}x{SEP}{}", ws.as_str(), x.as_str())),
        Identifier::Alias(a) => Some(format!("{}{SEP}a{SEP}{}{SEP}{}", ws.as_str(), a.alias_label, a.alias_name)),
        _ => None,
    }
}

/// The index prefix of a shared identifier (email or phone); entries add the service id.
pub(crate) fn shared_prefix(ws: &WorkspaceName, ident: &Identifier) -> Option<String> {
    match ident {
        Identifier::Email(e) => Some(format!("{}{SEP}e{SEP}{}{SEP}", ws.as_str(), e.as_str())),
        Identifier::Phone(p) => Some(format!("{}{SEP}p{SEP}{}{SEP}", ws.as_str(), p.as_str())),
        _ => None,
    }
}

/// The store key of an address record.
pub fn address_key(ws: &WorkspaceName, email: &Email) -> String {
    format!("{}{SEP}{}", ws.as_str(), email.as_str())
}

/// The store key of a subscription group.
pub fn group_key(ws: &WorkspaceName, id: &str) -> String {
    format!("{}{SEP}{id}", ws.as_str())
}

/// The store key of a preference center.
pub fn center_key(ws: &WorkspaceName, api_id: &str) -> String {
    format!("{}{SEP}{api_id}", ws.as_str())
}

/// The store key of a preference center's name (unique per workspace).
pub fn center_name_key(ws: &WorkspaceName, name: &str) -> String {
    format!("{}{SEP}{name}", ws.as_str())
}

/// The key prefix of every document of a workspace in a per-workspace table.
pub fn workspace_prefix(ws: &WorkspaceName) -> String {
    format!("{}{SEP}", ws.as_str())
}
