//! PATCH operations (RFC 7644 §3.5.2) on a dashboard user's writable attributes:
//! `add`, `replace` and `remove`, with a path (`attr`, `attr.sub`, optionally
//! behind the User schema's URN) or, for `add` and `replace`, without one (the
//! value is then a partial resource). Value filters (`emails[type eq "work"]`) are
//! refused: no attribute of this resource is a list of objects one would select.
//! The operations work on the user's JSON; the result is then checked as a whole,
//! exactly as a PUT body is.

use serde_json::{Map, Value};

use super::attrs::{list, object, pick};
use super::error::{ScimError, ScimType};
use super::protocol::{PATCH_URN, USER_URN};

/// Most operations in one request.
pub const MAX_OPERATIONS: usize = 100;

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Add values (appended to lists, merged into objects, set otherwise).
    Add,
    /// Replace values (lists replaced, objects merged, set otherwise).
    Replace,
    /// Remove the attribute.
    Remove,
}

/// An attribute path: a top-level attribute and perhaps one of its sub-attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    attr: String,
    sub: Option<String>,
}

/// One checked operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// `add` / `replace` / `remove` at a path.
    At(Op, Path, Option<Value>),
    /// `add` / `replace` without a path: a partial resource.
    Whole(Op, Map<String, Value>),
}

fn invalid_path(detail: String) -> ScimError {
    ScimError::Bad(ScimType::InvalidPath, detail)
}

fn parse_path(text: &str) -> Result<Path, ScimError> {
    if text.contains('[') || text.contains(']') {
        return Err(invalid_path(format!("'{text}': value filters in paths are not supported")));
    }
    let n = USER_URN.len();
    let bare = match text.get(..n) {
        Some(p) if p.eq_ignore_ascii_case(USER_URN) && text[n..].starts_with(':') => &text[n + 1..],
        _ => text,
    };
    let mut parts = bare.split('.');
    let attr = parts.next().unwrap_or("").trim();
    let sub = parts.next().map(|s| s.trim().to_string());
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if !valid(attr) || sub.as_deref().is_some_and(|s| !valid(s)) || parts.next().is_some() {
        return Err(invalid_path(format!("'{text}' is not an attribute path this resource has")));
    }
    Ok(Path { attr: attr.to_string(), sub })
}

/// Parses a PATCH body (pure).
pub fn parse(body: &[u8]) -> Result<Vec<Operation>, ScimError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ScimError::syntax(format!("the body is not valid JSON: {e}")))?;
    let map = value.as_object().ok_or_else(|| ScimError::syntax("the body must be a JSON object"))?;
    let [schemas, operations] = pick(map, ["schemas", "Operations"], "")?;
    let is_patch = schemas
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|u| u.as_str().is_some_and(|u| u.eq_ignore_ascii_case(PATCH_URN))));
    if !is_patch {
        return Err(ScimError::value(format!("'schemas' must be [\"{PATCH_URN}\"]")));
    }
    let ops = list(operations, "Operations", |v, p| {
        let [op, path, value] = pick(object(v, p)?, ["op", "path", "value"], p)?;
        let op = match op.and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
            Some("add") => Op::Add,
            Some("replace") => Op::Replace,
            Some("remove") => Op::Remove,
            _ => return Err(ScimError::value(format!("'{p}.op' must be add, replace or remove"))),
        };
        let path = match path {
            None => None,
            Some(Value::String(s)) => Some(parse_path(s)?),
            Some(_) => return Err(invalid_path(format!("'{p}.path' must be a string"))),
        };
        match (op, path, value) {
            (Op::Remove, None, _) => Err(ScimError::Bad(ScimType::NoTarget, format!("'{p}': remove needs a 'path'"))),
            (Op::Remove, Some(path), _) => Ok(Operation::At(op, path, None)),
            (_, _, None) => Err(ScimError::value(format!("'{p}.value' is required for {op:?}").to_lowercase())),
            (_, Some(path), Some(v)) => Ok(Operation::At(op, path, Some(v.clone()))),
            (_, None, Some(Value::Object(m))) => Ok(Operation::Whole(op, m.clone())),
            (_, None, Some(_)) => Err(ScimError::value(format!("'{p}.value' must be an object when there is no path"))),
        }
    })?;
    if ops.is_empty() {
        return Err(ScimError::value("'Operations' must hold at least one operation"));
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(ScimError::value(format!("'Operations' holds more than {MAX_OPERATIONS} operations")));
    }
    Ok(ops)
}

/// The key in `map` that `name` names (attribute names ignore case), or `name`.
fn key_of(map: &Map<String, Value>, name: &str) -> String {
    map.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned().unwrap_or_else(|| name.to_string())
}

/// Puts `value` at `key`: `add` appends to a list and merges into an object;
/// `replace` replaces a list and merges into an object (RFC 7644 §3.5.2.1, .3).
fn put(map: &mut Map<String, Value>, name: &str, value: Value, op: Op) {
    let key = key_of(map, name);
    match (map.get_mut(&key), value) {
        (Some(Value::Array(have)), Value::Array(more)) if op == Op::Add => have.extend(more),
        (Some(Value::Array(have)), more) if op == Op::Add && !more.is_array() => have.push(more),
        (Some(Value::Object(have)), Value::Object(more)) => {
            for (k, v) in more {
                put(have, &k, v, op);
            }
        }
        (_, value) => {
            map.insert(key, value);
        }
    }
}

/// Applies the operations, in order, to the user's writable attributes.
pub fn apply(ops: &[Operation], mut user: Value) -> Result<Value, ScimError> {
    let Value::Object(map) = &mut user else { return Ok(user) };
    for operation in ops {
        match operation {
            Operation::Whole(op, partial) => {
                for (k, v) in partial {
                    if !k.eq_ignore_ascii_case("schemas") {
                        put(map, k, v.clone(), *op);
                    }
                }
            }
            Operation::At(op, path, value) => {
                let key = key_of(map, &path.attr);
                match (&path.sub, value) {
                    (None, Some(v)) => put(map, &key, v.clone(), *op),
                    (None, None) => {
                        map.remove(&key);
                    }
                    (Some(sub), value) => {
                        let parent = map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
                        let Value::Object(parent) = parent else {
                            return Err(invalid_path(format!("'{key}' has no sub-attribute '{sub}'")));
                        };
                        match value {
                            Some(v) => put(parent, sub, v.clone(), *op),
                            None => {
                                let k = key_of(parent, sub);
                                parent.remove(&k);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(ops: Value, user: Value) -> Result<Value, ScimError> {
        let body = json!({"schemas": [PATCH_URN], "Operations": ops});
        apply(&parse(body.to_string().as_bytes())?, user)
    }

    #[test]
    fn add_replace_remove_by_path() {
        let user = json!({"userName": "a@x.io", "name": {"givenName": "A", "familyName": "B"},
                          "permissions": {"companyPermissions": ["admin"], "roles": []}});
        let out = run(
            json!([
                {"op": "Add", "path": "permissions.companyPermissions", "value": ["manage_company_settings"]},
                {"op": "replace", "path": "name.givenName", "value": "C"},
                {"op": "add", "path": "externalId", "value": "x-1"},
                {"op": "remove", "path": "permissions.roles"},
                {"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User:userName", "value": "b@x.io"},
            ]),
            user,
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"userName": "b@x.io", "name": {"givenName": "C", "familyName": "B"}, "externalId": "x-1",
                   "permissions": {"companyPermissions": ["admin", "manage_company_settings"]}})
        );
    }

    #[test]
    fn without_a_path_the_value_is_a_partial_resource() {
        let user =
            json!({"name": {"givenName": "A", "familyName": "B"}, "permissions": {"companyPermissions": ["admin"]}});
        let out = run(
            json!([{"op": "replace", "value": {"NAME": {"familyName": "Z"}, "permissions": {"companyPermissions": []}}}]),
            user,
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"name": {"givenName": "A", "familyName": "Z"}, "permissions": {"companyPermissions": []}})
        );
    }

    #[test]
    fn bad_operations_are_refused() {
        let kind = |ops: Value| match run(ops, json!({})) {
            Err(ScimError::Bad(t, _)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(json!([{"op": "remove"}])), ScimType::NoTarget);
        assert_eq!(kind(json!([{"op": "move", "path": "a"}])), ScimType::InvalidValue);
        assert_eq!(
            kind(json!([{"op": "add", "path": "emails[type eq \"work\"].value", "value": "x"}])),
            ScimType::InvalidPath
        );
        assert_eq!(kind(json!([{"op": "add", "path": "a.b.c", "value": 1}])), ScimType::InvalidPath);
        assert_eq!(kind(json!([{"op": "add", "path": "department"}])), ScimType::InvalidValue);
        assert_eq!(kind(json!([{"op": "add", "value": "x"}])), ScimType::InvalidValue);
        assert_eq!(kind(json!([])), ScimType::InvalidValue);
        assert_eq!(kind(json!([{"op": "add", "path": "x", "value": 1, "extra": 2}])), ScimType::InvalidSyntax);
        assert!(matches!(parse(br#"{"Operations": []}"#), Err(ScimError::Bad(ScimType::InvalidValue, _))));
    }
}
