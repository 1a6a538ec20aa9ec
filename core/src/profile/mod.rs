//! The user profile document: everything the service knows about one user, stored
//! as one document so that an update touches one record.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{Email, ExternalId, Phone, ServiceId, UserAlias};
use crate::profile::states::{GlobalState, GroupState};
use crate::time::Timestamp;

pub mod custom;
pub mod standard;
pub mod states;

/// Adds revenue, keeping the total finite (JSON has no infinity: an infinite total
/// could not be stored and read back).
pub fn add_revenue(total: f64, amount: f64) -> f64 {
    let sum = total + amount;
    if sum.is_finite() {
        sum
    } else if sum > 0.0 {
        f64::MAX
    } else {
        f64::MIN
    }
}

/// First and last occurrence and count of one event name or product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Earliest occurrence.
    pub first: Timestamp,
    /// Latest occurrence.
    pub last: Timestamp,
    /// Number of occurrences.
    pub count: u64,
}

impl Summary {
    /// A summary of one occurrence.
    pub fn once(at: Timestamp) -> Summary {
        Summary { first: at, last: at, count: 1 }
    }

    /// Adds `n` occurrences at `at`.
    pub fn record(&mut self, at: Timestamp, n: u64) {
        self.first = self.first.min(at);
        self.last = self.last.max(at);
        self.count = self.count.saturating_add(n);
    }

    /// Combines two summaries of the same name (merge rules: counts summed, first the
    /// earlier, last the later).
    pub fn absorb(&mut self, other: &Summary) {
        self.first = self.first.min(other.first);
        self.last = self.last.max(other.last);
        self.count = self.count.saturating_add(other.count);
    }
}

/// Most custom attributes one profile keeps. The platform publishes no bound; without
/// one a single user can grow without limit (1.2M attributes took 844 MB and slowed
/// every request), so Engage sets one well above real profiles'.
pub const MAX_CUSTOM_ATTRIBUTES: usize = 1000;

/// Most bytes of one profile's custom attributes (as compact JSON).
pub const MAX_CUSTOM_BYTES: usize = 1 << 20;

/// Most distinct custom event names, and most distinct products, one profile keeps.
pub const MAX_NAMES: usize = 1000;

/// True for `0.0` exactly (not `-0.0`, which is stored as it is).
fn is_positive_zero(x: &f64) -> bool {
    x.to_bits() == 0
}

/// One user's profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Internal id.
    pub id: ServiceId,
    /// External id, once identified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<ExternalId>,
    /// External ids this user had before a rename (`/users/external_ids/rename`):
    /// they still name the user until `/users/external_ids/remove` removes them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub deprecated_external_ids: BTreeSet<ExternalId>,
    /// Aliases, label → name (one alias per label).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, String>,
    /// Email address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<Email>,
    /// Phone number (E.164).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<Phone>,
    /// Standard attributes other than identifiers and subscription states
    /// (`first_name`, `dob`, `country`, ...), already validated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub standard: BTreeMap<String, Value>,
    /// Custom attributes.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub custom: Map<String, Value>,
    /// Custom event summaries by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, Summary>,
    /// Purchase summaries by product id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub purchases: BTreeMap<String, Summary>,
    /// Total revenue of all purchases, in the currencies' base units as sent. Not
    /// stored while it is zero (most profiles have no purchase): it read back as zero
    /// anyway, and it was a tenth of a new profile's bytes.
    #[serde(default, skip_serializing_if = "is_positive_zero")]
    pub total_revenue: f64,
    /// Global email subscription state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_subscribe: Option<GlobalState>,
    /// Global push subscription state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_subscribe: Option<GlobalState>,
    /// True once the email address hard-bounced (or was blocklisted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub email_hard_bounced: bool,
    /// Stored subscription-group statuses by group id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, GroupState>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last update time (drives `most_recently_updated`).
    pub updated_at: Timestamp,
}

impl Profile {
    /// An empty profile.
    pub fn new(id: ServiceId, now: Timestamp) -> Profile {
        Profile {
            id,
            external_id: None,
            deprecated_external_ids: BTreeSet::new(),
            aliases: BTreeMap::new(),
            email: None,
            phone: None,
            standard: BTreeMap::new(),
            custom: Map::new(),
            events: BTreeMap::new(),
            purchases: BTreeMap::new(),
            total_revenue: 0.0,
            email_subscribe: None,
            push_subscribe: None,
            email_hard_bounced: false,
            groups: BTreeMap::new(),
            created_at: now,
            updated_at: now,
        }
    }

    /// True when the profile has an external id.
    pub fn is_identified(&self) -> bool {
        self.external_id.is_some()
    }

    /// The profile's aliases as values.
    pub fn alias_list(&self) -> Vec<UserAlias> {
        self.aliases
            .iter()
            .map(|(label, name)| UserAlias { alias_name: name.clone(), alias_label: label.clone() })
            .collect()
    }

    /// Why this profile is over Engage's bound on a profile's size, if it is: the
    /// message names the user and the bound.
    pub fn size_error(&self) -> Option<String> {
        let over = |what: &str, n: usize, max: usize| {
            (n > max).then(|| {
                let who = self.external_id.as_ref().map_or(self.id.as_str(), |x| x.as_str());
                format!("Profile too large: user '{who}' would have {n} {what}; a profile keeps at most {max}")
            })
        };
        over("custom attributes", self.custom.len(), MAX_CUSTOM_ATTRIBUTES)
            .or_else(|| {
                // Counted exactly only where the quick bound could be over.
                if custom::encoded_len_bound(&self.custom) <= MAX_CUSTOM_BYTES {
                    return None;
                }
                over("bytes of custom attributes", custom::encoded_len(&self.custom), MAX_CUSTOM_BYTES)
            })
            .or_else(|| over("custom event names", self.events.len(), MAX_NAMES))
            .or_else(|| over("purchased products", self.purchases.len(), MAX_NAMES))
    }

    /// True when the profile has this alias.
    pub fn has_alias(&self, alias: &UserAlias) -> bool {
        self.aliases.get(&alias.alias_label) == Some(&alias.alias_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_revenue_is_not_stored_and_documents_that_stored_it_read_the_same() {
        let mut p = Profile::new(ServiceId::parse("6b0a177500ede92e92e00651").unwrap(), Timestamp(1_000));
        let stored = serde_json::to_string(&p).unwrap();
        assert!(!stored.contains("total_revenue"), "{stored}");
        let with_field = stored.replacen('{', "{\"total_revenue\":0.0,", 1);
        for text in [&stored, &with_field] {
            assert_eq!(serde_json::from_str::<Profile>(text).unwrap(), p, "{text}");
        }
        for revenue in [12.5, -0.0] {
            p.total_revenue = revenue;
            let stored = serde_json::to_string(&p).unwrap();
            let back: Profile = serde_json::from_str(&stored).unwrap();
            assert_eq!(back.total_revenue.to_bits(), revenue.to_bits(), "{stored}");
        }
    }
}
