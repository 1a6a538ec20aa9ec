//! The routes without credentials: the service's own (landing page, health,
//! readiness, this description, metrics), the playground's files, and the
//! preference pages (described with their family).

use serde_json::json;

use crate::describe::op::Op;
use crate::describe::schema::{free_object, object, refer, string, values};
use crate::preference_center;
use crate::routes::Public;
use crate::service::STUCK_AFTER_MS;

const HTML: &str = "text/html";

/// The description of a public route.
pub fn describe(endpoint: &Public) -> Op {
    match endpoint {
        Public::PreferencePage(_) => preference_center::schema::page(),
        Public::PreferenceSubmit(_) => preference_center::schema::submit(),
        Public::Landing => Op::new("A short HTML page: what this server is, with links to the playground, this description, health and readiness.")
            .reply_in(200, "The page.", HTML, string("HTML."))
            .with_example("page", json!("<!doctype html><html lang=\"en\"><head><title>Engage</title></head><body><h1>Engage</h1><p><a href=\"/playground/\">Playground</a> · <a href=\"/openapi.json\">API description</a></p></body></html>")),
        Public::Health => Op::new("Liveness: the process is up and answering, and which build it runs. It reads nothing.").reply(
            200,
            "Alive.",
            object(
                "",
                &[
                    ("status", values(&["ok"], "`ok`.")),
                    ("version", string("Engage's version, e.g. `0.1.0`.")),
                    ("commit", string("The commit the server was built from, when its build knew it.")),
                ],
                &["status", "version"],
            ),
        )
        .with_example("alive", json!({"status": "ok", "version": env!("CARGO_PKG_VERSION"), "commit": "1388d30"})),
        Public::Ready => {
            let minute = STUCK_AFTER_MS / 1000;
            let status = |s: &str| object("", &[("status", values(&[s], "")), ("message", string("Why not."))], &["status"]);
            Op::new(format!(
                "Readiness: the store answers, and queued writes are being applied (the oldest queued job is younger than {minute} s, or something was applied in the last {minute} s)."
            ))
            .reply(200, "Ready.", status("ready"))
            .with_example("ready", json!({"status": "ready"}))
            .reply(503, "Not ready; `message` says why.", status("not ready"))
            .with_header("Retry-After", "Seconds to wait before asking again.")
        }
        Public::OpenApi => Op::new(
            "This document: every route of the server, made from its route table, with the permission, rate limit, parameters and bodies of each.",
        )
        .reply(200, "The OpenAPI 3.1 document.", free_object("An OpenAPI 3.1 document."))
        .with_example("document", json!({"openapi": "3.1.0", "info": {"title": "Engage", "version": env!("CARGO_PKG_VERSION")}, "paths": {}})),
        Public::Metrics => Op::new(
            "Prometheus metrics in the text exposition format, from the host's counters (requests by route and status, durations, the queue's backlog). A host that keeps none answers 404.",
        )
        .reply_in(200, "The metrics.", "text/plain", string("Prometheus text format 0.0.4."))
        .with_example("metrics", json!("# HELP engage_queue_pending_jobs Queued /users/track jobs not yet applied.\n# TYPE engage_queue_pending_jobs gauge\nengage_queue_pending_jobs 0\n"))
        .reply(404, "This host keeps no metrics.", refer("Error")),
        Public::PlaygroundRoot => Op::new("Redirects to `/playground/` (the page's relative links need the slash).")
            .empty(301, "To `/playground/`.")
            .with_header("Location", "`/playground/`."),
        Public::PlaygroundFile(_) => Op::new(
            "A file of the built playground (`www/dist`): the page, its script and style, and the core compiled to WebAssembly. `/playground/` is the page. Served only when the host was given the playground's directory.",
        )
        .path("path", "The file's path under the playground's directory (may contain `/`; `..` is refused).")
        .reply_in(200, "The file, with its media type.", "application/octet-stream", string("The file."))
        .with_example("page", json!("<!doctype html><html lang=\"en\">...</html>"))
        .reply(404, "No such file, or no playground here.", refer("Error"))
        .reply_in(503, "`/playground/` while the playground is being built: a page that reloads itself.", "text/html", string("An HTML page."))
        .with_header("Retry-After", "Seconds to wait before asking again."),
    }
}
