//! Request input before any endpoint sees it: the body-size limit (checked once,
//! here, for every host) and the JSON body helpers the families share.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::json::{Json, Object};

/// Default largest request body: the platform documents 4 MB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Refuses a body whose declared `Content-Length` exceeds `limit` before it is read,
/// and framing that cannot be trusted: both `Content-Length` and
/// `Transfer-Encoding`, a length that is not a number, lengths that disagree.
pub fn check_declared_length(headers: &[(String, String)], limit: usize) -> Result<(), ApiError> {
    let named =
        |name: &'static str| headers.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
    // Two framings of one body is how requests are smuggled past a proxy that reads
    // the other one (RFC 9112 6.3): refuse rather than pick.
    if named("content-length").next().is_some() && named("transfer-encoding").next().is_some() {
        return Err(ApiError::bad("Bad Request: both Content-Length and Transfer-Encoding are set"));
    }
    let lengths: Vec<&str> = named("content-length").flat_map(|v| v.split(',')).map(str::trim).collect();
    let parsed: Option<Vec<u64>> =
        // All digits but past u64: longer than any limit.
        lengths.iter().map(|v| v.bytes().all(|b| b.is_ascii_digit()).then(|| v.parse().unwrap_or(u64::MAX))).collect();
    let declared = match parsed {
        None => return Err(ApiError::bad("Bad Request: Content-Length is not a number")),
        Some(ns) if ns.windows(2).any(|w| w[0] != w[1]) => {
            return Err(ApiError::bad("Bad Request: conflicting Content-Length values"))
        }
        Some(ns) => ns.first().copied(),
    };
    match declared {
        Some(n) if n > limit as u64 => Err(ApiError::PayloadTooLarge { limit }),
        _ => Ok(()),
    }
}

/// Refuses a body longer than `limit` (hosts stop reading there; this catches the rest).
pub fn check_body_len(len: usize, limit: usize) -> Result<(), ApiError> {
    if len > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    Ok(())
}

/// The message for a body that is not JSON.
fn invalid_json(e: serde_json::Error) -> String {
    format!("Invalid JSON body: {e}")
}

/// The message for a JSON body that is not an object.
const NOT_AN_OBJECT: &str = "The request body must be a JSON object";

/// Parses a JSON body; the error is the message to send.
pub fn json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(invalid_json)
}

/// Parses a JSON body that must be an object; the error is the message to send.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, String> {
    match json(body)? {
        Value::Object(o) => Ok(o),
        _ => Err(NOT_AN_OBJECT.into()),
    }
}

/// [`object`], with the strings borrowed from `body` ([`Json`]): for bodies read
/// field by field and dropped. Refuses the same bodies with the same messages.
pub fn borrowed_object(body: &[u8]) -> Result<Object<'_>, String> {
    match Json::parse(body).map_err(invalid_json)? {
        Json::Object(o) => Ok(o),
        _ => Err(NOT_AN_OBJECT.into()),
    }
}

/// A field's value, with `null` treated as absent.
pub fn field<'a>(body: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    body.get(key).filter(|v| !v.is_null())
}

/// Strict mode: a request body must be labelled JSON (`application/json`, with any
/// parameters), as the hosted platform requires; anything else is 415.
pub fn check_json_media_type(req: &crate::http::Request) -> Result<(), ApiError> {
    if matches!(req.method, crate::http::Method::Get | crate::http::Method::Head) && req.body.is_empty() {
        return Ok(());
    }
    let essence = req.header_value("content-type").map(|ct| ct.split(';').next().unwrap_or("").trim());
    match essence {
        Some(e) if e.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_length_over_the_limit_is_refused_before_reading() {
        let h = |v: &str| vec![("Content-Length".to_string(), v.to_string())];
        assert_eq!(check_declared_length(&h("10"), 10), Ok(()));
        assert_eq!(check_declared_length(&h("11"), 10), Err(ApiError::PayloadTooLarge { limit: 10 }));
        assert_eq!(check_declared_length(&h("99999999999999999999"), 10), Err(ApiError::PayloadTooLarge { limit: 10 }));
        assert_eq!(check_declared_length(&[], 10), Ok(()));
    }

    #[test]
    fn framing_that_cannot_be_trusted_is_refused() {
        let bad = |headers: &[(&str, &str)]| {
            let headers: Vec<(String, String)> = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            match check_declared_length(&headers, 100) {
                Err(ApiError::BadRequest(m)) => m,
                other => panic!("{headers:?}: {other:?}"),
            }
        };
        assert!(bad(&[("Content-Length", "5"), ("transfer-encoding", "chunked")]).contains("both"));
        assert!(bad(&[("Content-Length", "5x")]).contains("not a number"));
        assert!(bad(&[("Content-Length", "-1")]).contains("not a number"));
        assert!(bad(&[("Content-Length", "5, 6")]).contains("conflicting"));
        assert!(bad(&[("Content-Length", "5"), ("content-length", "7")]).contains("conflicting"));
        let same = vec![("Content-Length".to_string(), "5, 5".to_string())];
        assert_eq!(check_declared_length(&same, 100), Ok(()));
    }
}
