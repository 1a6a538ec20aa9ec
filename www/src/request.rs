//! The editor's request as text fields, turned into a core [`Request`] for the
//! in-page engine or into a `curl` command for a real server: both from the same
//! parsed fields, so what works in the playground works against a server.

use engage_core::{Method, Request};

/// A request as the editor holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    /// Method name, e.g. `POST`.
    pub method: String,
    /// Path, e.g. `/users/track`.
    pub path: String,
    /// Query without `?`, possibly empty.
    pub query: String,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// Body text, possibly empty.
    pub body: String,
}

/// Parses header lines `Name: value`; blank lines are skipped.
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':').ok_or(format!("header line {} has no ':'", n + 1))?;
        let name = name.trim();
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!("header line {} has an invalid name", n + 1));
        }
        out.push((name.to_string(), value.trim().to_string()));
    }
    Ok(out)
}

impl Draft {
    /// Builds a draft from the editor's fields (headers as `Name: value` lines).
    pub fn new(method: &str, path: &str, query: &str, headers: &str, body: &str) -> Result<Draft, String> {
        let method = method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err("the method must be a word such as GET or POST".into());
        }
        let path = path.trim();
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
            return Err("the path must start with '/' and hold no '?', '#' or space".into());
        }
        let query = query.trim().trim_start_matches('?');
        if query.contains(['#', ' ']) {
            return Err("the query must be percent-encoded (no '#' or space)".into());
        }
        Ok(Draft {
            method,
            path: path.to_string(),
            query: query.to_string(),
            headers: parse_headers(headers)?,
            body: body.to_string(),
        })
    }

    /// Path and query as they appear in a URL.
    pub fn path_and_query(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }

    /// The core request.
    pub fn to_request(&self) -> Request {
        let mut req = Request::new(Method::parse(&self.method), &self.path_and_query()).body(self.body.as_bytes());
        req.headers = self.headers.clone();
        req
    }

    /// A `curl` command sending this request to `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn to_curl(&self, base_url: &str) -> String {
        let url = format!("{}{}", base_url.trim().trim_end_matches('/'), self.path_and_query());
        let mut parts = vec![format!("curl -sS -i -X {} {}", self.method, shell_quote(&url))];
        for (name, value) in &self.headers {
            parts.push(format!("-H {}", shell_quote(&format!("{name}: {value}"))));
        }
        if !self.body.is_empty() {
            parts.push(format!("--data-raw {}", shell_quote(&self.body)));
        }
        parts.join(" \\\n  ")
    }
}

/// Quotes a word for a POSIX shell: single quotes, with `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lines_are_parsed_and_bad_ones_refused() {
        let h = parse_headers("Authorization: Bearer a:b\n\n content-type :application/json ").unwrap();
        assert_eq!(
            h,
            vec![("Authorization".into(), "Bearer a:b".into()), ("content-type".into(), "application/json".into())]
        );
        assert!(parse_headers("no colon").unwrap_err().contains("line 1"));
        assert!(parse_headers("ok: 1\nbad name: 2").unwrap_err().contains("line 2"));
    }

    #[test]
    fn a_draft_becomes_the_core_request() {
        let d = Draft::new("post", "/users/track", "?a=1", "X-A: 1", "{}").unwrap();
        let r = d.to_request();
        assert_eq!(r.method, Method::Post);
        assert_eq!((r.path.as_str(), r.query.as_str()), ("/users/track", "a=1"));
        assert_eq!(r.header_value("x-a"), Some("1"));
        assert_eq!(r.body, b"{}");
        assert!(Draft::new("GET", "users", "", "", "").is_err());
        assert!(Draft::new("GET", "/a b", "", "", "").is_err());
        assert!(Draft::new("G T", "/a", "", "", "").is_err());
    }

    #[test]
    fn curl_quotes_everything_for_the_shell() {
        let d = Draft::new("POST", "/users/track", "x=1", "Authorization: Bearer k", r#"{"name":"it's"}"#).unwrap();
        assert_eq!(
            d.to_curl("http://127.0.0.1:8080/"),
            "curl -sS -i -X POST 'http://127.0.0.1:8080/users/track?x=1' \\\n  -H 'Authorization: Bearer k' \\\n  --data-raw '{\"name\":\"it'\\''s\"}'"
        );
        let get = Draft::new("GET", "/cdi/integrations", "", "", "").unwrap();
        assert_eq!(
            get.to_curl("https://api.example.com"),
            "curl -sS -i -X GET 'https://api.example.com/cdi/integrations'"
        );
    }

    #[test]
    fn curl_output_survives_a_real_shell() {
        let body = "{\"a\": \"it's $HOME `x` \\\\ \\\"q\\\"\"}\nline2";
        let d = Draft::new("POST", "/p", "", "", body).unwrap();
        let cmd = d.to_curl("http://h");
        let data = cmd.split("--data-raw ").nth(1).unwrap();
        let out = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {data}")).output().unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), body);
    }
}
