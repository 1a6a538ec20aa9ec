//! An integration: a warehouse table synced into one workspace, what kind of rows
//! it holds, when it runs, and where its last sync stopped (the cursor).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::position::Within;
use crate::error::ApiError;
use crate::ids::{Email, WorkspaceName};
use crate::repo::codec::decode;
use crate::store::{Store, Table, MAX_SCAN};
use crate::time::Timestamp;

/// What the table's rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataKind {
    /// Custom attributes: `PAYLOAD` is an attributes object.
    Users,
    /// Custom events: `PAYLOAD` is one event.
    Events,
    /// Purchases: `PAYLOAD` is one purchase.
    Purchases,
    /// User deletes: identifier columns only, no `PAYLOAD`.
    Deletes,
}

impl DataKind {
    /// Parses the command line's spelling.
    pub fn parse(text: &str) -> Option<DataKind> {
        match text {
            "users" => Some(DataKind::Users),
            "events" => Some(DataKind::Events),
            "purchases" => Some(DataKind::Purchases),
            "deletes" => Some(DataKind::Deletes),
            _ => None,
        }
    }

    /// `integration_type` as the list endpoint writes it (the platform's data types).
    pub fn as_str(self) -> &'static str {
        match self {
            DataKind::Users => "user_attributes",
            DataKind::Events => "custom_events",
            DataKind::Purchases => "purchase_events",
            DataKind::Deletes => "user_deletes",
        }
    }
}

/// Where the table lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Warehouse {
    /// A SQLite database file (`sqlite:PATH`).
    Sqlite,
    /// A PostgreSQL server, or one speaking its protocol (`postgres://...`).
    Postgres,
}

impl Warehouse {
    /// `warehouse_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Warehouse::Sqlite => "sqlite",
            Warehouse::Postgres => "postgres",
        }
    }

    /// The warehouse a source URL names.
    pub fn of(source: &str) -> Option<Warehouse> {
        if source.strip_prefix("sqlite:").is_some_and(|p| !p.is_empty()) {
            Some(Warehouse::Sqlite)
        } else if source.starts_with("postgres://") || source.starts_with("postgresql://") {
            Some(Warehouse::Postgres)
        } else {
            None
        }
    }
}

/// The outcome of a sync job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// In progress.
    Running,
    /// Every row synced.
    Success,
    /// Some rows failed with errors.
    Partial,
    /// No row synced (all failed), or the job was interrupted before it finished.
    Error,
    /// The source could not be read: unreachable, no such table, a column missing.
    ConfigError,
}

impl JobStatus {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Success => "success",
            JobStatus::Partial => "partial",
            JobStatus::Error => "error",
            JobStatus::ConfigError => "config_error",
        }
    }
}

/// Where the last committed batch stopped: every row with `UPDATED_AT` before
/// `updated_at` is synced, and so is every row at it (`within` is `None`), or
/// those up to a place in that group ([`Within`]). The next batch reads after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The last synced `UPDATED_AT`.
    pub updated_at: Timestamp,
    /// Where in the group at `updated_at` the last batch ended, when it ended
    /// inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Within>,
}

/// What is stored for an integration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integration {
    /// Its id.
    pub id: String,
    /// The workspace its rows are synced into.
    pub workspace: WorkspaceName,
    /// A name for people.
    pub name: String,
    /// The kind of rows.
    pub kind: DataKind,
    /// The warehouse.
    pub warehouse: Warehouse,
    /// The source URL. May carry a password: never returned by the API, never logged.
    pub source: String,
    /// The table (or view) to read.
    pub table: String,
    /// Seconds between scheduled runs; `None`: on demand only.
    pub schedule_secs: Option<u64>,
    /// Who to tell about it.
    pub contact_emails: Vec<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed (a job started or finished).
    pub updated_at: Timestamp,
    /// Where the last committed batch stopped (`None`: nothing synced yet).
    pub cursor: Option<Cursor>,
    /// The number of jobs it has had (the last job's sequence number).
    pub jobs: u64,
    /// The last job's start and status.
    pub last_job: Option<(Timestamp, JobStatus)>,
    /// When the scheduler runs it next.
    pub next_run: Option<Timestamp>,
    /// Paused: no scheduled or requested job runs until it is resumed.
    #[serde(default)]
    pub paused: bool,
}

/// Longest integration name and table name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// Shortest schedule: the platform's dashboard offers 15 minutes; Engage allows a
/// minute, for local use and tests.
pub const MIN_SCHEDULE_SECS: u64 = 60;

/// Longest schedule: the platform's dashboard offers monthly; a year is allowed.
pub const MAX_SCHEDULE_SECS: u64 = 366 * 86_400;

/// What `engage cdi create` asks for, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Name.
    pub name: String,
    /// Source URL.
    pub source: String,
    /// Table.
    pub table: String,
    /// Kind of rows.
    pub kind: DataKind,
    /// Seconds between runs.
    pub schedule_secs: Option<u64>,
    /// Contacts.
    pub contact_emails: Vec<String>,
}

impl Spec {
    /// Checks the parts of a new integration.
    pub fn check(&self) -> Result<Warehouse, ApiError> {
        let text_ok = |s: &str| !s.trim().is_empty() && s.chars().count() <= MAX_NAME_CHARS;
        if !text_ok(&self.name) {
            return Err(ApiError::bad(format!("the name must be 1 to {MAX_NAME_CHARS} characters")));
        }
        // A table name is put into SQL as a quoted identifier: letters, digits, `_`,
        // `$` and one `.` (schema.table) only, so no quoting can be escaped.
        let table_ok = text_ok(&self.table)
            && self.table.split('.').count() <= 2
            && self
                .table
                .split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$'));
        if !table_ok {
            return Err(ApiError::bad("the table must be a name (or schema.name) of letters, digits, '_' and '$'"));
        }
        if let Some(s) = self.schedule_secs {
            if !(MIN_SCHEDULE_SECS..=MAX_SCHEDULE_SECS).contains(&s) {
                return Err(ApiError::bad(format!(
                    "the schedule must be {MIN_SCHEDULE_SECS} to {MAX_SCHEDULE_SECS} seconds"
                )));
            }
        }
        if let Some(bad) = self.contact_emails.iter().find(|e| Email::parse(e).is_none()) {
            return Err(ApiError::bad(format!("'{bad}' is not an email address")));
        }
        let warehouse = Warehouse::of(&self.source)
            .ok_or_else(|| ApiError::bad("the source must be sqlite:PATH or postgres://USER@HOST/DATABASE"))?;
        // A relative path would be read against the working directory of whichever
        // process runs the job, not the caller's (`engage cdi create` makes it absolute).
        if self.source.strip_prefix("sqlite:").is_some_and(|p| !p.starts_with('/')) {
            return Err(ApiError::bad("a sqlite: source needs an absolute path (sqlite:/path/to/file.db)"));
        }
        Ok(warehouse)
    }
}

impl Integration {
    /// The entry of `GET /cdi/integrations`.
    pub fn render(&self) -> Value {
        let ts = |t: Option<Timestamp>| t.map(Timestamp::to_rfc3339);
        json!({
            "integration_id": self.id,
            "app_group_id": self.workspace.as_str(),
            "integration_name": self.name,
            "integration_type": self.kind.as_str(),
            "integration_status": if self.paused { "paused" } else { "active" },
            "contact_emails": self.contact_emails.join(","),
            "last_updated_at": ts(self.cursor.as_ref().map(|c| c.updated_at)),
            "warehouse_type": self.warehouse.as_str(),
            "last_job_start_time": ts(self.last_job.map(|(t, _)| t)),
            "last_job_status": self.last_job.map(|(_, s)| s.as_str()),
            "next_scheduled_run": ts(self.next_run),
        })
    }
}

/// The table of integrations, keyed by id (ids are unique across workspaces).
pub const INTEGRATION_TABLE: Table = Table::CdiIntegration;

/// Most integrations a deployment keeps (listings read them all).
pub const MAX_INTEGRATIONS: usize = 1000;

/// Every integration of the deployment, oldest first.
pub async fn all<S: Store>(store: &S) -> Result<Vec<Integration>, ApiError> {
    let mut out = Vec::new();
    for (_, e) in store.scan(INTEGRATION_TABLE, "", MAX_SCAN).await? {
        out.push(decode::<Integration>(&e.value)?);
    }
    out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(out)
}

/// Reads an integration (any workspace: ids are unique).
pub async fn get<S: Store>(store: &S, id: &str) -> Result<Option<Integration>, ApiError> {
    match store.get(INTEGRATION_TABLE, id).await? {
        Some(e) => Ok(Some(decode(&e.value)?)),
        None => Ok(None),
    }
}
