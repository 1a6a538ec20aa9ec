//! A sync job: one run of an integration, with counts that only ever include rows
//! whose effects were committed (each batch commits its profiles, the counts and
//! the integration's cursor together).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::integration::JobStatus;
use crate::ids::WorkspaceName;
use crate::repo::keys::SEP;
use crate::time::Timestamp;

/// Most row errors kept on one job (the counts go on).
pub const MAX_KEPT_ERRORS: usize = 100;

/// Why a row failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowError {
    /// The row's `UPDATED_AT` (`None`: it could not be read as a time).
    pub updated_at: Option<Timestamp>,
    /// The row's identifier, as far as it could be read.
    pub identifier: Option<String>,
    /// What was wrong.
    pub reason: String,
}

/// What is stored for a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its sequence number within the integration (1, 2, ...).
    pub seq: u64,
    /// Its status.
    pub status: JobStatus,
    /// When it started.
    pub started_at: Timestamp,
    /// When it finished (`None` while running).
    pub finished_at: Option<Timestamp>,
    /// The last `UPDATED_AT` it committed (`None`: none yet).
    pub last_timestamp_synced: Option<Timestamp>,
    /// Rows synced.
    pub rows_synced: u64,
    /// Rows that failed.
    pub rows_failed: u64,
    /// The first [`MAX_KEPT_ERRORS`] row errors, and why a job failed as a whole.
    pub errors: Vec<RowError>,
    /// Why the job failed as a whole (`config_error`, interruption).
    pub failure: Option<String>,
}

impl Job {
    /// A job starting now.
    pub fn start(seq: u64, now: Timestamp) -> Job {
        Job {
            seq,
            status: JobStatus::Running,
            started_at: now,
            finished_at: None,
            last_timestamp_synced: None,
            rows_synced: 0,
            rows_failed: 0,
            errors: Vec::new(),
            failure: None,
        }
    }

    /// The status a finished job's counts give: every row synced (or no row at
    /// all) is `success`, some failed `partial`, all failed `error`.
    pub fn outcome(&self) -> JobStatus {
        match (self.rows_synced, self.rows_failed) {
            (_, 0) => JobStatus::Success,
            (0, _) => JobStatus::Error,
            _ => JobStatus::Partial,
        }
    }

    /// Keeps a row error (the first ones only) and counts it.
    pub fn fail_row(&mut self, e: RowError) {
        self.rows_failed += 1;
        if self.errors.len() < MAX_KEPT_ERRORS {
            self.errors.push(e);
        }
    }

    /// Everything kept of the job, for an operator: the status entry with the job's
    /// number, why it failed as a whole and its first row errors.
    pub fn detail(&self) -> Value {
        let mut v = self.render();
        v["job"] = json!(self.seq);
        v["failure"] = json!(self.failure);
        let errors: Vec<Value> = self
            .errors
            .iter()
            .map(|e| {
                json!({"updated_at": e.updated_at.map(Timestamp::to_rfc3339), "identifier": e.identifier, "reason": e.reason})
            })
            .collect();
        v["row_errors"] = json!(errors);
        v
    }

    /// The entry of `GET /cdi/integrations/{id}/job_sync_status`.
    pub fn render(&self) -> Value {
        json!({
            "job_status": self.status.as_str(),
            "sync_start_time": self.started_at.to_rfc3339(),
            "sync_finish_time": self.finished_at.map(Timestamp::to_rfc3339),
            "last_timestamp_synced": self.last_timestamp_synced.map(Timestamp::to_rfc3339),
            "rows_synced": self.rows_synced,
            "rows_failed_with_errors": self.rows_failed,
        })
    }
}

/// The store key of a job: zero-padded, so key order is job order.
pub fn job_key(ws: &WorkspaceName, integration: &str, seq: u64) -> String {
    format!("{}{SEP}{integration}{SEP}{seq:020}", ws.as_str())
}

/// The key prefix of an integration's jobs.
pub fn jobs_prefix(ws: &WorkspaceName, integration: &str) -> String {
    format!("{}{SEP}{integration}{SEP}", ws.as_str())
}
