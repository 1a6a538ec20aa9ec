//! `POST /users/alias/new` and `POST /users/alias/update` (documented by the
//! platform; the spec's rate-limit table refers to them).
//!
//! - new: `{"user_aliases": [{"alias_name", "alias_label", "external_id"?}]}`.
//!   Without `external_id` an alias-only profile is created; with one, the alias is
//!   added to that user. Nothing happens for an entry whose alias already exists,
//!   whose user does not exist, or whose user already has an alias with that label
//!   (one alias per label).
//! - update: `{"alias_updates": [{"alias_label", "old_alias_name", "new_alias_name"}]}`
//!   renames an alias; nothing happens when the old alias does not exist or the new
//!   one is taken.
//!
//! At most 50 entries per request; entries apply in request order in one unit of work.

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{ExternalId, IdGen, Identifier, UserAlias};
use crate::input;
use crate::profile::Profile;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// Most entries per request.
pub const MAX_ENTRIES: usize = 50;

/// One `/users/alias/new` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAlias {
    /// The alias to create.
    pub alias: UserAlias,
    /// The user to add it to; `None` creates an alias-only profile.
    pub external_id: Option<ExternalId>,
}

/// One `/users/alias/update` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct AliasUpdate {
    /// The alias as it is.
    pub old: UserAlias,
    /// Its new name (same label).
    pub new_name: String,
}

fn array(body: &[u8], key: &str) -> Result<Vec<Map<String, Value>>, ApiError> {
    let body = input::json(body).map_err(ApiError::bad)?;
    let shape = || ApiError::bad(format!("'{key}' must be an array of objects"));
    let items = body.get(key).and_then(Value::as_array).ok_or_else(shape)?;
    if items.len() > MAX_ENTRIES {
        return Err(ApiError::bad(format!("a single request may not contain more than 50 '{key}'")));
    }
    items.iter().map(|i| i.as_object().cloned().ok_or_else(shape)).collect()
}

/// A string field of an entry, checked like an alias name (non-empty, no control characters).
fn text<'a>(obj: &'a Map<String, Value>, key: &str, array: &str) -> Result<&'a str, ApiError> {
    let valid = |s: &&str| UserAlias::from_json(&json!({"alias_name": s, "alias_label": s})).is_some();
    obj.get(key)
        .and_then(Value::as_str)
        .filter(valid)
        .ok_or_else(|| ApiError::bad(format!("each entry of '{array}' needs '{key}', a non-empty string")))
}

/// Parses a `/users/alias/new` body.
pub fn parse_new(body: &[u8]) -> Result<Vec<NewAlias>, ApiError> {
    let mut out = Vec::new();
    for obj in array(body, "user_aliases")? {
        let alias = UserAlias {
            alias_name: text(&obj, "alias_name", "user_aliases")?.to_string(),
            alias_label: text(&obj, "alias_label", "user_aliases")?.to_string(),
        };
        let external_id = match obj.get("external_id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(ExternalId::parse)
                    .ok_or_else(|| ApiError::bad("'external_id' must be a non-empty string"))?,
            ),
        };
        out.push(NewAlias { alias, external_id });
    }
    Ok(out)
}

/// Parses a `/users/alias/update` body.
pub fn parse_update(body: &[u8]) -> Result<Vec<AliasUpdate>, ApiError> {
    let mut out = Vec::new();
    for obj in array(body, "alias_updates")? {
        let label = text(&obj, "alias_label", "alias_updates")?;
        let old = text(&obj, "old_alias_name", "alias_updates")?;
        let new_name = text(&obj, "new_alias_name", "alias_updates")?;
        out.push(AliasUpdate {
            old: UserAlias { alias_name: old.to_string(), alias_label: label.to_string() },
            new_name: new_name.to_string(),
        });
    }
    Ok(out)
}

/// Applies one new alias; true when it was added.
pub async fn add<S: Store>(
    tx: &mut Tx<'_, S>,
    e: &NewAlias,
    now: Timestamp,
    ids: &mut IdGen,
) -> Result<bool, StoreError> {
    if !tx.resolve(&Identifier::Alias(e.alias.clone())).await?.is_empty() {
        return Ok(false);
    }
    let Some(x) = &e.external_id else {
        let mut p = Profile::new(ids.service_id(now), now);
        p.aliases.insert(e.alias.alias_label.clone(), e.alias.alias_name.clone());
        tx.insert_profile(p);
        return Ok(true);
    };
    let Some(id) = tx.resolve_one(&Identifier::External(x.clone())).await? else { return Ok(false) };
    let Some(p) = tx.profile_mut(&id).await? else { return Ok(false) };
    if p.aliases.contains_key(&e.alias.alias_label) {
        return Ok(false);
    }
    p.aliases.insert(e.alias.alias_label.clone(), e.alias.alias_name.clone());
    p.updated_at = p.updated_at.max(now);
    Ok(true)
}

/// Applies one rename; true when the alias was renamed.
pub async fn rename<S: Store>(tx: &mut Tx<'_, S>, u: &AliasUpdate, now: Timestamp) -> Result<bool, StoreError> {
    let Some(id) = tx.resolve_one(&Identifier::Alias(u.old.clone())).await? else { return Ok(false) };
    let new = UserAlias { alias_name: u.new_name.clone(), alias_label: u.old.alias_label.clone() };
    if new == u.old || !tx.resolve(&Identifier::Alias(new)).await?.is_empty() {
        return Ok(false);
    }
    let Some(p) = tx.profile_mut(&id).await? else { return Ok(false) };
    p.aliases.insert(u.old.alias_label.clone(), u.new_name.clone());
    p.updated_at = p.updated_at.max(now);
    Ok(true)
}

/// POST /users/alias/new: `{"aliases_processed": n, "message": "success"}` (201).
pub async fn alias_new<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let entries = parse_new(body)?;
    transact(store, ws, ctx.seed, async |tx, ids| {
        for e in &entries {
            add(tx, e, ctx.now, ids).await?;
        }
        Ok(())
    })
    .await?;
    Ok(Response::json(201, &json!({"aliases_processed": entries.len(), "message": "success"})))
}

/// POST /users/alias/update: `{"message": "success"}` (201).
pub async fn alias_update<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    body: &[u8],
    ctx: Ctx,
) -> Result<Response, ApiError> {
    let updates = parse_update(body)?;
    transact(store, ws, ctx.seed, async |tx, _| {
        for u in &updates {
            rename(tx, u, ctx.now).await?;
        }
        Ok(())
    })
    .await?;
    Ok(Response::json(201, &json!({"message": "success"})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Kit;

    #[test]
    fn new_alias_without_external_id_creates_an_alias_only_profile() {
        let kit = Kit::new();
        let (status, body) =
            kit.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n1", "alias_label": "crm"}]}));
        assert_eq!((status, body), (201, json!({"aliases_processed": 1, "message": "success"})));
        let u = kit.by_alias("n1", "crm");
        assert_eq!(u["user_aliases"], json!([{"alias_name": "n1", "alias_label": "crm"}]));
        assert!(u.get("external_id").is_none());
    }

    #[test]
    fn one_alias_per_label_per_user() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "u1"}]}));
        let add = |name: &str| {
            kit.post(
                "/users/alias/new",
                json!({"user_aliases": [{"external_id": "u1", "alias_name": name, "alias_label": "crm"}]}),
            )
        };
        add("first");
        add("second");
        assert_eq!(kit.user("u1")["user_aliases"], json!([{"alias_name": "first", "alias_label": "crm"}]));
    }

    #[test]
    fn rename_changes_the_name_unless_taken() {
        let kit = Kit::new();
        kit.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "a", "alias_label": "crm"}, {"alias_name": "b", "alias_label": "crm"}]}));
        let upd = |old: &str, new: &str| json!({"alias_label": "crm", "old_alias_name": old, "new_alias_name": new});
        let (status, body) = kit.post("/users/alias/update", json!({"alias_updates": [upd("a", "b"), upd("a", "c")]}));
        assert_eq!((status, body), (201, json!({"message": "success"})));
        assert_eq!(kit.by_alias("a", "crm"), Value::Null);
        assert_eq!(kit.by_alias("c", "crm")["user_aliases"], json!([{"alias_name": "c", "alias_label": "crm"}]));
        assert_eq!(kit.by_alias("b", "crm")["user_aliases"], json!([{"alias_name": "b", "alias_label": "crm"}]));
    }
}
