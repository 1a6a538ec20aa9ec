//! The server's metrics, in Prometheus' text format at `GET /metrics`: requests by
//! route and status, latency, the queue's backlog, applied batches and jobs, store
//! commit time, rate-limit rejections and the profile cache. Counting is
//! observation, not a rule of the API: it stays in the host.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// A request's labels: its route (the pattern, never the raw path, which may carry
/// identifiers), method and status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: String,
}

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<RouteLabel, Histogram>,
    pub rate_limited: Family<RouteLabel, Counter>,
    pub queue_pending: Gauge,
    pub queue_oldest_age: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub applied_batches: Counter,
    pub applied_jobs: Counter,
    pub set_aside_jobs: Counter,
    /// Seconds the background applier held off for acknowledgements (`Engine::defers_applying`).
    pub held_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    pub commit_seconds: Histogram,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub connections: Gauge,
    pub refused_connections: Counter,
}

fn latency_histogram() -> Histogram {
    // 100 µs to ~13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("engage");
    let m = Metrics {
        requests: Family::default(),
        latency: Family::new_with_constructor(latency_histogram),
        rate_limited: Family::default(),
        queue_pending: Gauge::default(),
        queue_oldest_age: Gauge::default(),
        applied_batches: Counter::default(),
        applied_jobs: Counter::default(),
        set_aside_jobs: Counter::default(),
        held_seconds: Counter::default(),
        commit_seconds: latency_histogram(),
        cache_hits: Counter::default(),
        cache_misses: Counter::default(),
        connections: Gauge::default(),
        refused_connections: Counter::default(),
        registry: Registry::default(),
    };
    registry.register("http_requests", "Requests answered, by route, method and status", m.requests.clone());
    registry.register("http_request_duration_seconds", "Time to answer a request, by route", m.latency.clone());
    registry.register("rate_limited", "Requests refused by a rate limit (429), by route", m.rate_limited.clone());
    registry.register("queue_pending_jobs", "Queued /users/track jobs not yet applied", m.queue_pending.clone());
    registry.register(
        "queue_oldest_job_age_seconds",
        "How long the oldest queued job has waited",
        m.queue_oldest_age.clone(),
    );
    registry.register("queue_applied_batches", "Batches of queued jobs applied", m.applied_batches.clone());
    registry.register("queue_applied_jobs", "Queued jobs applied", m.applied_jobs.clone());
    registry.register("queue_set_aside_jobs", "Queued jobs set aside", m.set_aside_jobs.clone());
    registry.register(
        "queue_applier_held_seconds",
        "Time the background applier held off while acknowledgements saturated the server",
        m.held_seconds.clone(),
    );
    registry.register(
        "store_commit_duration_seconds",
        "Time to commit a change set to SQLite",
        m.commit_seconds.clone(),
    );
    registry.register("profile_cache_hits", "Profile and identifier reads answered by the cache", m.cache_hits.clone());
    registry.register(
        "profile_cache_misses",
        "Profile and identifier reads that went to SQLite",
        m.cache_misses.clone(),
    );
    registry.register("open_connections", "Client connections open", m.connections.clone());
    registry.register("refused_connections", "Connections answered 503 beyond the cap", m.refused_connections.clone());
    Metrics { registry, ..m }
});

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, route: &str, method: &str, status: u16, took: Duration) {
        let labels = RequestLabels { route: route.to_string(), method: method.to_string(), status };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&RouteLabel { route: route.to_string() }).observe(took.as_secs_f64());
        if status == 429 {
            self.rate_limited.get_or_create(&RouteLabel { route: route.to_string() }).inc();
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Counts an open connection while it lives.
pub struct OpenConnection(());

impl Default for OpenConnection {
    fn default() -> Self {
        METRICS.connections.inc();
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        METRICS.connections.dec();
    }
}
