//! The identifier index: the entries (external id, alias, email, phone → service
//! id) a profile implies. Derived from the profile documents at commit, never
//! written by hand, so changing `profile.email` moves its index entry with it.

use std::collections::{BTreeMap, BTreeSet};

use super::keys::{alias_key, email_entry, external_key, phone_entry};
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, WorkspaceName};
use crate::profile::Profile;
use crate::store::StoreError;

/// The identifying fields of a profile: everything its index entries derive from.
/// Kept as read, so that a profile whose identity did not change costs no index
/// work (most updates change attributes, not identifiers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    external_id: Option<ExternalId>,
    deprecated: BTreeSet<ExternalId>,
    aliases: BTreeMap<String, String>,
    email: Option<Email>,
    phone: Option<Phone>,
}

impl Identity {
    pub(crate) fn of(p: &Profile) -> Identity {
        Identity {
            external_id: p.external_id.clone(),
            deprecated: p.deprecated_external_ids.clone(),
            aliases: p.aliases.clone(),
            email: p.email.clone(),
            phone: p.phone.clone(),
        }
    }

    /// True when `p` has exactly this identity (compared without copying).
    pub(crate) fn same_as(&self, p: &Profile) -> bool {
        self.external_id == p.external_id
            && self.deprecated == p.deprecated_external_ids
            && self.aliases == p.aliases
            && self.email == p.email
            && self.phone == p.phone
    }

    /// The index entries this identity implies for profile `id`: key → unique?
    pub(crate) fn index_entries(&self, ws: &WorkspaceName, id: &ServiceId) -> BTreeMap<String, bool> {
        entries(
            ws,
            id,
            self.external_id.as_ref(),
            &self.deprecated,
            &self.aliases,
            self.email.as_ref(),
            self.phone.as_ref(),
        )
    }
}

/// The index entries a profile implies.
pub(crate) fn index_entries(ws: &WorkspaceName, p: &Profile) -> BTreeMap<String, bool> {
    entries(
        ws,
        &p.id,
        p.external_id.as_ref(),
        &p.deprecated_external_ids,
        &p.aliases,
        p.email.as_ref(),
        p.phone.as_ref(),
    )
}

/// The index entries of profile `id` with these identifiers: key → unique? Built
/// from borrowed parts: computed for every new profile a few times per unit of
/// work, where copying the identifiers first was 5% of a warehouse sync's
/// instructions (callgrind).
fn entries(
    ws: &WorkspaceName,
    id: &ServiceId,
    external_id: Option<&ExternalId>,
    deprecated: &BTreeSet<ExternalId>,
    aliases: &BTreeMap<String, String>,
    email: Option<&Email>,
    phone: Option<&Phone>,
) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    // A deprecated external id names its user as the primary one does.
    for x in external_id.into_iter().chain(deprecated) {
        out.insert(external_key(ws, x), true);
    }
    for (label, name) in aliases {
        out.insert(alias_key(ws, label, name), true);
    }
    if let Some(e) = email {
        out.insert(email_entry(ws, e, id), false);
    }
    if let Some(ph) = phone {
        out.insert(phone_entry(ws, ph, id), false);
    }
    out
}

/// The service id an identifier index entry points to.
pub(crate) fn index_value(bytes: &[u8]) -> Result<ServiceId, StoreError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(ServiceId::parse)
        .ok_or_else(|| StoreError("corrupt identifier index entry".into()))
}

/// True when the profile carries the identifier (a deprecated external id too).
pub fn matches(p: &Profile, ident: &Identifier) -> bool {
    match ident {
        Identifier::External(x) => p.external_id.as_ref() == Some(x) || p.deprecated_external_ids.contains(x),
        Identifier::Alias(a) => p.has_alias(a),
        Identifier::Service(id) => &p.id == id,
        Identifier::Email(e) => p.email.as_ref() == Some(e),
        Identifier::Phone(ph) => p.phone.as_ref() == Some(ph),
    }
}
