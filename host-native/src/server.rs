//! The HTTP server: hyper on tokio. It only translates between hyper and the core,
//! runs a background applier for queued track jobs and the warehouse syncs that are
//! due, and stops cleanly on a signal.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use engage_core::{BodyError, BodyPlan, Config, Engine, Method, Request, Response, Then};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::conn::{AcceptBackoff, Guarded, Limits, Phase};
use crate::ctx;
use crate::lanes::Lanes;
use crate::metrics::METRICS;
use crate::playground::Chosen;
use crate::store::NativeStore;

pub use crate::engine::SharedEngine;
use crate::startup::{listen_error, prepare, server_lock, Database, DATABASE};
pub use crate::startup::{server_runs_on, LogFormat, ServeArgs, APPLY_BATCH};

/// Runs `engage serve` until SIGINT or SIGTERM.
pub fn serve(args: ServeArgs) -> Result<(), String> {
    crate::logs::init(args.log_format);
    let database = Database::of(&args)?;
    let db = database.path.clone();
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
            journal_bodies: args.journal_bodies,
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

/// Connections the kernel queues for accepting: a burst (or a full descriptor
/// table, while accepts back off) waits here instead of clients retrying SYNs.
const ACCEPT_BACKLOG: u32 = 4096;

async fn listen(address: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(ACCEPT_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address")))
}

async fn stdin_closed() {
    // Read and discard until end of input, on a plain thread (stdin is blocking).
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        loop {
            match std::io::Read::read(&mut std::io::stdin(), &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// Serves on `listener` until `shutdown` completes, with the background applier
/// and the default [`Limits`].
pub async fn run(
    engine: SharedEngine,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    run_with(engine, listener, Limits::default(), shutdown).await
}

/// Serves on `listener` until `shutdown` completes, with the background applier.
pub async fn run_with(
    engine: SharedEngine,
    listener: TcpListener,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!("engage listening on http://{addr}");

    let stopping = Arc::new(AtomicBool::new(false));
    let applier = spawn_applier(engine.clone(), stopping.clone());
    let syncs = crate::cdi::spawn_runner(engine.clone(), stopping.clone());
    // A SQLite store's requests run on lanes, two per core (see `crate::lanes`). The
    // PostgreSQL store blocks on a runtime of its own, which cannot be entered from a
    // lane's: its requests take a thread of the blocking pool each.
    let lanes = match matches!(engine.store(), NativeStore::Postgres(_)) {
        false => Some(Arc::new(Lanes::start(&engine, crate::lanes::per_machine())?)),
        true => {
            warm_blocking_pool().await;
            None
        }
    };
    let connections = tokio_util_tracker();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let refusal = crate::conn::raw_response(&engine.overloaded());
    let mut backoff = AcceptBackoff::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => {
                        backoff.reset();
                        a
                    }
                    Err(e) => {
                        backoff.failed(&e).await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    METRICS.refused_connections.inc();
                    tokio::spawn(crate::conn::refuse(stream, refusal.clone()));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let engine = engine.clone();
                let lanes = lanes.clone();
                let guard = connections.clone();
                tokio::spawn(async move {
                    let _guard = (guard, permit, crate::metrics::OpenConnection::default());
                    let phase = Arc::new(Phase::default());
                    let max_body = engine.config().max_body_bytes;
                    let io = TokioIo::new(Guarded::new(stream, limits, max_body, phase.clone(), || ctx().seed));
                    let service = service_fn(move |req| {
                        let (engine, lanes, phase) = (engine.clone(), lanes.clone(), phase.clone());
                        async move {
                            let response = handle(engine, lanes, req, limits.body, peer.ip()).await;
                            phase.finish();
                            response
                        }
                    });
                    if let Err(e) = http1::Builder::new().serve_connection(io, service).await {
                        tracing::debug!("connection from {peer} ended: {e}");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    tracing::info!("shutting down: finishing in-flight requests");
    drop(listener);
    // Wait (bounded) for open connections to finish their current request.
    for _ in 0..100 {
        if Arc::strong_count(&connections) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stopping.store(true, Ordering::SeqCst);
    let _ = tokio::task::spawn_blocking(move || {
        let _ = syncs.join();
        applier.join()
    })
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the blocking pool's threads now (all of them: each waits at a barrier
/// until every one runs), so a burst of requests on a cold server does not wait for
/// them to be created one by one.
async fn warm_blocking_pool() {
    let all_running = Arc::new(std::sync::Barrier::new(BLOCKING_THREADS));
    let tasks: Vec<_> = (0..BLOCKING_THREADS)
        .map(|_| {
            let all_running = all_running.clone();
            tokio::task::spawn_blocking(move || {
                all_running.wait();
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// A counter of open connections: each holds a clone.
fn tokio_util_tracker() -> Arc<()> {
    Arc::new(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Threads that run the core for a PostgreSQL store (its calls block), so requests
/// handled at once (a SQLite store's run on lanes instead, `crate::lanes`).
/// Enough to keep both cores busy while others wait on an fsync, and for requests'
/// commits to share one ([`crate::store::sqlite`]'s group writer); beyond it requests
/// wait for a thread. tokio's default of 512 let a load of 64 connections start a
/// hundred threads, and the memory each thread's allocator keeps took the server to
/// 1.2 GB resident (measured with the performance suite).
const BLOCKING_THREADS: usize = 32;

/// Longest the applier leaves the gate to requests waiting for it before its own turn.
const YIELD_MAX: Duration = Duration::from_millis(50);

/// Longest an applier that found nothing to apply waits before it looks again.
const IDLE_WAIT: Duration = Duration::from_millis(250);

/// Batches the applier pipelines before it drains the pipeline and starts over.
const APPLY_ROUNDS: usize = 64;

/// Applies queued track jobs in the background. A request applies first only the
/// queued jobs concerning its users, so this is what applies the rest.
fn spawn_applier(engine: SharedEngine, stopping: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let thread = std::thread::Builder::new().name("engage-applier".into());
    thread
        .spawn(move || {
            crate::priority::background();
            while !stopping.load(Ordering::SeqCst) {
                // Requests waiting for their turn take it first: the gate is not fair, and
                // a turn started the moment the last one ended would take it again
                // before a woken request thread runs (on a busy machine, every time).
                // Up to `YIELD_MAX`, so a stream of reads cannot stop the queue.
                let since = std::time::Instant::now();
                while engine.requests_waiting() && since.elapsed() < YIELD_MAX {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let seen = engine.store().jobs_enqueued();
                match pollster::block_on(engine.apply_queued_pipelined(ctx(), APPLY_ROUNDS)) {
                    Ok(run) => {
                        if !run.is_empty() {
                            METRICS.applied_batches.inc();
                            METRICS.applied_jobs.inc_by(run.applied as u64);
                            METRICS.set_aside_jobs.inc_by(run.set_aside as u64);
                        }
                        if let Some(note) = run.set_aside_note() {
                            tracing::error!("{note}");
                        }
                        if run.is_empty() {
                            // Nothing to apply: wait for a job rather than look again
                            // every few milliseconds (an idle server spent 5-11% of a
                            // core on that). The timeout is a safety net.
                            engine.store().wait_for_jobs(seen, IDLE_WAIT);
                        }
                    }
                    Err(e) => {
                        tracing::error!("applying queued jobs failed: {e:?}");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
        })
        .expect("spawn the applier thread")
}

/// Answers one request, then logs it (one line: method, route, status, latency,
/// request id; never the raw path, a key or a body) and counts it.
async fn handle(
    engine: SharedEngine,
    lanes: Option<Arc<Lanes>>,
    req: hyper::Request<Incoming>,
    body_timeout: Duration,
    client: std::net::IpAddr,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let started = std::time::Instant::now();
    let method = Method::parse(req.method().as_str());
    let route = engine.route_label(method, req.uri().path());
    let path = req.uri().path().to_string();
    let arrived = ctx().now;
    let (response, request_body) = respond(&engine, lanes.as_deref(), req, body_timeout, client).await;
    let took = started.elapsed();
    let id = response.header_value("X-Request-Id").unwrap_or("-");
    engine.journal(engage_core::testing::Answered {
        at: arrived,
        method,
        path: &path,
        status: response.status,
        micros: took.as_micros() as u64,
        request_id: id,
        request_body: &request_body,
        response_body: &response.body,
    });
    if response.notice == Some(engage_core::Notice::CredentialRefused) {
        // A key made for another database is the usual cause: say which one this is.
        let db = DATABASE.get().map(String::as_str).unwrap_or("?");
        tracing::info!(route, request_id = id, "refused a request's credentials; this server serves {db}");
    }
    if let Some(why) = &response.internal {
        tracing::error!(method = method.as_str(), route, status = response.status, request_id = id, "{why}");
    }
    tracing::info!(
        target: "engage::request",
        method = method.as_str(),
        route,
        status = response.status,
        micros = took.as_micros() as u64,
        request_id = id,
    );
    METRICS.request(route, method.as_str(), response.status, took);
    Ok(to_hyper(response))
}

/// The response, and the request's body when the journal keeps bodies.
async fn respond(
    engine: &SharedEngine,
    lanes: Option<&Lanes>,
    req: hyper::Request<Incoming>,
    body_timeout: Duration,
    client: std::net::IpAddr,
) -> (Response, Vec<u8>) {
    let mut kept = Vec::new();
    let response = answer(engine, lanes, req, body_timeout, client, &mut kept).await;
    (response, kept)
}

async fn answer(
    engine: &SharedEngine,
    lanes: Option<&Lanes>,
    req: hyper::Request<Incoming>,
    body_timeout: Duration,
    client: std::net::IpAddr,
    kept: &mut Vec<u8>,
) -> Response {
    let (parts, body) = req.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
        .collect();
    // Answers given before the core runs carry a request id too.
    let early = |response: Response| {
        let id = engage_core::request_id(&headers, ctx().seed);
        response.with_header("X-Request-Id", id)
    };
    let body = match engine.plan_body(parts.uri.path(), &headers) {
        BodyPlan::Refuse(response) => {
            // The head was judged already (`crate::framing`), so this is rare; the
            // answer is not held for a body that may never come.
            tokio::spawn(tokio::time::timeout(body_timeout, discard(body)));
            return early(response);
        }
        BodyPlan::Read { limit } => match tokio::time::timeout(body_timeout, read_bounded(body, limit)).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return early(engine.body_error(parts.uri.path(), e)),
            Err(_) => {
                let e = BodyError::TimedOut { secs: body_timeout.as_secs() };
                return early(engine.body_error(parts.uri.path(), e));
            }
        },
    };
    if engine.journal_keeps_bodies() {
        kept.clone_from(&body);
    }
    let request = Request {
        method: Method::parse(parts.method.as_str()),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or("").to_string(),
        headers,
        body,
        // Links use the configured public URL (`--public-url`, else the listen address).
        origin: None,
        client: Some(client.to_string()),
    };
    let method = request.method;
    let core = engine.clone();
    let response = match lanes {
        Some(lanes) => lanes.handle(request).await,
        // PostgreSQL calls block: run the core on the blocking pool.
        None => tokio::task::spawn_blocking(move || pollster::block_on(core.handle(request, ctx()))).await.ok(),
    }
    .unwrap_or_else(|| engage_core::ApiError::Busy.into_response());
    let id = response.header_value("X-Request-Id").unwrap_or_default().to_string();
    let replaced = match &response.then {
        Then::ServeAsset(file) => {
            crate::playground::read(file).map(|content| Response::asset(file, content, method == Method::Head))
        }
        Then::Metrics => Some(metrics_response(engine).await),
        Then::SetClock(now) => {
            crate::set_clock(*now);
            tracing::info!("test clock set to {}", now.to_rfc3339());
            None
        }
        // The applier thread polls the queue; this host cannot run the conformance suite.
        // (CatchUpFirst and RunAgainSoon go to hosts without a background applier only.)
        Then::Nothing | Then::ApplyQueue | Then::RunConformance | Then::CatchUpFirst | Then::RunAgainSoon => None,
    };
    match replaced {
        Some(r) => r.with_header("X-Request-Id", id),
        None => response,
    }
}

/// `GET /metrics`: the backlog's gauges brought up to date, then every metric.
async fn metrics_response(engine: &SharedEngine) -> Response {
    let core = engine.clone();
    let state = tokio::task::spawn_blocking(move || pollster::block_on(core.backlog_state(ctx().now))).await;
    if let Ok(Ok(state)) = state {
        METRICS.queue_pending.set(state.pending as i64);
        METRICS.queue_oldest_age.set(state.oldest_age_seconds.unwrap_or(0.0));
    }
    Response::empty(200)
        .with_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        .with_body(METRICS.render().into_bytes())
}

/// Reads the body: too large past `limit` (after draining what the client still
/// sends), malformed when its framing breaks (a bad chunk, a connection closed early).
async fn read_bounded(mut body: Incoming, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return Err(BodyError::Malformed) };
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                discard(body).await;
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// Reads and drops what is left of a refused body (up to a bound), so the client,
/// still sending, gets the 413 instead of a broken connection.
async fn discard(mut body: Incoming) {
    const MAX_DISCARD: usize = 64 * 1024 * 1024;
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > MAX_DISCARD {
                break;
            }
        }
    }
}

fn to_hyper(resp: Response) -> hyper::Response<Full<Bytes>> {
    let mut builder = hyper::Response::builder().status(resp.status);
    for (k, v) in &resp.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(Full::new(Bytes::from(resp.body))).unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}
