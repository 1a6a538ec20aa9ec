//! # engage-edge
//!
//! Engage as a Cloudflare Worker. The Worker only translates: a `worker::Request`
//! becomes an [`engage_core::Request`], [`engage_core::Engine::handle`] answers it with
//! `Ctx::new(Date.now(), crypto random bytes)`, and the response goes back.
//! Storage is [`d1::D1Store`] (documents and the track queue in D1, one `batch()` per
//! commit) with API-key reads cached in KV ([`keycache`]).
//!
//! - Bindings (wrangler.toml): D1 `DB`, KV `KEY_CACHE` (optional), secret
//!   `ENGAGE_ADMIN_TOKEN` (enables the operator routes under `/_engage/`), var
//!   `ENGAGE_RATE_LIMITS` (`off` disables the API's rate limits, for load tests), var
//!   `ENGAGE_APPLY_BATCH` (queued jobs applied per commit, default 16), var
//!   `ENGAGE_FAULTS` (`1`: the test kit's faults, `/_engage/faults`).
//! - Workers have no background threads: `/users/track` enqueues, every other
//!   endpoint catches up with the queue first (the core does that), and after a
//!   `/users/track` response the Worker applies the backlog in `ctx.wait_until`.
//!
//! Everything is compiled for `wasm32` only; on other targets the crate is empty.

#[cfg(target_arch = "wasm32")]
mod conformance;
#[cfg(target_arch = "wasm32")]
mod d1;
#[cfg(target_arch = "wasm32")]
mod host;
#[cfg(target_arch = "wasm32")]
mod keycache;
