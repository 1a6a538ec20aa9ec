//! The API description of the test kit's routes.

use serde_json::{json, Value};

use super::journal::CAPACITY;
use super::reset::CHUNK;
use crate::describe::op::Op;
use crate::describe::schema::{array, free_object, integer, nullable, object, refer, string};
use crate::routes::Kit;

fn snapshot_name() -> Value {
    json!({"type": "string", "pattern": format!("^[A-Za-z0-9._-]{{1,64}}{}", crate::describe::schema::END)})
}

fn snapshot() -> Value {
    object(
        "A snapshot.",
        &[
            ("name", string("")),
            ("workspace", nullable(string("None: the deployment's."))),
            ("documents", integer("Documents kept.")),
            ("bytes", integer("Their size.")),
            ("taken_at", string("RFC 3339.")),
        ],
        &["name", "workspace", "documents", "bytes", "taken_at"],
    )
}

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
        Kit::SetClock => Op::new("Sets (`now`) or advances (`advance_secs`) the server's clock: link expiry, default event times, rate-limit windows, sync schedules and creation times follow it. With `?workspace=`, that workspace's clock only: its requests see it, other workspaces keep theirs (until a reset of it). Exists only on a server started with `--test-clock`.")
            .query("workspace", false, "Only this workspace's clock.", crate::describe::schema::workspace_name(""))
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
        Kit::CreateWorkspace => Op::new("Makes a workspace that did not exist, with one API key (all permissions unless `permissions` names them; made up unless `api_key` gives it), in one unit of work: each test of a suite gets a workspace of its own, and removes it with `POST /_engage/reset?workspace=NAME&keep=none`.")
            .body(crate::describe::schema::closed(object("Unknown fields are refused.", &[
                ("name", crate::describe::schema::workspace_name("The new workspace.")),
                ("api_key", nullable(crate::describe::schema::with(string("The key to make: 32 to 256 visible ASCII characters (absent or null: one is made up)."), "pattern", json!(format!("^[!-~]{{32,256}}{}", crate::describe::schema::END))))),
                ("permissions", nullable(crate::admin::schema::permissions())),
            ], &["name"])))
            .example(json!({"name": "test-7f3a"}))
            .reply(201, "Made.", object("", &[("name", string("")), ("api_key", string("The key (shown once)."))], &["name", "api_key"]))
            .with_example("made", json!({"name": "test-7f3a", "api_key": "0b6f2c1e-4a5d-4e8f-9c3b-7d1a2e5f6c90"}))
            .reply(400, "A bad body.", refer("Error"))
            .reply(409, "The workspace, or the key given, exists already.", refer("Error")),
        Kit::SaveSnapshot(_) => Op::new(format!("Keeps a copy of the state, of one workspace (`?workspace=`) or the whole deployment, in this server's memory under a name (one of that name and scope is replaced). Everything queued is applied first. At most {} snapshots and {} MiB together (and a million documents each); gone when the server stops (`GET /_engage/state` is the durable form).", super::snapshots::MAX_SNAPSHOTS, super::snapshots::MAX_BYTES >> 20))
            .path_with("name", "1 to 64 letters, digits, `-`, `_` and `.`.", snapshot_name())
            .query("workspace", false, "Only this workspace's state.", crate::describe::schema::workspace_name(""))
            .reply(201, "Kept.", snapshot())
            .with_example("kept", json!({"name": "before", "workspace": "shop", "documents": 120, "bytes": 48213, "taken_at": "2026-11-26T10:00:00Z"}))
            .reply(400, "A bad name or parameter.", refer("Error"))
            .reply(409, "Over the bounds: delete a snapshot first.", refer("Error")),
        Kit::RestoreSnapshot(_) => Op::new("Puts a snapshot's state back, in one unit of work: the scope's documents that differ are written, those the snapshot did not have are removed. Everything queued is applied first; the scope's rate-limit counts start again.")
            .path_with("name", "The snapshot.", snapshot_name())
            .query("workspace", false, "The workspace the snapshot is of.", crate::describe::schema::workspace_name(""))
            .reply(200, "Restored.", object("", &[("name", string("")), ("workspace", nullable(string(""))), ("written", integer("Documents written.")), ("removed", integer("Documents removed."))], &["name", "written", "removed"]))
            .with_example("restored", json!({"name": "before", "workspace": "shop", "written": 12, "removed": 3}))
            .reply(404, "No snapshot of this name (in this scope).", refer("Error"))
            .reply(409, "The scope's state grew past the bounds on a snapshot's: nothing is changed.", refer("Error")),
        Kit::ListSnapshots => Op::new("The snapshots kept (of `?workspace=`), by workspace and name.")
            .query("workspace", false, "Only this workspace's.", crate::describe::schema::workspace_name(""))
            .reply(200, "The snapshots.", object("", &[("snapshots", array(snapshot(), ""))], &["snapshots"]))
            .with_example("snapshots", json!({"snapshots": [{"name": "before", "workspace": "shop", "documents": 120, "bytes": 48213, "taken_at": "2026-11-26T10:00:00Z"}]})),
        Kit::DeleteSnapshot(_) => Op::new("Forgets a snapshot.")
            .path_with("name", "The snapshot.", snapshot_name())
            .query("workspace", false, "The workspace the snapshot is of.", crate::describe::schema::workspace_name(""))
            .reply(200, "Forgotten.", object("", &[("removed", integer(""))], &["removed"]))
            .with_example("removed", json!({"removed": 1}))
            .reply(404, "No snapshot of this name (in this scope).", refer("Error")),
        Kit::State => Op::new("The state, of one workspace (`?workspace=`) or the whole deployment, as a fixtures file: each workspace's stored documents under its `documents`, the deployment's (SCIM) at the top. `POST /_engage/seed`, `engage seed` and `--seed` load it back to an equal state; `engage serve --state FILE` writes it at a clean stop. API keys are in it by their hash, never as secrets. Everything queued is applied first.")
            .query("workspace", false, "Only this workspace's state.", crate::describe::schema::workspace_name(""))
            .reply(200, "The fixtures file.", free_object("`{\"workspaces\": {NAME: {\"documents\": [{\"table\", \"key\", \"value\" | \"text\"}]}}, \"documents\": [...]}`."))
            .with_example("state", json!({"workspaces": {"shop": {"documents": [{"table": "workspace", "key": "shop", "value": {"name": "shop", "created_at": 1_764_151_200_000_i64}}]}}}))
            .reply(409, format!("Over {} documents or {} MiB of them: a state file is for a test suite's data.", super::documents::MAX_DOCUMENTS, super::seed::MAX_STATE_BYTES >> 21).as_str(), refer("Error")),
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
