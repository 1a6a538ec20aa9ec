//! POST /subscription/status/set (v1) and POST /v2/subscription/status/set: parse
//! into a [`Plan`] (every check done before anything is written), then apply it
//! through [`state::set_group_for`], the same transition `/users/track` uses.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::state;
use super::{
    body_object, check_channel, double_opt_in, field, group_of, json_strings, parse_named, with_errors, Kind, Named,
    BAD_GROUP_STATE, EMAIL_AND_PHONE, MAX_IDS, TOO_MANY_IDS,
};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{Identifier, ServiceId};
use crate::profile::states::GroupState;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::subscriptions::groups::Group;

/// Most `subscription_groups` entries in one v2 request.
pub const MAX_GROUP_ENTRIES: usize = 50;

/// One group to set for some users.
#[derive(Debug)]
struct Update {
    group: Group,
    state: GroupState,
    users: Vec<Named>,
}

/// A validated request.
type Plan = Vec<Update>;

fn group_state(v: Option<&Value>) -> Result<GroupState, ApiError> {
    v.and_then(Value::as_str).and_then(GroupState::parse).ok_or_else(|| ApiError::bad(BAD_GROUP_STATE))
}

/// The identifiers of one group entry; `fields` maps each body field to its kind
/// (and whether a lone string is accepted).
fn identifiers(
    obj: &Map<String, Value>,
    group: &Group,
    fields: [(&str, Kind, bool); 3],
) -> Result<Vec<Named>, ApiError> {
    let mut out = Vec::new();
    for (name, kind, one_allowed) in fields {
        if let Some(v) = field(obj, name) {
            check_channel(group, kind, name)?;
            out.extend(parse_named(json_strings(v, name, one_allowed)?, kind, name)?);
        }
    }
    Ok(out)
}

/// POST /subscription/status/set: one group; `external_id`, `email` or `phone`
/// (each a string or an array of 1 to 50); external ids may accompany emails or
/// phones (every user named is updated), emails and phones may not be combined.
pub async fn set_v1<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let b = body_object(body)?;
    if field(&b, "email").is_some() && field(&b, "phone").is_some() {
        return Err(ApiError::bad(EMAIL_AND_PHONE));
    }
    let group = group_of(store, ws, b.get("subscription_group_id")).await?;
    let state = group_state(b.get("subscription_state"))?;
    double_opt_in(&b)?;
    let fields = [("external_id", Kind::External, true), ("email", Kind::Email, true), ("phone", Kind::Phone, true)];
    let users = identifiers(&b, &group, fields)?;
    if users.is_empty() {
        return Err(ApiError::bad("One of 'external_id', 'email' or 'phone' is required"));
    }
    if users.len() > MAX_IDS {
        return Err(ApiError::bad(TOO_MANY_IDS));
    }
    apply(store, ws, vec![Update { group, state, users }], ctx).await
}

/// POST /v2/subscription/status/set: several groups, each entry with exactly one of
/// `external_ids`, `emails`, `phones`; emails and phones never in the same request;
/// at most 50 distinct identifiers per request.
pub async fn set_v2<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let b = body_object(body)?;
    let entries = match field(&b, "subscription_groups") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => return Err(ApiError::bad("'subscription_groups' must be an array of 1 to 50 objects")),
    };
    if entries.len() > MAX_GROUP_ENTRIES {
        return Err(ApiError::bad("'subscription_groups' must be an array of 1 to 50 objects"));
    }
    let uses = |key: &str| entries.iter().any(|e| e.as_object().is_some_and(|o| field(o, key).is_some()));
    if uses("emails") && uses("phones") {
        return Err(ApiError::bad(EMAIL_AND_PHONE));
    }
    double_opt_in(&b)?;
    let mut plan = Plan::new();
    let mut distinct: BTreeSet<Identifier> = BTreeSet::new();
    for entry in entries {
        let obj = entry.as_object().ok_or_else(|| {
            ApiError::bad(
                "Each item in the 'subscription_groups' array must be a JSON object with 'subscription_group_id' and 'subscription_state' keys",
            )
        })?;
        let group = group_of(store, ws, obj.get("subscription_group_id")).await?;
        let state = group_state(obj.get("subscription_state"))?;
        double_opt_in(obj)?;
        let present = ["external_ids", "emails", "phones"].iter().filter(|k| field(obj, k).is_some()).count();
        if present != 1 {
            return Err(ApiError::bad(
                "Each item in the 'subscription_groups' array needs exactly one of 'external_ids', 'emails' or 'phones'",
            ));
        }
        let fields =
            [("external_ids", Kind::External, false), ("emails", Kind::Email, true), ("phones", Kind::Phone, true)];
        let users = identifiers(obj, &group, fields)?;
        distinct.extend(users.iter().map(|n| n.ident.clone()));
        if distinct.len() > MAX_IDS {
            return Err(ApiError::bad(TOO_MANY_IDS));
        }
        plan.push(Update { group, state, users });
    }
    apply(store, ws, plan, ctx).await
}

/// The users an identifier names: one for an external id, every user sharing an
/// email or phone.
async fn users_of<S: Store>(tx: &mut Tx<'_, S>, n: &Named) -> Result<Vec<ServiceId>, StoreError> {
    match n.ident {
        Identifier::External(_) => Ok(tx.resolve_one(&n.ident).await?.into_iter().collect()),
        _ => tx.resolve(&n.ident).await,
    }
}

/// Applies a plan in one unit of work, retried as a whole on conflict; answers 201.
async fn apply<S: Store>(store: &S, ws: &WorkspaceName, plan: Plan, ctx: Ctx) -> Result<Response, ApiError> {
    let at = ctx.now;
    let errors = transact(store, ws, ctx.seed, async |tx, _| {
        let mut errors = Vec::new();
        let mut missing: BTreeSet<&Identifier> = BTreeSet::new();
        for u in &plan {
            for n in &u.users {
                let ids = users_of(tx, n).await?;
                if ids.is_empty() && missing.insert(&n.ident) {
                    errors.push(n.not_found());
                }
                for id in ids {
                    state::set_group_for(tx, &id, &u.group.id, u.group.channel, u.state, at).await?;
                }
            }
        }
        Ok(errors)
    })
    .await?;
    Ok(Response::json(201, &with_errors(json!({"message": "success"}), errors)))
}
