//! Applying validated track operations to profiles inside a unit of work. Shared by
//! the asynchronous queue and the synchronous endpoint, so both behave alike.

use crate::address::{address_key, AddressState};
use crate::custom;
use crate::ids::{Email, IdGen, Identifier, ServiceId};
use crate::profile::Profile;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table};
use crate::subscriptions;
use crate::time::Timestamp;
use crate::track::{AttrUpdate, Target, TrackOp};

/// Among several profiles sharing an email or phone, the one to update: the most
/// recently updated identified profile, else the most recently updated one.
pub async fn pick_shared<S: Store>(tx: &mut Tx<'_, S>, ids: Vec<ServiceId>) -> Result<Option<ServiceId>, StoreError> {
    let mut best: Option<((bool, Timestamp), ServiceId)> = None;
    for id in ids {
        if let Some(p) = tx.profile(&id).await? {
            let rank = (p.is_identified(), p.updated_at);
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, id));
            }
        }
    }
    Ok(best.map(|(_, id)| id))
}

/// Finds the user an operation targets, creating it when allowed.
pub async fn locate<S: Store>(
    tx: &mut Tx<'_, S>,
    target: &Target,
    at: Timestamp,
    ids: &mut IdGen,
) -> Result<Option<ServiceId>, StoreError> {
    let found = tx.resolve(&target.ident).await?;
    let chosen = match target.ident {
        Identifier::Email(_) | Identifier::Phone(_) => pick_shared(tx, found).await?,
        _ => found.into_iter().next(),
    };
    if chosen.is_some() || !target.create {
        return Ok(chosen);
    }
    let mut p = Profile::new(ids.service_id(), at);
    match &target.ident {
        Identifier::External(x) => p.external_id = Some(x.clone()),
        Identifier::Alias(a) => {
            p.aliases.insert(a.alias_label.clone(), a.alias_name.clone());
        }
        Identifier::Email(e) => p.email = Some(e.clone()),
        Identifier::Phone(ph) => p.phone = Some(ph.clone()),
        Identifier::Service(_) => return Ok(None),
    }
    let id = p.id.clone();
    let email = p.email.clone();
    tx.insert_profile(p);
    if let Some(e) = email {
        link_email(tx, &id, &e).await?;
    }
    Ok(Some(id))
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

/// Every profile sharing the email (or phone) of `id`, including `id` itself.
pub async fn sharing<S: Store>(tx: &mut Tx<'_, S>, id: &ServiceId, by_phone: bool) -> Result<Vec<ServiceId>, StoreError> {
    let ident = match tx.profile(id).await? {
        Some(p) if by_phone => p.phone.clone().map(Identifier::Phone),
        Some(p) => p.email.clone().map(Identifier::Email),
        None => None,
    };
    let mut out = match ident {
        Some(i) => tx.resolve(&i).await?,
        None => Vec::new(),
    };
    if !out.contains(id) {
        out.push(id.clone());
    }
    Ok(out)
}

/// Changes every profile sharing the email (or phone) of `id`.
pub async fn for_sharing<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    by_phone: bool,
    at: Timestamp,
    mut change: impl FnMut(&mut Profile),
) -> Result<(), StoreError> {
    for other in sharing(tx, id, by_phone).await? {
        if let Some(p) = tx.profile_mut(&other).await? {
            change(p);
            p.updated_at = p.updated_at.max(at);
        }
    }
    Ok(())
}

/// Applies one operation; returns the profile it updated, if any.
pub async fn apply_op<S: Store>(
    tx: &mut Tx<'_, S>,
    op: &TrackOp,
    at: Timestamp,
    ids: &mut IdGen,
) -> Result<Option<ServiceId>, StoreError> {
    let Some(id) = locate(tx, op.target(), at, ids).await? else {
        return Ok(None);
    };
    match op {
        TrackOp::Attributes { updates, merge_objects, .. } => {
            for u in updates {
                apply_update(tx, &id, u, *merge_objects, at).await?;
            }
        }
        TrackOp::Event { name, time, .. } => {
            if let Some(p) = tx.profile_mut(&id).await? {
                p.events.entry(name.clone()).and_modify(|s| s.record(*time, 1)).or_insert(crate::profile::Summary::once(*time));
            }
        }
        TrackOp::Purchase { product_id, price, quantity, time, .. } => {
            if let Some(p) = tx.profile_mut(&id).await? {
                // The platform counts a purchase of quantity N as N purchases.
                p.purchases
                    .entry(product_id.clone())
                    .and_modify(|s| s.record(*time, *quantity))
                    .or_insert(crate::profile::Summary { first: *time, last: *time, count: *quantity });
                p.total_revenue = crate::profile::add_revenue(p.total_revenue, price * *quantity as f64);
            }
        }
    }
    if let Some(p) = tx.profile_mut(&id).await? {
        p.updated_at = p.updated_at.max(at);
    }
    Ok(Some(id))
}

async fn apply_update<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    u: &AttrUpdate,
    merge_objects: bool,
    at: Timestamp,
) -> Result<(), StoreError> {
    match u {
        AttrUpdate::Email(e) => {
            let Some(p) = tx.profile_mut(id).await? else { return Ok(()) };
            let changed = p.email != *e;
            p.email = e.clone();
            if let (true, Some(e)) = (changed, e) {
                link_email(tx, id, e).await?;
            }
        }
        AttrUpdate::Phone(ph) => {
            if let Some(p) = tx.profile_mut(id).await? {
                p.phone = ph.clone();
            }
        }
        AttrUpdate::Standard(k, v) => {
            if let Some(p) = tx.profile_mut(id).await? {
                if v.is_null() {
                    p.standard.remove(k);
                } else {
                    p.standard.insert(k.clone(), v.clone());
                }
            }
        }
        AttrUpdate::EmailSubscribe(s) => subscriptions::state::set_global_for(tx, id, *s, at).await?,
        AttrUpdate::PushSubscribe(s) => {
            if let Some(p) = tx.profile_mut(id).await? {
                p.push_subscribe = Some(*s);
            }
        }
        AttrUpdate::Group { id: gid, channel, state } => {
            subscriptions::state::set_group_for(tx, id, gid, *channel, *state, at).await?
        }
        AttrUpdate::Custom(k, op) => {
            if let Some(p) = tx.profile_mut(id).await? {
                custom::apply(&mut p.custom, k, op, merge_objects);
            }
        }
    }
    Ok(())
}
