//! `POST /users/identify`: gives an external id to anonymous (alias-only,
//! email-only, phone-only) profiles.
//!
//! For each entry, the anonymous profile is found (by alias, or by email or phone
//! through the prioritization); then
//! - no user has the external id yet: the anonymous profile gets it;
//! - a user has it: the anonymous profile is folded into that user
//!   ([`crate::identity::merge::absorb`]) and removed, unless that user already has an alias
//!   with a label the anonymous profile uses (the label conflict: nothing happens).
//!
//! Entries that find no profile, several profiles, or a profile already identified
//! under another external id are skipped. Entries are applied in request order
//! (aliases, then emails, then phones) in one unit of work, so several aliases may
//! attach to one external id in one request.

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::identity::merge::combine;
use crate::ids::WorkspaceName;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::input;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;
use crate::users::prioritization::{pick, Prioritization, Purpose};

/// Most entries (aliases, emails and phones together) in one request.
pub const MAX_ENTRIES: usize = 50;

/// The three arrays of the body.
const ARRAYS: [&str; 3] = ["aliases_to_identify", "emails_to_identify", "phone_numbers_to_identify"];

/// One entry to identify.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The external id to give.
    pub external_id: ExternalId,
    /// How the anonymous profile is found.
    pub ident: Identifier,
    /// For email and phone entries.
    pub prioritization: Option<Prioritization>,
}

/// A parsed body.
#[derive(Clone, Debug, PartialEq)]
pub struct Identify {
    /// Entries in processing order.
    pub entries: Vec<Entry>,
    /// Number of `aliases_to_identify` entries (the response's `aliases_processed`).
    pub aliases: usize,
}

fn external_id(obj: &Map<String, Value>, array: &str) -> Result<ExternalId, ApiError> {
    let x = obj.get("external_id").and_then(Value::as_str).and_then(ExternalId::parse).ok_or_else(|| {
        ApiError::bad(format!("each entry of '{array}' needs an 'external_id' that is a non-empty string"))
    })?;
    if x.is_blocked() {
        return Err(ApiError::bad("provided external_id is blacklisted and disallowed"));
    }
    Ok(x)
}

fn entry(array: &str, item: &Value) -> Result<Entry, ApiError> {
    let obj = item.as_object().ok_or_else(|| ApiError::bad(format!("'{array}' must be an array of objects")))?;
    let external_id = external_id(obj, array)?;
    let ident = match array {
        "aliases_to_identify" => {
            let a = obj.get("user_alias").and_then(UserAlias::from_json).ok_or_else(|| {
                ApiError::bad("each entry of 'aliases_to_identify' needs a 'user_alias' object with string 'alias_name' and 'alias_label'")
            })?;
            Identifier::Alias(a)
        }
        "emails_to_identify" => {
            let e = obj.get("email").and_then(Value::as_str).and_then(Email::parse).ok_or_else(|| {
                ApiError::bad("each entry of 'emails_to_identify' needs an 'email' that is a valid email address")
            })?;
            Identifier::Email(e)
        }
        _ => {
            let p = obj.get("phone").and_then(Value::as_str).and_then(Phone::parse).ok_or_else(|| {
                ApiError::bad(
                    "each entry of 'phone_numbers_to_identify' needs a 'phone' that is a valid E.164 phone number",
                )
            })?;
            Identifier::Phone(p)
        }
    };
    let prioritization = match ident {
        Identifier::Alias(_) => None,
        _ => Some(Prioritization::parse(obj.get("prioritization"), Purpose::IdentifyOrMerge).map_err(ApiError::bad)?),
    };
    Ok(Entry { external_id, ident, prioritization })
}

/// Parses a `/users/identify` body; every entry is checked before anything is applied.
pub fn parse(body: &[u8]) -> Result<Identify, ApiError> {
    let body = &input::object(body).map_err(ApiError::bad)?;
    let mut lists = Vec::new();
    for array in ARRAYS {
        match body.get(array) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => lists.push((array, items)),
            Some(_) => return Err(ApiError::bad(format!("'{array}' must be an array of objects"))),
        }
    }
    // Arrays given but all empty identify nobody: refused as if none were given.
    if lists.iter().all(|(_, items)| items.is_empty()) {
        return Err(ApiError::bad(
            "one of 'aliases_to_identify', 'emails_to_identify' or 'phone_numbers_to_identify' is required",
        ));
    }
    if lists.iter().map(|(_, items)| items.len()).sum::<usize>() > MAX_ENTRIES {
        return Err(ApiError::bad(
            "a single request may not contain more than 50 aliases, emails or phone numbers to identify",
        ));
    }
    let mut out = Identify { entries: Vec::new(), aliases: 0 };
    for (array, items) in lists {
        for item in items {
            out.entries.push(entry(array, item)?);
        }
        if array == "aliases_to_identify" {
            out.aliases = items.len();
        }
    }
    Ok(out)
}

/// What became of one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The anonymous profile got the external id.
    Identified,
    /// The anonymous profile was folded into the existing user.
    Merged,
    /// The profile already had this external id.
    AlreadyIdentified,
    /// No profile, several profiles, a profile identified under another external id,
    /// or a label conflict: nothing was done.
    Skipped,
}

/// Gives `x` to the anonymous profile `anon`.
pub async fn identify_profile<S: Store>(
    tx: &mut Tx<'_, S>,
    anon: &ServiceId,
    x: &ExternalId,
    now: Timestamp,
) -> Result<Outcome, StoreError> {
    let Some(p) = tx.profile(anon).await?.cloned() else { return Ok(Outcome::Skipped) };
    match &p.external_id {
        Some(have) if have == x => return Ok(Outcome::AlreadyIdentified),
        Some(_) => return Ok(Outcome::Skipped),
        None => {}
    }
    match tx.resolve_one(&Identifier::External(x.clone())).await? {
        None => {
            if let Some(p) = tx.profile_mut(anon).await? {
                p.external_id = Some(x.clone());
                p.updated_at = p.updated_at.max(now);
            }
            Ok(Outcome::Identified)
        }
        Some(user) => {
            let conflict = match tx.profile(&user).await? {
                Some(u) => p.aliases.keys().any(|label| u.aliases.contains_key(label)),
                None => true,
            };
            if conflict {
                return Ok(Outcome::Skipped);
            }
            Ok(if combine(tx, anon, &user, now).await? { Outcome::Merged } else { Outcome::Skipped })
        }
    }
}

/// Applies one entry.
pub async fn apply_entry<S: Store>(tx: &mut Tx<'_, S>, e: &Entry, now: Timestamp) -> Result<Outcome, StoreError> {
    match pick(tx, &e.ident, e.prioritization.as_ref()).await?.one() {
        Some(anon) => identify_profile(tx, &anon, &e.external_id, now).await,
        None => Ok(Outcome::Skipped),
    }
}

/// POST /users/identify: `{"aliases_processed": n, "message": "success"}` (201).
pub async fn identify<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let parsed = parse(body)?;
    transact(store, ws, ctx.seed, async |tx, _| {
        for e in &parsed.entries {
            apply_entry(tx, e, ctx.now).await?;
        }
        Ok(())
    })
    .await?;
    Ok(Response::json(201, &json!({"aliases_processed": parsed.aliases, "message": "success"})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Kit;

    fn alias_entry(x: &str, name: &str, label: &str) -> Value {
        json!({"external_id": x, "user_alias": {"alias_name": name, "alias_label": label}})
    }

    fn alias_only(kit: &Kit, name: &str, label: &str, attrs: Value) {
        let mut obj = attrs.as_object().cloned().unwrap_or_default();
        obj.insert("user_alias".into(), json!({"alias_name": name, "alias_label": label}));
        obj.insert("_update_existing_only".into(), json!(false));
        kit.track(json!({"attributes": [obj]}));
    }

    #[test]
    fn parse_requires_one_array_and_checks_every_entry() {
        let err = |v: Value| parse(v.to_string().as_bytes()).unwrap_err();
        assert!(matches!(err(json!({})), ApiError::BadRequest(_)));
        assert_eq!(
            err(
                json!({"aliases_to_identify": [{"external_id": "null", "user_alias": {"alias_name": "a", "alias_label": "l"}}]})
            ),
            ApiError::bad("provided external_id is blacklisted and disallowed")
        );
        assert_eq!(
            err(json!({"emails_to_identify": [{"external_id": "x", "email": "a@example.com"}]})),
            ApiError::bad(crate::users::prioritization::REQUIRED)
        );
        let many: Vec<Value> = (0..51).map(|i| alias_entry("x", &format!("a{i}"), "l")).collect();
        assert!(matches!(err(json!({"aliases_to_identify": many})), ApiError::BadRequest(_)));
        // Empty arrays name nobody: the same 400 as no array.
        assert!(matches!(err(json!({"aliases_to_identify": [], "emails_to_identify": null})), ApiError::BadRequest(_)));
    }

    #[test]
    fn a_new_external_id_is_given_to_the_alias_profile() {
        let kit = Kit::new();
        alias_only(&kit, "anon-1", "device", json!({"color": "red"}));
        let (status, body) =
            kit.post("/users/identify", json!({"aliases_to_identify": [alias_entry("u1", "anon-1", "device")]}));
        assert_eq!((status, body), (201, json!({"aliases_processed": 1, "message": "success"})));
        let u = kit.user("u1");
        assert_eq!(u["custom_attributes"], json!({"color": "red"}));
        assert_eq!(u["user_aliases"], json!([{"alias_name": "anon-1", "alias_label": "device"}]));
    }

    #[test]
    fn an_existing_user_absorbs_the_anonymous_profile_which_is_removed() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "u1", "color": "blue"}]}));
        alias_only(&kit, "anon-1", "device", json!({"color": "red", "size": 4}));
        kit.track(json!({"events": [{"user_alias": {"alias_name": "anon-1", "alias_label": "device"}, "name": "e", "time": "2024-01-01T00:00:00Z"}]}));
        let (status, _) =
            kit.post("/users/identify", json!({"aliases_to_identify": [alias_entry("u1", "anon-1", "device")]}));
        assert_eq!(status, 201);
        let u = kit.user("u1");
        assert_eq!(u["custom_attributes"], json!({"color": "blue", "size": 4}));
        assert_eq!(u["custom_events"][0]["count"], json!(1));
        // The alias now names the identified user; the anonymous profile is gone.
        assert_eq!(kit.by_alias("anon-1", "device")["external_id"], json!("u1"));
    }

    #[test]
    fn a_label_conflict_leaves_both_profiles_alone() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "u1"}]}));
        kit.post(
            "/users/alias/new",
            json!({"user_aliases": [{"external_id": "u1", "alias_name": "mine", "alias_label": "device"}]}),
        );
        alias_only(&kit, "other", "device", json!({"size": 4}));
        kit.post("/users/identify", json!({"aliases_to_identify": [alias_entry("u1", "other", "device")]}));
        assert!(kit.user("u1").get("custom_attributes").is_none());
        assert_eq!(kit.by_alias("other", "device")["custom_attributes"], json!({"size": 4}));
    }
}
