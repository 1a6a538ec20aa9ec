//! The API description of the operator routes under `/_engage/` (Engage's own,
//! not the platform's).

use serde_json::{json, Value};

use crate::openapi::op::Op;
use crate::openapi::schema::{
    array, boolean, free_object, integer, nullable, number, object, one_of, refer, string, values, with, workspace_name,
};
use crate::permission::Permission;
use crate::routes::Operator;
use crate::subscriptions::groups::Channel;

fn workspace(what: &str) -> (&'static str, Value) {
    (
        "workspace",
        nullable(workspace_name(&format!(
            "{what} (1 to 64 letters, digits, `-`, `_`, `.`; default, or `null`: `default`)."
        ))),
    )
}

fn group() -> Value {
    let channels = [Channel::Email, Channel::Sms, Channel::Whatsapp, Channel::Rcs, Channel::Line].map(Channel::as_str);
    object(
        "A subscription group.",
        &[("id", string("")), ("name", string("")), ("channel", values(&channels, ""))],
        &["id", "name", "channel"],
    )
}

/// An operator route.
pub fn describe(endpoint: &Operator) -> Op {
    let not_found = |op: Op, what: &str| op.reply(404, what, refer("Error"));
    match endpoint {
        Operator::CreateKey => {
            let names: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
            let perms = one_of(vec![values(&["all"], "Every permission."), with(array(values(&names, ""), "These permissions."), "minItems", json!(1))], "Default `all`.");
            Op::new("Creates an API key (as `engage keys create`). The key is shown once.")
                .body(object("", &[workspace("Its workspace, made when new"), ("permissions", nullable(perms))], &[]))
                .reply(201, "Created.", object("", &[("key", string("The API key.")), ("workspace", string(""))], &["key", "workspace"]))
        }
        Operator::ListKeys => {
            let key = object("", &[
                ("id", string("The first 16 hex digits of the key's SHA-256: names it, reveals nothing.")),
                ("workspace", string("")),
                ("permissions", array(string(""), "")),
                ("hint", string("Its first characters.")),
                ("created_at", string("RFC 3339.")),
                ("last_used_at", nullable(string("RFC 3339, to the hour."))),
            ], &["id", "workspace", "permissions"]);
            Op::new("Every API key, without secrets, by workspace then creation.")
                .reply(200, "The keys.", object("", &[("keys", array(key, ""))], &["keys"]))
        }
        Operator::RevokeKey(_) => not_found(Op::new("Revokes an API key: requests with it are refused from now on.")
            .path_with("id", "The key's `id` (from the listing).", json!({"type": "string", "pattern": format!("^[0-9a-fA-F]{{{}}}{}", crate::admin::keys::ID_LEN, crate::openapi::schema::END)}))
            .reply(200, "Revoked.", object("", &[("revoked", string("The id."))], &["revoked"]))
            .reply(400, "Not a key id (16 hex digits).", refer("Error")), "No key with this id."),
        Operator::ListWorkspaces => {
            let ws = object("", &[("name", string("")), ("created_at", string("RFC 3339.")), ("keys", integer("API keys."))], &["name"]);
            Op::new("Every workspace, by name.").reply(200, "The workspaces.", object("", &[("workspaces", array(ws, ""))], &["workspaces"]))
        }
        Operator::CreateGroup => Op::new("Creates a subscription group (as `engage groups create`).")
            .body(object("", &[workspace("Its workspace"), ("name", with(string("1 to 255 bytes, not blank."), "pattern", json!("\\S"))), ("channel", group()["properties"]["channel"].clone())], &["name", "channel"]))
            .reply(201, "Created.", group()),
        Operator::ListGroups => Op::new("A workspace's subscription groups.")
            .query("workspace", false, "The workspace (default `default`).", workspace_name(""))
            .reply(200, "The groups.", object("", &[("groups", array(group(), ""))], &["groups"])),
        Operator::CreateScimToken => Op::new("Creates a SCIM token for the deployment, valid with `X-Request-Origin: <origin>` (as `engage scim-tokens create`). The token is shown once.")
            .body(object("", &[("origin", with(string("The identity provider's origin (`https://idp.example.com`): 1 to 255 characters, no spaces."), "pattern", json!(format!("^\\S{{1,255}}{}", crate::openapi::schema::END))))], &["origin"]))
            .reply(201, "Created.", object("", &[("token", string("")), ("origin", string("Normalised."))], &["token", "origin"])),
        Operator::CreateIntegration => Op::new("Creates a warehouse integration (as `engage cdi create`). The source URL is never returned or logged.")
            .body(object("", &[
                workspace("Its workspace"),
                ("name", string("")),
                ("source", string("`sqlite:PATH` or `postgres://USER@HOST/DATABASE`.")),
                ("table", string("The table to read.")),
                ("kind", values(&["users", "events", "purchases", "deletes"], "What its rows are (default `users`).")),
                ("schedule_secs", integer("Run every this many seconds (at least 60); none: only on request.")),
                ("contact_emails", array(string(""), "")),
            ], &["name", "source", "table"]))
            .reply(201, "Created.", object("", &[("integration_id", string("")), ("workspace", string(""))], &["integration_id", "workspace"])),
        Operator::RequestSync(_) => not_found(Op::new("Asks for a sync job now; the host's runner starts it. A host that runs no syncs (the edge, the playground) answers 400.")
            .path("id", "The integration.")
            .reply(202, "Requested.", object("", &[("message", string("`success`."))], &["message"]))
            .reply(400, "This host runs no syncs.", refer("Error")), "No such integration."),
        Operator::IntegrationState(_) => not_found(Op::new("An integration's job count and last job status, for an operator (or a test) waiting for a job without spending the API's rate limit.")
            .path("id", "The integration.")
            .reply(200, "Its state.", object("", &[("integration_id", string("")), ("jobs", integer("Jobs so far.")), ("last_job_status", nullable(string("")))], &["integration_id", "jobs"])), "No such integration."),
        Operator::UpdateIntegration(_) => not_found(Op::new("Changes an integration (as `engage cdi update`, `pause`, `resume`): each field optional; a changed schedule is due at once. The cursor is kept (rewind to read a new source from its start).")
            .path("id", "The integration.")
            .body(object("", &[
                ("name", string("")),
                ("source", string("`sqlite:/ABSOLUTE/PATH` or `postgres://USER@HOST/DATABASE`.")),
                ("table", string("")),
                ("schedule_secs", nullable(integer("Run every this many seconds (at least 60); null: only on request."))),
                ("contact_emails", array(string(""), "")),
                ("paused", boolean("Pause (no job runs) or resume.")),
            ], &[]))
            .reply(200, "Its state (the `/cdi/integrations` entry, its table and schedule).", free_object("The integration."))
            .reply(400, "A field is invalid.", refer("Error")), "No such integration."),
        Operator::DeleteIntegration(_) => not_found(Op::new("Deletes an integration, its jobs and any request to run it; a job running meanwhile stops at its next batch.")
            .path("id", "The integration.")
            .reply(200, "Deleted.", object("", &[("deleted", string("Its id."))], &["deleted"])), "No such integration."),
        Operator::RewindIntegration(_) => not_found(Op::new("Moves an integration's cursor: its next job reads the rows after `to` (null: the whole table). Refused while a job runs.")
            .path("id", "The integration.")
            .body(object("", &[("to", nullable(crate::openapi::schema::time("An ISO 8601 time, or null.")))], &["to"]))
            .reply(200, "Its state.", free_object("The integration."))
            .reply(400, "`to` is invalid, or a job is running.", refer("Error")), "No such integration."),
        Operator::IntegrationJobs(_) => not_found(Op::new("An integration's newest 100 jobs, newest first, each as in `job_sync_status` plus its number, why it failed as a whole (`failure`) and its first 100 row errors.")
            .path("id", "The integration.")
            .reply(200, "Its jobs.", object("", &[
                ("integration_id", string("")),
                ("jobs", array(object("A job.", &[
                    ("job", integer("Its number.")),
                    ("job_status", string("")),
                    ("failure", nullable(string("Why it failed as a whole."))),
                    ("rows_synced", integer("")),
                    ("rows_failed_with_errors", integer("")),
                    ("row_errors", array(object("A row that failed.", &[
                        ("updated_at", nullable(string("Its UPDATED_AT (null: unreadable)."))),
                        ("identifier", nullable(string(""))),
                        ("reason", string("")),
                    ], &["reason"]), "The first 100.")),
                ], &["job", "job_status", "rows_synced", "rows_failed_with_errors", "row_errors"]), "Newest first.")),
            ], &["integration_id", "jobs"])), "No such integration."),
        Operator::QueueState => Op::new("The queue's backlog: jobs acknowledged and not yet applied, and how long the oldest has waited.")
            .reply(200, "The backlog.", object("", &[
                ("pending", integer("Jobs between the oldest not applied and the newest.")),
                ("tail", integer("The newest job's sequence number.")),
                ("oldest_seq", nullable(integer("The oldest job not applied."))),
                ("oldest_age_seconds", nullable(number("How long it has waited."))),
            ], &["pending", "tail"])),
        Operator::SetAsideJobs => {
            let job = object("", &[
                ("seq", integer("Its queue sequence number.")),
                ("error", string("Why it could not be decoded.")),
                ("job", string("The job as queued: text, or hex when `hex`.")),
                ("hex", boolean("Present (true) when `job` is hex.")),
            ], &["seq", "error", "job"]);
            Op::new("Queued jobs that could not be decoded or applied (the oldest 100), kept for an operator to inspect.")
                .reply(200, "The jobs.", object("", &[("count", integer("All of them.")), ("jobs", array(job, ""))], &["count", "jobs"]))
        }
        Operator::Conformance => Op::new("Runs the store conformance suite on a scratch store, where the host can make one (the edge); elsewhere 404.")
            .reply(200, "The suite's report.", free_object("The report.")),
    }
}
