//! # engage-core
//!
//! The whole of Engage's behaviour, with no I/O: a host hands [`Engine::handle`] a
//! [`Request`] and a [`Ctx`] (the current time and a random seed, since the core
//! reads neither a clock nor an RNG) and writes back the [`Response`].
//!
//! - Routing, authentication, permissions and rate limits: [`routes`], [`auth`], [`ratelimit`].
//! - Every endpoint family in its own module ([`ingest`], [`export`], ...), built on the
//!   [`repo::Tx`] unit of work, which commits one atomic [`store::ChangeSet`] per request.
//! - Storage is the [`store::Store`] trait; [`store::memory::MemoryStore`] is built in,
//!   SQLite and D1 live in the hosts.
//! - `/users/track` is acknowledged once durably queued; [`queue`] applies queued jobs
//!   in batches, and every other endpoint first catches up with the queue, so a read
//!   sees every write acknowledged before it.
#![forbid(unsafe_code)]


pub mod address;
pub mod admin;
pub mod alias;
pub mod apply;
pub mod auth;
pub mod custom;
pub mod delete;
pub mod email;
pub mod error;
pub mod export;
pub mod groups;
pub mod http;
pub mod identity;
pub mod ids;
pub mod ingest;
pub mod merge;
pub mod prioritization;
pub mod profile;
pub mod queue;
pub mod ratelimit;
pub mod repo;
pub mod routes;
pub mod standard;
pub mod store;
pub mod subscriptions;
pub mod time;
pub mod track;
pub mod workspace;

pub use error::ApiError;
pub use http::{Method, Request, Response};
pub use store::Store;
pub use time::Timestamp;

use auth::{bearer_token, key_hash, KeyRecord};
use ratelimit::{Decision, RateLimiter};
use repo::decode;
use routes::{Auth, Endpoint};
use store::Table;

/// What the host supplies per request: the core reads no clock and no RNG.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// The current time.
    pub now: Timestamp,
    /// Fresh random bytes (ids are derived from them).
    pub seed: [u8; 16],
}

/// Engine settings.
#[derive(Clone)]
pub struct Config {
    /// Largest request body accepted; larger bodies get 413. The platform documents 4 MB.
    pub max_body_bytes: usize,
    /// Enforce the spec's rate limits.
    pub rate_limits: bool,
    /// Queued jobs applied per commit.
    pub apply_batch: usize,
    /// Operator token enabling the `/_engage/` routes; `None` hides them.
    pub admin_token: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The admin token is a secret: never print it.
        f.debug_struct("Config")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("rate_limits", &self.rate_limits)
            .field("apply_batch", &self.apply_batch)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config { max_body_bytes: 4 * 1024 * 1024, rate_limits: true, apply_batch: queue::DEFAULT_BATCH, admin_token: None }
    }
}

/// The engine: a store, settings and rate-limit counters.
pub struct Engine<S: Store> {
    store: S,
    config: Config,
    limiter: RateLimiter,
    admin_token_hash: Option<String>,
}

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The key's record (workspace and permissions).
    pub key: KeyRecord,
}

impl<S: Store> Engine<S> {
    /// An engine over a store.
    pub fn new(store: S, config: Config) -> Engine<S> {
        let limiter = RateLimiter::new(config.rate_limits);
        let admin_token_hash = config.admin_token.as_deref().filter(|t| !t.is_empty()).map(key_hash);
        Engine { store, config, limiter, admin_token_hash }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The response for a body over [`Config::max_body_bytes`]; hosts that stop
    /// reading early send this without calling [`Engine::handle`].
    pub fn payload_too_large(&self) -> Response {
        ApiError::PayloadTooLarge { limit: self.config.max_body_bytes }.into_response()
    }

    /// Handles one request. Never panics on input; failures are responses.
    pub async fn handle(&self, req: Request, ctx: Ctx) -> Response {
        match self.route(req, ctx).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        }
    }

    async fn route(&self, req: Request, ctx: Ctx) -> Result<Response, ApiError> {
        let (route, endpoint) = routes::find(req.method, &req.path)?;
        if req.body.len() > self.config.max_body_bytes {
            return Err(ApiError::PayloadTooLarge { limit: self.config.max_body_bytes });
        }
        let caller = match route.auth {
            Auth::Key(permission) => {
                let caller = self.authenticate(&req).await?;
                if !caller.key.allows(permission) {
                    return Err(ApiError::MissingPermission(permission));
                }
                caller
            }
            Auth::Scim => return Err(ApiError::NotImplemented),
            Auth::Admin => {
                admin::authorize(&req, self.admin_token_hash.as_deref())?;
                return match endpoint {
                    Endpoint::AdminCreateKey => admin::create_key(&self.store, &req, ctx).await,
                    Endpoint::AdminCreateGroup => admin::create_group(&self.store, &req, ctx).await,
                    _ => admin::list_groups(&self.store, &req).await,
                };
            }
        };
        let decision = self.limiter.check(caller.key.workspace.as_str(), route.bucket, ctx.now);
        if let Decision::Limited { retry_after } = decision {
            return Err(ApiError::RateLimited { retry_after });
        }
        if endpoint != Endpoint::Track {
            // Read-your-writes: everything acknowledged before this request is applied first.
            queue::catch_up(&self.store, ctx.seed, self.config.apply_batch).await?;
        }
        let result = self.dispatch(endpoint, &req, &caller, ctx).await;
        let mut resp = result.unwrap_or_else(ApiError::into_response);
        if let Decision::Allowed { limit, remaining, reset } = decision {
            if resp.status != 429 {
                resp = resp
                    .with_header("X-RateLimit-Limit", limit.to_string())
                    .with_header("X-RateLimit-Remaining", remaining.to_string())
                    .with_header("X-RateLimit-Reset", reset.to_string());
            }
        }
        Ok(resp)
    }

    async fn authenticate(&self, req: &Request) -> Result<Caller, ApiError> {
        let token = bearer_token(req)?;
        let entry = self.store.get(Table::ApiKey, &key_hash(token)).await?.ok_or(ApiError::InvalidKey)?;
        Ok(Caller { key: decode(&entry.value)? })
    }

    async fn dispatch(&self, endpoint: Endpoint, req: &Request, caller: &Caller, ctx: Ctx) -> Result<Response, ApiError> {
        let ws = &caller.key.workspace;
        match endpoint {
            Endpoint::Track => ingest::track(&self.store, ws, &req.body, ctx).await,
            Endpoint::TrackSync => ingest::track_sync(&self.store, ws, &req.body, ctx).await,
            Endpoint::ExportIds => export::export_ids(&self.store, ws, &req.body).await,
            Endpoint::Identify => identity::identify(&self.store, ws, &req.body, ctx).await,
            Endpoint::Merge => merge::merge(&self.store, ws, &req.body, ctx).await,
            Endpoint::Delete => delete::delete(&self.store, ws, &req.body, ctx).await,
            Endpoint::AliasNew => alias::alias_new(&self.store, ws, &req.body, ctx).await,
            Endpoint::AliasUpdate => alias::alias_update(&self.store, ws, &req.body, ctx).await,
            Endpoint::SubscriptionSetV1 => subscriptions::set_v1(&self.store, ws, &req.body, ctx).await,
            Endpoint::SubscriptionSetV2 => subscriptions::set_v2(&self.store, ws, &req.body, ctx).await,
            Endpoint::SubscriptionUserStatus => subscriptions::user_status(&self.store, ws, req).await,
            Endpoint::SubscriptionStatusGet => subscriptions::status_get(&self.store, ws, req).await,
            Endpoint::EmailStatus => email::status(&self.store, ws, &req.body, ctx).await,
            Endpoint::EmailBlocklist => email::blocklist(&self.store, ws, &req.body, ctx).await,
            _ => Err(ApiError::NotImplemented),
        }
    }

    /// Applies up to one batch of queued jobs; returns how many were applied.
    /// Hosts call this from a background task.
    pub async fn apply_queued(&self, ctx: Ctx) -> Result<usize, ApiError> {
        queue::apply_batch(&self.store, ctx.seed, self.config.apply_batch).await
    }

    /// Applies up to `rounds` batches of queued jobs, each prepared while the one
    /// before it commits ([`queue::apply_pipelined`]); returns how many jobs were
    /// applied. For hosts whose store commits on another thread or machine.
    pub async fn apply_queued_pipelined(&self, ctx: Ctx, rounds: usize) -> Result<usize, ApiError> {
        queue::apply_pipelined(&self.store, ctx.seed, self.config.apply_batch, rounds).await
    }
}
