//! # engage-www
//!
//! The playground: the Engage core compiled to wasm, running in the page on the
//! in-memory store, so no server is needed. This crate holds only what the page
//! needs around the core; every rule of the API stays in `engage-core`.
//!
//! - [`session`]: the engine, the provisioned workspace and key, and the snapshot
//!   kept in the browser's storage across reloads.
//! - [`examples`]: a ready request for every public route, from the core's route table.
//! - [`request`]: the editor's text fields as a core request or a `curl` command.
//! - `bindings` (wasm only): the JavaScript API, `Playground` and `routes()`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod examples;
pub mod request;
pub mod session;

#[cfg(target_arch = "wasm32")]
pub mod bindings;
