//! Applying validated track operations to profiles inside a unit of work. Shared by
//! the asynchronous queue and the synchronous endpoint, so both behave alike.

use std::collections::BTreeMap;

use serde_json::Value;

use super::parse::{object_error, AttrUpdate, InputArray, Lookup, NotLookedUp, Parsed, Target, TrackOp};
use crate::ids::WorkspaceName;
use crate::ids::{IdGen, Identifier, ServiceId};
use crate::profile::custom;
use crate::profile::{add_revenue, Profile, Summary};
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::subscriptions::address::link_email;
use crate::subscriptions::groups::{self, Channel};
use crate::subscriptions::state::{set_global_for, set_group_for};
use crate::subscriptions::BAD_GROUP_ID;
use crate::time::Timestamp;
use crate::users::locate::find;

/// Looks up the subscription groups a parsed request names: an update of a group
/// that does not exist is dropped and reported as a non-fatal error of its object
/// (placed after that object's other errors); the rest of the object stands.
pub async fn look_up_groups<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    parsed: Parsed<NotLookedUp>,
) -> Result<Parsed<Channel>, StoreError> {
    let Parsed { ops, mut errors, processed } = parsed;
    let mut channels: BTreeMap<String, Option<Channel>> = BTreeMap::new();
    let mut out = Vec::with_capacity(ops.len());
    for (index, op) in ops {
        let op = match op {
            TrackOp::Attributes { target, merge_objects, updates } => {
                let mut kept = Vec::with_capacity(updates.len());
                for u in updates {
                    let (id, state) = match u.lookup() {
                        Lookup::Ready(u) => {
                            kept.push(u);
                            continue;
                        }
                        Lookup::Group { id, state } => (id, state),
                    };
                    let channel = match channels.get(&id) {
                        Some(c) => *c,
                        None => {
                            let c = groups::get(store, ws, &id).await?.map(|g| g.channel);
                            channels.insert(id.clone(), c);
                            c
                        }
                    };
                    match channel {
                        Some(channel) => kept.push(AttrUpdate::Group { id, channel, state }),
                        None => {
                            insert_error(&mut errors, index, object_error(InputArray::Attributes, index, BAD_GROUP_ID))
                        }
                    }
                }
                TrackOp::Attributes { target, merge_objects, updates: kept }
            }
            TrackOp::Event { target, name, time } => TrackOp::Event { target, name, time },
            TrackOp::Purchase { target, product_id, price, quantity, time } => {
                TrackOp::Purchase { target, product_id, price, quantity, time }
            }
        };
        out.push((index, op));
    }
    Ok(Parsed { ops: out, errors, processed })
}

/// Inserts an error of attribute object `index` after the errors of the objects up
/// to it (errors run array by array, object by object; request-wide ones, without
/// an index, come last).
fn insert_error(errors: &mut Vec<Value>, index: usize, error: Value) {
    let after = |e: &Value| {
        let array = e.get("input_array").and_then(Value::as_str);
        let i = e.get("index").and_then(Value::as_u64);
        match (array, i) {
            (Some("attributes"), Some(i)) => i > index as u64,
            _ => true,
        }
    };
    let at = errors.iter().position(after).unwrap_or(errors.len());
    errors.insert(at, error);
}

/// Finds the user an operation targets, creating it when allowed (a new profile
/// with an email inherits what is remembered about the address).
pub async fn locate<S: Store>(
    tx: &mut Tx<'_, S>,
    target: &Target,
    at: Timestamp,
    ids: &mut IdGen,
) -> Result<Option<ServiceId>, StoreError> {
    let chosen = find(tx, &target.ident).await?;
    if chosen.is_some() || !target.create {
        return Ok(chosen);
    }
    let mut p = Profile::new(ids.service_id(at), at);
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
            let mut rest = updates.as_slice();
            while let Some(u) = rest.first() {
                // A run of updates of this profile's own fields takes it once: taking
                // it for each (3 to 5 a warehouse row) was 4% of a sync's building
                // thread (callgrind).
                let plain = rest.iter().take_while(|u| own_field(u)).count();
                if plain == 0 {
                    apply_update(tx, &id, u, *merge_objects, at).await?;
                    rest = &rest[1..];
                    continue;
                }
                if let Some(p) = tx.profile_mut(&id).await? {
                    for u in &rest[..plain] {
                        set_own_field(p, u, *merge_objects);
                    }
                }
                rest = &rest[plain..];
            }
        }
        TrackOp::Event { name, time, .. } => {
            if let Some(p) = tx.profile_mut(&id).await? {
                p.events.entry(name.clone()).and_modify(|s| s.record(*time, 1)).or_insert(Summary::once(*time));
            }
        }
        TrackOp::Purchase { product_id, price, quantity, time, .. } => {
            if let Some(p) = tx.profile_mut(&id).await? {
                // The platform counts a purchase of quantity N as N purchases.
                p.purchases.entry(product_id.clone()).and_modify(|s| s.record(*time, *quantity)).or_insert(Summary {
                    first: *time,
                    last: *time,
                    count: *quantity,
                });
                p.total_revenue = add_revenue(p.total_revenue, price * *quantity as f64);
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
        AttrUpdate::EmailSubscribe(s) => set_global_for(tx, id, *s, at).await?,
        AttrUpdate::Group { id: gid, channel, state } => set_group_for(tx, id, gid, *channel, *state, at).await?,
        u => {
            if let Some(p) = tx.profile_mut(id).await? {
                set_own_field(p, u, merge_objects);
            }
        }
    }
    Ok(())
}

/// True for an update of the profile's own fields only (no other profile, no
/// other document): [`set_own_field`] applies it.
fn own_field(u: &AttrUpdate) -> bool {
    matches!(u, AttrUpdate::Phone(_) | AttrUpdate::Standard(..) | AttrUpdate::PushSubscribe(_) | AttrUpdate::Custom(..))
}

/// Applies an update [`own_field`] accepts; any other is left to [`apply_update`].
fn set_own_field(p: &mut Profile, u: &AttrUpdate, merge_objects: bool) {
    match u {
        AttrUpdate::Phone(ph) => p.phone = ph.clone(),
        AttrUpdate::Standard(k, v) if v.is_null() => {
            p.standard.remove(k);
        }
        AttrUpdate::Standard(k, v) => {
            p.standard.insert(k.clone(), v.clone());
        }
        AttrUpdate::PushSubscribe(s) => p.push_subscribe = Some(*s),
        AttrUpdate::Custom(k, op) => custom::apply(&mut p.custom, k, op, merge_objects),
        AttrUpdate::Email(_) | AttrUpdate::EmailSubscribe(_) | AttrUpdate::Group { .. } => {}
    }
}
