//! The engine: a store, settings and rate-limit counters, and the one way a request
//! goes through them: route → body limit → credential, permission and rate limit
//! ([`admit`]) → catch up with the queue → the endpoint's family ([`dispatch`]).
//! Dispatch is an exhaustive `match` over the route table's endpoint enums.
//!
//! What a host calls, by verb (a host turns its platform's request into a
//! [`Request`], calls these, and writes the [`Response`]; it decides nothing):
//! - `new`, `set_playground`, `store`, `into_store`, `config`: make and inspect it.
//! - `handle` a request; `handle_caught_up` one answered [`Then::CatchUpFirst`]
//!   after the host applied the queue; `may_ask_to_catch_up` and `catches_up` say
//!   beforehand whether a request will (hosts that serialize such requests).
//! - `plan_body` before reading a body; `refuse_body`, `refuse_too_large` and
//!   `refuse_overloaded`: the answers a host sends without running a request.
//! - `apply_queued`, `apply_queued_up_to`, `apply_queued_pipelined`: the applier's
//!   turns; `requests_waiting` tells it to yield; `backlog_state` for metrics.
//! - `route_label` for logs and metrics; `journal` and `journal_keeps_bodies` for
//!   the test kit's journal; `reset` and `load_seed` for the CLI's kit commands.

use std::sync::atomic::{AtomicI64, AtomicU8, AtomicUsize, Ordering};

use self::admit::Admitted;
use crate::admin;
use crate::auth::{self, KeyRecord};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Method, Notice, Request, Response, Then};
use crate::ids::{Identifier, WorkspaceName};
use crate::preference_center::link::LinkConfig;
use crate::preference_center::page::{PageOp, Visit};
use crate::ratelimit::{Decision, RateLimiter};
use crate::routes::{self, Api, CatchUp, Endpoint, Public};
use crate::store::Store;
use crate::time::Timestamp;
use crate::track::backlog::Backlog;
use crate::track::ledger::Ledger;
use crate::track::pressure::Pressure;
use crate::track::queue::QueueRun;
use crate::{input, preference_center, scim, service, track};

mod admit;
mod applying;
mod config;
mod dispatch;
pub(crate) mod kit;
mod state;
mod track_ack;

pub use config::Config;

/// What a host does with a request's body, decided from its headers before reading it.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyPlan {
    /// Read it, but stop and answer [`Engine::refuse_too_large`] past `limit` bytes.
    Read {
        /// Most bytes to read.
        limit: usize,
    },
    /// Do not read it: send this response.
    Refuse(Response),
}

/// Why a host could not read a request's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Longer than [`Config::max_body_bytes`].
    TooLarge,
    /// Its framing is broken (a bad chunk size, a connection closed mid-body).
    Malformed,
    /// It did not arrive within the host's body timeout.
    TimedOut {
        /// The timeout, in seconds.
        secs: u64,
    },
}

/// The engine: a store, settings and rate-limit counters.
pub struct Engine<S: Store> {
    store: S,
    config: Config,
    limiter: RateLimiter,
    gate: Gate,
    /// When this engine last noted each key's use (by key hash).
    keys_noted: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    /// The operator's credential and the test kit's journal and fixtures.
    kit: crate::kit::State,
    /// The playground's state now ([`service::Playground`]): a host moves it on
    /// while the server runs (built, or its build failed).
    playground: AtomicU8,
    /// Preference-center templates parsed at earlier page views.
    templates: preference_center::cache::Templates,
}

/// How finely a key's last use is kept: an hour.
const KEY_USE_RESOLUTION_MS: i64 = 3_600_000;

/// Whose turn it is to apply queued jobs. One holder at a time (the background
/// applier, or a request catching up) applies, so they take turns instead of racing
/// for the same jobs and failing each other's commits; requests waiting make the
/// applier stop after its current batch.
///
/// Its locks are fair: turns go in the order they were asked for. `futures-util`'s
/// mutex, used before, wakes the waiter in its lowest free slot and lets a newcomer
/// take the lock before the woken one runs, so under a closed load of reads a request
/// could wait for its turn as long as the load lasted (exports of 50 users,
/// 32 connections, 1M profiles: 816 answered a second, the slowest after 10 s).
struct Gate {
    backlog: tokio::sync::Mutex<Backlog>,
    /// What queued jobs will add to each user (told by the backlog what is applied).
    ledger: std::sync::Arc<Ledger>,
    /// How far behind the appliers are.
    pressure: std::sync::Arc<Pressure>,
    /// Held by a `/users/track` request checked exactly against the store.
    exact: tokio::sync::Mutex<()>,
    waiting: AtomicUsize,
    /// Queued jobs that requests catching up in their turns at this gate applied
    /// parts of since the background applier's last turn: its next turn applies as
    /// many whole jobs before it lets waiting requests go first (see
    /// [`applying::OWED_ROUNDS_MAX`]).
    owed: AtomicUsize,
    /// When a turn last found the queue empty or applied something (ms): readiness.
    progress_at: AtomicI64,
    /// The partitions of the queue this process applies.
    lanes: std::sync::Mutex<applying::Lanes>,
    /// On a store several servers share: the backlog requests catch up with, apart
    /// from the applier's. Servers sharing the store already apply early and in order
    /// at once, each application taking its partitions' turns (see
    /// `track::early::turn_key`); this server's requests and applier do the same, so
    /// that a read never waits for a batch being applied.
    reads: Option<tokio::sync::Mutex<Backlog>>,
}

impl Gate {
    /// `shared`: other servers apply the same store's queue.
    fn new(shared: bool) -> Gate {
        let ledger = std::sync::Arc::new(Ledger::default());
        let pressure = std::sync::Arc::new(Pressure::default());
        Gate {
            backlog: tokio::sync::Mutex::new(Backlog::with(ledger.clone(), pressure.clone(), shared)),
            lanes: Default::default(),
            reads: shared.then(|| tokio::sync::Mutex::new(Backlog::with(ledger.clone(), pressure.clone(), true))),
            ledger,
            pressure,
            exact: tokio::sync::Mutex::new(()),
            waiting: AtomicUsize::new(0),
            owed: AtomicUsize::new(0),
            progress_at: AtomicI64::new(0),
        }
    }
}

/// What the rate limit's headers start with (`X-RateLimit-Limit`, `-Remaining`, `-Reset`).
const RATE_LIMIT_HEADERS: &str = "X-RateLimit-";

/// Counts a request waiting for its turn, also when its future is dropped while waiting.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<S: Store> Engine<S> {
    /// An engine over a store.
    pub fn new(store: S, config: Config) -> Engine<S> {
        let limiter = RateLimiter::new(config.rate_limits);
        let kit = crate::kit::State::new(
            config.admin_token.as_deref(),
            config.journal_bodies,
            config.admin_failures_per_minute,
            config.id_seed,
        );
        let keys_noted = Default::default();
        let playground = AtomicU8::new(config.playground.to_u8());
        let gate = Gate::new(config.shared_store);
        let templates = Default::default();
        Engine { store, config, limiter, gate, keys_noted, kit, playground, templates }
    }

    /// Tells the engine what the host has of the playground now (its build finished
    /// or failed while the server ran).
    pub fn set_playground(&self, playground: service::Playground) {
        self.playground.store(playground.to_u8(), Ordering::SeqCst);
    }

    fn playground(&self) -> service::Playground {
        service::Playground::from_u8(self.playground.load(Ordering::SeqCst))
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, giving up the engine.
    pub fn into_store(self) -> S {
        self.store
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Decides from the request's path and headers whether to read its body: a
    /// declared `Content-Length` over the limit is refused before a byte is read.
    pub fn plan_body(&self, path: &str, headers: &[(String, String)]) -> BodyPlan {
        match input::check_declared_length(headers, self.config.max_body_bytes) {
            Ok(()) => BodyPlan::Read { limit: self.config.max_body_bytes },
            // The connection's framing is not trusted after a refusal: close it.
            Err(e) => BodyPlan::Refuse(e.into_shaped(scim::protocol::shape(path)).with_header("Connection", "close")),
        }
    }

    /// The response for a body the host could not read whole, for hosts that read
    /// it themselves (each answer closes the connection: where the next request
    /// starts is unknown).
    pub fn refuse_body(&self, path: &str, e: BodyError) -> Response {
        let e = match e {
            BodyError::TooLarge => ApiError::PayloadTooLarge { limit: self.config.max_body_bytes },
            BodyError::Malformed => ApiError::bad("Bad Request: malformed body framing (chunked encoding)"),
            BodyError::TimedOut { secs } => ApiError::RequestTimeout { secs },
        };
        e.into_shaped(scim::protocol::shape(path)).with_header("Connection", "close")
    }

    /// The response to a connection beyond the host's limit.
    pub fn refuse_overloaded(&self) -> Response {
        ApiError::Overloaded.into_response()
    }

    /// The response for a body over [`Config::max_body_bytes`] (or one that could not
    /// be read), for hosts that stop reading early.
    pub fn refuse_too_large(&self, path: &str) -> Response {
        ApiError::PayloadTooLarge { limit: self.config.max_body_bytes }.into_shaped(scim::protocol::shape(path))
    }

    /// Whether the request first applies the queue (every endpoint but
    /// `/users/track`): hosts that serialize such requests (the edge) ask before
    /// handling it.
    pub fn catches_up(&self, req: &Request) -> bool {
        routes::find(req.method, &req.path).is_ok_and(|(_, endpoint)| endpoint.catch_up() != CatchUp::Nothing)
    }

    /// Handles one request. Never panics on input; failures are responses.
    pub async fn handle(&self, req: Request, ctx: Ctx) -> Response {
        self.handle_as(req, ctx, false).await
    }

    /// Whether the request may be answered [`Then::CatchUpFirst`] (a host without a
    /// background applier keeps a copy of such a request to hand it back).
    pub fn may_ask_to_catch_up(&self, req: &Request) -> bool {
        !self.config.applies_in_background
            && matches!(routes::find(req.method, &req.path), Ok((_, Endpoint::Api(Api::Track))))
    }

    /// Handles a request answered [`Then::CatchUpFirst`] again, once the host has
    /// applied everything queued (in its turn, as for a request that catches up).
    /// `first`: that answer. The request was counted against its rate limit then:
    /// it is not again, and this answer carries that count's headers.
    pub async fn handle_caught_up(&self, req: Request, ctx: Ctx, first: &Response) -> Response {
        let mut resp = self.handle_as(req, ctx, true).await;
        for (name, value) in &first.headers {
            if name.starts_with(RATE_LIMIT_HEADERS) {
                resp = resp.with_header(name, value.clone());
            }
        }
        resp
    }

    async fn handle_as(&self, req: Request, ctx: Ctx, caught_up: bool) -> Response {
        // `--id-seed`: the request's randomness and time are the server's, not the host's.
        let ctx = self.kit.fixed.as_ref().map_or(ctx, |f| f.next(ctx));
        let shape = scim::protocol::shape(&req.path);
        let operator_path = req.path == "/_engage" || req.path.starts_with("/_engage/");
        let id = crate::http::request_id(&req.headers, ctx.seed);
        let head = req.method == Method::Head;
        let resp = match self.route(req, ctx, caught_up).await {
            Ok(resp) => resp,
            Err(e) => e.into_shaped(shape),
        };
        let mut resp = if head { resp.without_body() } else { resp };
        if resp.status == 401 && !operator_path {
            resp.notice = Some(Notice::CredentialRefused);
        }
        // The operator's and test kit's answers carry personal data and secrets: no
        // cache keeps them, and no browser reads them as anything but what they say.
        let resp = match operator_path {
            true => resp.set_header("Cache-Control", "no-store").set_header("X-Content-Type-Options", "nosniff"),
            false => resp,
        };
        resp.with_header("X-Request-Id", id)
    }

    /// The route pattern a request matches (for logs and metrics: never the raw
    /// path, which may carry identifiers or link tokens), or `"unmatched"`.
    pub fn route_label(&self, method: Method, path: &str) -> &'static str {
        routes::find(method, path).map_or("unmatched", |(route, _)| route.pattern)
    }

    /// The queue's backlog now (for metrics).
    pub async fn backlog_state(&self, now: Timestamp) -> Result<track::waiting::BacklogState, ApiError> {
        Ok(track::waiting::backlog_state(&self.store, now).await?)
    }

    async fn route(&self, req: Request, ctx: Ctx, caught_up: bool) -> Result<Response, ApiError> {
        let (route, endpoint) = routes::find(req.method, &req.path)?;
        input::check_body_len(req.body.len(), self.config.max_body_bytes)?;
        let admitted = match self.admit(route, &endpoint, &req, ctx, caught_up).await? {
            Admitted::Answered(resp) => return Ok(resp),
            admitted => admitted,
        };
        match (endpoint, admitted) {
            (Endpoint::Public(public), _) => Ok(self.public(public, &req, ctx).await),
            (Endpoint::Operator(op), _) => admin::handle(&self.store, op, &req, self.config.runs_syncs, ctx).await,
            (Endpoint::Kit(kit), _) => self.kit(kit, &req, ctx).await,
            (Endpoint::Scim(endpoint), Admitted::Scim(token, decision)) => {
                let base = req.public_base(self.config.public_url.as_deref());
                Ok(scim::handle(&self.store, endpoint, &req, (token, decision), &base, ctx).await)
            }
            (Endpoint::Api(api), Admitted::Key(key, decision, delayed, ctx)) => {
                let mut resp =
                    self.api(api, &req, &key.workspace, ctx, caught_up).await.unwrap_or_else(ApiError::into_response);
                resp.aside_mut().workspace = Some(key.workspace.as_str().into());
                if let Some((fault, delay_ms)) = delayed {
                    (resp.aside_mut().fault, resp.aside_mut().delay_ms) = (Some(fault), delay_ms);
                }
                Ok(match decision {
                    Decision::Allowed { limit, remaining, reset } if resp.status != 429 => resp
                        .with_header("X-RateLimit-Limit", limit.to_string())
                        .with_header("X-RateLimit-Remaining", remaining.to_string())
                        .with_header("X-RateLimit-Reset", reset.to_string()),
                    _ => resp,
                })
            }
            // A row whose credential column does not fit its endpoint's kind could only
            // be a broken table: it fails closed.
            (Endpoint::Scim(_) | Endpoint::Api(_), _) => Err(ApiError::RouteNotFound),
        }
    }

    /// The routes without credentials: the playground's files and the preference pages.
    async fn public(&self, public: Public, req: &Request, ctx: Ctx) -> Response {
        match public {
            Public::PreferencePage(token) => self.page(&token, PageOp::Show, req, ctx).await,
            Public::PreferenceSubmit(token) => self.page(&token, PageOp::Submit, req, ctx).await,
            Public::PlaygroundRoot => service::playground_root(),
            Public::PlaygroundFile(raw) => service::playground_file(&raw, self.playground()),
            Public::Landing => service::landing(self.playground(), &self.config.build),
            Public::Health => service::health(&self.config.build),
            Public::Ready => service::ready(&self.store, self.gate.progress_at.load(Ordering::SeqCst), ctx).await,
            Public::OpenApi => Response::json(200, &crate::openapi::document()),
            Public::Metrics => {
                let none = ApiError::NotFound("Not Found: this host keeps no metrics".into()).into_response();
                none.then(Then::Metrics)
            }
        }
    }

    /// A preference center's page: it reads and changes profiles, so it catches up
    /// with the queue first, as API reads do.
    async fn page(&self, token: &str, op: PageOp, req: &Request, ctx: Ctx) -> Response {
        // The page's user, when the token holds; an invalid token reads nobody. The
        // workspace it names keeps the clock (a test may have moved it) that decides
        // its expiry.
        let claims = match preference_center::link::claims(&self.store, token).await {
            Ok(claims) => claims,
            Err(e) => return ApiError::from(e).into_response(),
        };
        let ctx = claims.as_ref().map_or(ctx, |c| self.kit.clocks.at(c.ws.as_str(), ctx));
        if let Some(claims) = claims.filter(|c| !c.expired(ctx.now)) {
            let seeds = vec![Identifier::External(claims.external_id)];
            if let Err(e) = self.catch_up(&claims.ws, seeds, ctx).await {
                return e.into_response();
            }
        }
        let links = self.links(req);
        let visit = Visit { token, op, req, links: &links, templates: &self.templates, ctx };
        preference_center::page::page(&self.store, &self.limiter, &visit).await
    }

    /// The context background work runs in (a host's warehouse syncs): the host's,
    /// or with `--id-seed` the server's clock and randomness.
    pub fn background_ctx(&self, host: Ctx) -> Ctx {
        self.kit.fixed.as_ref().map_or(host, |f| f.background(host))
    }

    /// The randomness queued work is applied with: the context's, or with
    /// `--id-seed` one that is always the same.
    fn queue_seed(&self, ctx: Ctx) -> [u8; 16] {
        self.kit.fixed.as_ref().map_or(ctx.seed, crate::kit::fixed::Fixed::queue_seed)
    }

    fn links(&self, req: &Request) -> LinkConfig {
        LinkConfig::new(self.config.public_url.as_deref(), req, self.config.link_ttl_secs)
    }

    async fn authenticate(&self, req: &Request, now: Timestamp) -> Result<KeyRecord, ApiError> {
        let given = auth::bearer_token(req)?;
        let hash = auth::key_hash(given);
        let (record, version) = match auth::key_record(&self.store, &hash).await {
            // The platform names the key it did not find.
            Err(ApiError::InvalidKey) => return Err(ApiError::UnknownKey(given.chars().take(256).collect())),
            other => other?,
        };
        // When a key was last used, to the hour: one write per key and hour (per
        // engine), never a write per request. A failure here fails nothing.
        let due = {
            let mut noted = self.keys_noted.lock().unwrap_or_else(|e| e.into_inner());
            let last = noted.get(&hash).copied().or(record.last_used_at).unwrap_or(i64::MIN);
            let due = now.0.saturating_sub(last) >= KEY_USE_RESOLUTION_MS;
            if due {
                noted.insert(hash.clone(), now.0);
            }
            due
        };
        if due {
            let _ = auth::note_use(&self.store, &hash, record.clone(), version, now).await;
        }
        Ok(record)
    }

    /// Read-your-writes: applies the queued jobs acknowledged before this request
    /// that concern the users `seeds` name (with a background applier), or all of
    /// them (otherwise), in its turn at the gate.
    async fn catch_up(&self, ws: &WorkspaceName, seeds: Vec<Identifier>, ctx: Ctx) -> Result<QueueRun, ApiError> {
        // Nothing queued: every job acknowledged before this request is applied and
        // committed (a job leaves the queue only then), so there is nothing to catch
        // up with and no turn to wait for. Without this, each read took the queue's
        // turn to look for its users' jobs and read their profiles twice over, one
        // request at a time (exports of 50 users on 1M profiles: 800 a second).
        if self.store.nothing_queued().await? {
            self.gate.progress_at.store(ctx.now.0, Ordering::SeqCst);
            return Ok(QueueRun::default());
        }
        if let (Some(reads), true) = (&self.gate.reads, self.config.applies_in_background) {
            let mut backlog = reads.lock().await;
            return track::queue::catch_up_for(&self.store, &mut backlog, ws, seeds, self.queue_seed(ctx)).await;
        }
        let mut backlog = self.queue_turn().await;
        let run = if self.config.applies_in_background {
            let run = track::queue::catch_up_for(&self.store, &mut backlog, ws, seeds, self.queue_seed(ctx)).await?;
            self.gate.owed.fetch_add(run.applied, Ordering::SeqCst);
            run
        } else {
            let run = track::queue::catch_up(&self.store, &mut backlog, self.queue_seed(ctx), self.config.apply_batch)
                .await?;
            self.gate.progress_at.store(ctx.now.0, Ordering::SeqCst);
            run
        };
        Ok(run)
    }

    /// Waits for the queue's turn as a request does (counted as waiting, so the
    /// background applier lets it go first) and holds it while the guard lives.
    async fn queue_turn(&self) -> tokio::sync::MutexGuard<'_, Backlog> {
        let waiting = Waiting::new(&self.gate.waiting);
        let backlog = self.gate.backlog.lock().await;
        drop(waiting);
        backlog
    }

    /// The queue's turn, held, with everything queued applied: what copies,
    /// removes or puts back whole state holds while it does, so that no queued job
    /// is applied during it or over it afterwards.
    async fn caught_up_turn(&self, ctx: Ctx) -> Result<tokio::sync::MutexGuard<'_, Backlog>, ApiError> {
        let mut backlog = self.queue_turn().await;
        track::queue::catch_up(&self.store, &mut backlog, self.queue_seed(ctx), self.config.apply_batch).await?;
        Ok(backlog)
    }

    /// True when requests wait for their turn to apply queued jobs: a background
    /// applier lets them go first before it takes its next turn.
    pub fn requests_waiting(&self) -> bool {
        self.gate.waiting.load(Ordering::SeqCst) > 0
    }
}
