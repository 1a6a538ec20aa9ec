//! The API description of the test kit's routes.

use serde_json::{json, Value};

use super::journal::CAPACITY;
use super::reset::CHUNK;
use crate::describe::op::Op;
use crate::describe::schema::{array, free_object, integer, nullable, object, refer, string};
use crate::routes::Kit;

fn user_found() -> Value {
    free_object("A profile as `/users/export/ids` returns it with every field.")
}

/// A test-kit route.
pub fn describe(endpoint: &Kit) -> Op {
    match endpoint {
        Kit::Reset => Op::new(format!(
            "Removes the deployment's data, or a workspace's (`?workspace=`): profiles, events, purchases, aliases, subscription and email states, preference centers, sync jobs, set-aside queued jobs and (deployment-wide) SCIM users. Workspaces, API keys, groups, SCIM tokens and integrations stay unless `?keep=none`. Everything queued is applied first. Up to {CHUNK} documents go in one unit of work."
        ))
        .query("workspace", false, "Only this workspace.", crate::describe::schema::workspace_name(""))
        .query("keep", false, "`keys` (default): keep the set-up; `none`: remove it too.", crate::describe::schema::values(&["keys", "none"], ""))
        .reply(200, "Reset.", object("", &[("removed", integer("Documents removed.")), ("integrations_reset", integer("Integrations set back to never run."))], &["removed"]))
        .with_example("reset", json!({"removed": 42, "integrations_reset": 1}))
        .reply(400, "A bad parameter.", refer("Error")),
        Kit::SetClock => Op::new("Sets (`now`) or advances (`advance_secs`) the server's clock: link expiry, default event times, rate-limit windows, sync schedules and creation times follow it. Exists only on a server started with `--test-clock`.")
            .body(object("", &[("now", string("An RFC 3339 time.")), ("advance_secs", integer("Seconds to move on (0 to ten years)."))], &[]))
            .example(json!({"advance_secs": 3600}))
            .reply(200, "The new time.", object("", &[("now", string("RFC 3339."))], &["now"]))
            .with_example("now", json!({"now": "2026-11-26T11:00:00Z"}))
            .reply(400, "A bad body.", refer("Error")),
        Kit::Seed => Op::new("Loads a fixtures file (the body; the same as `engage seed` and `engage serve --seed`): workspaces with keys, groups, users, subscription states and preference centers, and SCIM users. Checked whole on an empty store first: a bad entry is a 400 naming its path, and nothing is stored. The same file again changes nothing.")
            .body(free_object("The fixtures file (see the README)."))
            .example(json!({"workspaces": {"shop": {
                "groups": [{"id": "newsletter", "name": "Newsletter", "channel": "email"}],
                "users": [{"attributes": [{"external_id": "ada", "email": "ada@example.com", "first_name": "Ada"}]}],
                "subscriptions": [{"subscription_groups": [{"subscription_group_id": "newsletter", "subscription_state": "subscribed", "external_ids": ["ada"]}]}]
            }}}))
            .reply(200, "Loaded (or already loaded).", object("", &[("loaded", integer("Entries loaded.")), ("already_loaded", crate::describe::schema::boolean("True when this file was loaded before."))], &["loaded"]))
            .with_example("loaded", json!({"loaded": 3, "already_loaded": false}))
            .reply(400, "A bad entry, named by its path.", refer("Error")),
        Kit::Journal => Op::new(format!("The latest {CAPACITY} requests the server answered (not the operator's, health checks, metrics or playground files), newest first: time, method, route, status, latency and request id; bodies only with `--journal-bodies`. Never a key or a token."))
            .query("limit", false, "At most this many.", crate::describe::schema::with(
                    crate::describe::schema::with(integer(""), "minimum", serde_json::json!(0)),
                    "maximum",
                    serde_json::json!(u64::MAX),
                ))
            .reply(200, "The requests.", object("", &[("requests", array(object("", &[
                ("at", string("RFC 3339.")), ("method", string("")), ("route", string("The route's pattern.")), ("status", integer("")),
                ("micros", integer("Latency.")), ("request_id", string("")), ("request_body", nullable(string(""))), ("response_body", nullable(string(""))),
            ], &["at", "method", "route", "status", "micros", "request_id"]), "Newest first.")), ("bodies", crate::describe::schema::boolean("Whether bodies are kept (`--journal-bodies`)."))], &["requests"]))
            .with_example("requests", json!({"bodies": false, "requests": [{"at": "2026-11-26T10:00:00.123Z", "method": "POST", "route": "/users/track",
                "status": 201, "micros": 840, "request_id": "5a10bbc1001eb5f8f3d029c29a04e06f"}]})),
        Kit::FindRequests | Kit::CountRequests => {
            let filter = crate::describe::schema::closed(object("A filter; a field not given matches everything (no body: every request).", &[
                ("method", crate::describe::schema::values(&["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "An HTTP method (any case).")),
                ("path", string("The path sent (link tokens masked), or the route's pattern (`/preference_center/v1/{preferenceCenterExternalID}`).")),
                ("workspace", string("The workspace the request acted in (its key's).")),
                ("status", crate::describe::schema::with(crate::describe::schema::with(integer("The answer's status."), "minimum", json!(100)), "maximum", json!(599))),
                ("body", crate::describe::schema::any("JSON the request body contains: every field of an object (recursively), every element of an array (each in some element of the body's), anything else equal. Needs bodies kept (`--journal-bodies` or `--ephemeral`).")),
                ("since", crate::describe::schema::time("Requests that arrived then or later.")),
            ], &[]));
            let op = Op::new(match endpoint {
                Kit::CountRequests => "How many journaled requests a filter matches (WireMock's `/__admin/requests/count`).".to_string(),
                _ => format!("The journaled requests a filter matches, newest first (WireMock's `/__admin/requests/find`): time, method, path, route, workspace, status, latency, request id, and the request's and answer's bodies (JSON where they are; with `--journal-bodies` or `--ephemeral`, whole up to {} KiB each, passwords and link tokens masked; never a key). The journal holds the latest {CAPACITY} requests and at most {} MiB of bodies.", crate::kit::journal::MAX_BODY_BYTES / 1024, crate::kit::journal::MAX_JOURNAL_BYTES >> 20),
            })
            .body_in(&[crate::describe::op::JSON], filter, false)
            .example(json!({"method": "POST", "path": "/users/track", "body": {"attributes": [{"external_id": "user-1"}]}}));
            match endpoint {
                Kit::CountRequests => op
                    .reply(200, "The count.", object("", &[("count", integer(""))], &["count"]))
                    .with_example("count", json!({"count": 1})),
                _ => op
                    .reply(200, "The requests.", object("", &[("requests", array(free_object("A request: at, method, path, route, workspace, status, micros, request_id, request_body, response_body."), "Newest first."))], &["requests"]))
                    .with_example("requests", json!({"requests": [{"at": "2026-11-26T10:00:00.123Z", "method": "POST", "path": "/users/track", "route": "/users/track", "workspace": "shop",
                        "status": 201, "micros": 840, "request_id": "5a10bbc1001eb5f8f3d029c29a04e06f",
                        "request_body": {"attributes": [{"external_id": "user-1"}]}, "response_body": {"message": "success", "attributes_processed": 1}}]})),
            }
            .bad_request("A filter out of shape, or a body filter on a server that keeps no bodies.", &[("unknown", "unknown filter field 'verb' (allowed: method, path, workspace, status, body, since)")])
        }
        Kit::AddFault => Op::new(format!("Makes the requests that match fail or wait, to check a client's retries (WireMock's `fault` and `fixedDelayMilliseconds`). A request to an API-key route matches when its method, its path (or route pattern) and its key's workspace are those given (a field not given matches all); it is answered with `status` as the platform answers it (a 429 as real limiting does, with `X-Ratelimit-Retry-After` and `Retry-After`; a 5xx in the error shape with `Retry-After`), after `delay_ms`, and reaches no endpoint or rate limit: it changes nothing. `delay_ms` alone delays the normal answer. `times`: the next this many requests (then the fault is gone); `probability`: that share of them; neither: all. At most {} faults; only with `--faults` (or `--ephemeral`), else 404.", crate::kit::faults::MAX_FAULTS))
            .body(object("", &[
                ("method", string("An HTTP method (any case).")),
                ("path", string("The path, or the route's pattern.")),
                ("workspace", crate::describe::schema::workspace_name("The workspace of the request's key.")),
                ("status", crate::describe::schema::with(crate::describe::schema::with(integer("The status to answer, 400 to 599."), "minimum", json!(400)), "maximum", json!(599))),
                ("times", crate::describe::schema::with(integer("Answer the next this many, then go."), "minimum", json!(1))),
                ("probability", crate::describe::schema::with(crate::describe::schema::with(json!({"type": "number"}), "minimum", json!(0)), "maximum", json!(1))),
                ("delay_ms", crate::describe::schema::with(crate::describe::schema::with(integer("Wait this long before answering."), "minimum", json!(0)), "maximum", json!(crate::kit::faults::MAX_DELAY_MS))),
                ("retry_after_secs", crate::describe::schema::with(crate::describe::schema::with(integer("The Retry-After of a 429 or 5xx (default 1)."), "minimum", json!(0)), "maximum", json!(86_400))),
            ], &[]))
            .example(json!({"method": "POST", "path": "/nowhere", "status": 503, "times": 1, "retry_after_secs": 2}))
            .reply(201, "The fault's id.", object("", &[("id", string(""))], &["id"]))
            .with_example("added", json!({"id": "fault-1"}))
            .bad_request("A fault out of shape: no status and no delay, both times and probability, a status under 400.", &[("shape", "a fault needs a 'status' to answer, or a 'delay_ms' to add")]),
        Kit::ListFaults => Op::new("The faults injected, oldest first (only with `--faults`).")
            .reply(200, "The faults.", object("", &[("faults", array(free_object("A fault as added, with its id and what is left of `times`."), ""))], &["faults"]))
            .with_example("faults", json!({"faults": [{"id": "fault-1", "method": "POST", "path": "/users/track", "workspace": null, "status": 429, "times": 2, "delay_ms": 0, "retry_after_secs": 1}]})),
        Kit::ClearFaults => Op::new("Removes every fault, or those of one workspace (only with `--faults`).")
            .query("workspace", false, "Only this workspace's.", crate::describe::schema::workspace_name(""))
            .reply(200, "How many were removed.", object("", &[("removed", integer(""))], &["removed"]))
            .with_example("removed", json!({"removed": 2})),
        Kit::RemoveFault(_) => Op::new("Removes one fault (only with `--faults`).")
            .reply(200, "Removed.", object("", &[("removed", integer(""))], &["removed"]))
            .with_example("removed", json!({"removed": 1}))
            .reply(404, "No fault has this id (or faults are off).", refer("Error")),
        Kit::ClearRequests => Op::new("Forgets the journaled requests: of one workspace (`workspace`), or all.")
            .query("workspace", false, "Only this workspace's.", crate::describe::schema::workspace_name(""))
            .reply(200, "How many were forgotten.", object("", &[("cleared", integer(""))], &["cleared"]))
            .with_example("cleared", json!({"cleared": 3})),
        Kit::FindUsers(_) => Op::new("Profiles a workspace has for an identifier: `q` (tried as external id, email, phone, braze id and `label:name` alias) or one of `external_id`, `email`, `phone`, `braze_id`, `alias_name` with `alias_label`. Everything queued is applied first.")
            .path("workspace", "The workspace.")
            .query("q", false, "Any identifier.", string(""))
            .reply(200, "The profiles found.", object("", &[("users", array(user_found(), "At most 50."))], &["users"]))
            .with_example("users", json!({"users": [{"external_id": "user-123", "service_id": "6745a1b2c3d4e5f601234567", "email": "ada@example.com",
                "first_name": "Ada", "created_at": "2026-11-26T10:00:00.000Z", "updated_at": "2026-11-26T10:00:00.000Z", "email_hard_bounced": false}]}))
            .reply(400, "No identifier.", refer("Error")),
        Kit::Centers(_) => Op::new("A workspace's preference centers, as `/preference_center/v1/list` returns them.")
            .path("workspace", "The workspace.")
            .reply(200, "The centers.", free_object("`{\"preference_centers\": [...]}`."))
            .with_example("centers", json!({"preference_centers": [{"name": "newsletter_preferences", "preference_center_api_id": "0a7c3e2b-9f41-4d6e-8b15-2c9d4e7f1a30",
                "created_at": "2026-11-26T10:00:00Z", "updated_at": "2026-11-26T10:00:00Z"}]})),
        Kit::CenterLink(..) => Op::new("A link to a preference center's page as a user, as `/preference_center/v1/{id}/url/{user}` makes it.")
            .path("workspace", "The workspace.").path("id", "The center's api id.").path("external_id", "The user.")
            .reply(200, "The link.", object("", &[("url", string(""))], &["url"]))
            .with_example("link", json!({"url": "https://engage.example.com/preferences/AnV4b2tKcW5lRlNVd0c2bU5Ga2xqR2V0"}))
            .reply(404, "No such center or user.", refer("Error")),
        Kit::Integrations => Op::new("Every warehouse integration (of `?workspace=`), with its job count, last job and how far it has synced; never its source.")
            .query("workspace", false, "Only this workspace.", string(""))
            .reply(200, "The integrations.", object("", &[("integrations", array(free_object("An integration."), ""))], &["integrations"]))
            .with_example("integrations", json!({"integrations": [{"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "workspace": "default",
                "name": "Users from the warehouse", "kind": "user_attributes", "table": "USERS", "paused": false, "jobs": 3,
                "last_job": {"started_at": "2026-11-26T10:00:00.000Z", "status": "success"}, "synced_up_to": "2026-11-26T09:59:58.000Z"}]})),
        Kit::Inspector => Op::new("The inspector: a page to see workspaces, users, recent requests, the queue, preference centers and syncs. Without a session, a login form for the admin token.")
            .reply_in(200, "The page.", "text/html", string("HTML."))
            .with_example("page", json!("<!doctype html><html lang=\"en\"><head><title>Engage inspector</title></head><body>...</body></html>")),
        Kit::Login => Op::new("Signs in to the inspector: a form with `token` (the admin token). Sets an `HttpOnly`, `SameSite=Strict` session cookie for `/_engage` (`Secure` when the server's public URL is https); the session is kept by the server, ends at sign-out and after 12 hours of real time.")
            .empty(303, "Signed in: to the inspector.")
            .reply_in(401, "Not the admin token: the form again.", "text/html", string("HTML."))
            .reply_in(429, "Too many wrong tokens from this address in the last minute: the form again; retry after `Retry-After` seconds.", "text/html", string("HTML.")),
        Kit::Logout => Op::new("Signs out of the inspector: the session ends on the server and its cookie is cleared. Needs the inspector's `X-Engage-Inspector` header (or the admin token), which a form on another site cannot send.")
            .empty(303, "Signed out: to the login form.")
            .reply(400, "Without the `X-Engage-Inspector` header or credentials.", refer("Error")),
    }
}
