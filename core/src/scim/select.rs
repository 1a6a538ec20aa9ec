//! `attributes` / `excludedAttributes` (RFC 7644 §3.9): which attributes a response
//! carries. `schemas`, `id` and `active` are always returned.

use serde_json::{Map, Value};

use super::error::ScimError;
use super::protocol::{ENTERPRISE_URN, USER_URN};

/// An attribute named by `attributes` / `excludedAttributes`: a top-level name and
/// perhaps one sub-attribute (both lower case: names ignore case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    attr: String,
    sub: Option<String>,
}

/// Which attributes a response carries (`attributes` / `excludedAttributes`, RFC
/// 7644 §3.9). `schemas` and `id` are always returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every attribute.
    #[default]
    All,
    /// Only these.
    Only(Vec<Selected>),
    /// All but these.
    Except(Vec<Selected>),
}

impl Selection {
    /// From the two parameters' values (comma-separated attribute paths).
    pub fn parse(attributes: Option<&str>, excluded: Option<&str>) -> Result<Selection, ScimError> {
        fn paths(text: &str) -> Vec<Selected> {
            text.split(',')
                .map(|p| {
                    // A path may carry its schema's URN; the enterprise extension is
                    // an attribute of its own, named by its URN.
                    let p = strip_urn(p.trim(), USER_URN).to_ascii_lowercase();
                    if let Some(rest) = p.strip_prefix(&ENTERPRISE_URN.to_ascii_lowercase()) {
                        let sub = rest.strip_prefix(':').filter(|s| !s.is_empty()).map(str::to_string);
                        return Selected { attr: ENTERPRISE_URN.to_ascii_lowercase(), sub };
                    }
                    let (attr, sub) = match p.split_once('.') {
                        Some((a, s)) => (a.to_string(), Some(s.to_string())),
                        None => (p, None),
                    };
                    Selected { attr, sub }
                })
                .filter(|s| !s.attr.is_empty())
                .collect()
        }
        match (attributes.filter(|a| !a.trim().is_empty()), excluded.filter(|e| !e.trim().is_empty())) {
            (Some(_), Some(_)) => Err(ScimError::value("use 'attributes' or 'excludedAttributes', not both")),
            (Some(a), None) => Ok(Selection::Only(paths(a))),
            (None, Some(e)) => Ok(Selection::Except(paths(e))),
            (None, None) => Ok(Selection::All),
        }
    }

    /// Applies the selection to a rendered resource: a sub-attribute path keeps (or
    /// drops) only that part of its attribute.
    pub fn apply(&self, resource: Value) -> Value {
        let (Value::Object(map), Selection::Only(list) | Selection::Except(list)) = (&resource, self) else {
            return resource;
        };
        let only = matches!(self, Selection::Only(_));
        let mut out = Map::new();
        for (k, v) in map {
            let key = k.to_ascii_lowercase();
            let named: Vec<&Selected> = list.iter().filter(|s| s.attr == key).collect();
            let whole = named.iter().any(|s| s.sub.is_none());
            let subs: Vec<&str> = named.iter().filter_map(|s| s.sub.as_deref()).collect();
            let value = match (v, only) {
                // Returned always, whatever is asked (RFC 7643 `returned: always`).
                _ if key == "schemas" || key == "id" || key == "active" => Some(v.clone()),
                (_, true) if whole => Some(v.clone()),
                (Value::Object(inner), true) if !subs.is_empty() => Some(Value::Object(
                    inner
                        .iter()
                        .filter(|(sk, _)| subs.contains(&sk.to_ascii_lowercase().as_str()))
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect(),
                )),
                (_, true) => None,
                (_, false) if whole => None,
                (Value::Object(inner), false) => Some(Value::Object(
                    inner
                        .iter()
                        .filter(|(sk, _)| !subs.contains(&sk.to_ascii_lowercase().as_str()))
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect(),
                )),
                (_, false) => Some(v.clone()),
            };
            if let Some(value) = value {
                out.insert(k.clone(), value);
            }
        }
        Value::Object(out)
    }
}

/// `path` without a leading `<urn>:` (ASCII case-insensitive).
pub fn strip_urn<'a>(path: &'a str, urn: &str) -> &'a str {
    let n = urn.len();
    match path.get(..n) {
        Some(prefix) if prefix.eq_ignore_ascii_case(urn) && path[n..].starts_with(':') => &path[n + 1..],
        _ => path,
    }
}
