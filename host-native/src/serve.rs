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
    let seed = match &args.seed {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Some(engage_core::testing::parse_seed(&bytes).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
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
            playground: playground.state(),
            build: crate::build(),
        };
        let engine: SharedEngine = Arc::new(Engine::new(store, config));
        if let Chosen::Building(dir) = playground {
            tokio::spawn(crate::playground::watch(engine.clone(), dir));
        }
        prepare(&engine, known_key, seed.as_ref(), &format!("http://{bound}")).await?;
        let _ = DATABASE.set(described);
        let exit_on_stdin_eof = args.exit_on_stdin_eof;
        run_with(engine, listener, limits, async move {
            if exit_on_stdin_eof {
                tokio::select! { _ = shutdown_signal() => {}, _ = stdin_closed() => {} }
            } else {
                shutdown_signal().await
            }
        })
        .await
    })
}
