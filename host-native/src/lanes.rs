//! Request lanes: two threads per core run the core's request futures, side by
//! side, each on a single-threaded runtime of its own.
//!
//! Why not the blocking pool (one thread per request in flight, as before): a request
//! spends most of its time waiting for the queue's fsync, and one fsync answers every
//! request waiting at that moment. The queue's thread then woke dozens of blocked
//! request threads at once; the kernel queued them on its own core while the other
//! core ran the applier's idle-class threads, and a core that runs only idle-class
//! work never goes idle, so it never pulled waiting threads over (`perf sched`: 24.9 s
//! of run-queue waits in 3 s on one core while the other ran idle-class work for 1.9 s
//! of them). A lane awaits the fsync instead of blocking on it, so a whole group's
//! answers wake a few threads, and a lane that has work takes its core from the
//! applier at once: the applier gets mostly the time requests leave idle, as intended
//! (`crate::priority`).
//!
//! Two per core, not one: a request that must apply its users' queued jobs first
//! (catching up, `Engine::track`) runs that on its lane and holds the lane's other
//! requests meanwhile. Measured with the suite on 2 cores: with one lane per core the
//! closed track load acknowledged 9-12% more than with two, but at 10M profiles under
//! a skewed (Zipf) load, where catching up is frequent, p99 rose to 513 ms (two per
//! core: 81 ms; the blocking pool: 125 ms).
//!
//! The core's futures are not `Send` (its store trait has no such bound, for the
//! edge), so each lane's runtime runs them as local tasks. A lane blocks while a
//! SQLite read runs, as a request thread did; the SQLite store's waits (the queue's
//! fsync, a commit, a turn at the gate, a back-off) are awaited.

use engage_core::{Request, Response};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use crate::engine::SharedEngine;
use crate::Counted;

/// Lanes for this machine: two per core.
pub fn per_machine() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The request lanes of a server.
pub struct Lanes {
    lanes: Vec<Lane>,
    /// Nanoseconds the lanes spent running requests that only acknowledge (in their
    /// futures' polls; see [`SATURATED_SHARE`]).
    busy_ns: Arc<AtomicU64>,
    cores: f64,
    /// The last sample of `busy_ns`, when it was taken, and what it said.
    sampled: std::sync::Mutex<(std::time::Instant, u64, bool)>,
}

/// The lanes count as saturated while, over the last [`SAMPLE`], they spent three
/// quarters of the time that the cores they can run on have running requests:
/// acknowledgements then want all of the CPU. Time in a poll is counted, not
/// requests in flight: a request waiting for the queue's fsync takes no CPU (counted
/// in flight, a slow disk would have looked like a busy server). Only requests that do
/// not catch up with the queue count (`Engine::catches_up`: acknowledgements): holding
/// the applier off is for them, while a read during a backlog applies its users' queued
/// jobs itself, and holding the applier off gives it only more of them to apply (a
/// read catching up on a 15-s backlog of full batches took 1.5 s of a lane; when reads
/// counted, one such read saturated a lane in the unit test below). Measured on 2 cores
/// and 4 lanes, 1M profiles (2026-12-04): a closed load of full batches from 32
/// connections kept the lanes polling 2.1-3.6 cores' worth a sample (a lane
/// preempted mid-poll counts on); 200 full batches a second, 0.16 (at most 0.21).
const SATURATED_SHARE: f64 = 0.75;

/// How often the lanes' busy time is sampled for [`Lanes::saturated`].
const SAMPLE: std::time::Duration = std::time::Duration::from_millis(100);

struct Lane {
    requests: mpsc::UnboundedSender<(Request, oneshot::Sender<Response>)>,
    /// Requests handed to this lane and not yet answered.
    in_flight: AtomicUsize,
}

impl Lanes {
    /// Starts `count` lanes (at least one) over `engine`.
    pub fn start(engine: &SharedEngine, count: usize) -> Result<Lanes, String> {
        let busy_ns = Arc::new(AtomicU64::new(0));
        let lanes: Vec<Lane> =
            (0..count.max(1)).map(|i| Lane::start(engine.clone(), i, busy_ns.clone())).collect::<Result<_, _>>()?;
        // The cores the lanes can run on at once.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(lanes.len()) as f64;
        let sampled = std::sync::Mutex::new((std::time::Instant::now(), 0, false));
        Ok(Lanes { lanes, busy_ns, cores, sampled })
    }

    /// Whether requests kept the lanes busy over the last sample
    /// ([`SATURATED_SHARE`]): the background applier then holds off
    /// (`Engine::defers_applying`).
    pub fn saturated(&self) -> bool {
        let mut sampled = self.sampled.lock().unwrap_or_else(|e| e.into_inner());
        let (at, busy, saturated) = *sampled;
        let elapsed = at.elapsed();
        if elapsed < SAMPLE {
            return saturated;
        }
        let now = self.busy_ns.load(Ordering::Relaxed);
        let share = now.saturating_sub(busy) as f64 / elapsed.as_nanos() as f64;
        *sampled = (std::time::Instant::now(), now, share >= SATURATED_SHARE * self.cores);
        sampled.2
    }

    /// Answers `request` on the lane with the fewest requests in flight. `None` if
    /// that lane stopped (it panicked): the caller answers busy.
    pub async fn handle(&self, request: Request) -> Option<Response> {
        let lane = self.lanes.iter().min_by_key(|l| l.in_flight.load(Ordering::SeqCst))?;
        let (_counted, _) = Counted::new(&lane.in_flight);
        let (reply, answer) = oneshot::channel();
        lane.requests.send((request, reply)).ok()?;
        answer.await.ok()
    }
}

impl Lane {
    fn start(engine: SharedEngine, index: usize, busy_ns: Arc<AtomicU64>) -> Result<Lane, String> {
        let (requests, mut arrived) = mpsc::unbounded_channel::<(Request, oneshot::Sender<Response>)>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name(format!("engage-lane-{index}"))
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.spawn_local(async move {
                    while let Some((request, reply)) = arrived.recv().await {
                        let acknowledges = !engine.catches_up(&request);
                        let engine = engine.clone();
                        let mut answered = Box::pin(async move {
                            let response = engine.handle(request, crate::ctx()).await;
                            let _ = reply.send(response);
                        });
                        // Each poll's time of an acknowledgement counts as the lanes'
                        // busy time.
                        let busy = acknowledges.then(|| busy_ns.clone());
                        // A panic ends this task only: its reply is dropped, and the
                        // caller answers busy, as for a request thread that panicked.
                        tokio::task::spawn_local(std::future::poll_fn(move |cx| {
                            let started = std::time::Instant::now();
                            let polled = answered.as_mut().poll(cx);
                            if let Some(busy) = &busy {
                                busy.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                            }
                            polled
                        }));
                    }
                });
                // Until the server lets go of the lanes and every request taken has
                // ended: one whose client has gone still runs to its end, whole.
                runtime.block_on(local);
            })
            .map_err(|e| e.to_string())?;
        Ok(Lane { requests, in_flight: AtomicUsize::new(0) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use engage_core::provision::{create_key, Permission, WorkspaceName};
    use engage_core::{Config, Engine, Method, Request};
    use serde_json::json;

    use super::Lanes;
    use crate::ctx;
    use crate::store::NativeStore;

    /// One lane over a new store, and a key with every permission.
    async fn one_lane() -> (tempfile::TempDir, Arc<Lanes>, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = NativeStore::open(&dir.path().join("e.db")).unwrap();
        let engine = Arc::new(Engine::new(store, Config { rate_limits: false, ..Config::default() }));
        let ws = WorkspaceName::parse("w").unwrap();
        let key = create_key(engine.store(), &ws, Permission::ALL.to_vec(), ctx()).await.unwrap();
        (dir, Arc::new(Lanes::start(&engine, 1).unwrap()), key)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_lane_answers_requests_in_flight_together_and_reads_see_every_write() {
        let (_dir, lanes, key) = one_lane().await;
        let post = |path: &str, body: serde_json::Value| {
            Request::new(Method::Post, path).header("Authorization", &format!("Bearer {key}")).body(body.to_string())
        };
        // Forty requests at once on one lane: each waits for the queue's fsync, and
        // the lane takes the others meanwhile.
        let tracked: Vec<_> = (0..40)
            .map(|n| {
                let (lanes, request) = (
                    lanes.clone(),
                    post(
                        "/users/track",
                        json!({"attributes": [
                            {"external_id": format!("u{n}"), "visits": n}
                        ]}),
                    ),
                );
                tokio::spawn(async move { lanes.handle(request).await.map(|r| r.status) })
            })
            .collect();
        for t in tracked {
            assert_eq!(t.await.unwrap(), Some(201));
        }
        let ids: Vec<String> = (0..40).map(|n| format!("u{n}")).collect();
        let exported = lanes.handle(post("/users/export/ids", json!({"external_ids": ids}))).await.unwrap();
        assert_eq!(exported.status, 201, "{}", exported.json_body());
        let mut visits: Vec<i64> = exported.json_body()["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["custom_attributes"]["visits"].as_i64().unwrap())
            .collect();
        visits.sort();
        assert_eq!(visits, (0..40).collect::<Vec<_>>());
        // Every request answered is counted off its lane.
        assert_eq!(lanes.lanes[0].in_flight.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// `POST path` with `body` from 16 clients at once for a second, each answered 201:
    /// how many were answered, and whether the lanes counted as saturated meanwhile.
    async fn sixteen_clients_for_a_second(lanes: &Arc<Lanes>, key: &str, path: &str, body: &str) -> (usize, bool) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let clients: Vec<_> = (0..16)
            .map(|_| {
                let (lanes, key, path, body) = (lanes.clone(), key.to_string(), path.to_string(), body.to_string());
                tokio::spawn(async move {
                    let mut answered = 0;
                    while std::time::Instant::now() < until {
                        let request = Request::new(Method::Post, &path)
                            .header("Authorization", &format!("Bearer {key}"))
                            .body(body.clone());
                        assert_eq!(lanes.handle(request).await.map(|r| r.status), Some(201));
                        answered += 1;
                    }
                    answered
                })
            })
            .collect();
        let mut seen = false;
        while std::time::Instant::now() < until {
            tokio::time::sleep(super::SAMPLE).await;
            seen |= lanes.saturated();
        }
        let mut answered = 0;
        for c in clients {
            answered += c.await.unwrap();
        }
        (answered, seen)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lanes_kept_busy_by_requests_count_as_saturated_and_idle_ones_do_not() {
        let (_dir, lanes, key) = one_lane().await;
        tokio::time::sleep(super::SAMPLE).await;
        assert!(!lanes.saturated(), "no requests");
        // A batch of 75 users' attributes, from 16 clients at once, for a second.
        let attributes: Vec<_> = (0..75).map(|n| json!({"external_id": format!("u{n}"), "n": n})).collect();
        let body = json!({ "attributes": attributes }).to_string();
        let (_, seen) = sixteen_clients_for_a_second(&lanes, &key, "/users/track", &body).await;
        assert!(seen, "a lane kept busy by requests counts as saturated");
        tokio::time::sleep(super::SAMPLE * 2).await;
        assert!(!lanes.saturated(), "once they stop, it does not");
        // Reads of those users from 16 clients at once, for a second: they keep the lane
        // as busy, but the applier's holding off is for acknowledgements only.
        let ids: Vec<_> = (0..50).map(|n| format!("u{n}")).collect();
        let body = json!({ "external_ids": ids }).to_string();
        let read = Request::new(Method::Post, "/users/export/ids").header("Authorization", &format!("Bearer {key}"));
        // The first read applies the whole backlog (this server has no applier).
        assert_eq!(lanes.handle(read.body(body.clone())).await.map(|r| r.status), Some(201));
        tokio::time::sleep(super::SAMPLE * 2).await;
        assert!(!lanes.saturated(), "nor did that read");
        let (reads, seen) = sixteen_clients_for_a_second(&lanes, &key, "/users/export/ids", &body).await;
        assert!(reads > 160, "the readers kept the lane busy ({reads} reads)");
        assert!(!seen, "reads do not count as saturating the server");
    }
}
