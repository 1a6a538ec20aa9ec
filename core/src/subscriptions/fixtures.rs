//! A fixtures file's entries of the email and SMS lists, put in place as the
//! platform's own bounces, unsubscribes and carrier reports would put them.

use super::lists::{self, List};
use super::state::{self, EmailChange};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::{Email, WorkspaceName};
use crate::profile::states::GlobalState;
use crate::repo::transact::transact;
use crate::store::Store;
use crate::time::Timestamp;

/// An entry of a fixtures file: `subject` (as [`List::subject`] keys it) is on
/// `list` since `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Which list.
    pub list: List,
    /// The address or number, as keyed.
    pub subject: String,
    /// Since when.
    pub at: Timestamp,
}

/// Puts a fixtures file's list entries in place, in one unit of work: an address on
/// the hard bounces is marked hard-bounced and one on the unsubscribes is
/// unsubscribed globally (on every profile with it and any that gets it later), as
/// the platform's own bounces and unsubscribes would; a number is invalid.
pub async fn seed<S: Store>(store: &S, ws: &WorkspaceName, entries: &[Listed], ctx: Ctx) -> Result<(), ApiError> {
    transact(store, ws, ctx.seed, async |tx, _| {
        for e in entries {
            let change = match e.list {
                List::HardBounces => EmailChange::HardBounce,
                List::Unsubscribes => EmailChange::Set(GlobalState::Unsubscribed),
                List::InvalidPhones => {
                    lists::put_invalid_phone(tx, &e.subject, e.at)?;
                    continue;
                }
            };
            // Keyed by `List::subject`, so it parses.
            if let Some(email) = Email::parse(&e.subject) {
                state::change_address(tx, &email, change, e.at).await?;
            }
        }
        Ok(())
    })
    .await?;
    Ok(())
}
