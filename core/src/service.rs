//! The routes that describe and check the service itself: the landing page, health
//! and readiness. They need no credentials and reveal nothing about the data.

use serde_json::json;

use crate::ctx::Ctx;
use crate::http::Response;
use crate::store::Store;
use crate::track::waiting::oldest_age;

/// How long the oldest queued job may wait while nothing is applied before the
/// service is not ready (the applier is stuck).
pub const STUCK_AFTER_MS: i64 = 60_000;

/// What the host has of the built playground: the landing page links it, says it
/// is on its way, or says how to build it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Playground {
    /// None: `/playground/` is an ordinary unknown path.
    Absent,
    /// Its directory is there and its files are being built (`serve.sh` builds
    /// them beside a running server): served once they appear.
    Building,
    /// Its build failed; the API is unaffected.
    Failed,
    /// Served at `/playground/`.
    #[default]
    Served,
}

impl Playground {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Playground::Absent => 0,
            Playground::Building => 1,
            Playground::Failed => 2,
            Playground::Served => 3,
        }
    }

    pub(crate) fn from_u8(n: u8) -> Playground {
        match n {
            0 => Playground::Absent,
            1 => Playground::Building,
            2 => Playground::Failed,
            _ => Playground::Served,
        }
    }
}

/// Which build of Engage answers: the version, and the commit when the host knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Build {
    /// The commit the host was built from (`git rev-parse`), when it was known.
    pub commit: Option<String>,
}

impl Build {
    /// Engage's version (the workspace's, shared by every crate).
    pub const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    /// `0.1.0 (commit 1a2b3c4d5e6f)`, or the version alone.
    pub fn describe(&self) -> String {
        match &self.commit {
            Some(c) => format!("{} (commit {c})", Build::VERSION),
            None => Build::VERSION.to_string(),
        }
    }
}

/// GET /: what this is and where to go, which build answers, and the playground's
/// state (a link, "being built", or how to build it: never a dead link).
pub fn landing(playground: Playground, build: &Build) -> Response {
    const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Engage</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .2em}footer{color:#666;font-size:.9em}</style>
</head><body>
<h1>Engage</h1>
<p>A self-hostable implementation of a customer-engagement platform's REST API for user data: tracking, identify, merge and delete, subscription groups, email state and blocklists, preference centers, SCIM provisioning and warehouse syncs. Point your API client here instead of the hosted platform.</p>
<ul>
PLAYGROUND
<li><a href="/openapi.json">API description</a> (OpenAPI 3.1).</li>
<li><a href="/healthz">Health</a> and <a href="/readyz">readiness</a>.</li>
</ul>
<p>Requests need an API key: <code>Authorization: Bearer &lt;key&gt;</code> (make one with <code>engage keys create</code>).</p>
<footer>Engage BUILD</footer>
</body></html>
"#;
    let playground_line = match playground {
        Playground::Served => {
            r#"<li><a href="/playground/">Playground</a>: try every endpoint in your browser, no server needed.</li>"#
        }
        Playground::Building => {
            r#"<li id="playground-building">Playground: being built beside this server (the core compiled to WebAssembly; the first time takes a few minutes). The API answers meanwhile; reload this page to get the link.</li>"#
        }
        Playground::Failed => {
            "<li>Playground: its build failed (the server's terminal says why). The API is unaffected;              <code>bash www/build.sh</code> builds it again.</li>"
        }
        Playground::Absent => {
            "<li>Playground: not built on this server. Build it with <code>bash www/build.sh</code> (or start with \
             <code>bash serve.sh</code>), then restart; or pass <code>--playground-dir</code>.</li>"
        }
    };
    let inspector = r#"<li><a href="/_engage/inspector">Inspector</a>: see workspaces, users, recent requests and the queue (needs the server's admin token).</li>"#;
    // The commit comes from the host's build, never from a request: still, only
    // its hex digits and dashes reach the page.
    let build_text: String =
        build.describe().chars().filter(|c| c.is_ascii_alphanumeric() || " .-()".contains(*c)).collect();
    let page = PAGE.replace("PLAYGROUND", &format!("{playground_line}\n{inspector}")).replace("BUILD", &build_text);
    Response::html(200, &page)
}

/// `/playground/` while the playground is being built: a page that reloads itself
/// until the files are there (503: try again soon), in place of a 404.
pub fn playground_building() -> Response {
    const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="5"><title>Engage playground: being built</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}</style>
</head><body><h1>The playground is being built</h1>
<p>The server answers API requests already; the playground (the core compiled to WebAssembly) is still being built beside it. This page reloads every 5 seconds until it is there.</p>
<p><a href="/">Back</a></p></body></html>
"#;
    Response::html(503, PAGE).with_header("Retry-After", "5").with_header("Cache-Control", "no-store")
}

/// GET /healthz: the process is up and answering, and which build it runs.
pub fn health(build: &Build) -> Response {
    let mut body = json!({"status": "ok", "version": Build::VERSION});
    if let Some(commit) = &build.commit {
        body["commit"] = json!(commit);
    }
    Response::json(200, &body)
}

/// GET /readyz: the store answers, and the queue is being applied (its oldest job
/// is younger than [`STUCK_AFTER_MS`], or something was applied since `progress_at`).
pub async fn ready<S: Store>(store: &S, progress_at: i64, ctx: Ctx) -> Response {
    // Not the whole backlog's state: counting a partitioned queue reads all of it.
    let age = match oldest_age(store, ctx.now).await {
        Ok(age) => age,
        Err(_) => return not_ready("the store does not answer"),
    };
    let waited_ms = age.map(|s| (s * 1000.0) as i64);
    match waited_ms {
        Some(waited) if waited > STUCK_AFTER_MS && ctx.now.0 - progress_at > STUCK_AFTER_MS => {
            not_ready("queued writes have not been applied for over a minute")
        }
        _ => Response::json(200, &json!({"status": "ready"})),
    }
}

fn not_ready(why: &str) -> Response {
    Response::json(503, &json!({"status": "not ready", "message": why})).with_header("Retry-After", "5")
}

/// `/playground`: relative asset URLs in the page need the trailing slash.
pub fn playground_root() -> Response {
    Response::empty(301).with_header("Location", "/playground/")
}

/// A playground file: the host serves it, the core checks the path. While the
/// playground is being built, its page is a "being built" page instead of a 404.
pub fn playground_file(raw: &str, playground: Playground) -> Response {
    let not_found = match playground {
        Playground::Building if raw.is_empty() || raw == "index.html" => playground_building(),
        _ => crate::error::ApiError::RouteNotFound.into_response(),
    };
    match crate::http::AssetPath::parse(raw) {
        Some(path) => not_found.then(crate::http::Then::ServeAsset(path)),
        None => not_found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Response) -> String {
        String::from_utf8(r.body.clone()).unwrap()
    }

    #[test]
    fn the_landing_page_says_where_the_playground_is_and_which_build_answers() {
        let build = Build { commit: Some("0123456789ab".into()) };
        let served = text(&landing(Playground::Served, &build));
        assert!(served.contains(r#"<a href="/playground/">"#), "{served}");
        assert!(served.contains(&format!("<footer>Engage {} (commit 0123456789ab)</footer>", Build::VERSION)));
        let building = text(&landing(Playground::Building, &Build::default()));
        assert!(building.contains("being built") && !building.contains(r#"href="/playground/""#), "{building}");
        assert!(building.contains(&format!("<footer>Engage {}</footer>", Build::VERSION)));
        let failed = text(&landing(Playground::Failed, &build));
        assert!(failed.contains("its build failed") && !failed.contains(r#"href="/playground/""#));
        let absent = text(&landing(Playground::Absent, &build));
        assert!(absent.contains("bash www/build.sh") && !absent.contains(r#"href="/playground/""#));
        // A commit that is not a commit cannot put markup on the page.
        let odd = text(&landing(Playground::Served, &Build { commit: Some("<script>".into()) }));
        assert!(!odd.contains("<script>"), "{odd}");
    }

    #[test]
    fn health_names_the_version_and_the_commit_when_known() {
        let known = health(&Build { commit: Some("0123456789ab".into()) });
        let body: serde_json::Value = serde_json::from_slice(&known.body).unwrap();
        assert_eq!(body, json!({"status": "ok", "version": Build::VERSION, "commit": "0123456789ab"}));
        let unknown: serde_json::Value = serde_json::from_slice(&health(&Build::default()).body).unwrap();
        assert_eq!(unknown, json!({"status": "ok", "version": Build::VERSION}));
    }

    #[test]
    fn the_playground_states_survive_their_round_trip_through_a_byte() {
        for p in [Playground::Absent, Playground::Building, Playground::Failed, Playground::Served] {
            assert_eq!(Playground::from_u8(p.to_u8()), p);
        }
        let page = playground_building();
        assert_eq!((page.status, page.header_value("Retry-After")), (503, Some("5")));
    }
}
