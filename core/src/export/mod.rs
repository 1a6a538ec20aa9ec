//! POST /users/export/ids: read profiles back by identifier.

pub mod schema;

use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::input;
use crate::repo::Tx;
use crate::store::Store;
use crate::users::profile::Profile;

/// Most `external_ids` plus `user_aliases` in one request.
pub const MAX_IDS: usize = 50;

/// Every field `fields_to_export` may name.
pub const FIELDS: &[&str] = &[
    "external_id",
    "user_aliases",
    "service_id",
    "braze_id",
    "created_at",
    "updated_at",
    "email",
    "phone",
    "first_name",
    "last_name",
    "gender",
    "dob",
    "country",
    "home_city",
    "language",
    "time_zone",
    "image_url",
    "current_location",
    "custom_attributes",
    "custom_events",
    "purchases",
    "total_revenue",
    "email_subscribe",
    "push_subscribe",
    "email_hard_bounced",
    "subscription_groups",
    "standard_attributes",
];

fn bad_ids() -> ApiError {
    ApiError::bad("The max number of external_ids and aliases per request was exceeded")
}

fn string_list<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Vec<&'a Value>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.iter().collect()),
        Some(_) => Err(ApiError::bad(format!("'{key}' must be an array"))),
    }
}

/// Parses the request into identifiers, in request order.
fn identifiers(body: &Map<String, Value>) -> Result<Vec<(Identifier, Value)>, ApiError> {
    let mut out = Vec::new();
    let externals = string_list(body, "external_ids")?;
    let aliases = string_list(body, "user_aliases")?;
    if externals.len() + aliases.len() > MAX_IDS {
        return Err(bad_ids());
    }
    for v in externals {
        let x = v
            .as_str()
            .and_then(ExternalId::parse)
            .ok_or_else(|| ApiError::bad("'external_ids' must hold non-empty strings"))?;
        out.push((Identifier::External(x), v.clone()));
    }
    for v in aliases {
        let a = UserAlias::from_json(v)
            .ok_or_else(|| ApiError::bad("'user_aliases' must hold objects with 'alias_name' and 'alias_label'"))?;
        out.push((Identifier::Alias(a), v.clone()));
    }
    let mut single = |key: &str, parse: fn(&str) -> Option<Identifier>| -> Result<(), ApiError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(v) => {
                let ident = v.as_str().and_then(parse).ok_or_else(|| ApiError::bad(format!("'{key}' is not valid")))?;
                out.push((ident, v.clone()));
                Ok(())
            }
        }
    };
    single("service_id", |s| ServiceId::parse(s).map(Identifier::Service))?;
    single("braze_id", |s| ServiceId::parse(s).map(Identifier::Service))?;
    single("email_address", |s| Email::parse(s).map(Identifier::Email))?;
    single("phone", |s| Phone::parse(s).map(Identifier::Phone))?;
    let service_ids = string_list(body, "service_ids")?;
    if out.len() + service_ids.len() > MAX_IDS {
        return Err(bad_ids());
    }
    for v in service_ids {
        let id =
            v.as_str().and_then(ServiceId::parse).ok_or_else(|| ApiError::bad("'service_ids' must hold strings"))?;
        out.push((Identifier::Service(id), v.clone()));
    }
    if out.is_empty() {
        return Err(ApiError::bad(
            "one of 'external_ids', 'user_aliases', 'service_id', 'service_ids', 'email_address' or 'phone' is required",
        ));
    }
    Ok(out)
}

fn fields(body: &Map<String, Value>) -> Result<Option<Vec<String>>, ApiError> {
    match body.get("fields_to_export") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(f) if FIELDS.contains(&f) => out.push(f.to_string()),
                    _ => return Err(ApiError::bad(format!("'fields_to_export' holds an unknown field: {item}"))),
                }
            }
            Ok(Some(out))
        }
        Some(_) => Err(ApiError::bad("'fields_to_export' must be an array of strings")),
    }
}

/// Renders a profile of workspace `ws`; `only` restricts the fields. Takes the
/// store, not the unit of work, so that the profile is rendered where the unit of
/// work holds it, not copied out of it first.
pub async fn render<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    p: &Profile,
    only: Option<&[String]>,
) -> Result<Value, ApiError> {
    let want = |f: &str| only.is_none_or(|o| o.iter().any(|x| x == f || (f == "service_id" && x == "braze_id")));
    let mut u = Map::new();
    if want("created_at") {
        u.insert("created_at".into(), json!(p.created_at.to_rfc3339()));
    }
    if want("updated_at") {
        u.insert("updated_at".into(), json!(p.updated_at.to_rfc3339()));
    }
    if want("service_id") {
        u.insert("service_id".into(), json!(p.id.as_str()));
    }
    if let (true, Some(x)) = (want("external_id"), &p.external_id) {
        u.insert("external_id".into(), json!(x.as_str()));
    }
    if want("user_aliases") && !p.aliases.is_empty() {
        u.insert("user_aliases".into(), Value::Array(p.alias_list().iter().map(UserAlias::to_json).collect()));
    }
    if let (true, Some(e)) = (want("email"), &p.email) {
        u.insert("email".into(), json!(e.as_str()));
    }
    if let (true, Some(ph)) = (want("phone"), &p.phone) {
        u.insert("phone".into(), json!(ph.as_str()));
    }
    for (k, v) in &p.standard {
        if want(k) || want("standard_attributes") {
            u.insert(k.clone(), v.clone());
        }
    }
    if want("custom_attributes") && !p.custom.is_empty() {
        u.insert("custom_attributes".into(), Value::Object(p.custom.clone()));
    }
    let summaries = |m: &std::collections::BTreeMap<String, crate::users::profile::Summary>| -> Value {
        Value::Array(
            m.iter()
                .map(|(n, s)| json!({"name": n, "first": s.first.to_rfc3339(), "last": s.last.to_rfc3339(), "count": s.count}))
                .collect(),
        )
    };
    if want("custom_events") && !p.events.is_empty() {
        u.insert("custom_events".into(), summaries(&p.events));
    }
    if want("purchases") && !p.purchases.is_empty() {
        u.insert("purchases".into(), summaries(&p.purchases));
    }
    if want("total_revenue") && !p.purchases.is_empty() {
        u.insert("total_revenue".into(), json!(p.total_revenue));
    }
    if let (true, Some(s)) = (want("email_subscribe"), p.email_subscribe) {
        u.insert("email_subscribe".into(), json!(s.as_str()));
    }
    if let (true, Some(s)) = (want("push_subscribe"), p.push_subscribe) {
        u.insert("push_subscribe".into(), json!(s.as_str()));
    }
    if want("email_hard_bounced") {
        u.insert("email_hard_bounced".into(), json!(p.email_hard_bounced));
    }
    if want("subscription_groups") && !p.groups.is_empty() {
        let list = crate::subscriptions::group_entries(store, ws, p, true).await?;
        u.insert("subscription_groups".into(), Value::Array(list));
    }
    Ok(Value::Object(u))
}

/// POST /users/export/ids.
pub async fn export_ids<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8]) -> Result<Response, ApiError> {
    let body = &input::object(body).map_err(ApiError::bad)?;
    let idents = identifiers(body)?;
    let only = fields(body)?;
    let mut tx = Tx::new(store, ws.clone());
    // Every identifier and profile the request names in two store reads, not two
    // per identifier: the resolution below then finds them in the unit of work.
    let names: Vec<Identifier> = idents.iter().map(|(ident, _)| ident.clone()).collect();
    tx.prefetch(&names).await?;
    let mut users = Vec::new();
    let mut seen: Vec<ServiceId> = Vec::new();
    let mut invalid = Vec::new();
    for (ident, raw) in idents {
        let found = tx.resolve(&ident).await?;
        if found.is_empty() {
            invalid.push(raw);
        }
        for id in found {
            if seen.contains(&id) {
                continue;
            }
            if let Some(p) = tx.profile(&id).await? {
                users.push(render(store, ws, p, only.as_deref()).await?);
                seen.push(id);
            }
        }
    }
    let mut out = json!({"users": users, "message": "success"});
    if !invalid.is_empty() {
        out["invalid_user_ids"] = Value::Array(invalid);
    }
    Ok(Response::json(200, &out))
}
