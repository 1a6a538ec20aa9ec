//! The identifier index: the entries (external id, alias, email, phone → service
//! id) a profile implies. Derived from the profile documents at commit, never
//! written by hand, so changing `profile.email` moves its index entry with it.

use std::collections::BTreeMap;

use super::keys::{shared_prefix, unique_key};
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
use crate::store::StoreError;
use crate::users::profile::Profile;

/// The identifying fields of a profile: everything its index entries derive from.
/// Kept as read, so that a profile whose identity did not change costs no index
/// work (most updates change attributes, not identifiers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    external_id: Option<ExternalId>,
    aliases: BTreeMap<String, String>,
    email: Option<Email>,
    phone: Option<Phone>,
}

impl Identity {
    pub(crate) fn of(p: &Profile) -> Identity {
        Identity {
            external_id: p.external_id.clone(),
            aliases: p.aliases.clone(),
            email: p.email.clone(),
            phone: p.phone.clone(),
        }
    }

    /// True when `p` has exactly this identity (compared without copying).
    pub(crate) fn same_as(&self, p: &Profile) -> bool {
        self.external_id == p.external_id && self.aliases == p.aliases && self.email == p.email && self.phone == p.phone
    }

    /// The index entries this identity implies for profile `id`: key → unique?
    pub(crate) fn index_entries(&self, ws: &WorkspaceName, id: &ServiceId) -> BTreeMap<String, bool> {
        let mut out = BTreeMap::new();
        if let Some(x) = &self.external_id {
            if let Some(k) = unique_key(ws, &Identifier::External(x.clone())) {
                out.insert(k, true);
            }
        }
        for (label, name) in &self.aliases {
            let a = UserAlias { alias_name: name.clone(), alias_label: label.clone() };
            if let Some(k) = unique_key(ws, &Identifier::Alias(a)) {
                out.insert(k, true);
            }
        }
        if let Some(e) = &self.email {
            if let Some(prefix) = shared_prefix(ws, &Identifier::Email(e.clone())) {
                out.insert(format!("{prefix}{}", id.as_str()), false);
            }
        }
        if let Some(ph) = &self.phone {
            if let Some(prefix) = shared_prefix(ws, &Identifier::Phone(ph.clone())) {
                out.insert(format!("{prefix}{}", id.as_str()), false);
            }
        }
        out
    }
}

/// The index entries a profile implies.
pub(crate) fn index_entries(ws: &WorkspaceName, p: &Profile) -> BTreeMap<String, bool> {
    Identity::of(p).index_entries(ws, &p.id)
}

/// The service id an identifier index entry points to.
pub(crate) fn index_value(bytes: &[u8]) -> Result<ServiceId, StoreError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(ServiceId::parse)
        .ok_or_else(|| StoreError("corrupt identifier index entry".into()))
}

/// True when the profile carries the identifier.
pub fn matches(p: &Profile, ident: &Identifier) -> bool {
    match ident {
        Identifier::External(x) => p.external_id.as_ref() == Some(x),
        Identifier::Alias(a) => p.has_alias(a),
        Identifier::Service(id) => &p.id == id,
        Identifier::Email(e) => p.email.as_ref() == Some(e),
        Identifier::Phone(ph) => p.phone.as_ref() == Some(ph),
    }
}
