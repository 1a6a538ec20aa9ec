//! The API description of the operator routes under `/_engage/` (Engage's own,
//! not the platform's).

use serde_json::{json, Value};

use crate::describe::op::Op;
use crate::describe::schema::{
    array, boolean, free_object, integer, not_blank, nullable, number, object, one_of, refer, string, values, with,
    workspace_name, BLANK,
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

/// An integration's name, as `Spec::check` takes it.
fn integration_name() -> Value {
    let max = crate::cdi::integration::MAX_NAME_CHARS;
    with(not_blank(string(&format!("1 to {max} characters, not blank."))), "maxLength", json!(max))
}

/// An integration's source, as `Warehouse::of` and `Spec::check` take it.
fn integration_source() -> Value {
    with(
        string("`sqlite:/ABSOLUTE/PATH` or `postgres://USER@HOST/DATABASE` (a password is better named by `PGPASSFILE` or `${VAR}` than written here)."),
        "pattern",
        json!("^(sqlite:/|postgres://|postgresql://)"),
    )
}

/// An integration's table: a name, or schema.name, put into SQL as a quoted identifier.
fn integration_table() -> Value {
    let max = crate::cdi::integration::MAX_NAME_CHARS;
    let pattern = format!("^[A-Za-z0-9_$]+(\\.[A-Za-z0-9_$]+)?{}", crate::describe::schema::END);
    with(
        with(
            string("The table to read: letters, digits, `_` and `$`, with one `.` for a schema."),
            "pattern",
            json!(pattern),
        ),
        "maxLength",
        json!(max),
    )
}

/// Seconds between scheduled runs.
fn schedule(none: &str) -> Value {
    use crate::cdi::integration::{MAX_SCHEDULE_SECS, MIN_SCHEDULE_SECS};
    let secs = integer(&format!("Run every this many seconds ({MIN_SCHEDULE_SECS} to {MAX_SCHEDULE_SECS}); {none}"));
    with(with(secs, "minimum", json!(MIN_SCHEDULE_SECS)), "maximum", json!(MAX_SCHEDULE_SECS))
}

/// Who hears about failed jobs.
fn contacts() -> Value {
    array(crate::describe::schema::email("An email address."), "Email addresses.")
}

/// A key's permissions, as a body gives them: `"all"` or some by name.
pub fn permissions() -> Value {
    let names: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
    one_of(
        vec![
            values(&["all"], "Every permission."),
            with(array(values(&names, ""), "These permissions."), "minItems", json!(1)),
        ],
        "Default `all`.",
    )
}

/// An operator route.
pub fn describe(endpoint: &Operator) -> Op {
    let not_found = |op: Op, what: &str| op.reply(404, what, refer("Error"));
    match endpoint {
        Operator::CreateKey => {
            let perms = permissions();
            Op::new("Creates an API key (as `engage keys create`). The key is shown once.")
                .body(object("", &[workspace("Its workspace, made when new"), ("permissions", nullable(perms))], &[]))
                .example(json!({"workspace": "shop", "permissions": ["users.track", "users.export.ids"]}))
                .reply(201, "Created.", object("", &[("key", string("The API key.")), ("workspace", string(""))], &["key", "workspace"]))
                .with_example("created", json!({"key": "ebfe6044-f12d-2c9c-8992-3de57cc3b8c2", "workspace": "shop"}))
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
                .with_example("keys", json!({"keys": [{"id": "3f9a2c4e1b7d8a60", "workspace": "shop", "permissions": ["users.track", "users.export.ids"],
                    "hint": "ebfe6044", "created_at": "2026-11-26T10:00:00.000Z", "last_used_at": "2026-11-26T10:00:00.000Z"}]}))
        }
        Operator::RevokeKey(_) => not_found(Op::new("Revokes an API key: requests with it are refused from now on.")
            .path_with("id", "The key's `id` (from the listing).", json!({"type": "string", "pattern": format!("^[0-9a-fA-F]{{{}}}{}", crate::admin::keys::ID_LEN, crate::describe::schema::END)}))
            .reply(200, "Revoked.", object("", &[("revoked", string("The id."))], &["revoked"]))
            .with_example("revoked", json!({"revoked": "3f9a2c4e1b7d8a60"}))
            .reply(400, "Not a key id (16 hex digits).", refer("Error")), "No key with this id."),
        Operator::ListWorkspaces => {
            let ws = object("", &[("name", string("")), ("created_at", string("RFC 3339.")), ("keys", integer("API keys."))], &["name"]);
            Op::new("Every workspace, by name.").reply(200, "The workspaces.", object("", &[("workspaces", array(ws, ""))], &["workspaces"]))
                .with_example("workspaces", json!({"workspaces": [{"name": "default", "created_at": "2026-11-26T10:00:00.000Z", "keys": 1}, {"name": "shop", "created_at": "2026-11-26T10:05:00.000Z", "keys": 2}]}))
        }
        Operator::CreateGroup => Op::new("Creates a subscription group (as `engage groups create`).")
            .body(object("", &[workspace("Its workspace"), ("name", not_blank(string("1 to 255 bytes, not blank."))), ("channel", group()["properties"]["channel"].clone())], &["name", "channel"]))
            .example(json!({"workspace": "shop", "name": "Weekly newsletter", "channel": "email"}))
            .reply(201, "Created.", group())
            .with_example("group", json!({"id": "6c2bdb0e-3e57-4a8b-9d0a-0c4d1f5e8a21", "name": "Weekly newsletter", "channel": "email"})),
        Operator::ListGroups => Op::new("A workspace's subscription groups.")
            .query("workspace", false, "The workspace (default `default`).", workspace_name(""))
            .reply(200, "The groups.", object("", &[("groups", array(group(), ""))], &["groups"]))
            .with_example("groups", json!({"groups": [{"id": "6c2bdb0e-3e57-4a8b-9d0a-0c4d1f5e8a21", "name": "Weekly newsletter", "channel": "email"}]})),
        Operator::CreateScimToken => Op::new("Creates a SCIM token for the deployment, valid with `X-Request-Origin: <origin>` (as `engage scim-tokens create`). The token is shown once. With `default_department`, the users it creates without a department get that one.")
            .body(object("", &[
                ("origin", with(string("The identity provider's origin (`https://idp.example.com`): 1 to 255 characters, no spaces or control characters; spaces around it and slashes at its end are dropped."), "pattern", json!(format!("^[{BLANK}]*[^{BLANK}\\x00-\\x1f\\x7f-\\x9f]{{0,254}}[^{BLANK}\\x00-\\x1f\\x7f-\\x9f/]/*[{BLANK}]*{}", crate::describe::schema::END)))),
                ("default_department", nullable(values(&crate::scim::values::Department::ALL.iter().map(|d| d.as_str()).collect::<Vec<_>>(), "The department the users this token creates get when they name none (`null` or absent: none; such creates must name one)."))),
            ], &["origin"]))
            .example(json!({"origin": "https://idp.example.com", "default_department": "engineering"}))
            .reply(201, "Created.", object("", &[("token", string("")), ("origin", string("Normalised.")), ("default_department", nullable(string("The department SCIM users it makes get when they name none.")))], &["token", "origin"]))
            .with_example("created", json!({"token": "scim_8c66c79a487aa3c965585575ef9cf393", "origin": "https://idp.example.com", "default_department": null})),
        Operator::CreateIntegration => Op::new("Creates a warehouse integration (as `engage cdi create`). The source URL is never returned or logged.")
            .body(object("", &[
                workspace("Its workspace"),
                ("name", integration_name()),
                ("source", integration_source()),
                ("table", integration_table()),
                ("kind", nullable(values(&["users", "events", "purchases", "deletes"], "What its rows are (default, or `null`: `users`)."))),
                ("schedule_secs", nullable(schedule("none or `null`: only on request."))),
                ("contact_emails", nullable(contacts())),
            ], &["name", "source", "table"]))
            .example(json!({"workspace": "default", "name": "Users from the warehouse", "source": "sqlite:/var/lib/warehouse/users.db",
                "table": "USERS", "kind": "users", "schedule_secs": 3600, "contact_emails": ["data@example.com"]}))
            .reply(201, "Created.", object("", &[("integration_id", string("")), ("workspace", string(""))], &["integration_id", "workspace"]))
            .with_example("created", json!({"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "workspace": "default"})),
        Operator::RequestSync(_) => not_found(Op::new("Asks for a sync job now; the host's runner starts it. A host that runs no syncs (the edge, the playground) answers 400.")
            .path("id", "The integration.")
            .reply(202, "Requested.", object("", &[("message", string("`success`."))], &["message"]))
            .with_example("requested", json!({"message": "success"}))
            .reply(400, "This host runs no syncs.", refer("Error"))
            .reply(409, "The integration is paused.", refer("Error")), "No such integration."),
        Operator::IntegrationState(_) => not_found(Op::new("An integration's job count and last job status, for an operator (or a test) waiting for a job without spending the API's rate limit.")
            .path("id", "The integration.")
            .reply(200, "Its state.", object("", &[("integration_id", string("")), ("jobs", integer("Jobs so far.")), ("last_job_status", nullable(string("")))], &["integration_id", "jobs"]))
            .with_example("state", json!({"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "jobs": 3, "last_job_status": "success"})), "No such integration."),
        Operator::UpdateIntegration(_) => not_found(Op::new("Changes an integration (as `engage cdi update`, `pause`, `resume`): each field optional; a changed schedule is due at once. The cursor is kept (rewind to read a new source from its start).")
            .path("id", "The integration.")
            .body(crate::describe::schema::closed(object("Unknown fields are refused.", &[
                ("name", integration_name()),
                ("source", integration_source()),
                ("table", integration_table()),
                ("schedule_secs", nullable(schedule("`null`: only on request."))),
                ("contact_emails", contacts()),
                ("paused", boolean("Pause (no job runs) or resume.")),
            ], &[])))
            .example(json!({"schedule_secs": 3600, "paused": false}))
            .reply(200, "Its state (the `/cdi/integrations` entry, its table and schedule).", free_object("The integration."))
            .with_example("integration", json!({"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "app_group_id": "default", "integration_name": "Users from the warehouse", "integration_type": "user_attributes", "integration_status": "active", "contact_emails": "data@example.com", "last_updated_at": null, "warehouse_type": "sqlite", "last_job_start_time": "2026-11-26T10:00:00.000Z", "last_job_status": "success", "next_scheduled_run": "2026-11-26T11:00:00.000Z", "table": "USERS", "schedule_secs": 3600}))
            .reply(400, "A field is invalid.", refer("Error")), "No such integration."),
        Operator::DeleteIntegration(_) => not_found(Op::new("Deletes an integration, its jobs and any request to run it; a job running meanwhile stops at its next batch.")
            .path("id", "The integration.")
            .reply(200, "Deleted.", object("", &[("deleted", string("Its id."))], &["deleted"]))
            .with_example("deleted", json!({"deleted": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab"})), "No such integration."),
        Operator::RewindIntegration(_) => not_found(Op::new("Moves an integration's cursor: its next job reads the rows after `to` (null: the whole table). Refused while a job runs.")
            .path("id", "The integration.")
            .body(object("", &[("to", nullable(crate::describe::schema::time("An ISO 8601 time, or null.")))], &["to"]))
            .example(json!({"to": "2026-11-01T00:00:00Z"}))
            .reply(200, "Its state.", free_object("The integration."))
            .with_example("integration", json!({"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "app_group_id": "default", "integration_name": "Users from the warehouse", "integration_type": "user_attributes", "integration_status": "active", "contact_emails": "data@example.com", "last_updated_at": null, "warehouse_type": "sqlite", "last_job_start_time": "2026-11-26T10:00:00.000Z", "last_job_status": "success", "next_scheduled_run": "2026-11-26T11:00:00.000Z", "table": "USERS", "schedule_secs": 3600}))
            .reply(400, "`to` is invalid.", refer("Error"))
            .reply(409, "A job of this integration is running.", refer("Error")), "No such integration."),
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
            ], &["integration_id", "jobs"]))
            .with_example("jobs", json!({"integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "jobs": [{"job": 3, "job_status": "partial", "failure": null,
                "sync_start_time": "2026-11-26T10:00:00.000Z", "sync_finish_time": "2026-11-26T10:00:04.000Z", "last_timestamp_synced": "2026-11-26T09:59:58.000Z",
                "rows_synced": 1998, "rows_failed_with_errors": 2, "row_errors": [
                    {"updated_at": "2026-11-26T09:59:58Z", "identifier": "user-77", "reason": "PAYLOAD is not a JSON object"},
                    {"updated_at": null, "identifier": "user-78", "reason": "UPDATED_AT cannot be read: 'yesterday'"}]}]})), "No such integration."),
        Operator::QueueState => Op::new("The queue's backlog: jobs acknowledged and not yet applied, and how long the oldest has waited.")
            .reply(200, "The backlog.", object("", &[
                ("pending", integer("Jobs between the oldest not applied and the newest.")),
                ("tail", integer("The newest job's sequence number.")),
                ("oldest_seq", nullable(integer("The oldest job not applied."))),
                ("oldest_age_seconds", nullable(number("How long it has waited."))),
            ], &["pending", "tail"]))
            .with_example("backlog", json!({"pending": 12, "tail": 40512, "oldest_seq": 40501, "oldest_age_seconds": 0.35})),
        Operator::SetAsideJobs => {
            let job = object("", &[
                ("seq", integer("Its queue sequence number.")),
                ("error", string("Why it could not be decoded.")),
                ("job", string("The job as queued: text, or hex when `hex`.")),
                ("hex", boolean("Present (true) when `job` is hex.")),
            ], &["seq", "error", "job"]);
            Op::new("Queued jobs that could not be decoded or applied (the oldest 100), kept for an operator to inspect.")
                .reply(200, "The jobs.", object("", &[("count", integer("All of them.")), ("jobs", array(job, ""))], &["count", "jobs"]))
                .with_example("jobs", json!({"count": 1, "jobs": [{"seq": 40499, "error": "unknown queue record version 9", "job": "09ff00", "hex": true}]}))
        }
        Operator::Conformance => Op::new("Runs the store conformance suite on a scratch store, where the host can make one (the edge); elsewhere 404.")
            .reply(200, "The suite's report.", free_object("The report."))
            .with_example("report", json!({"passed": crate::store::conformance::CHECKS})),
    }
}
