//! External id migration (documented by the platform; its public clients call it):
//!
//! - `POST /users/external_ids/rename` `{"external_id_renames": [{"current_external_id",
//!   "new_external_id"}]}`: the user gets the new (primary) id and keeps the current one
//!   as deprecated: either names the user until the deprecated one is removed.
//!   The current id must be a user's primary id (not a deprecated one); the new id
//!   must name nobody (as a primary or a deprecated id); the two must differ.
//! - `POST /users/external_ids/remove` `{"external_ids": [...]}`: removes deprecated
//!   ids; a primary id (or one naming nobody) is an error of its entry.
//!
//! At most 50 entries a request, applied in order in one unit of work. Each answers
//! 201 with what it did and, per refused entry, `[index, message]` (the platform's
//! "array of arrays ... reference the index of the object in the original request").

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::{ExternalId, Identifier, WorkspaceName};
use crate::input;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// Most entries per request.
pub const MAX_ENTRIES: usize = 50;

/// The entry's current id names no user.
pub const NO_USER: &str = "'current_external_id' does not name a user";
/// The entry's current id is a deprecated one.
pub const CURRENT_DEPRECATED: &str = "'current_external_id' is a deprecated external ID: rename the user's primary ID";
/// The entry's new id names a user already.
pub const NEW_TAKEN: &str = "'new_external_id' is already in use as a primary or deprecated external ID";
/// The two ids are one.
pub const SAME: &str = "'current_external_id' and 'new_external_id' cannot be the same";
/// The id to remove is a user's primary id.
pub const PRIMARY: &str = "only deprecated external IDs can be removed; this is a user's primary ID";
/// The id to remove names no user.
pub const UNKNOWN: &str = "no user has this deprecated external ID";

/// One rename.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rename {
    /// The user's primary id now.
    pub current: ExternalId,
    /// Its new primary id.
    pub new: ExternalId,
}

/// An entry that could not be read, or not be applied: its index and why.
type EntryError = (usize, String);

/// A body's entries as read: those to apply (with their index), and those refused
/// as they are.
#[derive(Debug)]
pub struct Entries<T> {
    /// To apply.
    pub ok: Vec<(usize, T)>,
    /// Refused.
    pub refused: Vec<EntryError>,
}

fn entries<'a>(body: &'a Map<String, Value>, key: &str) -> Result<&'a Vec<Value>, ApiError> {
    let shape = || ApiError::bad(format!("'{key}' must be an array of 1 to {MAX_ENTRIES} entries"));
    let items = body.get(key).and_then(Value::as_array).ok_or_else(shape)?;
    if items.is_empty() || items.len() > MAX_ENTRIES {
        return Err(shape());
    }
    Ok(items)
}

fn external_id(v: Option<&Value>, at: &str) -> Result<ExternalId, ApiError> {
    v.and_then(Value::as_str).and_then(ExternalId::parse).ok_or_else(|| {
        ApiError::bad(format!("'{at}' must be a non-empty string of at most 987 bytes without control characters"))
    })
}

/// Parses a rename body. An entry out of shape refuses the request (400); two
/// equal ids are an error of their entry.
pub fn parse_renames(body: &[u8]) -> Result<Entries<Rename>, ApiError> {
    let body = input::object(body).map_err(ApiError::bad)?;
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    for (i, item) in entries(&body, "external_id_renames")?.iter().enumerate() {
        let at = format!("external_id_renames[{i}]");
        let obj = item.as_object().ok_or_else(|| {
            ApiError::bad(format!("'{at}' must be an object with 'current_external_id' and 'new_external_id'"))
        })?;
        let current = external_id(obj.get("current_external_id"), &format!("{at}.current_external_id"))?;
        let new = external_id(obj.get("new_external_id"), &format!("{at}.new_external_id"))?;
        if current == new {
            refused.push((i, SAME.to_string()));
        } else {
            ok.push((i, Rename { current, new }));
        }
    }
    Ok(Entries { ok, refused })
}

/// Parses a remove body; an id out of shape refuses the request (400).
pub fn parse_removals(body: &[u8]) -> Result<Entries<ExternalId>, ApiError> {
    let body = input::object(body).map_err(ApiError::bad)?;
    let ok = entries(&body, "external_ids")?
        .iter()
        .enumerate()
        .map(|(i, item)| Ok((i, external_id(Some(item), &format!("external_ids[{i}]"))?)))
        .collect::<Result<_, ApiError>>()?;
    Ok(Entries { ok, refused: Vec::new() })
}

/// Applies one rename; `Err` is the entry's error.
async fn rename<S: Store>(
    tx: &mut Tx<'_, S>,
    r: &Rename,
    now: Timestamp,
) -> Result<Result<(), &'static str>, StoreError> {
    let Some(id) = tx.resolve_one(&Identifier::External(r.current.clone())).await? else { return Ok(Err(NO_USER)) };
    if tx.resolve_one(&Identifier::External(r.new.clone())).await?.is_some() {
        return Ok(Err(NEW_TAKEN));
    }
    let Some(p) = tx.profile_mut(&id).await? else { return Ok(Err(NO_USER)) };
    if p.external_id.as_ref() != Some(&r.current) {
        return Ok(Err(CURRENT_DEPRECATED));
    }
    p.deprecated_external_ids.insert(r.current.clone());
    p.external_id = Some(r.new.clone());
    p.updated_at = p.updated_at.max(now);
    Ok(Ok(()))
}

/// Applies one removal; `Err` is the entry's error.
async fn remove<S: Store>(
    tx: &mut Tx<'_, S>,
    x: &ExternalId,
    now: Timestamp,
) -> Result<Result<(), &'static str>, StoreError> {
    let Some(id) = tx.resolve_one(&Identifier::External(x.clone())).await? else { return Ok(Err(UNKNOWN)) };
    let Some(p) = tx.profile_mut(&id).await? else { return Ok(Err(UNKNOWN)) };
    if !p.deprecated_external_ids.remove(x) {
        return Ok(Err(PRIMARY));
    }
    p.updated_at = p.updated_at.max(now);
    Ok(Ok(()))
}

fn errors_json(mut errors: Vec<EntryError>) -> Value {
    errors.sort_by_key(|(i, _)| *i);
    Value::Array(errors.into_iter().map(|(i, why)| json!([i, why])).collect())
}

/// POST /users/external_ids/rename: 201 `{"external_ids": [{"current_external_id",
/// "new_external_id"}], "rename_errors": [[index, message]], "message": "success"}`.
pub async fn rename_ids<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let Entries { ok: renames, refused } = parse_renames(body)?;
    let (done, failed) = transact(store, ws, ctx.seed, async |tx, _| {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        for (i, r) in &renames {
            match rename(tx, r, ctx.now).await? {
                Ok(()) => done.push(r.clone()),
                Err(why) => failed.push((*i, why.to_string())),
            }
        }
        Ok((done, failed))
    })
    .await?;
    let renamed: Vec<Value> = done
        .iter()
        .map(|r| json!({"current_external_id": r.current.as_str(), "new_external_id": r.new.as_str()}))
        .collect();
    let errors = errors_json(refused.into_iter().chain(failed).collect());
    Ok(Response::json(201, &json!({"external_ids": renamed, "rename_errors": errors, "message": "success"})))
}

/// POST /users/external_ids/remove: 201 `{"removed_ids": [...], "removal_errors":
/// [[index, message]], "message": "success"}`.
pub async fn remove_ids<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let Entries { ok: ids, refused } = parse_removals(body)?;
    let (done, failed) = transact(store, ws, ctx.seed, async |tx, _| {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        for (i, x) in &ids {
            match remove(tx, x, ctx.now).await? {
                Ok(()) => done.push(x.as_str().to_string()),
                Err(why) => failed.push((*i, why.to_string())),
            }
        }
        Ok((done, failed))
    })
    .await?;
    let errors = errors_json(refused.into_iter().chain(failed).collect());
    Ok(Response::json(201, &json!({"removed_ids": done, "removal_errors": errors, "message": "success"})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Kit;

    fn renames(pairs: &[(&str, &str)]) -> Value {
        let items: Vec<Value> =
            pairs.iter().map(|(c, n)| json!({"current_external_id": c, "new_external_id": n})).collect();
        json!({ "external_id_renames": items })
    }

    #[test]
    fn a_renamed_user_answers_to_both_ids_until_the_old_one_is_removed() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "old", "plan": "pro"}, {"external_id": "other"}]}));
        let (status, body) = kit.post("/users/external_ids/rename", renames(&[("old", "new")]));
        assert_eq!(status, 201);
        assert_eq!(
            body,
            json!({"external_ids": [{"current_external_id": "old", "new_external_id": "new"}], "rename_errors": [], "message": "success"})
        );
        assert_eq!(kit.user("new")["custom_attributes"]["plan"], "pro");
        assert_eq!(kit.user("old")["external_id"], "new", "the deprecated id names the user");
        // A write by the deprecated id lands on the user.
        kit.track(json!({"attributes": [{"external_id": "old", "seen": true}]}));
        assert_eq!(kit.user("new")["custom_attributes"]["seen"], true);

        let (status, body) = kit.post(
            "/users/external_ids/rename",
            renames(&[("old", "x"), ("nobody", "y"), ("new", "other"), ("new", "new"), ("new", "newer")]),
        );
        assert_eq!(status, 201);
        assert_eq!(body["external_ids"], json!([{"current_external_id": "new", "new_external_id": "newer"}]));
        assert_eq!(body["rename_errors"], json!([[0, CURRENT_DEPRECATED], [1, NO_USER], [2, NEW_TAKEN], [3, SAME]]));

        let (status, body) = kit.post("/users/external_ids/remove", json!({"external_ids": ["old", "newer", "ghost"]}));
        assert_eq!(status, 201);
        assert_eq!(
            body,
            json!({"removed_ids": ["old"], "removal_errors": [[1, PRIMARY], [2, UNKNOWN]], "message": "success"})
        );
        assert_eq!(kit.user("old"), Value::Null, "removed: it names nobody");
        assert_eq!(kit.user("new")["external_id"], "newer", "still deprecated");
        assert_eq!(kit.user("newer")["custom_attributes"]["plan"], "pro");
    }

    #[test]
    fn bodies_out_of_shape_are_400s() {
        let kit = Kit::new();
        for body in [json!({}), json!({"external_id_renames": []}), json!({"external_id_renames": "x"}), json!([])] {
            assert_eq!(kit.post("/users/external_ids/rename", body.clone()).0, 400, "{body}");
        }
        let many: Vec<Value> = (0..51).map(|i| json!(format!("u{i}"))).collect();
        assert_eq!(kit.post("/users/external_ids/remove", json!({"external_ids": many})).0, 400);
        for ids in [json!([""]), json!([true]), json!(["a\u{1}b"])] {
            let (status, body) = kit.post("/users/external_ids/remove", json!({"external_ids": ids}));
            assert_eq!(status, 400, "{ids}: {body}");
        }
        let (status, body) = kit.post("/users/external_ids/remove", json!({"external_ids": [5]}));
        assert_eq!((status, &body["removal_errors"]), (201, &json!([[0, UNKNOWN]])), "a number names the user \"5\"");
    }
}
