//! Reading a SCIM body's attributes: names match case-insensitively (RFC 7643
//! §2.1), `null` means unassigned, an attribute the resource does not have is a
//! 400 `invalidSyntax`, a value of the wrong type or out of bounds a 400
//! `invalidValue`. Every message names the attribute's path.

use serde_json::{Map, Value};

use super::error::ScimError;

/// Longest text value (names, ids, department strings), in characters.
pub const MAX_TEXT_CHARS: usize = 255;

/// Most entries of one multi-valued attribute.
pub const MAX_ITEMS: usize = 100;

/// The values of `names` in `map` (case-insensitive), `None` where absent or null.
/// Any other attribute is refused, so a misspelt one is never silently dropped.
pub fn pick<'a, const N: usize>(
    map: &'a Map<String, Value>,
    names: [&str; N],
    path: &str,
) -> Result<[Option<&'a Value>; N], ScimError> {
    let mut out = [None; N];
    for (k, v) in map {
        let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(k)) else {
            return Err(ScimError::syntax(format!(
                "{}unknown attribute '{k}'; allowed: {}",
                at(path),
                names.join(", ")
            )));
        };
        if out[i].is_some() {
            return Err(ScimError::syntax(format!("{}attribute '{}' is given twice", at(path), names[i])));
        }
        if !v.is_null() {
            out[i] = Some(v);
        }
    }
    Ok(out)
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// `parent.name`, or `name` at the top.
pub fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// A required attribute.
pub fn required<'a>(v: Option<&'a Value>, path: &str) -> Result<&'a Value, ScimError> {
    v.ok_or_else(|| ScimError::value(format!("'{path}' is required")))
}

/// A non-empty text value of at most [`MAX_TEXT_CHARS`] characters, without
/// control characters.
pub fn text(v: &Value, path: &str) -> Result<String, ScimError> {
    let s = v.as_str().ok_or_else(|| ScimError::value(format!("'{path}' must be a string")))?;
    let t = s.trim();
    if t.is_empty() {
        return Err(ScimError::value(format!("'{path}' must not be empty")));
    }
    if t.chars().count() > MAX_TEXT_CHARS {
        return Err(ScimError::value(format!("'{path}' is longer than {MAX_TEXT_CHARS} characters")));
    }
    if t.chars().any(char::is_control) {
        return Err(ScimError::value(format!("'{path}' must not contain control characters")));
    }
    Ok(t.to_string())
}

/// An object value.
pub fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ScimError> {
    v.as_object().ok_or_else(|| ScimError::value(format!("'{path}' must be an object")))
}

/// A multi-valued attribute of at most [`MAX_ITEMS`] entries, each read by `item`
/// with its path (`path[i]`); absent is empty.
pub fn list<T>(
    v: Option<&Value>,
    path: &str,
    mut item: impl FnMut(&Value, &str) -> Result<T, ScimError>,
) -> Result<Vec<T>, ScimError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let items = v.as_array().ok_or_else(|| ScimError::value(format!("'{path}' must be an array")))?;
    if items.len() > MAX_ITEMS {
        return Err(ScimError::value(format!("'{path}' has more than {MAX_ITEMS} entries")));
    }
    items.iter().enumerate().map(|(i, x)| item(x, &format!("{path}[{i}]"))).collect()
}

/// One string of a closed list, parsed by `parse`; `listing` names the allowed ones.
pub fn one_of<T>(v: &Value, path: &str, parse: fn(&str) -> Option<T>, listing: fn() -> String) -> Result<T, ScimError> {
    let s = v.as_str().ok_or_else(|| ScimError::value(format!("'{path}' must be a string")))?;
    parse(s).ok_or_else(|| ScimError::value(format!("'{path}': '{s}' is not one of {}", listing())))
}
