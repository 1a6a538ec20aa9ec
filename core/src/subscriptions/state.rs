//! The two subscription state machines and their one transition function each.
//!
//! - **Group status**, per user and group: never set (`Unknown`), `Subscribed` or
//!   `Unsubscribed`. Moved only by [`set_group`] (the v1 and v2 set endpoints and
//!   `subscription_groups` in `/users/track` all end there).
//! - **Global email state**, per user and remembered per address: `subscribed`,
//!   `unsubscribed`, `opted_in`, plus the hard-bounce flag. Moved only by
//!   [`email_transition`] (`email_subscribe` in track, `/email/status`,
//!   `/email/blocklist`), on profiles and on address records alike.
//!
//! The two are stored independently: a global unsubscribe does not touch any group
//! status. [`effective`] combines them (a globally unsubscribed user is unsubscribed
//! from every email group), and a global re-subscribe brings every email group back
//! to its stored status.

use crate::ids::{Email, Identifier, ServiceId};
use crate::profile::states::{GlobalState, GroupState};
use crate::profile::Profile;
use crate::repo::keys::address_key;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table};
use crate::subscriptions::address::AddressState;
use crate::subscriptions::groups::Channel;
use crate::time::Timestamp;
use crate::users::locate::for_sharing;

/// A group status as reads report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Subscribed to the group.
    Subscribed,
    /// Unsubscribed from the group.
    Unsubscribed,
    /// No status change in the user's history.
    Unknown,
}

impl Status {
    /// The wire form: `Subscribed`, `Unsubscribed` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Subscribed => "Subscribed",
            Status::Unsubscribed => "Unsubscribed",
            Status::Unknown => "Unknown",
        }
    }
}

impl From<Option<GroupState>> for Status {
    fn from(s: Option<GroupState>) -> Status {
        match s {
            Some(GroupState::Subscribed) => Status::Subscribed,
            Some(GroupState::Unsubscribed) => Status::Unsubscribed,
            None => Status::Unknown,
        }
    }
}

/// The one transition of the group state machine: any status, `Unknown` included,
/// moves to the state that was set.
pub fn set_group(p: &mut Profile, group_id: &str, state: GroupState) {
    p.groups.insert(group_id.to_string(), state);
}

/// The stored status of a group: what was last set, `Unknown` if never.
pub fn stored(p: &Profile, group_id: &str) -> Status {
    p.groups.get(group_id).copied().into()
}

/// The status that decides delivery: the stored status, except that a globally
/// unsubscribed user is unsubscribed from every email group.
pub fn effective(p: &Profile, group_id: &str, channel: Option<Channel>) -> Status {
    if channel == Some(Channel::Email) && p.email_subscribe == Some(GlobalState::Unsubscribed) {
        return Status::Unsubscribed;
    }
    stored(p, group_id)
}

/// A change of the global email state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmailChange {
    /// `subscribed`, `unsubscribed` or `opted_in` (track, `/email/status`).
    Set(GlobalState),
    /// `/email/blocklist`: unsubscribed, and the address marked as a hard bounce.
    Blocklist,
    /// A hard bounce alone (a fixtures file's): the state stays as it is.
    HardBounce,
}

/// The one transition of the global email state machine, applied alike to a
/// profile's fields and to an address record's. Setting a state never clears the
/// hard-bounce flag (the platform removes bounces through a separate operation).
pub fn email_transition(global: &mut Option<GlobalState>, hard_bounced: &mut bool, change: EmailChange) {
    match change {
        EmailChange::Set(s) => *global = Some(s),
        EmailChange::Blocklist => {
            *global = Some(GlobalState::Unsubscribed);
            *hard_bounced = true;
        }
        EmailChange::HardBounce => *hard_bounced = true,
    }
}

/// Applies an email change to a profile.
pub fn change_profile(p: &mut Profile, change: EmailChange) {
    email_transition(&mut p.email_subscribe, &mut p.email_hard_bounced, change);
}

/// Which profiles share a group status change with the one named: those with the
/// same email (email groups), the same phone (SMS, RCS, WhatsApp), or none (LINE
/// users are not addressed by email or phone).
pub fn shared_by(channel: Channel) -> Option<bool> {
    match channel {
        Channel::Email => Some(false),
        Channel::Sms | Channel::Rcs | Channel::Whatsapp => Some(true),
        Channel::Line => None,
    }
}

/// Sets a group status on a profile and on every profile sharing its email (email
/// groups) or phone (phone channels).
pub async fn set_group_for<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    group_id: &str,
    channel: Channel,
    state: GroupState,
    at: Timestamp,
) -> Result<(), StoreError> {
    match shared_by(channel) {
        Some(by_phone) => for_sharing(tx, id, by_phone, at, |p| set_group(p, group_id, state)).await,
        None => {
            if let Some(p) = tx.profile_mut(id).await? {
                set_group(p, group_id, state);
                p.updated_at = p.updated_at.max(at);
            }
            Ok(())
        }
    }
}

/// Sets the global email state of a profile and of every profile sharing its email;
/// an address record already kept for that email follows, so that a profile getting
/// the address later inherits the latest state rather than an older one.
pub async fn set_global_for<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    state: GlobalState,
    at: Timestamp,
) -> Result<(), StoreError> {
    let change = EmailChange::Set(state);
    for_sharing(tx, id, false, at, |p| change_profile(p, change)).await?;
    let email = tx.profile(id).await?.and_then(|p| p.email.clone());
    if let Some(email) = email {
        super::lists::note_global(tx, &email, state, at).await?;
        let key = address_key(tx.workspace(), &email);
        if let Some(mut a) = tx.doc::<AddressState>(Table::Address, &key).await? {
            email_transition(&mut a.global, &mut a.hard_bounced, change);
            tx.put_doc(Table::Address, &key, &a)?;
        }
    }
    Ok(())
}

/// Applies an email change to an address: remembered in its address record (so a
/// profile that gets the address later inherits it) and applied to every profile
/// that has the address now.
pub async fn change_address<S: Store>(
    tx: &mut Tx<'_, S>,
    email: &Email,
    change: EmailChange,
    at: Timestamp,
) -> Result<(), StoreError> {
    let key = address_key(tx.workspace(), email);
    let mut a = tx.doc::<AddressState>(Table::Address, &key).await?.unwrap_or_default();
    email_transition(&mut a.global, &mut a.hard_bounced, change);
    tx.put_doc(Table::Address, &key, &a)?;
    match change {
        EmailChange::Set(state) => super::lists::note_global(tx, email, state, at).await?,
        EmailChange::Blocklist => super::lists::note_hard_bounce(tx, email, true, at).await?,
        EmailChange::HardBounce => super::lists::note_hard_bounce(tx, email, false, at).await?,
    }
    for id in tx.resolve(&Identifier::Email(email.clone())).await? {
        if let Some(p) = tx.profile_mut(&id).await? {
            change_profile(p, change);
            p.updated_at = p.updated_at.max(at);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdGen;

    fn profile() -> Profile {
        Profile::new(IdGen::new([1; 16]).service_id(Timestamp(0)), Timestamp(0))
    }

    #[test]
    fn a_group_never_set_is_unknown() {
        let p = profile();
        assert_eq!(stored(&p, "g"), Status::Unknown);
        assert_eq!(effective(&p, "g", Some(Channel::Email)), Status::Unknown);
    }

    #[test]
    fn any_group_state_moves_to_the_state_set() {
        let mut p = profile();
        for (state, expected) in [
            (GroupState::Unsubscribed, Status::Unsubscribed),
            (GroupState::Subscribed, Status::Subscribed),
            (GroupState::Subscribed, Status::Subscribed),
            (GroupState::Unsubscribed, Status::Unsubscribed),
        ] {
            set_group(&mut p, "g", state);
            assert_eq!(stored(&p, "g"), expected);
        }
        assert_eq!(stored(&p, "other"), Status::Unknown);
    }

    #[test]
    fn global_unsubscribe_masks_email_groups_but_keeps_their_stored_status() {
        let mut p = profile();
        set_group(&mut p, "news", GroupState::Subscribed);
        set_group(&mut p, "texts", GroupState::Subscribed);
        change_profile(&mut p, EmailChange::Set(GlobalState::Unsubscribed));
        assert_eq!(stored(&p, "news"), Status::Subscribed);
        assert_eq!(effective(&p, "news", Some(Channel::Email)), Status::Unsubscribed);
        assert_eq!(effective(&p, "never", Some(Channel::Email)), Status::Unsubscribed);
        // The global email state says nothing about SMS.
        assert_eq!(effective(&p, "texts", Some(Channel::Sms)), Status::Subscribed);
    }

    #[test]
    fn global_resubscribe_restores_each_stored_group_status() {
        let mut p = profile();
        set_group(&mut p, "a", GroupState::Subscribed);
        set_group(&mut p, "b", GroupState::Unsubscribed);
        change_profile(&mut p, EmailChange::Set(GlobalState::Unsubscribed));
        change_profile(&mut p, EmailChange::Set(GlobalState::OptedIn));
        assert_eq!(effective(&p, "a", Some(Channel::Email)), Status::Subscribed);
        assert_eq!(effective(&p, "b", Some(Channel::Email)), Status::Unsubscribed);
        assert_eq!(effective(&p, "c", Some(Channel::Email)), Status::Unknown);
    }

    #[test]
    fn a_group_change_while_globally_unsubscribed_is_stored_and_shows_after_resubscribe() {
        let mut p = profile();
        change_profile(&mut p, EmailChange::Set(GlobalState::Unsubscribed));
        set_group(&mut p, "a", GroupState::Subscribed);
        assert_eq!(stored(&p, "a"), Status::Subscribed);
        assert_eq!(effective(&p, "a", Some(Channel::Email)), Status::Unsubscribed);
        change_profile(&mut p, EmailChange::Set(GlobalState::Subscribed));
        assert_eq!(effective(&p, "a", Some(Channel::Email)), Status::Subscribed);
    }

    #[test]
    fn blocklisting_unsubscribes_and_marks_a_hard_bounce_that_a_later_state_keeps() {
        let mut global = Some(GlobalState::OptedIn);
        let mut bounced = false;
        email_transition(&mut global, &mut bounced, EmailChange::Blocklist);
        assert_eq!((global, bounced), (Some(GlobalState::Unsubscribed), true));
        email_transition(&mut global, &mut bounced, EmailChange::Set(GlobalState::Subscribed));
        assert_eq!((global, bounced), (Some(GlobalState::Subscribed), true));
    }

    #[test]
    fn every_email_state_is_reachable_from_every_other() {
        let states = [GlobalState::Subscribed, GlobalState::Unsubscribed, GlobalState::OptedIn];
        for from in states {
            for to in states {
                let (mut g, mut b) = (Some(from), false);
                email_transition(&mut g, &mut b, EmailChange::Set(to));
                assert_eq!((g, b), (Some(to), false));
            }
        }
    }

    #[test]
    fn line_groups_are_not_shared_through_email_or_phone() {
        assert_eq!(shared_by(Channel::Email), Some(false));
        assert_eq!(shared_by(Channel::Whatsapp), Some(true));
        assert_eq!(shared_by(Channel::Line), None);
    }
}
