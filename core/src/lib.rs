//! # engage-core
//!
//! The whole of Engage's behaviour, with no I/O: a host hands [`Engine::handle`] a
//! [`Request`] and a [`Ctx`] (the current time and a random seed, since the core
//! reads neither a clock nor an RNG) and writes back the [`Response`], then does
//! what [`Response::then`] asks (apply the queue, serve a playground file, ...).
//!
//! - A request goes one way through: route ([`routes`]) → body limit → the one
//!   credential step (the route's credential column: key and permission, SCIM token,
//!   admin token; then the rate limit) → catch up with the queue → the endpoint
//!   family's `parse` (pure) → `apply` (one unit of work, committed atomically) →
//!   render.
//! - One folder per endpoint family (`track`, `identity`, `users`, `export`,
//!   `subscriptions`, `preference_center`, `scim`, `cdi`, `admin`, and the test kit,
//!   `kit`) over shared layers (`describe`, `repo`, `profile`, `store`, `auth`,
//!   `ratelimit`, `routes`, `dialect`, `error`, `input`, `ids`, `time`, `http`); layers
//!   point down only (`tests/checks/imports.py`), as docs/architecture.md draws them.
//! - Storage is the [`store::Store`] trait; [`store::memory::MemoryStore`] is built in,
//!   SQLite, PostgreSQL and D1 live in the hosts, and each passes the conformance
//!   suite ([`store::conformance`]).
//! - `/users/track` is acknowledged once durably queued; [`Engine::apply_queued`]
//!   applies queued jobs in batches, and every other endpoint first catches up with
//!   the queue, so a read sees every write acknowledged before it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admin;
mod auth;
mod cdi;
mod ctx;
mod describe;
mod dialect;
mod engine;
mod error;
mod export;
pub mod head;
mod http;
mod identity;
mod ids;
mod input;
mod json;
mod kit;
mod openapi;
mod permission;
mod preference_center;
mod profile;
mod ratelimit;
mod repo;
mod routes;
mod scim;
mod service;
pub mod store;
mod subscriptions;
mod time;
mod track;
mod users;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod testkit;

pub use ctx::Ctx;
pub use engine::{BodyError, BodyPlan, Config, Engine};
pub use error::ApiError;
pub use http::{request_id, Aside, AssetPath, Method, Notice, Request, Response, Then};
pub use preference_center::link::DEFAULT_LINK_TTL_SECS;
pub use service::{Build, Playground};
pub use store::Store;
pub use time::Timestamp;
pub use track::queue::QueueRun;

/// Provisioning that hosts offer on their command lines (and the playground on its
/// page): workspaces, API keys and subscription groups. Never reachable through the
/// platform's API; the operator routes under `/_engage/` use the same functions.
pub mod provision {
    pub use crate::admin::keys::{list as list_keys, revoke as revoke_key, workspaces as list_workspaces};
    pub use crate::admin::keys::{KeyInfo, WorkspaceInfo};
    pub use crate::admin::workspace::{create_group, create_key, seed_profiles};
    pub use crate::auth::key_hash;
    pub use crate::ids::WorkspaceName;
    pub use crate::permission::{parse_permission_list, Permission};
    pub use crate::scim::token::{create as create_scim_token, TokenFor};
    pub use crate::subscriptions::groups::{list as list_groups, Channel, Group};
}

/// The test kit for hosts: a known API key, fixtures, reset and the request journal
/// (see the `kit` module's routes for the rest).
pub mod testing {
    pub use crate::engine::kit::{check_seed, Loaded};
    pub use crate::kit::journal::Answered;
    pub use crate::kit::key::{check as check_api_key, ensure as ensure_key, Made};
    pub use crate::kit::reset::{Keep, Report as ResetReport, Scope as ResetScope};
    pub use crate::kit::seed::{
        parse as parse_seed, parse_sized as parse_seed_sized, Seed, SeedError, MAX_STATE_BYTES,
    };
    pub use crate::kit::session::check_admin_token;
}

/// The queue's records, for a store that moves queued jobs itself (a PostgreSQL
/// database whose one queue becomes partitions).
pub mod queue {
    pub use crate::track::partition::{record_names, split_record};
}

/// How long a background applier holds off while requests saturate the server, for
/// a host that schedules its own drainer (the edge): one rule's limits, kept here.
pub mod applying {
    pub use crate::track::pressure::{DEFER_LIMIT_MS, SATURATED_MEMORY_MS};
}

/// The route table as data, for documentation and the playground's examples.
pub mod api {
    pub use crate::routes::{find, Auth, Endpoint, Family, Route, ROUTES};
}

/// Warehouse syncs for hosts that read warehouse tables: integrations, and a job's
/// steps (begin, commit a batch of rows, finish). The host reads the rows; every
/// rule (row parsing, what a row does, counts, cursors, statuses) is here.
pub mod warehouse {
    pub use crate::cdi::columns::{Columns, COLUMNS};
    pub use crate::cdi::integration::{all, get as integration};
    pub use crate::cdi::integration::{Cursor, DataKind, Integration, JobStatus, Spec, Warehouse};
    pub use crate::cdi::job::{Job, RowError};
    pub use crate::cdi::manage::{create, delete, due, request_run, requested, rewind, update, withdraw, Update};
    pub use crate::cdi::pipeline::Pipeline;
    pub use crate::cdi::position::Within;
    pub use crate::cdi::read::job_details;
    pub use crate::cdi::resume::Resume;
    pub use crate::cdi::rows::Row;
    pub use crate::cdi::sync::{
        begin, close_interrupted, commit_batch, finish, job, prepare_batch, reads_payload, BatchReport, Begun,
        PreparedBatch,
    };
}
