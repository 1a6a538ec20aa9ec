//! The black-box API suite: one binary, one module per endpoint family. It runs
//! against any host (see `engage_tests::host`).

mod auth;
mod cdi;
mod export;
mod fidelity;
mod identity;
mod kit;
mod matrix;
mod preference_center;
mod replay;
mod scim;
mod security;
mod service;
mod shapes;
mod subscriptions;
mod track;
mod track_sync;
