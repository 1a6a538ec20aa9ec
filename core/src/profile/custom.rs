//! Custom attributes: what a value may be, the documented update operations
//! (`inc`, array `add`/`remove`, nested objects with `$time`, arrays of objects with
//! `$add`/`$remove`/`$update`), and how each is applied to a profile.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::time::{parse_date, Timestamp};

/// Longest custom attribute key and string value, in characters.
pub const MAX_STRING_CHARS: usize = 255;
/// Most elements an array attribute keeps; adding past it drops the oldest.
pub const MAX_ARRAY_LEN: usize = 500;
/// Largest nested object or array of objects, serialized.
pub const MAX_NESTED_BYTES: usize = 100 * 1024;
/// Deepest nesting accepted in a nested attribute.
pub const MAX_DEPTH: usize = 32;

/// One validated update of one custom attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "v", rename_all = "snake_case")]
pub enum CustomOp {
    /// Set a scalar or an array of scalars (already de-duplicated).
    Set(Value),
    /// Remove the attribute (`null`).
    Remove,
    /// Add to an integer attribute (missing or non-integer counts as 0).
    Inc(i64),
    /// Remove then append elements of an array attribute.
    Array { add: Vec<Value>, remove: Vec<Value> },
    /// Set a nested object (dates already normalised); merged when `_merge_objects`.
    Object(Value),
    /// Set an array of objects.
    Objects(Vec<Value>),
    /// Append objects to an array of objects.
    ObjectsAdd(Vec<Value>),
    /// Remove objects whose `key` equals `value`.
    ObjectsRemove(Vec<(String, Value)>),
    /// Deep-merge `new_object` into objects whose `key` equals `value`.
    ObjectsUpdate(Vec<(String, Value, Value)>),
}

impl CustomOp {
    /// Whether the update adds to the attribute's value rather than replacing it:
    /// what such updates add accumulates, a replaced value is only as large as the
    /// largest update.
    pub fn appends(&self) -> bool {
        matches!(
            self,
            CustomOp::Array { .. } | CustomOp::Object(_) | CustomOp::ObjectsAdd(_) | CustomOp::ObjectsUpdate(_)
        )
    }

    /// Nested operations are the ones rule 2 drops together when any nested value is invalid.
    pub fn is_nested(&self) -> bool {
        matches!(
            self,
            CustomOp::Object(_)
                | CustomOp::Objects(_)
                | CustomOp::ObjectsAdd(_)
                | CustomOp::ObjectsRemove(_)
                | CustomOp::ObjectsUpdate(_)
        )
    }
}

/// Why an update was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomError {
    /// This attribute's update is skipped.
    Invalid(String),
    /// A nested value is invalid: every nested update of the request is skipped.
    InvalidNested(String),
}

/// Checks a custom attribute key.
pub fn check_key(key: &str) -> Result<(), CustomError> {
    if key.is_empty()
        || key.chars().count() > MAX_STRING_CHARS
        || key.starts_with('$')
        || key.chars().any(char::is_control)
    {
        return Err(CustomError::Invalid(format!(
            "custom attribute key '{}' must be 1 to {MAX_STRING_CHARS} characters and must not start with '$'",
            truncate(key)
        )));
    }
    Ok(())
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn check_scalar(key: &str, v: &Value) -> Result<(), CustomError> {
    if let Value::String(s) = v {
        if s.chars().count() > MAX_STRING_CHARS {
            return Err(CustomError::Invalid(format!(
                "custom attribute '{}' exceeds {MAX_STRING_CHARS} characters",
                truncate(key)
            )));
        }
    }
    Ok(())
}

fn scalar_array(key: &str, items: &[Value]) -> Result<Vec<Value>, CustomError> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !is_scalar(item) {
            return Err(CustomError::Invalid(format!(
                "custom attribute '{}' arrays may hold only strings, numbers and booleans",
                truncate(key)
            )));
        }
        check_scalar(key, item)?;
        // Arrays hold unique values: a repeated value keeps its first position.
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    Ok(out)
}

/// A date written as an ISO 8601 timestamp or a `YYYY-MM-DD` day, normalised.
pub fn normalise_time(text: &str) -> Option<String> {
    if let Some(t) = Timestamp::parse(text) {
        return Some(t.to_rfc3339());
    }
    let d = parse_date(text)?;
    let ms = d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis();
    Some(Timestamp(ms).to_rfc3339())
}

/// Validates a nested value and normalises `{"$time": ...}` into a timestamp string.
fn nested(key: &str, v: &Value, depth: usize) -> Result<Value, CustomError> {
    let bad = |why: &str| CustomError::InvalidNested(format!("nested custom attribute '{}': {why}", truncate(key)));
    if depth > MAX_DEPTH {
        return Err(bad("nested too deeply"));
    }
    match v {
        Value::Null => Err(bad("null is not allowed inside a nested attribute")),
        Value::String(s) if s.chars().count() > MAX_STRING_CHARS => Err(bad("string longer than 255 characters")),
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(v.clone()),
        Value::Array(items) => {
            items.iter().map(|i| nested(key, i, depth + 1)).collect::<Result<Vec<_>, _>>().map(Value::Array)
        }
        Value::Object(o) => {
            if o.len() == 1 {
                if let Some(t) = o.get("$time") {
                    return t
                        .as_str()
                        .and_then(normalise_time)
                        .map(Value::String)
                        .ok_or_else(|| bad("invalid '$time' value"));
                }
            }
            let mut out = Map::new();
            for (k, val) in o {
                if k.is_empty() || k.chars().count() > MAX_STRING_CHARS || k.contains(['.', '$', ' ']) {
                    return Err(bad("keys must be 1 to 255 characters without '.', '$' or spaces"));
                }
                out.insert(k.clone(), nested(key, val, depth + 1)?);
            }
            Ok(Value::Object(out))
        }
    }
}

fn nested_size_ok(v: &Value) -> bool {
    encoded_len(v) <= MAX_NESTED_BYTES
}

/// At least the bytes of the compact JSON of an object with these members, counted
/// without formatting anything: each byte of a string taken as escaped (six bytes),
/// each number as long as a float prints. A profile's size is checked at every
/// change, and the exact count ([`encoded_len`]) formatted every attribute again
/// (1.9% of a warehouse sync's building thread, callgrind); it is needed only where
/// this bound is over the limit.
pub(crate) fn encoded_len_bound(members: &Map<String, Value>) -> usize {
    fn string(s: &str) -> usize {
        s.len().saturating_mul(6).saturating_add(2)
    }
    fn value(v: &Value) -> usize {
        match v {
            Value::Null | Value::Bool(_) => 5,
            // An integer prints in at most 20 bytes, a float in at most 24.
            Value::Number(_) => 24,
            Value::String(s) => string(s),
            Value::Array(items) => items.iter().fold(2, |n, v| n.saturating_add(value(v)).saturating_add(1)),
            Value::Object(m) => encoded_len_bound(m),
        }
    }
    members.iter().fold(2, |n, (k, v)| n.saturating_add(string(k)).saturating_add(value(v)).saturating_add(2))
}

/// Bytes of `value`'s compact JSON, counted without building it (`usize::MAX` if it
/// cannot be serialized).
pub(crate) fn encoded_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

fn object_list(key: &str, v: &Value) -> Result<Vec<Value>, CustomError> {
    let items = v.as_array().ok_or_else(|| {
        CustomError::InvalidNested(format!("nested custom attribute '{}': expected an array of objects", truncate(key)))
    })?;
    items
        .iter()
        .map(|i| {
            if !i.is_object() {
                return Err(CustomError::InvalidNested(format!(
                    "nested custom attribute '{}': expected an array of objects",
                    truncate(key)
                )));
            }
            nested(key, i, 1)
        })
        .collect()
}

fn identifier_pairs(key: &str, v: &Value, with_new: bool) -> Result<Vec<(String, Value, Value)>, CustomError> {
    let bad = || {
        CustomError::InvalidNested(format!(
            "nested custom attribute '{}': entries need '$identifier_key', '$identifier_value'{}",
            truncate(key),
            if with_new { " and '$new_object'" } else { "" }
        ))
    };
    let items = v.as_array().ok_or_else(bad)?;
    let mut out = Vec::new();
    for item in items {
        let o = item.as_object().ok_or_else(bad)?;
        let k = o.get("$identifier_key").and_then(Value::as_str).ok_or_else(bad)?;
        let val = o.get("$identifier_value").filter(|v| !v.is_null()).ok_or_else(bad)?;
        let new = if with_new {
            let n = o.get("$new_object").filter(|v| v.is_object()).ok_or_else(bad)?;
            nested(key, n, 1)?
        } else {
            Value::Null
        };
        out.push((k.to_string(), val.clone(), new));
    }
    Ok(out)
}

/// Parses the update of one custom attribute.
pub fn parse(key: &str, v: &Value, merge_objects: bool) -> Result<CustomOp, CustomError> {
    check_key(key)?;
    match v {
        Value::Null => Ok(CustomOp::Remove),
        Value::Number(_) | Value::Bool(_) | Value::String(_) => {
            check_scalar(key, v)?;
            Ok(CustomOp::Set(v.clone()))
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            let objs = object_list(key, v)?;
            if !nested_size_ok(v) {
                return Err(CustomError::InvalidNested(format!(
                    "nested custom attribute '{}' exceeds 100 KB",
                    truncate(key)
                )));
            }
            Ok(CustomOp::Objects(objs))
        }
        Value::Array(items) => {
            if items.len() > MAX_ARRAY_LEN {
                return Err(CustomError::Invalid(format!(
                    "custom attribute '{}' has more than {MAX_ARRAY_LEN} elements",
                    truncate(key)
                )));
            }
            Ok(CustomOp::Set(Value::Array(scalar_array(key, items)?)))
        }
        Value::Object(o) => {
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            if keys == ["inc"] {
                return match o["inc"].as_i64() {
                    Some(n) => Ok(CustomOp::Inc(n)),
                    None => Err(CustomError::Invalid(format!("'inc' of '{}' must be an integer", truncate(key)))),
                };
            }
            if !keys.is_empty() && keys.iter().all(|k| *k == "add" || *k == "remove") {
                let list = |name: &str| -> Result<Vec<Value>, CustomError> {
                    match o.get(name) {
                        None => Ok(Vec::new()),
                        Some(Value::Array(items)) => scalar_array(key, items),
                        Some(_) => {
                            Err(CustomError::Invalid(format!("'{name}' of '{}' must be an array", truncate(key))))
                        }
                    }
                };
                return Ok(CustomOp::Array { add: list("add")?, remove: list("remove")? });
            }
            if keys.len() == 1 && keys[0] == "$time" {
                return match o["$time"].as_str().and_then(normalise_time) {
                    Some(t) => Ok(CustomOp::Set(Value::String(t))),
                    None => Err(CustomError::Invalid(format!("'$time' of '{}' is not a valid time", truncate(key)))),
                };
            }
            if keys.len() == 1 && matches!(keys[0], "$add" | "$remove" | "$update") {
                let arg = &o[keys[0]];
                if !nested_size_ok(arg) {
                    return Err(CustomError::InvalidNested(format!(
                        "nested custom attribute '{}' exceeds 100 KB",
                        truncate(key)
                    )));
                }
                return match keys[0] {
                    "$add" => Ok(CustomOp::ObjectsAdd(object_list(key, arg)?)),
                    "$remove" => Ok(CustomOp::ObjectsRemove(
                        identifier_pairs(key, arg, false)?.into_iter().map(|(k, v, _)| (k, v)).collect(),
                    )),
                    _ if !merge_objects => Err(CustomError::InvalidNested(format!(
                        "nested custom attribute '{}': '$update' requires '_merge_objects': true",
                        truncate(key)
                    ))),
                    _ => Ok(CustomOp::ObjectsUpdate(identifier_pairs(key, arg, true)?)),
                };
            }
            let value = nested(key, v, 1)?;
            if !nested_size_ok(&value) {
                return Err(CustomError::InvalidNested(format!(
                    "nested custom attribute '{}' exceeds 100 KB",
                    truncate(key)
                )));
            }
            Ok(CustomOp::Object(value))
        }
    }
}

fn deep_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                match t.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => deep_merge(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// Applies one update to a profile's custom attributes.
pub fn apply(custom: &mut Map<String, Value>, key: &str, op: &CustomOp, merge_objects: bool) {
    match op {
        CustomOp::Set(v) => {
            custom.insert(key.to_string(), v.clone());
        }
        CustomOp::Remove => {
            custom.remove(key);
        }
        CustomOp::Inc(n) => {
            let current = custom.get(key).and_then(Value::as_i64).unwrap_or(0);
            custom.insert(key.to_string(), Value::from(current.saturating_add(*n)));
        }
        CustomOp::Array { add, remove } => {
            let mut items = match custom.remove(key) {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            };
            items.retain(|v| !remove.contains(v));
            for v in add {
                items.retain(|x| x != v);
                items.push(v.clone());
            }
            if items.len() > MAX_ARRAY_LEN {
                let excess = items.len() - MAX_ARRAY_LEN;
                items.drain(..excess);
            }
            custom.insert(key.to_string(), Value::Array(items));
        }
        CustomOp::Object(v) => match custom.get_mut(key) {
            Some(existing) if merge_objects && existing.is_object() => deep_merge(existing, v),
            _ => {
                custom.insert(key.to_string(), v.clone());
            }
        },
        CustomOp::Objects(items) => {
            custom.insert(key.to_string(), Value::Array(items.clone()));
        }
        CustomOp::ObjectsAdd(items) => {
            let list = custom.entry(key.to_string()).or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(Vec::new());
            }
            if let Value::Array(a) = list {
                a.extend(items.iter().cloned());
            }
        }
        CustomOp::ObjectsRemove(pairs) => {
            if let Some(Value::Array(a)) = custom.get_mut(key) {
                a.retain(|o| !pairs.iter().any(|(k, v)| o.get(k) == Some(v)));
            }
        }
        CustomOp::ObjectsUpdate(triples) => {
            if let Some(Value::Array(a)) = custom.get_mut(key) {
                for o in a.iter_mut() {
                    for (k, v, new) in triples {
                        if o.get(k) == Some(v) {
                            deep_merge(o, new);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(start: Value, key: &str, update: Value, merge: bool) -> Value {
        let mut m = start.as_object().cloned().unwrap();
        let op = parse(key, &update, merge).unwrap();
        apply(&mut m, key, &op, merge);
        Value::Object(m)
    }

    #[test]
    fn the_quick_bound_is_never_under_the_encoded_length() {
        let values = [
            json!({}),
            json!({"a": null, "b": true, "c": false, "d": ""}),
            json!({"ctl\u{1}": "\u{0}\u{1f}\"\\\n", "é": "日本語 🎉"}),
            json!({"i": i64::MIN, "u": u64::MAX, "f": -1.7976931348623157e308, "g": 5e-324, "h": -0.000001}),
            json!({"deep": {"list": [1, [2, [3, {"x": "\u{7f}"}]], [], {}], "o": {"p": [null, true]}}}),
        ];
        for v in values {
            let m = v.as_object().unwrap();
            assert!(encoded_len(m) <= encoded_len_bound(m), "{v}: {} > {}", encoded_len(m), encoded_len_bound(m));
        }
    }

    #[test]
    fn inc_starts_from_zero_and_adds() {
        assert_eq!(run(json!({}), "n", json!({"inc": 3}), false), json!({"n": 3}));
        assert_eq!(run(json!({"n": 3}), "n", json!({"inc": -5}), false), json!({"n": -2}));
        assert!(parse("n", &json!({"inc": 1.5}), false).is_err());
    }

    #[test]
    fn arrays_keep_unique_values_and_move_re_added_ones_to_the_end() {
        assert_eq!(run(json!({}), "a", json!(["x", "x", "y"]), false), json!({"a": ["x", "y"]}));
        assert_eq!(
            run(json!({"a": ["x", "y", "z"]}), "a", json!({"add": ["x", "w"], "remove": ["y"]}), false),
            json!({"a": ["z", "x", "w"]})
        );
    }

    #[test]
    fn adding_past_the_limit_drops_the_oldest() {
        let full: Vec<Value> = (0..MAX_ARRAY_LEN).map(|i| json!(i)).collect();
        let out = run(json!({"a": full}), "a", json!({"add": ["new"]}), false);
        let a = out["a"].as_array().unwrap();
        assert_eq!(a.len(), MAX_ARRAY_LEN);
        assert_eq!(a[0], json!(1));
        assert_eq!(a[MAX_ARRAY_LEN - 1], json!("new"));
    }

    #[test]
    fn nested_time_is_normalised_and_null_inside_is_invalid() {
        let out = run(json!({}), "o", json!({"d": {"$time": "2020-05-28"}, "k": [1, {"x": true}]}), false);
        assert_eq!(out, json!({"o": {"d": "2020-05-28T00:00:00.000Z", "k": [1, {"x": true}]}}));
        assert!(matches!(parse("o", &json!({"d": null}), false), Err(CustomError::InvalidNested(_))));
        assert!(matches!(parse("o", &json!({"d": {"$time": "soon"}}), false), Err(CustomError::InvalidNested(_))));
    }

    #[test]
    fn objects_merge_only_when_asked() {
        let start = json!({"o": {"a": 1, "b": {"c": 2}}});
        assert_eq!(run(start.clone(), "o", json!({"b": {"d": 3}}), false), json!({"o": {"b": {"d": 3}}}));
        assert_eq!(run(start, "o", json!({"b": {"d": 3}}), true), json!({"o": {"a": 1, "b": {"c": 2, "d": 3}}}));
    }

    #[test]
    fn arrays_of_objects_add_update_remove() {
        let start = json!({"pets": [{"id": 1, "type": "dog"}, {"id": 2, "type": "cat"}]});
        let added = run(start, "pets", json!({"$add": [{"id": 3, "type": "dog"}]}), false);
        let updated = run(
            added,
            "pets",
            json!({"$update": [{"$identifier_key": "id", "$identifier_value": 2, "$new_object": {"name": "Tom"}}]}),
            true,
        );
        assert_eq!(updated["pets"][1], json!({"id": 2, "type": "cat", "name": "Tom"}));
        let removed =
            run(updated, "pets", json!({"$remove": [{"$identifier_key": "type", "$identifier_value": "dog"}]}), false);
        assert_eq!(removed, json!({"pets": [{"id": 2, "type": "cat", "name": "Tom"}]}));
        assert!(parse("pets", &json!({"$update": []}), false).is_err());
    }

    #[test]
    fn long_strings_and_bad_keys_are_refused() {
        assert!(parse("s", &json!("x".repeat(256)), false).is_err());
        assert!(parse("$s", &json!(1), false).is_err());
        assert!(parse("", &json!(1), false).is_err());
        assert!(parse("s", &json!("x".repeat(255)), false).is_ok());
    }
}
