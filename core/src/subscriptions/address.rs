//! State remembered per email address, for addresses that may not be on any profile
//! yet (`/email/status`, `/email/blocklist`): applied when a profile gets the address.

use serde::{Deserialize, Serialize};

use crate::ids::{Email, ServiceId};
use crate::profile::states::GlobalState;
use crate::profile::Profile;
use crate::repo::keys::address_key;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table};

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

/// Applies what is remembered about an address to a profile that just got it.
pub async fn link_email<S: Store>(tx: &mut Tx<'_, S>, id: &ServiceId, email: &Email) -> Result<(), StoreError> {
    let key = address_key(tx.workspace(), email);
    if let Some(state) = tx.doc::<AddressState>(Table::Address, &key).await? {
        if let Some(p) = tx.profile_mut(id).await? {
            state.apply_to(p);
        }
    }
    Ok(())
}
