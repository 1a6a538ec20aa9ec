//! State remembered per email address, for addresses that may not be on any profile
//! yet (`/email/status`, `/email/blocklist`): applied when a profile gets the address.

use serde::{Deserialize, Serialize};

use crate::auth::WorkspaceName;
use crate::ids::Email;
use crate::profile::{GlobalState, Profile};
use crate::repo::SEP;

/// What is known about one address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressState {
    /// Global email state set for the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<GlobalState>,
    /// The address hard-bounced or was blocklisted.
    #[serde(default)]
    pub hard_bounced: bool,
}

impl AddressState {
    /// Applies the remembered state to a profile that now has the address.
    pub fn apply_to(&self, p: &mut Profile) {
        if let Some(g) = self.global {
            p.email_subscribe = Some(g);
        }
        if self.hard_bounced {
            p.email_hard_bounced = true;
        }
    }
}

/// The store key of an address record.
pub fn address_key(ws: &WorkspaceName, email: &Email) -> String {
    format!("{}{SEP}{}", ws.as_str(), email.as_str())
}
