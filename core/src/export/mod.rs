//! POST /users/export/ids: read profiles back by identifier.

pub mod schema;
mod user;
#[cfg(test)]
mod user_tests;

use serde::Serialize;
use serde_json::{Map, Value};

use self::user::ExportUser;

use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::input;
use crate::profile::Profile;
use crate::repo::Tx;
use crate::store::Store;

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

/// A profile of workspace `ws` as the export shows it; `only` restricts the fields.
pub async fn render<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    p: &Profile,
    only: Option<&[String]>,
) -> Result<Value, ApiError> {
    let user = export_user(store, ws, p, only).await?;
    // Serialising our own plain data types (string keys only) cannot fail.
    Ok(serde_json::to_value(&user).unwrap_or(Value::Null))
}

/// `p` to serialize, with its subscription groups read when they are exported.
async fn export_user<'a, S: Store>(
    store: &S,
    ws: &WorkspaceName,
    p: &'a Profile,
    only: Option<&'a [String]>,
) -> Result<ExportUser<'a>, ApiError> {
    let mut user = ExportUser { profile: p, only, groups: None };
    if user.wants("subscription_groups") && !p.groups.is_empty() {
        user.groups = Some(crate::subscriptions::group_entries(store, ws, p, true).await?);
    }
    Ok(user)
}

/// The export's answer; members in key order, as a `Value` writes them.
#[derive(Serialize)]
struct Answer<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    invalid_user_ids: Vec<Value>,
    message: &'static str,
    users: Vec<ExportUser<'a>>,
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
    // The profiles are read first (the unit of work lends one at a time), then
    // written straight from where it holds them.
    let mut seen: Vec<ServiceId> = Vec::new();
    let mut groups = Vec::new();
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
                groups.push(export_user(store, ws, p, only.as_deref()).await?.groups);
                seen.push(id);
            }
        }
    }
    let users = seen
        .iter()
        .zip(groups)
        .filter_map(|(id, groups)| {
            let profile = tx.loaded(id)?;
            Some(ExportUser { profile, only: only.as_deref(), groups })
        })
        .collect();
    // 201, as the platform answers (every recorded export of its public clients).
    Ok(Response::json(201, &Answer { invalid_user_ids: invalid, message: "success", users }))
}
