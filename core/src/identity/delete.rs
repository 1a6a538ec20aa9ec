//! `POST /users/delete`: removes whole profiles (identifiers, attributes, events,
//! purchases, subscription states), so that nothing of them can be read back; an
//! identifier of a deleted user names nobody afterwards, and a later track with
//! it creates a fresh profile.
//!
//! The arrays `external_ids`, `user_aliases`, `service_ids` (also `braze_ids`),
//! `email_addresses` and `phone_numbers` may be combined in one request, with at
//! most 50 entries in all. Email and phone entries are `{"email" | "phone": ..,
//! "prioritization": [..]}`; when several users still match after prioritization,
//! that entry deletes nobody. `deleted` counts the profiles actually removed.

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::input;
use crate::repo::transact::transact;
use crate::store::Store;
use crate::users::prioritization::{pick, Prioritization, Purpose};

/// Most entries of all arrays together.
pub const MAX_ENTRIES: usize = 50;

/// One user to delete.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The identifier.
    pub ident: Identifier,
    /// For email and phone entries.
    pub prioritization: Option<Prioritization>,
}

fn list<'a>(body: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(ApiError::bad(format!("'{key}' must be an array"))),
    }
}

fn shared(item: &Value, array: &str, key: &str, parse: fn(&str) -> Option<Identifier>) -> Result<Target, ApiError> {
    let what = if key == "email" { "a valid email address" } else { "a valid E.164 phone number" };
    let shape = || {
        ApiError::bad(format!("each entry of '{array}' must be an object with '{key}' ({what}) and 'prioritization'"))
    };
    let obj = item.as_object().ok_or_else(shape)?;
    let ident = obj.get(key).and_then(Value::as_str).and_then(parse).ok_or_else(shape)?;
    let prioritization = Prioritization::parse(obj.get("prioritization"), Purpose::Delete).map_err(ApiError::bad)?;
    Ok(Target { ident, prioritization: Some(prioritization) })
}

/// Parses a `/users/delete` body; every entry is checked before anything is deleted.
pub fn parse(body: &[u8]) -> Result<Vec<Target>, ApiError> {
    let body = &input::object(body).map_err(ApiError::bad)?;
    let externals = list(body, "external_ids")?;
    let aliases = list(body, "user_aliases")?;
    let services: Vec<&Value> = list(body, "service_ids")?.iter().chain(list(body, "braze_ids")?).collect();
    let emails = list(body, "email_addresses")?;
    let phones = list(body, "phone_numbers")?;
    let total = externals.len() + aliases.len() + services.len() + emails.len() + phones.len();
    if total == 0 {
        return Err(ApiError::bad(
            "one of 'external_ids', 'user_aliases', 'service_ids', 'email_addresses' or 'phone_numbers' is required",
        ));
    }
    if total > MAX_ENTRIES {
        return Err(ApiError::bad("a single request may not contain more than 50 users to delete"));
    }
    let mut out = Vec::with_capacity(total);
    let plain = |ident| Target { ident, prioritization: None };
    for v in externals {
        let x = v
            .as_str()
            .and_then(ExternalId::parse)
            .ok_or_else(|| ApiError::bad("'external_ids' must hold non-empty strings"))?;
        out.push(plain(Identifier::External(x)));
    }
    for v in aliases {
        let a = UserAlias::from_json(v)
            .ok_or_else(|| ApiError::bad("'user_aliases' must hold objects with 'alias_name' and 'alias_label'"))?;
        out.push(plain(Identifier::Alias(a)));
    }
    for v in services {
        let id = v
            .as_str()
            .and_then(ServiceId::parse)
            .ok_or_else(|| ApiError::bad("'service_ids' must hold non-empty strings"))?;
        out.push(plain(Identifier::Service(id)));
    }
    for v in emails {
        out.push(shared(v, "email_addresses", "email", |s| Email::parse(s).map(Identifier::Email))?);
    }
    for v in phones {
        out.push(shared(v, "phone_numbers", "phone", |s| Phone::parse(s).map(Identifier::Phone))?);
    }
    Ok(out)
}

/// POST /users/delete: `{"deleted": n, "message": "success"}` (201).
pub async fn delete<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let targets = parse(body)?;
    let deleted = transact(store, ws, ctx.seed, async |tx, _| {
        let mut deleted = 0;
        for t in &targets {
            if let Some(id) = pick(tx, &t.ident, t.prioritization.as_ref()).await?.one() {
                if tx.delete_profile(&id).await? {
                    deleted += 1;
                }
            }
        }
        Ok(deleted)
    })
    .await?;
    Ok(Response::json(201, &json!({"deleted": deleted, "message": "success"})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Kit;

    #[test]
    fn parse_checks_counts_shapes_and_prioritization() {
        let err = |v: Value| parse(v.to_string().as_bytes()).unwrap_err();
        assert!(matches!(err(json!({})), ApiError::BadRequest(_)));
        let ids: Vec<String> = (0..51).map(|i| format!("u{i}")).collect();
        assert_eq!(
            err(json!({"external_ids": ids})),
            ApiError::bad("a single request may not contain more than 50 users to delete")
        );
        assert_eq!(
            err(json!({"email_addresses": [{"email": "a@example.com", "prioritization": ["least_recently_updated"]}]})),
            ApiError::bad("'least_recently_updated' is not allowed in the prioritization of /users/delete")
        );
        let ok = json!({"external_ids": ["a"], "phone_numbers": [{"phone": "+14155550100", "prioritization": ["identified"]}]});
        assert_eq!(parse(ok.to_string().as_bytes()).unwrap().len(), 2);
    }

    #[test]
    fn deleting_removes_the_profile_and_its_identifiers() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "u1", "email": "u1@example.com", "color": "red"}]}));
        let (status, body) = kit.post("/users/delete", json!({"external_ids": ["u1", "nobody"]}));
        assert_eq!((status, body), (201, json!({"deleted": 1, "message": "success"})));
        assert_eq!(kit.user("u1"), Value::Null);
        assert!(kit.users(json!({"email_address": "u1@example.com"})).is_empty());
        kit.track(json!({"attributes": [{"external_id": "u1", "size": 1}]}));
        assert_eq!(kit.user("u1")["custom_attributes"], json!({"size": 1}));
    }
}
