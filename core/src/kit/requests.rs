//! Verifying calls, as WireMock's `/__admin/requests/find` and `/count` do: a test
//! asks whether its code made a call, and with which body. A filter names any of
//! `method`, `path` (the path sent, or the route's pattern), `workspace`, `status`,
//! `body` (JSON the request body must contain: every field of an object, with a
//! value that contains the filter's; every element of an array, each contained in
//! some element of the body's; anything else equal) and `since` (an RFC 3339 time,
//! inclusive). Entries come from the journal ([`super::journal`]): newest first,
//! bodies as it keeps them (passwords and link tokens masked, keys never).

use serde_json::{json, Map, Value};

use super::journal::Entry;
use crate::error::ApiError;
use crate::http::Method;
use crate::time::Timestamp;

/// A request filter; a field not given matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    method: Option<Method>,
    path: Option<String>,
    workspace: Option<String>,
    status: Option<u16>,
    body: Option<Value>,
    since: Option<Timestamp>,
}

const FIELDS: [&str; 6] = ["method", "path", "workspace", "status", "body", "since"];

impl Filter {
    /// Reads a filter from a request body (an empty body: everything).
    pub fn parse(body: &[u8]) -> Result<Filter, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Filter::default());
        }
        let m: Map<String, Value> = serde_json::from_slice(body).map_err(|_| {
            ApiError::bad("the filter must be a JSON object: method, path, workspace, status, body, since")
        })?;
        if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(ApiError::bad(format!("unknown filter field '{k}' (allowed: {})", FIELDS.join(", "))));
        }
        let text = |name: &str| -> Result<Option<String>, ApiError> {
            match m.get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(ApiError::bad(format!("'{name}' must be a string"))),
            }
        };
        let method = text("method")?.as_deref().map(method).transpose()?;
        let status = match m.get("status") {
            None => None,
            // JSON Schema's integers include 321.0.
            Some(v) => Some(
                v.as_f64()
                    .filter(|s| s.fract() == 0.0 && (100.0..=599.0).contains(s))
                    .map(|s| s as u16)
                    .ok_or_else(|| ApiError::bad("'status' must be an HTTP status, 100 to 599"))?,
            ),
        };
        let since = match text("since")? {
            None => None,
            Some(t) => Some(
                Timestamp::parse(&t).ok_or_else(|| ApiError::bad("'since' must be an RFC 3339 time with an offset"))?,
            ),
        };
        let body = m.get("body").filter(|b| !b.is_null()).cloned();
        Ok(Filter { method, path: text("path")?, workspace: text("workspace")?, status, body, since })
    }

    /// Whether the filter asks about bodies.
    pub fn reads_bodies(&self) -> bool {
        self.body.is_some()
    }

    /// Whether `e` passes the filter.
    pub fn matches(&self, e: &Entry) -> bool {
        self.method.is_none_or(|m| m.as_str() == e.method)
            && self.path.as_deref().is_none_or(|p| p == e.path || p == e.route)
            && self.workspace.as_deref().is_none_or(|w| Some(w) == e.workspace.as_deref())
            && self.status.is_none_or(|s| s == e.status)
            && self.since.is_none_or(|t| e.at_ms >= t.0)
            && self.body.as_ref().is_none_or(|want| {
                let have = e.request_body.as_deref().and_then(|b| serde_json::from_str::<Value>(b).ok());
                have.is_some_and(|have| contains(&have, want))
            })
    }
}

/// A filter's or a fault's `method`: an HTTP method, in any case.
pub(super) fn method(name: &str) -> Result<Method, ApiError> {
    match Method::parse(&name.to_ascii_uppercase()) {
        Method::Other => Err(ApiError::bad(format!("'method' must be an HTTP method, not '{name}'"))),
        known => Ok(known),
    }
}

/// Whether `have` contains `want` (see the module's comment).
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Value::Array(h), Value::Array(w)) => w.iter().all(|wv| h.iter().any(|hv| contains(hv, wv))),
        // 1 and 1.0 are one number.
        (Value::Number(h), Value::Number(w)) => h.as_f64() == w.as_f64(),
        _ => have == want,
    }
}

/// An entry as `find` answers it: bodies as JSON where they are.
pub fn shown(e: &Entry) -> Value {
    let body = |b: &Option<String>| match b {
        None => Value::Null,
        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::from(text.as_str())),
    };
    json!({
        "at": e.at, "method": e.method, "path": e.path, "route": e.route, "workspace": e.workspace, "fault": e.fault,
        "status": e.status, "micros": e.micros, "request_id": e.request_id,
        "request_body": body(&e.request_body), "response_body": body(&e.response_body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(method: &'static str, path: &str, ws: Option<&str>, status: u16, body: Option<&str>, at: i64) -> Entry {
        Entry {
            at: Timestamp(at).to_rfc3339(),
            method,
            route: "/users/track",
            path: path.into(),
            workspace: ws.map(str::to_string),
            fault: None,
            status,
            micros: 1,
            request_id: "r".into(),
            request_body: body.map(str::to_string),
            response_body: None,
            at_ms: at,
        }
    }

    #[test]
    fn a_filter_matches_on_each_field_and_a_body_it_contains() {
        let e = entry(
            "POST",
            "/users/track",
            Some("shop"),
            201,
            Some(r#"{"attributes": [{"external_id": "u1", "plan": "pro", "n": 1}, {"external_id": "u2"}]}"#),
            1_000,
        );
        let f = |text: &str| Filter::parse(text.as_bytes()).unwrap();
        for yes in [
            "",
            r#"{"method": "post", "path": "/users/track", "workspace": "shop", "status": 201}"#,
            r#"{"body": {"attributes": [{"external_id": "u2"}, {"plan": "pro", "n": 1.0}]}}"#,
            r#"{"since": "1970-01-01T00:00:01Z"}"#,
        ] {
            assert!(f(yes).matches(&e), "{yes}");
        }
        for no in [
            r#"{"method": "GET"}"#,
            r#"{"path": "/users/track/sync"}"#,
            r#"{"workspace": "other"}"#,
            r#"{"status": 400}"#,
            r#"{"body": {"attributes": [{"external_id": "u3"}]}}"#,
            r#"{"body": {"attributes": {"external_id": "u1"}}}"#,
            r#"{"since": "1970-01-01T00:00:01.001Z"}"#,
        ] {
            assert!(!f(no).matches(&e), "{no}");
        }
        assert!(!f(r#"{"body": {}}"#).matches(&entry("POST", "/x", None, 201, None, 0)), "no body kept");
        for bad in
            ["[]", r#"{"verb": "GET"}"#, r#"{"status": "201"}"#, r#"{"since": "yesterday"}"#, r#"{"method": "FLY"}"#]
        {
            assert_eq!(Filter::parse(bad.as_bytes()).unwrap_err().status(), 400, "{bad}");
        }
    }
}
