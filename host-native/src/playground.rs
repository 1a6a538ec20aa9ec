//! Serves the playground's static files (the `www/dist` build) at `/playground/`.
//! A host concern only: no API rule lives here, and the core never sees these requests.
//!
//! Safety: a request path is decoded and split into segments; any segment that is
//! empty, `.` or `..`, hidden, or holds a separator or NUL is refused, and the
//! resolved file must still lie under the (canonical) root, so symlinks cannot
//! lead outside it either.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Response, StatusCode};

/// The URL prefix the playground is served under.
pub const PREFIX: &str = "/playground";

/// The directory served, set once at start-up (unset: `/playground` is an ordinary
/// API path, answered by the core with 404).
static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Chooses the directory: the one given, else `www/dist` under the current
/// directory if it exists. Returns the directory served, if any.
pub fn init(dir: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    let dir = match dir {
        Some(d) => d,
        None => {
            let d = PathBuf::from("www/dist");
            if !d.is_dir() {
                return Ok(None);
            }
            d
        }
    };
    let root = dir.canonicalize().map_err(|e| format!("playground directory {}: {e}", dir.display()))?;
    if !root.is_dir() {
        return Err(format!("playground directory {} is not a directory", dir.display()));
    }
    let _ = ROOT.set(root.clone());
    Ok(Some(root))
}

/// The response for a playground path, or `None` when the path is not the
/// playground's (or no playground is configured): the API handles it.
pub fn respond(method: &Method, path: &str) -> Option<Response<Full<Bytes>>> {
    let root = ROOT.get()?;
    let rest = path.strip_prefix(PREFIX)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(serve(root, method, rest))
}

fn serve(root: &Path, method: &Method, rest: &str) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed").with_allow();
    }
    if rest.is_empty() {
        // Relative asset URLs in the page need the trailing slash.
        let mut r = plain(StatusCode::MOVED_PERMANENTLY, "");
        r.headers_mut().insert(hyper::header::LOCATION, hyper::header::HeaderValue::from_static("/playground/"));
        return r;
    }
    let Some(file) = resolve(root, rest) else { return plain(StatusCode::NOT_FOUND, "Not Found") };
    match std::fs::read(&file) {
        Ok(content) => {
            let len = content.len();
            let body = if method == Method::HEAD { Bytes::new() } else { Bytes::from(content) };
            let mut r = Response::new(Full::new(body));
            let h = r.headers_mut();
            h.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type(&file)));
            h.insert(hyper::header::CONTENT_LENGTH, hyper::header::HeaderValue::from(len));
            h.insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-cache"));
            h.insert("x-content-type-options", hyper::header::HeaderValue::from_static("nosniff"));
            r
        }
        Err(_) => plain(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// Maps `/a/b.js` (already stripped of the prefix) to a file under `root`, or `None`.
fn resolve(root: &Path, rest: &str) -> Option<PathBuf> {
    let decoded = percent_decode(rest)?;
    let mut path = root.to_path_buf();
    let mut segments: Vec<&str> = decoded.split('/').skip(1).collect();
    if segments.last() == Some(&"") {
        segments.pop();
        segments.push("index.html");
    }
    for seg in segments {
        let bad = seg.is_empty() || seg.starts_with('.') || seg.contains(['\\', '\0', ':']);
        if bad {
            return None;
        }
        path.push(seg);
    }
    let real = path.canonicalize().ok()?;
    if !real.starts_with(root) {
        return None;
    }
    if real.is_dir() {
        let index = real.join("index.html");
        return index.is_file().then_some(index);
    }
    real.is_file().then_some(real)
}

/// Strict percent-decoding of a path (no `+` rule); `None` for broken escapes or
/// non-UTF-8 results.
fn percent_decode(s: &str) -> Option<String> {
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

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
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

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

trait WithAllow {
    fn with_allow(self) -> Self;
}

impl WithAllow for Response<Full<Bytes>> {
    fn with_allow(mut self) -> Self {
        self.headers_mut().insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A small site in its own directory per test (removed when dropped).
    fn site() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("site/pkg")).unwrap();
        std::fs::write(dir.join("site/index.html"), "<!doctype html>").unwrap();
        std::fs::write(dir.join("site/pkg/engage_www_bg.wasm"), b"\0asm").unwrap();
        std::fs::write(dir.join("site/pkg/engage_www.js"), "export {}").unwrap();
        std::fs::write(dir.join("site/.hidden"), "no").unwrap();
        std::fs::write(dir.join("secret.txt"), "outside").unwrap();
        let root = dir.join("site").canonicalize().unwrap();
        (tmp, root)
    }

    fn get(root: &Path, path: &str) -> (StatusCode, String, Vec<u8>) {
        let r = serve(root, &Method::GET, path.strip_prefix(PREFIX).unwrap());
        let status = r.status();
        let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = pollster::block_on(r.into_body().collect()).unwrap().to_bytes().to_vec();
        (status, ct, body)
    }

    #[test]
    fn files_are_served_with_their_content_types() {
        let (_tmp, root) = site();
        let (s, ct, body) = get(&root, "/playground/");
        assert_eq!((s, ct.as_str(), body.as_slice()), (StatusCode::OK, "text/html; charset=utf-8", &b"<!doctype html>"[..]));
        let (s, ct, _) = get(&root, "/playground/pkg/engage_www_bg.wasm");
        assert_eq!((s, ct.as_str()), (StatusCode::OK, "application/wasm"));
        let (s, ct, _) = get(&root, "/playground/pkg/engage_www.js");
        assert_eq!((s, ct.as_str()), (StatusCode::OK, "text/javascript; charset=utf-8"));
        assert_eq!(get(&root, "/playground").0, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(get(&root, "/playground/pkg").0, StatusCode::NOT_FOUND);
        assert_eq!(get(&root, "/playground/missing.js").0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn paths_cannot_leave_the_root() {
        let (_tmp, root) = site();
        for path in [
            "/playground/../secret.txt",
            "/playground/%2e%2e/secret.txt",
            "/playground/pkg/..%2f..%2fsecret.txt",
            "/playground/pkg/%2e%2e%2f%2e%2e%2fsecret.txt",
            "/playground/..\\secret.txt",
            "/playground//etc/passwd",
            "/playground/.hidden",
            "/playground/%zz",
            "/playground/index.html%00",
        ] {
            assert_eq!(get(&root, path).0, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[test]
    fn only_get_and_head_are_allowed() {
        let (_tmp, root) = site();
        let r = serve(&root, &Method::POST, "/index.html");
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        let r = serve(&root, &Method::HEAD, "/index.html");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers().get("content-length").unwrap(), "15");
    }

    #[test]
    fn other_paths_are_left_to_the_api() {
        // `respond` needs the configured root; without it nothing is intercepted.
        assert!(respond(&Method::GET, "/users/track").is_none());
        assert!(respond(&Method::GET, "/playgroundx").is_none());
    }
}
