//! One request's exchange: hyper's request turned into the core's (its body read
//! within its bounds), the engine run on a lane or a blocking thread, what the core
//! asks besides the answer done (a playground file, the metrics, the test clock),
//! the request journaled, logged and counted, and the core's response turned into
//! hyper's. It decides nothing: every rule is the core's.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use engage_core::{BodyError, BodyPlan, Method, Request, Response, Then};
use http_body_util::Full;
use hyper::body::Incoming;

use crate::body::{discard, read_bounded};
use crate::ctx;
use crate::engine::SharedEngine;
use crate::lanes::Lanes;
use crate::metrics::METRICS;
use crate::startup::DATABASE;

/// Answers one request, then logs it (one line: method, route, status, latency,
/// request id; never the raw path, a key or a body) and counts it.
pub(crate) async fn handle(
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
    // A delay a test injected (the test kit's faults): the answer waits, the server does not.
    if let Some(ms) = response.aside.as_ref().map(|a| a.delay_ms).filter(|ms| *ms > 0) {
        tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
    }
    let took = started.elapsed();
    let id = response.header_value("X-Request-Id").unwrap_or("-");
    engine.journal(engage_core::testing::Answered {
        at: arrived,
        method,
        path: &path,
        aside: response.aside.as_deref(),
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
            Ok(Err(e)) => return early(engine.refuse_body(parts.uri.path(), e)),
            Err(_) => {
                let e = BodyError::TimedOut { secs: body_timeout.as_secs() };
                return early(engine.refuse_body(parts.uri.path(), e));
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

fn to_hyper(resp: Response) -> hyper::Response<Full<Bytes>> {
    let mut builder = hyper::Response::builder().status(resp.status);
    for (k, v) in &resp.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(Full::new(Bytes::from(resp.body))).unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}
