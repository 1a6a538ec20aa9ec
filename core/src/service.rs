//! The routes that describe and check the service itself: the landing page, health
//! and readiness. They need no credentials and reveal nothing about the data.

use serde_json::json;

use crate::ctx::Ctx;
use crate::http::Response;
use crate::store::Store;
use crate::track::queue::backlog_state;

/// How long the oldest queued job may wait while nothing is applied before the
/// service is not ready (the applier is stuck).
pub const STUCK_AFTER_MS: i64 = 60_000;

/// GET /: what this is and where to go; `playground`: whether the host serves the
/// built playground (if not, the page says how to build it instead of a dead link).
pub fn landing(playground: bool) -> Response {
    const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Engage</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .2em}</style>
</head><body>
<h1>Engage</h1>
<p>A self-hostable implementation of a customer-engagement platform's REST API for user data: tracking, identify, merge and delete, subscription groups, email state and blocklists, preference centers, SCIM provisioning and warehouse syncs. Point your API client here instead of the hosted platform.</p>
<ul>
PLAYGROUND
<li><a href="/openapi.json">API description</a> (OpenAPI 3.1).</li>
<li><a href="/healthz">Health</a> and <a href="/readyz">readiness</a>.</li>
</ul>
<p>Requests need an API key: <code>Authorization: Bearer &lt;key&gt;</code> (make one with <code>engage keys create</code>).</p>
</body></html>
"#;
    let playground_line = if playground {
        r#"<li><a href="/playground/">Playground</a>: try every endpoint in your browser, no server needed.</li>"#
    } else {
        "<li>Playground: not built on this server. Build it with <code>bash www/build.sh</code> (or start with \
         <code>bash serve.sh</code>), then restart; or pass <code>--playground-dir</code>.</li>"
    };
    let inspector = r#"<li><a href="/_engage/inspector">Inspector</a>: see workspaces, users, recent requests and the queue (needs the server's admin token).</li>"#;
    Response::html(200, &PAGE.replace("PLAYGROUND", &format!("{playground_line}\n{inspector}")))
}

/// GET /healthz: the process is up and answering.
pub fn health() -> Response {
    Response::json(200, &json!({"status": "ok"}))
}

/// GET /readyz: the store answers, and the queue is being applied (its oldest job
/// is younger than [`STUCK_AFTER_MS`], or something was applied since `progress_at`).
pub async fn ready<S: Store>(store: &S, progress_at: i64, ctx: Ctx) -> Response {
    let backlog = match backlog_state(store, ctx.now).await {
        Ok(backlog) => backlog,
        Err(_) => return not_ready("the store does not answer"),
    };
    let waited_ms = backlog.oldest_age_seconds.map(|s| (s * 1000.0) as i64);
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
