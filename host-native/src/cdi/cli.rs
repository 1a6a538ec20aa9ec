//! `engage cdi create | list | sync | jobs | update | pause | resume | rewind | delete`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Subcommand;
use engage_core::provision::WorkspaceName;
use engage_core::warehouse::{self, DataKind, Integration, Job, JobStatus, Spec};

use crate::ctx;
use crate::store::postgres::SYNC_RUNNER_LOCK;
use crate::store::NativeStore;

/// The `cdi` subcommands.
#[derive(Subcommand)]
pub enum CdiCommand {
    /// Create an integration and print its id.
    Create {
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
        /// The workspace its rows are synced into.
        #[arg(long, default_value = "default")]
        workspace: String,
        /// A name for people.
        #[arg(long)]
        name: String,
        /// Where the table is: sqlite:PATH or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long)]
        source: String,
        /// The table (or view), optionally schema.table.
        #[arg(long)]
        table: String,
        /// What its rows are: users (attributes), events, purchases or deletes.
        #[arg(long, default_value = "users")]
        kind: String,
        /// Run every INTERVAL (e.g. 15m, 1h, 1d, or seconds); without it, on demand only.
        #[arg(long)]
        schedule: Option<String>,
        /// Who to tell about it (repeat, or separate with commas).
        #[arg(long = "contact", value_delimiter = ',')]
        contacts: Vec<String>,
    },
    /// List integrations: one `id<TAB>workspace<TAB>type<TAB>warehouse<TAB>last job<TAB>name` line each.
    List {
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
    },
    /// Print an integration's newest jobs (JSON), with why each failed and its first
    /// row errors.
    Jobs {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
    },
    /// Change an integration: its name, source, table, schedule or contacts.
    Update {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// A new source (sqlite:PATH or postgres://...); the cursor is kept (see rewind).
        #[arg(long)]
        source: Option<String>,
        /// A new table.
        #[arg(long)]
        table: Option<String>,
        /// Run every INTERVAL (15m, 1h, 1d, or seconds).
        #[arg(long, conflicts_with = "no_schedule")]
        schedule: Option<String>,
        /// Run only on demand.
        #[arg(long)]
        no_schedule: bool,
        /// New contacts (repeat, or separate with commas).
        #[arg(long = "contact", value_delimiter = ',')]
        contacts: Option<Vec<String>>,
    },
    /// Pause an integration: no job runs until it is resumed.
    Pause {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
    },
    /// Resume a paused integration (a scheduled one is due at once).
    Resume {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
    },
    /// Move an integration's cursor: its next job reads the rows after TIME, or the
    /// whole table with --start.
    Rewind {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
        /// An ISO 8601 time.
        #[arg(long, required_unless_present = "start", conflicts_with = "start")]
        to: Option<String>,
        /// Read the whole table again.
        #[arg(long)]
        start: bool,
    },
    /// Delete an integration and its jobs.
    Delete {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
    },
    /// Run one job of an integration now and print it. With a server running on the
    /// database, the server runs it (it owns the profiles); this waits for it.
    Sync {
        /// The integration id.
        id: String,
        /// SQLite database file of Engage.
        #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
        db: PathBuf,
        /// How long to wait for a running server to finish the job, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout_secs: u64,
    },
}

/// Reads `15m`, `1h`, `2d`, `90s` or a number of seconds.
pub fn parse_interval(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| format!("'{text}' is not an interval such as 15m, 1h or 1d"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("'{text}' is not an interval such as 15m, 1h or 1d")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("'{text}' is too long"))
}

/// The database of a command on existing integrations (it must exist).
fn store(db: &std::path::Path) -> Result<NativeStore, String> {
    NativeStore::open_existing(db)
}

/// An error as the operator reads it.
fn message(e: engage_core::ApiError) -> String {
    match e {
        engage_core::ApiError::BadRequest(m) | engage_core::ApiError::NotFound(m) => m,
        e => format!("{e:?}"),
    }
}

/// Applies `update` to integration `id` and prints its state.
fn change(db: &std::path::Path, id: &str, update: &warehouse::Update) -> Result<(), String> {
    let store = store(db)?;
    let i = pollster::block_on(warehouse::update(&store, id, update, ctx())).map_err(message)?;
    crate::outln!("{}", i.render());
    Ok(())
}

/// `sqlite:PATH` with a relative path made absolute against this command's working
/// directory: the job runs in the server, whose directory may be another.
fn absolute_sqlite(source: String) -> Result<String, String> {
    match source.strip_prefix("sqlite:") {
        Some(path) if !path.is_empty() && !path.starts_with('/') => {
            let absolute = std::path::absolute(path).map_err(|e| format!("cannot resolve {path}: {e}"))?;
            Ok(format!("sqlite:{}", absolute.display()))
        }
        _ => Ok(source),
    }
}

fn show(job: &Job) -> String {
    job.detail().to_string()
}

/// Runs a `cdi` subcommand.
pub fn run(command: CdiCommand) -> Result<(), String> {
    match command {
        CdiCommand::Create { db, workspace, name, source, table, kind, schedule, contacts } => {
            let ws = WorkspaceName::parse(&workspace).ok_or_else(|| format!("invalid workspace name '{workspace}'"))?;
            let kind = DataKind::parse(&kind).ok_or("--kind must be users, events, purchases or deletes")?;
            let schedule_secs = schedule.as_deref().map(parse_interval).transpose()?;
            let contact_emails = contacts.into_iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
            let source = absolute_sqlite(source)?;
            let spec = Spec { name, source, table, kind, schedule_secs, contact_emails };
            let store = NativeStore::open_or_create(&db)?;
            let i = pollster::block_on(warehouse::create(&store, &ws, &spec, ctx())).map_err(|e| match e {
                engage_core::ApiError::BadRequest(m) => m,
                e => format!("{e:?}"),
            })?;
            crate::outln!("{}", i.id);
            Ok(())
        }
        CdiCommand::List { db } => {
            let store = store(&db)?;
            for i in pollster::block_on(warehouse::all(&store)).map_err(|e| format!("{e:?}"))? {
                let last = i.last_job.map_or("-", |(_, s)| s.as_str());
                crate::outln!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    i.id,
                    i.workspace.as_str(),
                    i.kind.as_str(),
                    i.warehouse.as_str(),
                    last,
                    i.name
                );
            }
            Ok(())
        }
        CdiCommand::Update { id, db, name, source, table, schedule, no_schedule, contacts } => {
            let schedule_secs = match (schedule, no_schedule) {
                (Some(s), _) => Some(Some(parse_interval(&s)?)),
                (None, true) => Some(None),
                (None, false) => None,
            };
            let contact_emails =
                contacts.map(|cs| cs.into_iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect());
            let source = source.map(absolute_sqlite).transpose()?;
            let update = warehouse::Update { name, source, table, schedule_secs, contact_emails, paused: None };
            change(&db, &id, &update)
        }
        CdiCommand::Pause { id, db } => {
            change(&db, &id, &warehouse::Update { paused: Some(true), ..Default::default() })
        }
        CdiCommand::Resume { id, db } => {
            change(&db, &id, &warehouse::Update { paused: Some(false), ..Default::default() })
        }
        CdiCommand::Rewind { id, db, to, start } => {
            let to = match (to, start) {
                (_, true) => None,
                (Some(t), false) => Some(engage_core::Timestamp::parse(&t).ok_or("--to must be an ISO 8601 time")?),
                (None, false) => return Err("give --to TIME or --start".into()),
            };
            let store = store(&db)?;
            let i = pollster::block_on(warehouse::rewind(&store, &id, to, ctx())).map_err(message)?;
            crate::outln!("{}", i.render());
            Ok(())
        }
        CdiCommand::Delete { id, db } => {
            let store = store(&db)?;
            match pollster::block_on(warehouse::delete(&store, &id, ctx())).map_err(message)? {
                true => Ok(()),
                false => Err(format!("no integration '{id}'")),
            }
        }
        CdiCommand::Jobs { id, db } => {
            let store = store(&db)?;
            let jobs = pollster::block_on(warehouse::job_details(&store, &id))
                .map_err(|e| format!("{e:?}"))?
                .ok_or_else(|| format!("no integration '{id}'"))?;
            crate::outln!("{jobs:#}");
            Ok(())
        }
        CdiCommand::Sync { id, db, timeout_secs } => {
            let store = store(&db)?;
            let i = pollster::block_on(warehouse::integration(&store, &id))
                .map_err(|e| format!("{e:?}"))?
                .ok_or_else(|| format!("no integration '{id}'"))?;
            if i.paused {
                return Err("the integration is paused: resume it first".into());
            }
            let timeout = Duration::from_secs(timeout_secs);
            let job = match &store {
                // On PostgreSQL the server holding the sync runner's lease runs the
                // job; with none, this command takes the lease and runs it.
                NativeStore::Postgres(pg) => match pg.try_lease(SYNC_RUNNER_LOCK).map_err(|e| e.to_string())? {
                    Some(_lease) => super::run(&store, &i, &ctx)?,
                    None => {
                        let serving = || pg.try_lease(SYNC_RUNNER_LOCK).is_ok_and(|lease| lease.is_none());
                        ask_the_server(&store, &serving, &i, timeout)?
                    }
                },
                NativeStore::Sqlite(_) if store.is_owner() => super::run(&store, &i, &ctx)?,
                NativeStore::Sqlite(_) => {
                    if !crate::startup::server_runs_on(&db) {
                        return Err(
                            "another engage command holds the database and no server runs on it; try again".into()
                        );
                    }
                    ask_the_server(&store, &|| crate::startup::server_runs_on(&db), &i, timeout)?
                }
            };
            crate::outln!("{}", show(&job));
            match job.status {
                JobStatus::Success | JobStatus::Partial => Ok(()),
                s => Err(format!("the job ended {}", s.as_str())),
            }
        }
    }
}

/// Another process owns the database: ask it to run the job and wait for the job to
/// end. A server takes the request when its runner is free (after the job it is
/// running); without a server on the database (another command owns it), or once
/// the server stops, this says so at once.
fn ask_the_server(
    store: &NativeStore,
    serving: &dyn Fn() -> bool,
    i: &Integration,
    timeout: Duration,
) -> Result<Job, String> {
    let before = i.jobs;
    pollster::block_on(warehouse::request_run(store, &i.id, ctx())).map_err(|e| format!("{e:?}"))?;
    let started = Instant::now();
    let give_up = |why: &str| -> Result<Job, String> {
        let _ = pollster::block_on(warehouse::withdraw(store, &i.id, ctx()));
        Err(why.to_string())
    };
    while pollster::block_on(warehouse::requested(store, &i.id)).map_err(|e| format!("{e:?}"))? {
        if !serving() {
            return give_up("the server stopped before it took the job");
        }
        if started.elapsed() > timeout {
            return give_up("the server did not take the job in time (its runner was busy); try again");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = pollster::block_on(warehouse::integration(store, &i.id))
            .map_err(|e| format!("{e:?}"))?
            .ok_or("the integration is gone")?;
        if now.jobs > before {
            if let Some(job) =
                pollster::block_on(warehouse::job(store, &now, before + 1)).map_err(|e| format!("{e:?}"))?
            {
                if job.status != JobStatus::Running {
                    return Ok(job);
                }
            }
        }
        if !serving() {
            return Err("the server stopped before the job finished (the next start closes it as interrupted)".into());
        }
        if started.elapsed() > timeout {
            return Err("the server did not finish the job in time (it goes on; see job_sync_status)".into());
        }
    }
}
