//! Load generators over HTTP/1.1 keep-alive connections: an open loop (a fixed
//! offered rate, latency measured from each request's scheduled send time, so a
//! stalled server cannot hide its queueing) and a closed loop (N connections, each
//! sending its next request when the previous one is answered).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

/// Where to send, with which API key.
pub struct Target {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub base: String,
    pub key: String,
}

/// One request to send.
#[derive(Clone)]
pub struct Req {
    pub method: Method,
    /// Path and query.
    pub path: String,
    pub body: Bytes,
}

impl Req {
    pub fn post(path: &str, body: Vec<u8>) -> Req {
        Req { method: Method::POST, path: path.to_string(), body: Bytes::from(body) }
    }

    pub fn get(path: String) -> Req {
        Req { method: Method::GET, path, body: Bytes::new() }
    }
}

/// What a load achieved.
pub struct Outcome {
    pub sent: usize,
    /// Answered with the expected status.
    pub ok: usize,
    /// Achieved rate: answered as expected per second of the load.
    pub rate: f64,
    /// Latencies of the good answers, microseconds, sorted.
    pub latencies: Vec<u64>,
    /// A sample answer that was not as expected, for the report.
    pub first_failure: Option<String>,
}

impl Outcome {
    /// Percentile `p` (0..=1) of the latencies, ms.
    pub fn pct(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i] as f64 / 1000.0
    }
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client(connections: usize) -> HttpClient {
    Client::builder(TokioExecutor::new()).pool_max_idle_per_host(connections).build_http()
}

/// Sends one request; Ok when its status is `expect`, else a description.
pub async fn send(client: &HttpClient, target: &Target, req: &Req, expect: u16) -> Result<(), String> {
    let r = hyper::Request::builder()
        .method(req.method.clone())
        .uri(format!("{}{}", target.base, req.path))
        .header("Authorization", format!("Bearer {}", target.key))
        .header("Content-Type", "application/json")
        .body(Full::new(req.body.clone()))
        .expect("request");
    match client.request(r).await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            if status == expect {
                Ok(())
            } else {
                Err(format!("{status} {}", String::from_utf8_lossy(&body[..body.len().min(300)])))
            }
        }
        Err(e) => Err(format!("transport: {e}")),
    }
}

/// The load generator's runtime: two workers, the machine's cores (the server shares them).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// Offers `rate` requests per second for `seconds`, over at most `connections`
/// connections at once, cycling through `requests`. A server that falls behind
/// holds every connection, and the offer falls behind with it: past `seconds` + 10 s
/// the rest is not sent (counted as failed), so an overloaded phase ends on time.
pub fn open_loop(
    rt: &tokio::runtime::Runtime,
    target: &Target,
    requests: Arc<Vec<Req>>,
    expect: u16,
    rate: u64,
    seconds: u64,
    connections: usize,
) -> Outcome {
    let total = (rate * seconds) as usize;
    let target = Arc::new(Target { base: target.base.clone(), key: target.key.clone() });
    let client = client(connections);
    let limiter = Arc::new(tokio::sync::Semaphore::new(connections));
    let started = Instant::now();
    let results = rt.block_on(async {
        let mut handles = Vec::with_capacity(total);
        let give_up = started + Duration::from_secs(seconds + 10);
        for i in 0..total {
            let scheduled = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(scheduled.into()).await;
            let Ok(Ok(permit)) = tokio::time::timeout_at(give_up.into(), limiter.clone().acquire_owned()).await else {
                break;
            };
            let (client, target, requests) = (client.clone(), target.clone(), requests.clone());
            handles.push(tokio::spawn(async move {
                let r = send(&client, &target, &requests[i % requests.len()], expect).await;
                drop(permit);
                (r, scheduled.elapsed().as_micros() as u64, Instant::now())
            }));
        }
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.expect("request task"));
        }
        out
    });
    let last = results.iter().map(|r| r.2).max().unwrap_or(started);
    let unsent = total - results.len();
    let mut out = outcome(total, results.into_iter().map(|(r, l, _)| (r, l)), last.duration_since(started));
    if unsent > 0 {
        let sent = format!("{unsent} not sent: the server fell behind the offer");
        out.first_failure = Some(out.first_failure.map_or(sent.clone(), |f| format!("{sent}; {f}")));
    }
    out
}

/// `connections` connections, each sending its next request (from `next`, given a
/// running number) as soon as the previous one is answered, for `seconds`.
pub fn closed_loop(
    rt: &tokio::runtime::Runtime,
    target: &Target,
    next: Arc<dyn Fn(u64) -> Req + Send + Sync>,
    expect: u16,
    connections: usize,
    seconds: u64,
) -> Outcome {
    let client = client(connections);
    let target = Arc::new(Target { base: target.base.clone(), key: target.key.clone() });
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let end = started + Duration::from_secs(seconds);
    let results = rt.block_on(async {
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                let (client, target, next, counter) = (client.clone(), target.clone(), next.clone(), counter.clone());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    while Instant::now() < end {
                        let req = next(counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
                        let t = Instant::now();
                        let r = send(&client, &target, &req, expect).await;
                        out.push((r, t.elapsed().as_micros() as u64));
                    }
                    out
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.extend(t.await.expect("connection task"));
        }
        out
    });
    let sent = results.len();
    outcome(sent, results.into_iter(), started.elapsed())
}

fn outcome(sent: usize, results: impl Iterator<Item = (Result<(), String>, u64)>, window: Duration) -> Outcome {
    let mut latencies = Vec::with_capacity(sent);
    let mut first_failure = None;
    for (r, l) in results {
        match r {
            Ok(()) => latencies.push(l),
            Err(e) => {
                first_failure.get_or_insert(e);
            }
        }
    }
    latencies.sort_unstable();
    let ok = latencies.len();
    Outcome { sent, ok, rate: ok as f64 / window.as_secs_f64().max(1e-9), latencies, first_failure }
}
