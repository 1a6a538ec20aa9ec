//! A request head as a host read it off the wire, judged before anything else runs:
//! how its body is framed, or why the request is refused (RFC 9112). A host that
//! parses HTTP/1.1 itself (the native server) asks here for every head, so each
//! refusal, whatever layer notices it, has the platform's shape and a request id.
//! Hosts whose platform parses HTTP (the edge) never see such heads.

use crate::error::ApiError;
use crate::http::Response;
use crate::input;

/// Longest request target accepted (then 414).
pub const MAX_TARGET_BYTES: usize = 8 * 1024;

/// Largest request head accepted, request line and header fields (then 431).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Most header fields in one head (then 431).
pub const MAX_HEADER_FIELDS: usize = 100;

/// What a host's parser made of a head's bytes.
#[derive(Debug)]
pub enum Head<'a> {
    /// A complete head.
    Parsed {
        /// The request target as sent (path and query).
        target: &'a str,
        /// The minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
        minor_version: u8,
        /// The header fields, in order, names as sent.
        fields: Vec<(&'a str, &'a [u8])>,
    },
    /// More than [`MAX_HEAD_BYTES`] arrived without the head's end, or more than
    /// [`MAX_HEADER_FIELDS`] fields: `start` is what arrived (at least the head's
    /// start), which tells a request line too long (414) from a head too large (431).
    TooLarge {
        /// The bytes that arrived.
        start: &'a [u8],
    },
    /// The bytes are not an HTTP/1.x request head.
    Malformed,
    /// The header timeout passed before the head's end.
    TimedOut {
        /// The timeout, in seconds.
        secs: u64,
    },
}

/// How the body after an accepted head is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
}

/// The judgement of a head.
#[derive(Debug)]
pub enum Verdict {
    /// Hand the request on; its body is framed so.
    Accept(Framing),
    /// Send this response (it closes the connection) instead of handling the request.
    Refuse(Response),
}

/// Judges `head`: accepted with its framing, or refused in the platform's shape
/// (the SCIM shape on `/scim/v2` paths) with a request id, and `Connection: close`,
/// since where the next request would start cannot be trusted after a refusal.
pub fn judge(head: &Head<'_>, max_body_bytes: usize, seed: [u8; 16]) -> Verdict {
    let (refusal, path, ids) = match head {
        Head::Parsed { target, minor_version, fields } => match framing(target, *minor_version, fields, max_body_bytes)
        {
            Ok(framing) => return Verdict::Accept(framing),
            Err(e) => (e, path_of(target), text_fields(fields)),
        },
        Head::TooLarge { start } => (too_large(start), "/", Vec::new()),
        Head::Malformed => (ApiError::bad("Bad Request: malformed request head"), "/", Vec::new()),
        Head::TimedOut { secs } => (ApiError::RequestTimeout { secs: *secs }, "/", Vec::new()),
    };
    let id = crate::http::request_id(&ids, seed);
    let response = refusal.into_shaped(crate::scim::protocol::shape(path));
    Verdict::Refuse(response.with_header("X-Request-Id", id).with_header("Connection", "close"))
}

/// A head over the bounds: its request line alone (method, target, version) is past
/// the target's bound, so the target is what is too long (414), or the head is
/// too large (431).
fn too_large(start: &[u8]) -> ApiError {
    let line = start.iter().position(|b| *b == b'\n').unwrap_or(start.len());
    // "METHOD " and " HTTP/1.1\r" around the target: a few bytes of slack.
    if line > MAX_TARGET_BYTES + 32 {
        ApiError::UriTooLong { limit: MAX_TARGET_BYTES }
    } else {
        ApiError::HeadersTooLarge { limit: MAX_HEAD_BYTES }
    }
}

fn path_of(target: &str) -> &str {
    target.split(['?', '#']).next().unwrap_or("/")
}

fn text_fields(fields: &[(&str, &[u8])]) -> Vec<(String, String)> {
    fields.iter().filter_map(|(k, v)| std::str::from_utf8(v).ok().map(|v| (k.to_string(), v.to_string()))).collect()
}

/// The framing rules of RFC 9112 as this server applies them.
fn framing(target: &str, minor_version: u8, fields: &[(&str, &[u8])], limit: usize) -> Result<Framing, ApiError> {
    if target.len() > MAX_TARGET_BYTES {
        return Err(ApiError::UriTooLong { limit: MAX_TARGET_BYTES });
    }
    let named = |name: &'static str| fields.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
    // §3.2: a server MUST answer 400 to an HTTP/1.1 request without exactly one Host.
    let hosts = named("host").count();
    if (minor_version >= 1 && hosts != 1) || hosts > 1 {
        return Err(ApiError::bad(if hosts == 0 {
            "Bad Request: an HTTP/1.1 request needs a Host header"
        } else {
            "Bad Request: more than one Host header"
        }));
    }
    let lengths: Vec<String> = named("content-length").map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    let codings: Vec<String> = named("transfer-encoding")
        .flat_map(|v| String::from_utf8_lossy(v).split(',').map(|c| c.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .filter(|c| !c.is_empty())
        .collect();
    if named("transfer-encoding").next().is_some() {
        // §6.3: both framings is how requests are smuggled past a proxy that reads
        // the other one; refuse rather than pick.
        if !lengths.is_empty() {
            return Err(ApiError::bad("Bad Request: both Content-Length and Transfer-Encoding are set"));
        }
        // §6.1: chunked must be the final coding, and no other coding is supported;
        // HTTP/1.0 has no transfer codings, so the framing cannot be trusted (§6.1).
        if minor_version == 0 {
            return Err(ApiError::bad("Bad Request: Transfer-Encoding in an HTTP/1.0 request"));
        }
        return match codings.as_slice() {
            [only] if only == "chunked" => Ok(Framing::Chunked),
            _ => Err(ApiError::UnsupportedTransferCoding(codings.join(", "))),
        };
    }
    let pairs: Vec<(String, String)> = lengths.into_iter().map(|v| ("content-length".to_string(), v)).collect();
    input::check_declared_length(&pairs, limit)?;
    let declared = pairs.first().and_then(|(_, v)| v.split(',').next()).map(|v| v.trim().parse::<u64>().unwrap_or(0));
    Ok(match declared {
        Some(n) if n > 0 => Framing::Length(n),
        _ => Framing::Empty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge_fields(minor_version: u8, fields: &[(&str, &str)]) -> Result<Framing, (u16, String)> {
        let fields: Vec<(&str, &[u8])> = fields.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
        let head = Head::Parsed { target: "/users/track", minor_version, fields };
        match judge(&head, 100, [7; 16]) {
            Verdict::Accept(f) => Ok(f),
            Verdict::Refuse(r) => {
                assert_eq!(r.header_value("Connection"), Some("close"));
                assert!(r.header_value("X-Request-Id").is_some());
                let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                Err((r.status, body["message"].as_str().unwrap().to_string()))
            }
        }
    }

    #[test]
    fn a_head_is_framed_by_its_length_or_chunked_coding() {
        assert_eq!(judge_fields(1, &[("Host", "x")]), Ok(Framing::Empty));
        assert_eq!(judge_fields(1, &[("Host", "x"), ("Content-Length", "0")]), Ok(Framing::Empty));
        assert_eq!(judge_fields(1, &[("Host", "x"), ("Content-Length", "12")]), Ok(Framing::Length(12)));
        assert_eq!(judge_fields(1, &[("Host", "x"), ("content-length", "12, 12")]), Ok(Framing::Length(12)));
        assert_eq!(judge_fields(1, &[("Host", "x"), ("Transfer-Encoding", "Chunked")]), Ok(Framing::Chunked));
        assert_eq!(judge_fields(0, &[]), Ok(Framing::Empty), "HTTP/1.0 needs no Host");
    }

    #[test]
    fn heads_the_rfc_refuses_are_refused_in_the_platform_shape() {
        let status = |minor, fields: &[(&str, &str)]| judge_fields(minor, fields).unwrap_err().0;
        assert_eq!(status(1, &[]), 400, "no Host");
        assert_eq!(status(1, &[("Host", "a"), ("Host", "b")]), 400, "two Hosts");
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "1"), ("Transfer-Encoding", "chunked")]), 400);
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "1"), ("Content-Length", "2")]), 400);
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "-1")]), 400);
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "101")]), 413);
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "18446744073709551614")]), 413);
        assert_eq!(status(1, &[("Host", "x"), ("Content-Length", "99999999999999999999999")]), 413);
        assert_eq!(status(1, &[("Host", "x"), ("Transfer-Encoding", "gzip, chunked")]), 501);
        assert_eq!(status(1, &[("Host", "x"), ("Transfer-Encoding", "chunked, gzip")]), 501);
        assert_eq!(status(0, &[("Transfer-Encoding", "chunked")]), 400);
    }

    #[test]
    fn oversized_malformed_and_slow_heads_have_their_own_statuses() {
        let status = |head: Head<'_>| match judge(&head, 100, [0; 16]) {
            Verdict::Refuse(r) => r.status,
            Verdict::Accept(_) => 0,
        };
        let long = format!("/{}", "a".repeat(MAX_TARGET_BYTES));
        assert_eq!(status(Head::Parsed { target: &long, minor_version: 1, fields: vec![("Host", b"x")] }), 414);
        let fields = format!("GET / HTTP/1.1\r\n{}", "X-A: b\r\n".repeat(20_000));
        assert_eq!(status(Head::TooLarge { start: fields.as_bytes() }), 431);
        let line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(100_000));
        assert_eq!(status(Head::TooLarge { start: line.as_bytes() }), 414);
        assert_eq!(status(Head::TooLarge { start: &line.as_bytes()[..70_000] }), 414, "no line end yet");
        assert_eq!(status(Head::Malformed), 400);
        assert_eq!(status(Head::TimedOut { secs: 3 }), 408);
    }

    #[test]
    fn a_refusal_on_a_scim_path_has_the_scim_shape() {
        let head = Head::Parsed { target: "/scim/v2/Users", minor_version: 1, fields: vec![] };
        let Verdict::Refuse(r) = judge(&head, 100, [0; 16]) else { panic!("refused") };
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["status"], 400);
        assert!(body["schemas"].is_array(), "{body}");
    }
}
