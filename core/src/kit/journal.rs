//! The request journal: the most recent requests an engine answered, for a person
//! (the inspector) or a test to see what their application sent. Each entry has
//! the time, method, route (the pattern: never the raw path, which may carry
//! identifiers or link tokens, shown as `path` with link tokens masked), the
//! workspace it acted in, status, latency and request id; bodies only when the host
//! asks for them (`--journal-bodies`, or `--ephemeral`), whole up to
//! [`MAX_BODY_BYTES`] (so a test can match them, [`super::requests`]), with passwords
//! and link tokens masked (and a body that is not JSON on an API route kept as its
//! length alone). Credentials are headers and are never kept. The operator's own
//! routes, health checks, metrics and playground files are not journaled.
//!
//! Bounded twice: at most [`CAPACITY`] entries and [`MAX_JOURNAL_BYTES`] of kept
//! bodies in all; the oldest entries go first.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;

use crate::error::UNKNOWN_KEY;
use crate::http::Method;
use crate::routes;
use crate::time::Timestamp;

/// Entries kept (the oldest is dropped for a new one).
pub const CAPACITY: usize = 1000;
/// Most bytes of a body kept in an entry (a longer one is cut, and says so).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Most bytes of bodies the whole journal keeps: the oldest entries are dropped
/// past it (at most 2 × [`MAX_BODY_BYTES`] an entry, so at least 128 entries fit).
pub const MAX_JOURNAL_BYTES: usize = 16 * 1024 * 1024;

/// One journaled request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// When it arrived (RFC 3339).
    pub at: String,
    /// Its method.
    pub method: &'static str,
    /// The route it matched, or `unmatched`.
    pub route: &'static str,
    /// The path it was sent to, link tokens masked.
    pub path: String,
    /// The workspace it acted in (its key's), when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The id of the injected fault it met, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// The answer's status.
    pub status: u16,
    /// How long answering took, in microseconds (as the host measured it).
    pub micros: u64,
    /// The request id (`X-Request-Id`).
    pub request_id: String,
    /// The request's body, with `--journal-bodies`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// The response's body, with `--journal-bodies`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_body: Option<String>,
    /// When it arrived (ms), for filters.
    #[serde(skip)]
    pub at_ms: i64,
}

impl Entry {
    /// The bytes of body this entry holds (what [`MAX_JOURNAL_BYTES`] counts).
    fn body_bytes(&self) -> usize {
        self.request_body.as_ref().map_or(0, String::len) + self.response_body.as_ref().map_or(0, String::len)
    }
}

/// What a host tells the journal of a request it answered.
#[derive(Clone, Copy, Debug)]
pub struct Answered<'a> {
    /// When it arrived.
    pub at: Timestamp,
    /// Its method.
    pub method: Method,
    /// Its path.
    pub path: &'a str,
    /// What the response set aside for the test kit ([`crate::Response::aside`]).
    pub aside: Option<&'a crate::http::Aside>,
    /// The answer's status.
    pub status: u16,
    /// How long answering took, in microseconds.
    pub micros: u64,
    /// The request id.
    pub request_id: &'a str,
    /// The request's body (empty when the host kept none).
    pub request_body: &'a [u8],
    /// The response's body.
    pub response_body: &'a [u8],
}

/// The journal: a bounded list of the latest entries.
#[derive(Debug, Default)]
pub struct Journal {
    entries: Mutex<Entries>,
    bodies: bool,
}

/// The entries, oldest first, and the bytes of body they hold.
#[derive(Debug, Default)]
struct Entries {
    list: VecDeque<Entry>,
    bytes: usize,
}

/// Whether requests to `path` are journaled: the application's, not the tools'.
fn journaled(path: &str) -> bool {
    !(path.starts_with("/_engage/")
        || path == "/_engage"
        || path.starts_with("/playground")
        || matches!(path, "/" | "/healthz" | "/readyz" | "/metrics" | "/openapi.json" | "/favicon.ico"))
}

/// What stands for a secret that is not kept.
const NOT_KEPT: &str = "[not kept]";

/// Whether a SCIM attribute path names the password (`password`, or with the
/// schema's URN before it).
fn names_password(path: &str) -> bool {
    let last = path.rsplit(':').next().unwrap_or(path);
    last.trim().eq_ignore_ascii_case("password")
}

/// Masks passwords in a JSON body: the value of every `password` field (SCIM
/// users carry one), and the `value` of a PATCH operation whose `path` is the
/// password.
fn without_passwords(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            let patches_password = m.get("path").and_then(|p| p.as_str()).is_some_and(names_password);
            for (k, x) in m.iter_mut() {
                if k.eq_ignore_ascii_case("password") || (patches_password && k.eq_ignore_ascii_case("value")) {
                    *x = serde_json::Value::from(NOT_KEPT);
                } else {
                    without_passwords(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(without_passwords),
        _ => {}
    }
}

/// A body as an entry keeps it: text, truncated, with passwords and link tokens
/// masked. `text_kept`: a body that is not JSON is kept as text (a preference
/// page's form and HTML); elsewhere such a body (malformed JSON, which could hold
/// anything) is kept as its length alone.
fn kept(body: &[u8], text_kept: bool) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut json) => {
            without_passwords(&mut json);
            // The answer to an unknown key names it: not kept either.
            if let Some(m) = json.get_mut("message").filter(|m| m.as_str().is_some_and(|m| m.starts_with(UNKNOWN_KEY)))
            {
                *m = serde_json::Value::from(format!("{UNKNOWN_KEY}{NOT_KEPT}"));
            }
            json.to_string()
        }
        Err(_) if text_kept => String::from_utf8_lossy(body).into_owned(),
        Err(_) => return Some(format!("[{} bytes, not JSON: {NOT_KEPT}]", body.len())),
    };
    let text = crate::preference_center::link::mask_tokens(&text, "[token]");
    Some(cut(text, body.len()))
}

/// `text` whole, or cut at [`MAX_BODY_BYTES`] (on a character boundary) saying so.
fn cut(text: String, len: usize) -> String {
    if text.len() <= MAX_BODY_BYTES {
        return text;
    }
    let mut end = MAX_BODY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{len} bytes in all]", &text[..end])
}

impl Journal {
    /// A journal; `bodies`: keep request and response bodies too.
    pub fn new(bodies: bool) -> Journal {
        Journal { entries: Mutex::new(Entries::default()), bodies }
    }

    /// Notes a request the host answered (if its path is journaled).
    pub fn record(&self, a: Answered<'_>) {
        if !journaled(a.path) {
            return;
        }
        let route = routes::find(a.method, a.path).map_or("unmatched", |(r, _)| r.pattern);
        let page = a.path.starts_with(crate::preference_center::link::PAGE_PREFIX);
        let entry = Entry {
            at: a.at.to_rfc3339(),
            method: a.method.as_str(),
            route,
            path: crate::preference_center::link::mask_tokens(
                &a.path.chars().take(2048).collect::<String>(),
                "[token]",
            ),
            workspace: a.aside.and_then(|x| x.workspace.clone()),
            fault: a.aside.and_then(|x| x.fault.clone()),
            status: a.status,
            micros: a.micros,
            request_id: a.request_id.chars().take(128).collect(),
            request_body: if self.bodies { kept(a.request_body, page) } else { None },
            response_body: if self.bodies { kept(a.response_body, page) } else { None },
            at_ms: a.at.0,
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.bytes += entry.body_bytes();
        entries.list.push_back(entry);
        while entries.list.len() > CAPACITY || entries.bytes > MAX_JOURNAL_BYTES {
            let Some(old) = entries.list.pop_front() else { break };
            entries.bytes -= old.body_bytes();
        }
    }

    /// The latest `limit` entries, newest first.
    pub fn recent(&self, limit: usize) -> Vec<Entry> {
        self.matching(limit, |_| true)
    }

    /// The latest `limit` entries `keep` takes, newest first.
    pub fn matching(&self, limit: usize, keep: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.list.iter().rev().filter(|e| keep(e)).take(limit).cloned().collect()
    }

    /// How many entries `keep` takes.
    pub fn count(&self, keep: impl Fn(&Entry) -> bool) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).list.iter().filter(|e| keep(e)).count()
    }

    /// The entries and the bytes of body the journal holds now.
    #[cfg(test)]
    pub fn size(&self) -> (usize, usize) {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        (entries.list.len(), entries.bytes)
    }

    /// Whether bodies are kept.
    pub fn keeps_bodies(&self) -> bool {
        self.bodies
    }

    /// Forgets every entry (a reset of the whole deployment).
    pub fn clear(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        *entries = Entries::default();
    }

    /// Forgets the entries `drop` takes; answers how many.
    pub fn forget(&self, drop: impl Fn(&Entry) -> bool) -> usize {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let before = entries.list.len();
        entries.list.retain(|e| !drop(e));
        entries.bytes = entries.list.iter().map(Entry::body_bytes).sum();
        before - entries.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered<'a>(path: &'a str, body: &'a [u8]) -> Answered<'a> {
        Answered {
            at: Timestamp(0),
            method: Method::Post,
            path,
            aside: None,
            status: 201,
            micros: 7,
            request_id: "r1",
            request_body: body,
            response_body: br#"{"url": "http://x/preferences/abc.def-1?x=1"}"#,
        }
    }

    #[test]
    fn the_application_s_requests_are_kept_newest_first_and_bounded() {
        let j = Journal::new(false);
        j.record(answered("/users/track", b"{}"));
        j.record(answered("/_engage/keys", b"{}"));
        j.record(answered("/healthz", b""));
        j.record(answered("/users/7/nope", b""));
        let got = j.recent(10);
        assert_eq!(got.iter().map(|e| e.route).collect::<Vec<_>>(), ["unmatched", "/users/track"]);
        assert!(got[1].request_body.is_none(), "no bodies unless asked");
        for _ in 0..CAPACITY + 5 {
            j.record(answered("/users/track", b"{}"));
        }
        assert_eq!(j.recent(usize::MAX).len(), CAPACITY);
    }

    #[test]
    fn passwords_are_never_kept() {
        let j = Journal::new(true);
        j.record(answered(
            "/scim/v2/Users",
            br#"{"userName": "a@b.c", "password": "hunter2", "x": [{"Password": 1}]}"#,
        ));
        let body = j.recent(1)[0].request_body.clone().unwrap();
        assert!(!body.contains("hunter2") && body.contains("[not kept]"), "{body}");
    }

    #[test]
    fn scim_passwords_are_never_kept_whatever_the_body_s_shape() {
        let j = Journal::new(true);
        let patch = br#"{"Operations": [{"op": "replace", "path": "password", "value": "hunter2"},
            {"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User:PASSWORD", "value": "hunter3"},
            {"op": "replace", "path": "name.givenName", "value": "Ada"}]}"#;
        j.record(answered("/scim/v2/Users/abc", patch));
        let body = j.recent(1)[0].request_body.clone().unwrap();
        assert!(!body.contains("hunter") && body.contains("Ada"), "{body}");
        let malformed = br#"{"userName": "a@b.c", "password": "hunter2","#;
        j.record(answered("/scim/v2/Users", malformed));
        let body = j.recent(1)[0].request_body.clone().unwrap();
        assert_eq!(body, format!("[{} bytes, not JSON: [not kept]]", malformed.len()));
    }

    #[test]
    fn link_tokens_are_masked_by_their_value_wherever_they_stand() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut sealed = vec![2u8];
        sealed.extend([7u8; 80]);
        let v2 = b64.encode(&sealed);
        let v1 = format!("{}.{}", b64.encode("v1\u{1f}shop\u{1f}c1\u{1f}u1\u{1f}99"), b64.encode([1u8; 32]));
        let j = Journal::new(true);
        for token in [&v2, &v1] {
            let html = format!("<p>Your code: {token}</p><a href=\"x?t={token}&y=1\">");
            j.record(Answered { response_body: html.as_bytes(), ..answered("/preferences/abc", b"") });
            let body = j.recent(1)[0].response_body.clone().unwrap();
            assert_eq!(body, "<p>Your code: [token]</p><a href=\"x?t=[token]&y=1\">");
            let json =
                format!(r#"{{"token": "{token}", "external_id": "user-of-a-long-name-0123456789-abcdefghijklmnop"}}"#);
            j.record(answered("/users/track", json.as_bytes()));
            let body = j.recent(1)[0].request_body.clone().unwrap();
            assert!(!body.contains(token.as_str()) && body.contains("[token]"), "{body}");
            assert!(body.contains("user-of-a-long-name-0123456789-abcdefghijklmnop"), "{body}");
        }
    }

    #[test]
    fn bodies_when_asked_with_link_tokens_masked_and_truncated() {
        let j = Journal::new(true);
        let big = format!(r#"{{"a":"{}"}}"#, "a".repeat(MAX_BODY_BYTES + 10)).into_bytes();
        j.record(answered("/users/track", &big));
        let e = &j.recent(1)[0];
        assert!(e.request_body.as_ref().unwrap().ends_with(&format!("… [{} bytes in all]", big.len())));
        // What only looks like a link is kept: tokens are masked by their value.
        assert_eq!(e.response_body.as_deref(), Some(r#"{"url":"http://x/preferences/abc.def-1?x=1"}"#));
    }

    #[test]
    fn the_bodies_kept_stay_within_the_journal_s_bound() {
        let j = Journal::new(true);
        let body = format!(r#"{{"a":"{}"}}"#, "a".repeat(MAX_BODY_BYTES - 20)).into_bytes();
        for _ in 0..2 * MAX_JOURNAL_BYTES / MAX_BODY_BYTES {
            j.record(answered("/users/track", &body));
            let (_, bytes) = j.size();
            assert!(bytes <= MAX_JOURNAL_BYTES, "{bytes}");
        }
        let (entries, bytes) = j.size();
        assert!(entries >= 128 && bytes > MAX_JOURNAL_BYTES / 2, "{entries} entries, {bytes} bytes");
        // 100,000 small requests: the entries' bound holds too.
        for _ in 0..100_000 {
            j.record(answered("/users/track", br#"{"attributes": [{"external_id": "u"}]}"#));
        }
        let (entries, bytes) = j.size();
        assert!(entries == CAPACITY && bytes <= MAX_JOURNAL_BYTES, "{entries} entries, {bytes} bytes");
        assert_eq!(j.forget(|e| e.route == "/users/track"), entries);
        assert_eq!(j.size(), (0, 0));
    }
}
