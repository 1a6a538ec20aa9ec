//! `engage serve`: its options turned into logging, a store, a playground, the
//! engine's [`Config`] and the server's bounds, then the server run until a signal.

use std::sync::Arc;
use std::time::Duration;

use engage_core::{Config, Engine};

use crate::conn::Limits;
use crate::engine::SharedEngine;
use crate::playground::Chosen;
use crate::server::{listen, run_with, shutdown_signal, stdin_closed, BLOCKING_THREADS};
use crate::startup::{listen_error, prepare, server_lock, Database, ServeArgs, DATABASE};
use crate::store::NativeStore;

/// Runs `engage serve` until SIGINT or SIGTERM.
pub fn serve(args: ServeArgs) -> Result<(), String> {
    crate::logs::init(args.log_format);
    let database = Database::of(&args)?;
    let db = database.path.clone();
    // A throwaway server (`--ephemeral`, `--db :memory:`) is a test's: it keeps
    // bodies in the request journal, so a test can match them.
    let journal_bodies = args.journal_bodies || database._temporary.is_some();
    let faults = args.faults || database._temporary.is_some();
    let options = crate::store::Options { cache_bytes: args.cache_mib.saturating_mul(1 << 20) };
    // Refused before anything else: a second server on a file another one serves
    // would answer every write with a storage failure.
    let is_sqlite = !crate::store::postgres::is_postgres_url(&db.to_string_lossy());
    let _serving = if is_sqlite { Some(server_lock(&db)?) } else { None };
    let new = is_sqlite && !db.exists() && database._temporary.is_none();
    let store = NativeStore::open_with(&db, options)?;
    if new {
        tracing::info!("made a new database at {}", db.display());
    }
    let playground = crate::playground::init(args.playground_dir.clone())?;
    match &playground {
        Chosen::Dir(dir) => tracing::info!("serving the playground from {} at /playground/", dir.display()),
        Chosen::Building(dir) => {
            tracing::info!("the playground is being built into {}: served when it is there", dir.display())
        }
        Chosen::Embedded => tracing::info!("serving the playground built into this binary at /playground/"),
        Chosen::None => tracing::info!("no playground built (bash www/build.sh builds it): / says how"),
    }
    let known_key = match &args.api_key {
        Some(key) => Some((
            key.clone(),
            engage_core::provision::WorkspaceName::parse(&args.workspace).ok_or_else(|| {
                format!("invalid --workspace '{}': {}", args.workspace, engage_core::provision::WorkspaceName::RULE)
            })?,
            engage_core::provision::parse_permission_list(&args.permissions)?,
        )),
        None => None,
    };
    let mut seeds = Vec::new();
    if let Some(path) = &args.state {
        if database._temporary.is_none() {
            return Err(
                "--state is for a throwaway server: add --ephemeral (a database file keeps its state itself)".into()
            );
        }
        match std::fs::read(path) {
            Ok(bytes) => seeds.push((
                "--state",
                engage_core::testing::parse_seed_sized(&bytes, engage_core::testing::MAX_STATE_BYTES)
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            )),
            // Written at the first clean stop.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        }
    }
    if let Some(path) = &args.seed {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        seeds.push((
            "--seed",
            engage_core::testing::parse_seed(&bytes).map_err(|e| format!("{}: {e}", path.display()))?,
        ));
    }
    let described = crate::store::native::describe(&db);
    let limits = Limits {
        header: Duration::from_secs(args.header_timeout_secs),
        body: Duration::from_secs(args.body_timeout_secs),
        idle: Duration::from_secs(args.idle_timeout_secs),
        max_connections: crate::conn::connection_cap(args.max_connections),
    };
    tracing::info!(
        "at most {} connections; timeouts: headers {} s, body {} s, idle {} s",
        limits.max_connections,
        args.header_timeout_secs,
        args.body_timeout_secs,
        args.idle_timeout_secs
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = listen(&args.listen).await.map_err(|e| listen_error(&args.listen, e))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let config = Config {
            max_body_bytes: args.max_body_bytes,
            rate_limits: !args.no_rate_limits,
            apply_batch: args.apply_batch,
            admin_token: args.admin_token.clone(),
            admin_failures_per_minute: args.admin_failures_per_minute,
            public_url: Some(args.public_url.clone().unwrap_or_else(|| format!("http://{bound}"))),
            link_ttl_secs: args.link_ttl_secs,
            runs_syncs: true,
            max_backlog_secs: (args.max_backlog_secs > 0).then_some(args.max_backlog_secs),
            applies_in_background: true,
            shared_store: matches!(store, NativeStore::Postgres(_)),
            strict: args.strict,
            test_clock: args.test_clock,
            journal_bodies,
            faults,
            id_seed: args.id_seed,
            playground: playground.state(),
            build: crate::build(),
        };
        let engine: SharedEngine = Arc::new(Engine::new(store, config));
        if let Chosen::Building(dir) = playground {
            tokio::spawn(crate::playground::watch(engine.clone(), dir));
        }
        prepare(&engine, known_key, seeds, &format!("http://{bound}")).await?;
        let _ = DATABASE.set(described);
        let exit_on_stdin_eof = args.exit_on_stdin_eof;
        let kept = engine.clone();
        run_with(engine, listener, limits, async move {
            if exit_on_stdin_eof {
                tokio::select! { _ = shutdown_signal() => {}, _ = stdin_closed() => {} }
            } else {
                shutdown_signal().await
            }
        })
        .await?;
        match &args.state {
            Some(path) => write_state(kept, path).await,
            None => Ok(()),
        }
    })
}

/// Writes the whole state to `path` (`--state`), whole or not at all: into a file
/// beside it, then renamed over it.
async fn write_state(engine: SharedEngine, path: &std::path::Path) -> Result<(), String> {
    let state = tokio::task::spawn_blocking(move || pollster::block_on(engine.export_state(None, crate::ctx())))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("--state: the state could not be read: {}", e.message()))?;
    let bytes = serde_json::to_vec_pretty(&state).map_err(|e| e.to_string())?;
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let written = std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, path));
    written.map_err(|e| format!("--state: cannot write {}: {e}", path.display()))?;
    tracing::info!("--state: wrote the state to {} ({} bytes)", path.display(), bytes.len());
    Ok(())
}
