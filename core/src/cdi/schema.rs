//! The API description of the warehouse-sync status endpoints.

use serde_json::{json, Value};

use super::cursor::PAGE;
use super::integration::{DataKind, JobStatus, Warehouse};
use super::read::{INVALID_CURSOR, INVALID_INTEGRATION};
use super::sync::MAX_JOBS;
use crate::describe::op::Op;
use crate::describe::schema::{array, integer, nullable, object, string, success_body, time, values};
use crate::routes::Cdi;

fn statuses() -> Vec<&'static str> {
    [JobStatus::Running, JobStatus::Success, JobStatus::Partial, JobStatus::Error, JobStatus::ConfigError]
        .map(JobStatus::as_str)
        .to_vec()
}

fn page(op: Op, item: Value, what: &'static str, example: Value) -> Op {
    op.query("cursor", false, "A cursor from a `Link` header (opaque).", string(""))
        .reply(200, &format!("One page of {PAGE} {what} at most, newest first."), success_body("", &[("results", array(item, ""))], &["results"]))
        .with_example(what, json!({"message": "success", "results": [example]}))
        .with_header("Link", "Pagination: `<url>; rel=\"prev\"` and `<url>; rel=\"next\"` (relative URLs with a cursor). Absent when there are no more items than one page; no `prev` without a cursor, no `next` on the last page.")
}

/// A warehouse-sync endpoint.
pub fn describe(endpoint: &Cdi) -> Op {
    let st = statuses();
    match endpoint {
        Cdi::Integrations => {
            let kinds =
                [DataKind::Users, DataKind::Events, DataKind::Purchases, DataKind::Deletes].map(DataKind::as_str);
            let warehouses = [Warehouse::Sqlite, Warehouse::Postgres].map(Warehouse::as_str);
            let item = object(
                "A warehouse integration.",
                &[
                    ("integration_id", string("")),
                    ("app_group_id", string("The workspace.")),
                    ("integration_name", string("")),
                    ("integration_type", values(&kinds, "What its rows are.")),
                    ("integration_status", string("`active`.")),
                    ("contact_emails", string("Comma-separated.")),
                    ("last_updated_at", nullable(time("The last `UPDATED_AT` synced."))),
                    ("warehouse_type", values(&warehouses, "")),
                    ("last_job_start_time", nullable(time(""))),
                    ("last_job_status", nullable(values(&st, ""))),
                    ("next_scheduled_run", nullable(time(""))),
                ],
                &["integration_id", "integration_name", "integration_type"],
            );
            let op = Op::new("Lists the workspace's warehouse integrations (made by the operator: `engage cdi create`). `integration_id` narrows the list to one.")
                .query("integration_id", false, "Only this integration.", string(""));
            let example = json!({
                "integration_id": "b2c8e6f0-1a2b-4c3d-9e8f-0123456789ab", "app_group_id": "default",
                "integration_name": "Users from the warehouse", "integration_type": "user_attributes", "integration_status": "active",
                "contact_emails": "data@example.com", "last_updated_at": "2026-11-26T09:59:58Z", "warehouse_type": "postgres",
                "last_job_start_time": "2026-11-26T10:00:00Z", "last_job_status": "success", "next_scheduled_run": "2026-11-26T11:00:00Z",
            });
            page(op, item, "integrations", example).bad_request(
                "An invalid cursor or integration id.",
                &[("cursor", INVALID_CURSOR), ("integration", INVALID_INTEGRATION)],
            )
        }
        Cdi::JobSyncStatus(_) => {
            let item = object("A sync job.", &[
                ("job_status", values(&st, "`running`, `success` (every row), `partial` (some rows failed), `error` (none, or interrupted), `config_error` (the source could not be read).")),
                ("sync_start_time", time("")),
                ("sync_finish_time", nullable(time(""))),
                ("last_timestamp_synced", nullable(time("The last `UPDATED_AT` processed."))),
                ("rows_synced", integer("")),
                ("rows_failed_with_errors", integer("")),
            ], &["job_status", "sync_start_time", "rows_synced", "rows_failed_with_errors"]);
            let op = Op::new(format!("Lists an integration's past sync jobs (its last {MAX_JOBS})."))
                .path("integration_id", "The integration.");
            let example = json!({
                "job_status": "partial", "sync_start_time": "2026-11-26T10:00:00Z", "sync_finish_time": "2026-11-26T10:00:04Z",
                "last_timestamp_synced": "2026-11-26T09:59:58Z", "rows_synced": 1998, "rows_failed_with_errors": 2,
            });
            page(op, item, "jobs", example).bad_request(
                "An invalid cursor or integration id.",
                &[("cursor", INVALID_CURSOR), ("integration", INVALID_INTEGRATION)],
            )
        }
    }
}
