//! The fetch handler: translation between `worker` and the core, the isolate's
//! engine, and the queue applier. No API rule lives here.
//!
//! Workers have no background threads. A request the core says does not catch up
//! with the queue (`Engine::catches_up`: it only enqueues, touching no document)
//! runs concurrently; when the core answers `Then::ApplyQueue`, the isolate applies
//! the queue after the response in `ctx.wait_until`. The isolate has one thread,
//! and acknowledging goes first, as the native host's idle-class applier lets it:
//! beside requests the drainer applies in short turns with rests (see
//! [`REST_FACTOR`]), and while they keep the thread mostly busy it waits (see
//! [`BUSY_SHARE`], up to [`DEFER_LIMIT_MS`]).
//!
//! Every other request runs in the isolate's *lane*, one at a time, after applying
//! what this isolate queued. A request the core answered is never rerun: its writes
//! may have committed, and the core already retried storage conflicts inside its
//! unit of work. Optimistic versions keep D1 correct under any
//! concurrency, but on a hot document (50 parallel increments of one attribute, or
//! every reader catching up with the same queued jobs) each round of retries lets
//! only one request win, and D1 runs a database's queries one after the other
//! anyway: serializing within the isolate is far faster than retrying in
//! lockstep. Requests in other isolates still race, and the guards of
//! [`crate::d1`] settle that.
//!
//! Waiting is done with timers only: workerd cancels a request that awaits a
//! promise only another request can resolve ("the Worker's code had hung"), so
//! the lane is polled, and a holder silent for too long (its request cancelled by
//! the runtime) is presumed gone.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use engage_core::store::StoreError;
use engage_core::{applying, ApiError, BodyPlan, Config, Ctx, Engine, Method, Request, Response, Then, Timestamp};
use worker::{event, Context, Date, Delay, Env, Headers};

use crate::conformance;
use crate::d1::{error_text, D1Store};
use crate::keycache::KeyCache;

/// Queued jobs applied per commit, as natively. A batch reads what its jobs name in
/// two queries (`D1Store::get_many`) and commits in one `batch()` of two statements
/// per document written (~6,000 for 16 full jobs over 10,000 existing users). Under
/// `wrangler dev` (Worker and D1 on one thread) 16 rather than 4 drained a backlog
/// ~10% faster, and under 200 offered full batches/s it applied 28 jobs/s instead of
/// 12 while acknowledging 37 requests/s instead of 46: a bigger batch keeps the
/// thread longer at a time (one held the lane ~0.4 s), more work gets done in all,
/// and more of it goes to the backlog.
const DEFAULT_APPLY_BATCH: usize = 16;
/// A drain pass starts no new batch after this long, letting waiting requests in.
const DRAIN_BUDGET_MS: u64 = 1_000;
/// Requests in flight at which the isolate counts as busy: they queue behind one
/// another, so every turn of the background drainer delays them. (A lone request,
/// an operator's poll say, does not slow the drainer down.)
const BUSY_IN_FLIGHT: u32 = 2;
/// How long the isolate counts as busy after it last was: requests come and go
/// between turns, and one full batch started in a gap holds up all that follow. The
/// core's memory of a saturated server, for the native applier's hold too.
const BUSY_MEMORY_MS: u64 = applying::SATURATED_MEMORY_MS.unsigned_abs();
/// Jobs per background turn while the isolate is busy: one full job's unit of work
/// holds the isolate's thread for milliseconds, a full batch's for ~0.4 s under
/// `wrangler dev`, and every request arriving meanwhile waits for it.
const BUSY_APPLY_BATCH: usize = 1;
/// While the isolate is busy, the background drainer rests after each turn as many
/// times the turn's length as requests are in flight, up to this many: the more
/// requests queue, the smaller applying's share of the isolate's time, down to a
/// tenth. Under `wrangler dev` (one thread for the Worker and D1) applying
/// alongside 200 offered full batches/s halved what was acknowledged (56/s; 200/s
/// with no applier at all), so the load fell minutes behind; the backlog is applied
/// at full speed once requests stop.
const REST_FACTOR: u64 = 9;
/// The longest rest between two background turns.
const MAX_REST_MS: u64 = 2_000;
/// Requests in flight this share of the time (over about a second) keep the
/// background drainer waiting: the thread has no room for a turn. Under `wrangler
/// dev`, at 0.5 the drainer still took turns beside 200 offered full batches/s
/// (whose requests are in the isolate a few ms each) and acknowledgement p99 rose to
/// 205-1,194 ms in three of five runs; at 0.3 it waits there, and beside 40/s it
/// still takes turns, which keep the backlog small (287 jobs left at the end
/// against 676 when it waited whenever two requests overlapped).
const BUSY_SHARE: f64 = 0.3;
/// The window over which [`BUSY_SHARE`] is measured, ms.
const SHARE_WINDOW_MS: u64 = 1_000;
/// How long the background drainer leaves queued jobs waiting while requests keep
/// the isolate mostly busy ([`BUSY_SHARE`]), before it applies in turns with rests
/// anyway. A turn holds the isolate's one thread (reading, applying and committing
/// one full job took 30-230 ms under `wrangler dev` beside 200 offered full
/// batches/s), and every request arriving meanwhile waits: applying in turns during
/// such a load held acknowledgement p99 at 100-185 ms a second, not applying at
/// 15-75 ms. A burst up to this long is acknowledged at full speed and applied
/// after it; reads never see stale data meanwhile (they catch up with the queue
/// first). The core's limit, for the native applier's hold too.
const DEFER_LIMIT_MS: u64 = applying::DEFER_LIMIT_MS.unsigned_abs();
/// How often a deferring drainer looks at the isolate again.
const DEFER_POLL_MS: u64 = 250;
/// A lane holder silent this long is presumed cancelled by the runtime.
const LANE_STALE_MS: u64 = 10_000;
/// Longest pause between two looks at a busy lane.
const LANE_POLL_MAX_MS: u64 = 8;
/// A background drainer silent this long is presumed cancelled (`wait_until` lasts 30 s).
const DRAINER_STALE_MS: u64 = 30_000;
/// What one isolate keeps between requests: the engine (so the rate-limit counters
/// live as long as the isolate, like a native process's), the lane and the drain
/// state. Bindings are the same objects for every request of an isolate.
struct Isolate {
    engine: Engine<D1Store>,
    /// Requests this isolate is handling (see [`BUSY_IN_FLIGHT`]).
    in_flight: Cell<u32>,
    /// The share of time requests were in flight (see [`BUSY_SHARE`]).
    share: Cell<Share>,
    /// When a request last arrived to find the isolate busy (ms).
    busy_at: Cell<u64>,
    /// Jobs were queued here since the last drain started.
    drain_pending: Cell<bool>,
    /// The lane holder's last sign of life (ms), if the lane is held.
    lane: Cell<Option<u64>>,
    /// When the background drainer (in `wait_until`) last started a pass, if one is scheduled.
    drainer: Cell<Option<u64>>,
    /// Since when queued jobs have waited for a drain to find the queue empty (ms),
    /// while there are such jobs (see [`DEFER_LIMIT_MS`]): once that is longer than
    /// the limit, turns go on until it does.
    waiting_since: Cell<Option<u64>>,
}

thread_local! {
    static ISOLATE: RefCell<Option<Rc<Isolate>>> = const { RefCell::new(None) };
}

fn isolate(env: &Env) -> worker::Result<Rc<Isolate>> {
    if let Some(i) = ISOLATE.with(|c| c.borrow().clone()) {
        return Ok(i);
    }
    // Panics are bugs (input never panics the core): say where in the Worker's log.
    std::panic::set_hook(Box::new(|info| worker::console_error!("panic: {info}")));
    let db = env.d1("DB")?;
    let keys = env.kv("KEY_CACHE").ok().map(KeyCache::new);
    let admin_token = env.secret("ENGAGE_ADMIN_TOKEN").ok().map(|s| s.to_string()).filter(|t| !t.is_empty());
    // The core enables no operator route with a token it refuses: say why in the log.
    if let Some(Err(why)) = admin_token.as_deref().map(engage_core::testing::check_admin_token) {
        worker::console_error!("ENGAGE_ADMIN_TOKEN is not used: {why}");
    }
    let rate_limits = env.var("ENGAGE_RATE_LIMITS").map_or(true, |v| v.to_string() != "off");
    let apply_batch = env
        .var("ENGAGE_APPLY_BATCH")
        .ok()
        .and_then(|v| v.to_string().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_APPLY_BATCH);
    // Links point at ENGAGE_PUBLIC_URL, else at the origin each request arrived at.
    let public_url = env.var("ENGAGE_PUBLIC_URL").ok().map(|v| v.to_string()).filter(|v| !v.is_empty());
    let link_ttl_secs = env
        .var("ENGAGE_LINK_TTL_SECS")
        .ok()
        .and_then(|v| v.to_string().parse().ok())
        .unwrap_or(engage_core::DEFAULT_LINK_TTL_SECS);
    // The test kit's faults, for a Worker that tests run against.
    let faults = env.var("ENGAGE_FAULTS").is_ok_and(|v| matches!(v.to_string().as_str(), "1" | "true" | "on" | "yes"));
    let config =
        Config { rate_limits, admin_token, apply_batch, public_url, link_ttl_secs, faults, ..Config::default() };
    let i = Rc::new(Isolate {
        engine: Engine::new(D1Store::new(db, keys), config),
        in_flight: Cell::new(0),
        share: Cell::new(Share::default()),
        busy_at: Cell::new(0),
        drain_pending: Cell::new(false),
        lane: Cell::new(None),
        drainer: Cell::new(None),
        waiting_since: Cell::new(None),
    });
    ISOLATE.with(|c| *c.borrow_mut() = Some(i.clone()));
    Ok(i)
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}

fn ctx() -> Ctx {
    let mut seed = [0u8; 16];
    let _ = getrandom::fill(&mut seed);
    Ctx::new(Timestamp(now_ms() as i64), seed)
}

#[event(fetch)]
async fn fetch(mut req: worker::Request, env: Env, wctx: Context) -> worker::Result<worker::Response> {
    let isolate = match isolate(&env) {
        Ok(i) => i,
        Err(e) => {
            worker::console_error!("cannot set up the engine: {}", error_text(&e));
            return to_worker(ApiError::Store(StoreError("bindings".into())).into_response());
        }
    };
    let _in_flight = InFlight::enter(&isolate);
    let request = match translate(&mut req, &isolate.engine).await {
        Ok(Ok(r)) => r,
        Ok(Err(refused)) => return to_worker(refused),
        Err(e) => {
            // As on the native host, a body that cannot be read counts as too large.
            worker::console_warn!("cannot read the request body: {}", error_text(&e));
            let path = req.path();
            return to_worker(isolate.engine.refuse_too_large(&path));
        }
    };
    let (method, path, arrived) = (request.method, request.path.clone(), ctx().now);
    let response = if isolate.engine.catches_up(&request) {
        let lane = Lane::enter(&isolate).await;
        drain(&lane, Yield::Never).await;
        isolate.engine.handle(request, ctx()).await
    } else {
        // A track request the core cannot answer yet comes back (nothing done): to
        // run again after a pause while another request loads what it needs, or in
        // the lane after draining when the queue must be applied first, as catching
        // up does.
        let again = isolate.engine.may_ask_to_catch_up(&request).then(|| request.clone());
        let response = isolate.engine.handle(request, ctx()).await;
        match again {
            Some(request) => {
                let response = run_again_soon(&isolate.engine, &request, None, response).await;
                if matches!(response.then, Then::CatchUpFirst) {
                    let lane = Lane::enter(&isolate).await;
                    drain(&lane, Yield::Never).await;
                    let again = isolate.engine.handle_caught_up(request.clone(), ctx(), &response).await;
                    run_again_soon(&isolate.engine, &request, Some(&response), again).await
                } else {
                    response
                }
            }
            None => response,
        }
    };
    if let Some(why) = &response.internal {
        worker::console_error!("{} {why}", response.status);
    }
    // A delay a test injected (the test kit's faults).
    if let Some(ms) = response.aside.as_ref().map(|a| a.delay_ms).filter(|ms| *ms > 0) {
        Delay::from(Duration::from_millis(u64::from(ms))).await;
    }
    // The request journal is this isolate's (bodies are not kept at the edge).
    isolate.engine.journal(engage_core::testing::Answered {
        at: arrived,
        method,
        path: &path,
        aside: response.aside.as_deref(),
        status: response.status,
        micros: (ctx().now.0 - arrived.0).max(0) as u64 * 1000,
        request_id: response.header_value("X-Request-Id").unwrap_or("-"),
        request_body: &[],
        response_body: &response.body,
    });
    let response = match response.then {
        Then::ApplyQueue => {
            schedule_drain(&isolate, &wctx);
            response
        }
        Then::RunConformance => match conformance::run(&env).await {
            Some(report) => report,
            None => response,
        },
        // Workers serve no playground files (the playground is its own static site).
        // The edge keeps no metrics (the platform's analytics count its requests).
        // No test clock at the edge: the core never asks to set one here.
        Then::Nothing
        | Then::ServeAsset(_)
        | Then::Metrics
        | Then::CatchUpFirst
        | Then::RunAgainSoon
        | Then::SetClock(_) => response,
    };
    to_worker(response)
}

/// Hands `request` to the core again (`caught_up`: as [`Engine::handle_caught_up`]
/// after that answer) while it answers [`Then::RunAgainSoon`], after pauses on a
/// timer (see the module docs), for up to [`LANE_STALE_MS`]; then `response` is the
/// last answer.
async fn run_again_soon(
    engine: &Engine<D1Store>,
    request: &Request,
    caught_up: Option<&Response>,
    first: Response,
) -> Response {
    let started = now_ms();
    let mut pause = 1;
    let mut response = first;
    while matches!(response.then, Then::RunAgainSoon) && now_ms().saturating_sub(started) < LANE_STALE_MS {
        Delay::from(Duration::from_millis(pause)).await;
        pause = (pause * 2).min(LANE_POLL_MAX_MS);
        response = match caught_up {
            Some(answer) => engine.handle_caught_up(request.clone(), ctx(), answer).await,
            None => engine.handle(request.clone(), ctx()).await,
        };
    }
    response
}

/// Marks queued work and, unless a background drainer is already scheduled in this
/// isolate, applies the queue after the response in `wait_until`.
fn schedule_drain(isolate: &Rc<Isolate>, wctx: &Context) {
    isolate.drain_pending.set(true);
    let now = now_ms();
    if isolate.waiting_since.get().is_none() {
        isolate.waiting_since.set(Some(now));
    }
    if isolate.drainer.get().is_some_and(|since| now.saturating_sub(since) < DRAINER_STALE_MS) {
        return;
    }
    isolate.drainer.set(Some(now));
    let isolate = isolate.clone();
    wctx.wait_until(async move {
        while isolate.drain_pending.get() {
            let rest = {
                let lane = Lane::enter(&isolate).await;
                isolate.drainer.set(Some(now_ms()));
                drain(&lane, Yield::ToRequests).await
            };
            // At least longer than a waiter's poll: requests waiting for the lane go first.
            Delay::from(Duration::from_millis(rest.max(2 * LANE_POLL_MAX_MS))).await;
        }
        isolate.drainer.set(None);
    });
}

impl Isolate {
    /// Busy now, or within the last [`BUSY_MEMORY_MS`].
    fn busy(&self) -> bool {
        self.in_flight.get() >= BUSY_IN_FLIGHT || now_ms().saturating_sub(self.busy_at.get()) < BUSY_MEMORY_MS
    }

    /// Busy at some moment since `since` (ms).
    fn busy_since(&self, since: u64) -> bool {
        self.in_flight.get() >= BUSY_IN_FLIGHT || self.busy_at.get() >= since
    }

    /// Counts the time since the last count as in flight or not, before
    /// [`Isolate::in_flight`] changes, and closes a window that is over.
    fn count_share(&self, now: u64) {
        let mut share = self.share.get();
        if self.in_flight.get() > 0 {
            share.in_flight_ms += now.saturating_sub(share.counted_at);
        }
        share.counted_at = now;
        let length = now.saturating_sub(share.window_start);
        if length >= SHARE_WINDOW_MS {
            share.last = share.in_flight_ms as f64 / length as f64;
            share.window_start = now;
            share.in_flight_ms = 0;
        }
        self.share.set(share);
    }

    /// Requests kept the thread busy over the last window (or this one so far).
    fn mostly_busy(&self, now: u64) -> bool {
        self.count_share(now);
        let share = self.share.get();
        let length = now.saturating_sub(share.window_start).max(1);
        share.last.max(share.in_flight_ms as f64 / length as f64) > BUSY_SHARE
    }

    /// Queued jobs have waited at least [`DEFER_LIMIT_MS`] for the background drainer.
    fn deferred_too_long(&self, now: u64) -> bool {
        self.waiting_since.get().is_some_and(|since| now.saturating_sub(since) >= DEFER_LIMIT_MS)
    }
}

/// The share of time requests were in flight in an isolate: the window under way
/// and the last one (ms, as [`now_ms`]).
#[derive(Clone, Copy, Default)]
struct Share {
    window_start: u64,
    in_flight_ms: u64,
    counted_at: u64,
    last: f64,
}

/// Counts a request in [`Isolate::in_flight`] while it is held.
struct InFlight<'a>(&'a Isolate);

impl<'a> InFlight<'a> {
    fn enter(isolate: &'a Isolate) -> InFlight<'a> {
        isolate.count_share(now_ms());
        isolate.in_flight.set(isolate.in_flight.get() + 1);
        if isolate.in_flight.get() >= BUSY_IN_FLIGHT {
            isolate.busy_at.set(now_ms());
        }
        InFlight(isolate)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.count_share(now_ms());
        self.0.in_flight.set(self.0.in_flight.get().saturating_sub(1));
    }
}

fn lane_busy(isolate: &Isolate) -> bool {
    isolate.lane.get().is_some_and(|seen| now_ms().saturating_sub(seen) < LANE_STALE_MS)
}

/// Holding the isolate's lane; dropping it frees the lane.
struct Lane<'a> {
    isolate: &'a Isolate,
}

impl<'a> Lane<'a> {
    /// Waits (polling a timer, see the module docs) until the lane is free, then takes it.
    async fn enter(isolate: &'a Isolate) -> Lane<'a> {
        let mut pause = 1;
        while lane_busy(isolate) {
            Delay::from(Duration::from_millis(pause)).await;
            pause = (pause * 2).min(LANE_POLL_MAX_MS);
        }
        isolate.lane.set(Some(now_ms()));
        Lane { isolate }
    }

    fn alive(&self) {
        self.isolate.lane.set(Some(now_ms()));
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        self.isolate.lane.set(None);
    }
}

/// Whether a drain gives way to requests arriving in the isolate.
#[derive(Clone, Copy, PartialEq)]
enum Yield {
    /// The request draining waits for it anyway (a read catching up).
    Never,
    /// The background drainer: while the isolate is busy, one short turn and a rest
    /// of up to [`REST_FACTOR`] times its length, so requests go first.
    ToRequests,
}

/// Applies what this isolate queued, for about [`DRAIN_BUDGET_MS`] at most (the
/// background drainer returns for the rest; the core's catch-up applies anything
/// left before a read). Returns how long to rest before the next pass, in ms.
async fn drain(lane: &Lane<'_>, yielding: Yield) -> u64 {
    let isolate = lane.isolate;
    if !isolate.drain_pending.replace(false) {
        return 0;
    }
    let yields = yielding == Yield::ToRequests;
    let started = now_ms();
    loop {
        let turn = now_ms();
        let max_jobs = match yields && isolate.busy() {
            false => isolate.engine.config().apply_batch,
            true if !isolate.mostly_busy(turn) || isolate.deferred_too_long(turn) => BUSY_APPLY_BATCH,
            true => {
                isolate.drain_pending.set(true);
                return DEFER_POLL_MS;
            }
        };
        if !apply_turn(lane, max_jobs).await {
            // Nothing left to apply (or applying failed: the next request's drain tries again).
            isolate.waiting_since.set(None);
            return 0;
        }
        let now = now_ms();
        if yields && isolate.busy_since(turn) {
            isolate.drain_pending.set(true);
            let factor = u64::from(isolate.in_flight.get()).clamp(1, REST_FACTOR);
            return now.saturating_sub(turn).saturating_mul(factor).min(MAX_REST_MS);
        }
        if now.saturating_sub(started) >= DRAIN_BUDGET_MS {
            // Let waiting requests in; the background drainer comes back for the rest.
            isolate.drain_pending.set(true);
            return 0;
        }
    }
}

/// Applies up to `max_jobs` queued jobs in one unit of work; false when the queue
/// was empty or applying failed (the next request's drain tries again).
async fn apply_turn(lane: &Lane<'_>, max_jobs: usize) -> bool {
    match lane.isolate.engine.apply_queued_up_to(ctx(), max_jobs).await {
        Ok(run) if run.is_empty() => false,
        Ok(run) => {
            if let Some(note) = run.set_aside_note() {
                worker::console_error!("{note}");
            }
            lane.alive();
            true
        }
        Err(e) => {
            worker::console_warn!("applying queued jobs failed: {e:?}");
            false
        }
    }
}

/// The core's request, or the response that refuses it before its body is read.
async fn translate(req: &mut worker::Request, engine: &Engine<D1Store>) -> worker::Result<Result<Request, Response>> {
    let headers: Vec<(String, String)> = req.headers().entries().collect();
    let path = req.path();
    let limit = match engine.plan_body(&path, &headers) {
        BodyPlan::Refuse(response) => return Ok(Err(response)),
        BodyPlan::Read { limit } => limit,
    };
    let body = req.bytes().await?;
    if body.len() > limit {
        return Ok(Err(engine.refuse_too_large(&path)));
    }
    let url = req.url()?;
    Ok(Ok(Request {
        method: Method::parse(&req.inner().method()),
        path: url.path().to_string(),
        query: url.query().unwrap_or("").to_string(),
        headers,
        body,
        origin: Some(url.origin().ascii_serialization()),
        // Cloudflare names the client's address in this header (set by its edge,
        // never passed through from the client).
        client: req.headers().get("CF-Connecting-IP").ok().flatten(),
    }))
}

fn to_worker(resp: Response) -> worker::Result<worker::Response> {
    let headers = Headers::new();
    for (k, v) in &resp.headers {
        headers.append(k, v)?;
    }
    Ok(worker::Response::from_bytes(resp.body)?.with_status(resp.status).with_headers(headers))
}
