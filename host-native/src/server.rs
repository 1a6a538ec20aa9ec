//! The HTTP server: hyper on tokio. The accept loop and its bounds (connections,
//! timeouts, a backoff when descriptors run out), the background applier
//! ([`crate::applier`]) and the warehouse syncs that are due started beside it, and
//! a clean stop on a signal. Each request is one [`crate::exchange`]; `engage serve`'s
//! options become a server in [`crate::serve`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::conn::{AcceptBackoff, Guarded, Limits, Phase};
use crate::ctx;
use crate::lanes::Lanes;
use crate::metrics::METRICS;
use crate::store::NativeStore;

pub use crate::engine::SharedEngine;
pub use crate::startup::{server_runs_on, LogFormat, ServeArgs, APPLY_BATCH};

/// Connections the kernel queues for accepting: a burst (or a full descriptor
/// table, while accepts back off) waits here instead of clients retrying SYNs.
const ACCEPT_BACKLOG: u32 = 4096;

pub(crate) async fn listen(address: &str) -> std::io::Result<TcpListener> {
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

pub(crate) async fn stdin_closed() {
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
    // A SQLite store's requests run on lanes, two per core (see `crate::lanes`). The
    // PostgreSQL store blocks on a runtime of its own, which cannot be entered from a
    // lane's: its requests take a thread of the blocking pool each (and its applier
    // never holds off for them).
    let lanes = match matches!(engine.store(), NativeStore::Postgres(_)) {
        false => Some(Arc::new(Lanes::start(&engine, crate::lanes::per_machine())?)),
        true => {
            warm_blocking_pool().await;
            None
        }
    };
    let watched = lanes.clone();
    let saturated = move || watched.as_ref().is_some_and(|l| l.saturated());
    let applier = crate::applier::spawn_applier(engine.clone(), stopping.clone(), saturated);
    let syncs = crate::cdi::spawn_runner(engine.clone(), stopping.clone());
    let connections = tokio_util_tracker();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let refusal = crate::conn::raw_response(&engine.refuse_overloaded());
    let mut backoff = AcceptBackoff::default();
    tokio::pin!(shutdown);
    // Told to every connection when the server stops.
    let (stopped, _) = tokio::sync::watch::channel(false);
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
                let mut stop = stopped.subscribe();
                tokio::spawn(async move {
                    let _guard = (guard, permit, crate::metrics::OpenConnection::default());
                    let phase = Arc::new(Phase::default());
                    let max_body = engine.config().max_body_bytes;
                    let io = TokioIo::new(Guarded::new(stream, limits, max_body, phase.clone(), || ctx().seed));
                    let service = service_fn(move |req| {
                        let (engine, lanes, phase) = (engine.clone(), lanes.clone(), phase.clone());
                        async move {
                            let response = crate::exchange::handle(engine, lanes, req, limits.body, peer.ip()).await;
                            phase.finish();
                            response
                        }
                    });
                    let conn = http1::Builder::new().serve_connection(io, service);
                    tokio::pin!(conn);
                    // At a stop, a connection waiting for its next request closes at
                    // once; one in a request finishes it first (then closes).
                    let ended = tokio::select! {
                        ended = conn.as_mut() => ended,
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            conn.as_mut().await
                        }
                    };
                    if let Err(e) = ended {
                        tracing::debug!("connection from {peer} ended: {e}");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    tracing::info!("shutting down: finishing in-flight requests");
    drop(listener);
    let _ = stopped.send(true);
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

pub(crate) async fn shutdown_signal() {
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
pub(crate) const BLOCKING_THREADS: usize = 32;
