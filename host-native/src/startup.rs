//! What `engage serve` does before it serves: its options, where its database is
//! (a file, PostgreSQL, or a temporary directory), the lock that keeps a second
//! server off a SQLite file, and the known key and fixtures made ready before the
//! first request.

use clap::builder::BoolishValueParser;
use clap::Args;

use crate::ctx;
use crate::engine::SharedEngine;

/// Queued track requests applied per commit on SQLite. Larger commits apply a
/// little faster (64: ~82 batches/s, 16: ~70) but write the WAL in bigger bursts,
/// and acknowledgements' fsyncs wait behind them (ack p99 ~100 ms vs ~40 ms at
/// 1000 req/s, measured with the track_load bench).
pub const APPLY_BATCH: usize = 16;

/// Options of `engage serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// SQLite database file (created on first use), or a PostgreSQL database
    /// (`postgres://user:password@host:port/db`) that several servers share.
    #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
    pub db: std::path::PathBuf,
    /// Address to listen on.
    #[arg(long, env = "ENGAGE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "ENGAGE_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Do not enforce the API's rate limits (for load tests).
    #[arg(long, env = "ENGAGE_NO_RATE_LIMITS", value_parser = BoolishValueParser::new())]
    pub no_rate_limits: bool,
    /// Most seconds of applying the queue of /users/track writes may hold (jobs
    /// waiting over the rate they are applied at); past it /users/track answers 503
    /// with Retry-After and acknowledges nothing. 0: unbounded.
    #[arg(long, env = "ENGAGE_MAX_BACKLOG_SECS", default_value_t = 30)]
    pub max_backlog_secs: u64,
    /// Memory for profiles and identifiers kept in front of the database, MiB.
    #[arg(long, env = "ENGAGE_CACHE_MIB", default_value_t = crate::store::DEFAULT_CACHE_MIB)]
    pub cache_mib: usize,
    /// Queued track requests applied per commit.
    #[arg(long, env = "ENGAGE_APPLY_BATCH", default_value_t = APPLY_BATCH)]
    pub apply_batch: usize,
    /// Enables the operator routes under /_engage/ (keys, workspaces, groups, SCIM tokens,
    /// warehouse integrations, the queue).
    /// At least 32 characters.
    #[arg(long, env = "ENGAGE_ADMIN_TOKEN", hide_env_values = true, value_parser = parse_admin_token)]
    pub admin_token: Option<String>,
    /// Wrong admin tokens one client address may present in a minute before every
    /// attempt from it waits out the minute (429 with Retry-After).
    #[arg(long, env = "ENGAGE_ADMIN_FAILURES_PER_MINUTE", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub admin_failures_per_minute: u32,
    /// Stop when standard input closes (lets a test harness own the server's lifetime).
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
    /// The server's public address, the base of preference-center links (e.g.
    /// https://prefs.example.com). Default: http:// and the address listened on.
    #[arg(long, env = "ENGAGE_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// How long a preference-center link stays valid, in seconds (default: 30 days).
    #[arg(long, env = "ENGAGE_LINK_TTL_SECS", default_value_t = engage_core::DEFAULT_LINK_TTL_SECS)]
    pub link_ttl_secs: u64,
    /// Seconds from a request's first byte to the end of its headers.
    #[arg(long, env = "ENGAGE_HEADER_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// Seconds to receive a request's whole body (then 408).
    #[arg(long, env = "ENGAGE_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,
    /// Seconds a kept-alive connection may wait for its next request (and a write
    /// may stall on a client that does not read).
    #[arg(long, env = "ENGAGE_IDLE_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_secs: u64,
    /// Most connections open at once (more are answered 503 and closed). Default:
    /// half of the open-files limit (raised to its hard limit at start) less 256.
    #[arg(long, env = "ENGAGE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Directory of the built playground (www/build.sh), served at /playground/.
    /// Default: www/dist under the current directory, when it exists.
    #[arg(long, env = "ENGAGE_PLAYGROUND_DIR")]
    pub playground_dir: Option<std::path::PathBuf>,
    /// Log lines as text or as JSON objects (one per line).
    #[arg(long, env = "ENGAGE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// A throwaway database: made in a new temporary directory, removed when the
    /// server stops (`--db :memory:` means the same).
    #[arg(long, env = "ENGAGE_EPHEMERAL", value_parser = BoolishValueParser::new())]
    pub ephemeral: bool,
    /// An API key that exists once the server is ready (32 characters or more),
    /// across restarts, for a CI job or a `.env` file to hold.
    #[arg(long, env = "ENGAGE_API_KEY", hide_env_values = true, value_parser = parse_api_key)]
    pub api_key: Option<String>,
    /// The workspace of `--api-key`.
    #[arg(long, env = "ENGAGE_WORKSPACE", default_value = "default")]
    pub workspace: String,
    /// The permissions of `--api-key`: `all`, or a comma-separated list.
    #[arg(long, env = "ENGAGE_PERMISSIONS", default_value = "all")]
    pub permissions: String,
    /// A fixtures file to load before serving (see `engage seed`).
    #[arg(long, env = "ENGAGE_SEED")]
    pub seed: Option<std::path::PathBuf>,
    /// A clock tests can move: `POST /_engage/clock` (with the admin token).
    #[arg(long, env = "ENGAGE_TEST_CLOCK", value_parser = BoolishValueParser::new())]
    pub test_clock: bool,
    /// Refuse what the hosted platform refuses where Engage is lenient (a body
    /// that is not `Content-Type: application/json`: 415).
    #[arg(long, env = "ENGAGE_STRICT", value_parser = BoolishValueParser::new())]
    pub strict: bool,
    /// Keep request and response bodies in the request journal (the inspector's
    /// "recent requests"); keys and tokens are never kept.
    #[arg(long, env = "ENGAGE_JOURNAL_BODIES", value_parser = BoolishValueParser::new())]
    pub journal_bodies: bool,
    /// Offer the test kit's faults (`/_engage/faults`): a test makes matching
    /// requests fail or wait (on by itself with `--ephemeral`).
    #[arg(long, env = "ENGAGE_FAULTS", value_parser = BoolishValueParser::new())]
    pub faults: bool,
    /// Make every id, and the clock, from this number: two servers started alike
    /// and sent the same requests answer the same, byte for byte. The clock
    /// stands at 2026-01-01T00:00:00Z until `POST /_engage/clock` moves it.
    #[arg(long, env = "ENGAGE_ID_SEED")]
    pub id_seed: Option<u64>,
    /// A state file for a throwaway server (`--ephemeral`): loaded at start when it
    /// exists, written (the whole state, as `GET /_engage/state` answers it) when
    /// the server stops cleanly.
    #[arg(long, env = "ENGAGE_STATE")]
    pub state: Option<std::path::PathBuf>,
}

/// Where `engage serve` keeps its data: a file or PostgreSQL, or a temporary
/// directory removed when the server stops.
pub(crate) struct Database {
    pub(crate) path: std::path::PathBuf,
    pub(crate) _temporary: Option<tempfile::TempDir>,
}

impl Database {
    pub(crate) fn of(args: &ServeArgs) -> Result<Database, String> {
        let memory = args.db.as_os_str() == ":memory:";
        if !(args.ephemeral || memory) {
            return Ok(Database { path: args.db.clone(), _temporary: None });
        }
        if args.ephemeral && !memory && args.db.as_os_str() != "engage.db" {
            return Err("--ephemeral makes a database of its own: leave out --db (and ENGAGE_DB)".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("engage-ephemeral-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let path = dir.path().join("engage.db");
        tracing::info!("ephemeral database in {} (removed when the server stops)", dir.path().display());
        Ok(Database { path, _temporary: Some(dir) })
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What this server serves, for log lines that must say it (an unknown key).
pub(crate) static DATABASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Before the first request: the known key exists, the fixtures are loaded (a
/// state file's first, then `--seed`'s).
pub(crate) async fn prepare(
    engine: &SharedEngine,
    known_key: Option<(String, engage_core::provision::WorkspaceName, Vec<engage_core::provision::Permission>)>,
    seeds: Vec<(&'static str, engage_core::testing::Seed)>,
    base: &str,
) -> Result<(), String> {
    let core = engine.clone();
    let base = base.to_string();
    tokio::task::spawn_blocking(move || {
        if let Some((key, ws, permissions)) = known_key {
            let made =
                pollster::block_on(engage_core::testing::ensure_key(core.store(), &ws, permissions, &key, ctx()))
                    .map_err(|e| format!("--api-key: {}", e.message()))?;
            tracing::info!("the --api-key of workspace {} is {:?}", ws.as_str(), made);
        }
        for (option, seed) in seeds {
            match pollster::block_on(core.load_seed(&seed, &base, ctx())).map_err(|e| format!("{option}: {e}"))? {
                engage_core::testing::Loaded::Now(n) => tracing::info!("{option}: loaded {n} entries"),
                engage_core::testing::Loaded::Before => tracing::info!("{option}: this file was loaded before"),
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Why the server cannot listen, with a hint for an address without a host.
pub(crate) fn listen_error(address: &str, e: std::io::Error) -> String {
    if address.parse::<u16>().is_ok() {
        return format!("cannot listen on {address}: give a host and a port, e.g. --listen 127.0.0.1:{address}");
    }
    format!("cannot listen on {address}: {e}")
}

/// The file a server holds locked while it serves `db`.
fn server_lock_path(db: &std::path::Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-server.lock");
    name.into()
}

/// Locks `db`'s server lock file for as long as the returned file is kept.
pub(crate) fn server_lock(db: &std::path::Path) -> Result<std::fs::File, String> {
    let path = server_lock_path(db);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!("another engage server runs on {}", db.display())),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// True while an `engage serve` runs on `db` (it holds the server lock file).
pub fn server_runs_on(db: &std::path::Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(server_lock_path(db)) else { return false };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// An admin token the core accepts (long enough to guard every key and all data).
/// A key refused before anything is made (no database for a server that will not start).
fn parse_api_key(text: &str) -> Result<String, String> {
    engage_core::testing::check_api_key(text).map(|()| text.to_string()).map_err(|e| e.message())
}

fn parse_admin_token(text: &str) -> Result<String, String> {
    engage_core::testing::check_admin_token(text).map(|()| text.to_string())
}

pub(crate) fn parse_public_url(text: &str) -> Result<String, String> {
    let ok = (text.starts_with("http://") || text.starts_with("https://")) && !text.contains(['?', '#', ' ']);
    if ok {
        Ok(text.trim_end_matches('/').to_string())
    } else {
        Err("expected an http:// or https:// URL without query or fragment".into())
    }
}
