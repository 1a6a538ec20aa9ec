//! PATCH operations (RFC 7644 §3.5.2) on a dashboard user's attributes: `add`,
//! `replace` and `remove`, with a path (`attr`, `attr.sub`, optionally behind the
//! User schema's URN) or, for `add` and `replace`, without one (the value is then a
//! partial resource, whose keys may be paths too, as Entra ID sends them).
//!
//! The enterprise extension's `department` (its path, or the extension as an object)
//! is the user's `department`. Paths to the standard attributes Engage does not keep
//! (`emails[type eq "work"].value`, `phoneNumbers`, the extension's `manager`, ...)
//! are accepted and change nothing, as those attributes are in a PUT body; a value
//! filter on any other attribute, or an attribute the resource does not have, is
//! 400 `invalidPath`. The operations work on the user's JSON; the result is then
//! checked as a whole, exactly as a PUT body is, except that an attribute removed
//! is unassigned (`null`), not left as it was.

use serde_json::{Map, Value};

use super::attrs::{list, object, pick};
use super::error::{ScimError, ScimType};
use super::protocol::{ENTERPRISE_URN, PATCH_URN, USER_URN};
use super::user::{DROPPED, DROPPED_NAME, ENTERPRISE_DROPPED};

/// Most operations in one request.
pub const MAX_OPERATIONS: usize = 100;

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Add values (appended to lists unless already there, merged into objects, set otherwise).
    Add,
    /// Replace values (lists replaced, objects merged, set otherwise).
    Replace,
    /// Remove the attribute.
    Remove,
}

/// Where an operation acts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An attribute of the resource and perhaps one of its sub-attributes.
    Attr(String, Option<String>),
    /// The enterprise extension as a whole (its value an object of its attributes).
    Extension,
    /// An attribute Engage does not keep: the operation changes nothing.
    Dropped,
}

/// One checked operation: `add` / `replace` / `remove` at a target (no value for
/// `remove`, always one for the others).
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    op: Op,
    target: Target,
    value: Option<Value>,
}

/// The resource's attributes and the sub-attributes a path may name.
const ATTRIBUTES: [(&str, &[&str]); 12] = [
    ("schemas", &[]),
    ("id", &[]),
    ("externalId", &[]),
    ("displayName", &[]),
    ("meta", &[]),
    ("userName", &[]),
    ("name", &["givenName", "familyName"]),
    ("department", &[]),
    ("active", &[]),
    ("permissions", &["companyPermissions", "roles", "appGroup"]),
    ("createdAt", &[]),
    ("lastSignInAt", &[]),
];

fn invalid_path(detail: String) -> ScimError {
    ScimError::Bad(ScimType::InvalidPath, detail)
}

fn strip_prefix<'a>(text: &'a str, urn: &str) -> Option<&'a str> {
    let n = urn.len();
    match text.get(..n) {
        Some(p) if p.eq_ignore_ascii_case(urn) => Some(&text[n..]),
        _ => None,
    }
}

fn is_in(list: &[&str], name: &str) -> bool {
    list.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Resolves a path to its target (case-insensitive, spelt as the resource spells it).
pub fn target(text: &str) -> Result<Target, ScimError> {
    let text = text.trim();
    let unknown = || invalid_path(format!("'{text}' is not an attribute path of this resource"));
    match strip_prefix(text, ENTERPRISE_URN) {
        Some("") => return Ok(Target::Extension),
        Some(rest) if rest.starts_with(':') => {
            let head = rest[1..].split(['.', '[']).next().unwrap_or("");
            return if rest[1..].eq_ignore_ascii_case("department") {
                Ok(Target::Attr("department".into(), None))
            } else if is_in(&ENTERPRISE_DROPPED, head) {
                Ok(Target::Dropped)
            } else {
                Err(unknown())
            };
        }
        _ => {}
    }
    let bare = strip_prefix(text, USER_URN).and_then(|rest| rest.strip_prefix(':')).unwrap_or(text);
    let head = bare.split(['.', '[']).next().unwrap_or("");
    if is_in(&DROPPED, head) {
        return Ok(Target::Dropped);
    }
    if bare.contains('[') {
        return Err(invalid_path(format!("'{text}': value filters in paths are not supported")));
    }
    let (attr, sub) = match bare.split_once('.') {
        Some((a, s)) => (a, Some(s)),
        None => (bare, None),
    };
    let (name, subs) = ATTRIBUTES.iter().find(|(n, _)| n.eq_ignore_ascii_case(attr)).ok_or_else(unknown)?;
    match sub {
        None => Ok(Target::Attr(name.to_string(), None)),
        Some(s) if *name == "name" && is_in(&DROPPED_NAME, s) => Ok(Target::Dropped),
        Some(s) => {
            let sub = subs.iter().find(|n| n.eq_ignore_ascii_case(s)).ok_or_else(unknown)?;
            Ok(Target::Attr(name.to_string(), Some(sub.to_string())))
        }
    }
}

fn parse_op(v: &Value, p: &str) -> Result<Vec<Operation>, ScimError> {
    let [op, path, value] = pick(object(v, p)?, ["op", "path", "value"], p)?;
    let op = match op.and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
        Some("add") => Op::Add,
        Some("replace") => Op::Replace,
        Some("remove") => Op::Remove,
        _ => return Err(ScimError::value(format!("'{p}.op' must be add, replace or remove"))),
    };
    let path = match path {
        None => None,
        Some(Value::String(s)) => Some(target(s)?),
        Some(_) => return Err(invalid_path(format!("'{p}.path' must be a string"))),
    };
    match (op, path, value) {
        (Op::Remove, None, _) => Err(ScimError::Bad(ScimType::NoTarget, format!("'{p}': remove needs a 'path'"))),
        // Removing the extension removes the department it holds (refused: required).
        (Op::Remove, Some(Target::Extension), _) => {
            Ok(vec![Operation { op, target: Target::Attr("department".into(), None), value: None }])
        }
        (Op::Remove, Some(target), _) => Ok(vec![Operation { op, target, value: None }]),
        (_, _, None) => Err(ScimError::value(format!(
            "'{p}.value' is required to {}",
            if op == Op::Add { "add" } else { "replace" }
        ))),
        (_, Some(target), Some(v)) => with_value(op, target, v, p),
        // A partial resource: each key is a path of its own.
        (_, None, Some(Value::Object(m))) => {
            let mut ops = Vec::new();
            for (k, v) in m.iter().filter(|(k, _)| !k.eq_ignore_ascii_case("schemas")) {
                ops.extend(with_value(op, target(k)?, v, p)?);
            }
            Ok(ops)
        }
        (_, None, Some(_)) => Err(ScimError::value(format!("'{p}.value' must be an object when there is no path"))),
    }
}

/// An `add` or `replace` of `value` at `target`; the extension as a whole is one
/// operation for each of its attributes.
fn with_value(op: Op, target: Target, value: &Value, p: &str) -> Result<Vec<Operation>, ScimError> {
    match target {
        Target::Extension => {
            let m = object(value, &format!("{p}.value"))?;
            // A client may send the extension as a resource, with its `schemas`.
            m.iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case("schemas"))
                .map(|(k, v)| {
                    Ok(Operation {
                        op,
                        target: self::target(&format!("{ENTERPRISE_URN}:{k}"))?,
                        value: Some(v.clone()),
                    })
                })
                .collect()
        }
        target => Ok(vec![Operation { op, target, value: Some(value.clone()) }]),
    }
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
    let ops: Vec<Operation> = list(operations, "Operations", parse_op)?.into_iter().flatten().collect();
    if operations.and_then(Value::as_array).is_none_or(Vec::is_empty) {
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

/// Puts `value` at `name`: `add` appends to a list (values already there are not
/// repeated) and merges into an object; `replace` replaces a list and merges into
/// an object (RFC 7644 §3.5.2.1, .3).
fn put(map: &mut Map<String, Value>, name: &str, value: Value, op: Op) {
    let key = key_of(map, name);
    match (map.get_mut(&key), value) {
        (Some(Value::Array(have)), more) if op == Op::Add => {
            let more = if let Value::Array(more) = more { more } else { vec![more] };
            for v in more {
                if !have.contains(&v) {
                    have.push(v);
                }
            }
        }
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

/// Applies the operations, in order, to the user's attributes (as JSON).
pub fn apply(ops: &[Operation], mut user: Value) -> Result<Value, ScimError> {
    let Value::Object(map) = &mut user else { return Ok(user) };
    for Operation { op, target, value } in ops {
        let Target::Attr(attr, sub) = target else { continue };
        let key = key_of(map, attr);
        match (sub, value) {
            // Replacing with null unassigns, as a remove does (and is refused where
            // a remove is).
            (None, Some(Value::Null)) if attr == "department" || attr == "active" => {
                return Err(ScimError::value(format!("'{attr}' cannot be unassigned; give it a value")))
            }
            (None, Some(v)) => put(map, &key, v.clone(), *op),
            // Every user has a department and is active or not: removing either
            // is refused rather than read as a default (it would reactivate a
            // user). Others removed are unassigned (and required ones are then
            // refused by the check of the whole).
            (None, None) if attr == "department" => {
                return Err(ScimError::value("'department' is required; it cannot be removed"))
            }
            (None, None) if attr == "active" => {
                return Err(ScimError::value("'active' cannot be removed; replace it with true or false"))
            }
            (None, None) => {
                map.insert(key, Value::Null);
            }
            (Some(sub), Some(v)) => match map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new())) {
                Value::Object(parent) => put(parent, sub, v.clone(), *op),
                _ => return Err(invalid_path(format!("'{key}' has no sub-attribute '{sub}'"))),
            },
            // Removing from an attribute that is not there changes nothing.
            (Some(sub), None) => {
                if let Some(Value::Object(parent)) = map.get_mut(&key) {
                    let k = key_of(parent, sub);
                    parent.remove(&k);
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
    fn what_identity_providers_send_about_attributes_engage_does_not_keep_changes_nothing() {
        let user = json!({"userName": "a@x.io", "name": {"givenName": "A", "familyName": "B"}});
        let out = run(
            json!([
                {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "b@x.io"},
                {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber", "value": "7"},
                {"op": "Replace", "path": "name.formatted", "value": "A B"},
                {"op": "Replace", "value": {"name.givenName": "C", "nickName": "C B",
                 "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"employeeNumber": "9"}}},
                {"op": "Add", "path": "name.familyName", "value": "D"},
                {"op": "Add", "path": "manager", "value": [{"value": "m-1"}]},
                {"op": "Remove", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager"},
            ]),
            user,
        )
        .unwrap();
        assert_eq!(out, json!({"userName": "a@x.io", "name": {"givenName": "C", "familyName": "D"}}));
    }

    #[test]
    fn the_enterprise_department_is_the_department() {
        let user = json!({"userName": "a@x.io", "department": "bi"});
        let urn = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
        let by_path = run(json!([{"op": "Replace", "path": format!("{urn}:department"), "value": "pm"}]), user.clone());
        assert_eq!(by_path.unwrap()["department"], "pm");
        let as_object =
            run(json!([{"op": "replace", "value": {urn: {"department": "finance", "costCenter": "7"}}}]), user.clone());
        assert_eq!(as_object.unwrap()["department"], "finance");
        let whole = run(json!([{"op": "add", "path": urn, "value": {"department": "agency"}}]), user.clone());
        assert_eq!(whole.unwrap()["department"], "agency");
        let key_path =
            run(json!([{"op": "replace", "value": {format!("{urn}:department"): "marketing"}}]), user.clone());
        assert_eq!(key_path.unwrap()["department"], "marketing");
        for removal in [
            json!({"op": "remove", "path": "department"}),
            json!({"op": "remove", "path": format!("{urn}:department")}),
            json!({"op": "remove", "path": urn}),
        ] {
            assert!(matches!(run(json!([removal]), user.clone()), Err(ScimError::Bad(ScimType::InvalidValue, _))));
        }
        assert!(matches!(
            run(json!([{"op": "add", "path": format!("{urn}:shoeSize"), "value": 1}]), user),
            Err(ScimError::Bad(ScimType::InvalidPath, _))
        ));
    }

    #[test]
    fn a_removed_attribute_is_unassigned_not_left_out() {
        let user = json!({"userName": "a@x.io", "externalId": "x", "active": false});
        let out = run(json!([{"op": "remove", "path": "externalId"}]), user.clone()).unwrap();
        assert_eq!(out, json!({"userName": "a@x.io", "externalId": null, "active": false}));
        let active = run(json!([{"op": "remove", "path": "active"}]), user);
        assert!(matches!(active, Err(ScimError::Bad(ScimType::InvalidValue, _))), "{active:?}");
    }

    #[test]
    fn add_does_not_repeat_values_and_remove_of_nothing_changes_nothing() {
        let user = json!({"permissions": {"companyPermissions": ["admin"]}});
        let out = run(
            json!([
                {"op": "add", "path": "permissions.companyPermissions", "value": ["admin", "manage_company_settings"]},
                {"op": "remove", "path": "name.givenName"},
            ]),
            user,
        )
        .unwrap();
        assert_eq!(out, json!({"permissions": {"companyPermissions": ["admin", "manage_company_settings"]}}));
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
            kind(json!([{"op": "add", "path": "department[value eq \"x\"]", "value": "x"}])),
            ScimType::InvalidPath
        );
        assert_eq!(kind(json!([{"op": "add", "path": "a.b.c", "value": 1}])), ScimType::InvalidPath);
        assert_eq!(kind(json!([{"op": "add", "path": "name.givenName.x", "value": 1}])), ScimType::InvalidPath);
        assert_eq!(kind(json!([{"op": "add", "path": "nickname2", "value": 1}])), ScimType::InvalidPath);
        assert_eq!(kind(json!([{"op": "add", "path": "permissions.teams", "value": 1}])), ScimType::InvalidPath);
        assert_eq!(kind(json!([{"op": "add", "path": "department"}])), ScimType::InvalidValue);
        assert_eq!(kind(json!([{"op": "add", "value": "x"}])), ScimType::InvalidValue);
        assert_eq!(kind(json!([])), ScimType::InvalidValue);
        assert_eq!(kind(json!([{"op": "add", "path": "department", "value": 1, "extra": 2}])), ScimType::InvalidSyntax);
        assert!(matches!(parse(br#"{"Operations": []}"#), Err(ScimError::Bad(ScimType::InvalidValue, _))));
    }
}
