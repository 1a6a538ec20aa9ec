//! The core's own request and response values. Hosts translate their platform's
//! HTTP types into these and back; nothing here performs I/O.

use serde::Serialize;

/// HTTP methods the API distinguishes. Anything else is carried as `Other` so the
/// router can answer 405 rather than the host guessing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
    /// `HEAD`
    Head,
    /// `OPTIONS`
    Options,
    /// Any other method (answered 405 or 404).
    Other,
}

impl Method {
    /// Parses a method name as it appears on the wire (case-sensitive, per RFC 9110).
    pub fn parse(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }
}

/// One HTTP request as the core sees it.
#[derive(Clone, Debug)]
pub struct Request {
    /// Request method.
    pub method: Method,
    /// Path without the query string, e.g. `/users/track`.
    pub path: String,
    /// Raw query string without the leading `?` (still percent-encoded).
    pub query: String,
    /// Header names are matched case-insensitively.
    pub headers: Vec<(String, String)>,
    /// The body bytes, already bounded by the host to [`crate::Config::max_body_bytes`].
    pub body: Vec<u8>,
    /// The origin the host saw the request addressed to (`https://host[:port]`), if it
    /// knows it: links default to it when no public URL is configured.
    pub origin: Option<String>,
    /// The address of the client the host got the request from (its IP), if it
    /// knows one: failed admin-token attempts are counted per client.
    pub client: Option<String>,
}

impl Request {
    /// Builds a request; convenient for tests and the playground.
    pub fn new(method: Method, path_and_query: &str) -> Request {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (path_and_query.to_string(), String::new()),
        };
        Request { method, path, query, headers: Vec::new(), body: Vec::new(), origin: None, client: None }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// The first value of a header, matched case-insensitively.
    pub fn header_value(&self, name: &str) -> Option<&str> {
        first_header(&self.headers, name)
    }

    /// The address this server is reached at, without a trailing `/`: the
    /// configured public URL, else the origin the host saw, else `http://` and the
    /// `Host` header. Links and `Location`s are built on it.
    pub fn public_base(&self, public_url: Option<&str>) -> String {
        let base = public_url
            .map(str::to_string)
            .or_else(|| self.origin.clone())
            .or_else(|| self.header_value("Host").map(|h| format!("http://{h}")))
            .unwrap_or_else(|| "http://localhost".into());
        base.trim_end_matches('/').to_string()
    }

    /// Decoded query pairs in order, with `key[]` normalised to `key`.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.query
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let k = percent_decode(k);
                let k = k.strip_suffix("[]").map(str::to_string).unwrap_or(k);
                (k, percent_decode(v))
            })
            .collect()
    }
}

/// Decodes `%XX` escapes and `+` as space; invalid escapes are kept literally
/// and invalid UTF-8 is replaced, so decoding never fails.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One HTTP response produced by the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers to send, in order.
    pub headers: Vec<(String, String)>,
    /// Body bytes (JSON unless a header says otherwise).
    pub body: Vec<u8>,
    /// For the host's log only, never sent: what went wrong inside on a 5xx.
    pub internal: Option<String>,
    /// For the host only, never sent: what to do besides writing this response.
    pub then: Then,
    /// For the host's log only, never sent: something the operator should hear of.
    pub notice: Option<Notice>,
    /// For the host only, never sent: what the test kit needs of this request
    /// besides its answer.
    pub aside: Option<Box<Aside>>,
}

/// For the host only, never sent: what the test kit needs of a request besides its
/// answer; the host hands it back to the journal ([`crate::Engine::journal`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aside {
    /// The workspace the request acted in (its key's).
    pub workspace: Option<String>,
    /// The injected fault it met.
    pub fault: Option<String>,
    /// How long to wait before writing the answer (ms): an injected delay.
    pub delay_ms: u32,
}

/// What the core asks the host to log besides the request line: facts an operator
/// acts on, which hosts log without knowing which route produced them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// An API key or SCIM token was missing or unknown. A key made for another
    /// database is the usual cause, so the host names the one it serves.
    CredentialRefused,
}

/// What the core asks of the host besides writing a response. Hosts act on these
/// without knowing which endpoint produced them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Then {
    /// Nothing.
    #[default]
    Nothing,
    /// Jobs were queued: apply them soon (hosts without a background applier).
    ApplyQueue,
    /// Serve this file of the built playground in place of the response (which is
    /// the 404 to send when the host has no such file).
    ServeAsset(AssetPath),
    /// Answer with the host's metrics in Prometheus' text format, in place of the
    /// response (the 404 to send when the host keeps none).
    Metrics,
    /// Nothing was done: apply everything queued (in the turn requests that catch up
    /// take), then hand the same request to [`crate::Engine::handle_caught_up`]; the
    /// response is the 503 to send for a host that cannot. Only hosts without a
    /// background applier get it ([`crate::Engine::may_ask_to_catch_up`]).
    CatchUpFirst,
    /// Nothing was done: another request is loading what this one needs (the track
    /// ledger's count of the queue); hand the same request to the same method again
    /// after a short pause (a timer: never a wait on the other request). The
    /// response is the 503 to send for a host that cannot, or that tried for long
    /// enough. Only hosts without a background applier get it
    /// ([`crate::Engine::may_ask_to_catch_up`]).
    RunAgainSoon,
    /// Run the store conformance suite on a scratch store and answer with
    /// [`crate::store::conformance::report`], in place of the response (the 404
    /// to send when the host cannot).
    RunConformance,
    /// Set the host's clock to this time (a test clock's `POST /_engage/clock`): the
    /// host keeps the offset from its own clock and passes the moved time in every
    /// [`crate::Ctx`] from now on. Only asked of hosts configured with a test clock.
    SetClock(crate::time::Timestamp),
}

/// A file path under the playground's root, checked: percent-decoded, made of
/// segments that are neither empty nor hidden (`.`, `..`, `.git`) and hold no
/// separator, NUL or drive colon; a directory path names its `index.html`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetPath {
    segments: Vec<String>,
}

impl AssetPath {
    /// Parses the raw (percent-encoded) rest of a URL path; `None` when unsafe.
    pub fn parse(raw: &str) -> Option<AssetPath> {
        let decoded = strict_percent_decode(raw)?;
        let mut segments: Vec<String> = decoded.split('/').map(str::to_string).collect();
        if segments.last().is_some_and(String::is_empty) {
            segments.pop();
            segments.push("index.html".into());
        }
        let bad = |s: &String| s.is_empty() || s.starts_with('.') || s.contains(['\\', '\0', ':']);
        if segments.iter().any(bad) {
            return None;
        }
        Some(AssetPath { segments })
    }

    /// The segments, to join under the root.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The content type of the file, by its extension.
    pub fn content_type(&self) -> &'static str {
        let name = self.segments.last().map(String::as_str).unwrap_or("");
        match name.rsplit_once('.').map(|(_, ext)| ext).unwrap_or("") {
            "html" => "text/html; charset=utf-8",
            "js" | "mjs" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "wasm" => "application/wasm",
            "json" | "map" => "application/json",
            "svg" => "image/svg+xml",
            "png" => "image/png",
            "ico" => "image/x-icon",
            "txt" => "text/plain; charset=utf-8",
            _ => "application/octet-stream",
        }
    }
}

/// Strict percent-decoding of a path (no `+` rule); `None` for broken escapes or
/// non-UTF-8 results.
fn strict_percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The id of a request: the client's `X-Request-Id` when it is a sane token (1 to
/// 128 letters, digits and `-_.:`), else 32 hex digits from the request's seed.
pub fn request_id(headers: &[(String, String)], seed: [u8; 16]) -> String {
    let given = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("x-request-id")).map(|(_, v)| v.trim());
    match given {
        Some(v)
            if (1..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b)) =>
        {
            v.to_string()
        }
        _ => seed.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

impl Response {
    /// A JSON response.
    pub fn json<T: Serialize + ?Sized>(status: u16, body: &T) -> Response {
        // Serialising our own plain data types cannot fail.
        let body = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
        Response {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body,
            internal: None,
            then: Then::Nothing,
            notice: None,
            aside: None,
        }
    }

    /// An HTML page.
    pub fn html(status: u16, page: &str) -> Response {
        Response::empty(status)
            .with_header("Content-Type", "text/html; charset=utf-8")
            .with_body(page.as_bytes().to_vec())
    }

    /// What this response asks of the host for the test kit, made as it is set.
    pub fn aside_mut(&mut self) -> &mut Aside {
        self.aside.get_or_insert_with(Default::default)
    }

    /// A response without a body.
    pub fn empty(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            internal: None,
            then: Then::Nothing,
            notice: None,
            aside: None,
        }
    }

    /// A playground file the host read for [`Then::ServeAsset`]. For `HEAD` the body
    /// is left out and its length still announced.
    pub fn asset(path: &AssetPath, content: Vec<u8>, head: bool) -> Response {
        let len = content.len();
        Response {
            status: 200,
            headers: vec![
                ("Content-Type".into(), path.content_type().into()),
                ("Content-Length".into(), len.to_string()),
                ("Cache-Control".into(), "no-cache".into()),
                ("X-Content-Type-Options".into(), "nosniff".into()),
            ],
            body: if head { Vec::new() } else { content },
            internal: None,
            then: Then::Nothing,
            notice: None,
            aside: None,
        }
    }

    /// The answer to a HEAD: the headers of the GET, its body's length announced
    /// and the body left out. A file the host serves in its place
    /// ([`Then::ServeAsset`]) is read and answered the same way by the host.
    pub fn without_body(mut self) -> Response {
        if self.body.is_empty() {
            return self;
        }
        if self.header_value("Content-Length").is_none() {
            let len = self.body.len().to_string();
            self = self.with_header("Content-Length", len);
        }
        self.body.clear();
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: Vec<u8>) -> Response {
        self.body = body;
        self
    }

    /// Asks the host to do something besides writing the response.
    pub fn then(mut self, then: Then) -> Response {
        self.then = then;
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// The first value of a header, matched case-insensitively.
    pub fn header_value(&self, name: &str) -> Option<&str> {
        first_header(&self.headers, name)
    }

    /// Sets a header: any value it had is replaced.
    pub fn set_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.with_header(name, value)
    }

    /// The body parsed as JSON (`Null` when empty or not JSON); for tests and tools.
    pub fn json_body(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// The first value of header `name` in `headers`, matched case-insensitively.
fn first_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_pairs_decode_and_strip_array_brackets() {
        let r = Request::new(Method::Get, "/x?external_id%5B%5D=a%20b&external_id[]=c&email=x%40y.z&limit=5");
        assert_eq!(
            r.query_pairs(),
            vec![
                ("external_id".into(), "a b".into()),
                ("external_id".into(), "c".into()),
                ("email".into(), "x@y.z".into()),
                ("limit".into(), "5".into()),
            ]
        );
    }

    #[test]
    fn asset_paths_refuse_hidden_empty_and_escaping_segments() {
        let segs = |raw: &str| AssetPath::parse(raw).map(|p| p.segments().join("/"));
        assert_eq!(segs(""), Some("index.html".into()));
        assert_eq!(segs("pkg/a%20b.js"), Some("pkg/a b.js".into()));
        assert_eq!(segs("pkg/"), Some("pkg/index.html".into()));
        for bad in
            ["..", "../secret.txt", "%2e%2e/x", ".hidden", "a//b", "a%2Fb/../..", "a%5Cb", "c:x", "%00", "%zz", "%ff"]
        {
            assert_eq!(segs(bad), None, "{bad}");
        }
        assert_eq!(AssetPath::parse("pkg/x.wasm").unwrap().content_type(), "application/wasm");
        assert_eq!(AssetPath::parse("").unwrap().content_type(), "text/html; charset=utf-8");
    }

    #[test]
    fn percent_decode_keeps_broken_escapes() {
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
