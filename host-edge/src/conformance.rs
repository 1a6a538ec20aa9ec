//! The store conformance suite of the core (`engage_core::store::conformance`), run on
//! D1 inside the Worker, since that is the only place a D1 store can run.
//!
//! The core routes `POST /_engage/conformance` (admin token) and asks the host to
//! run it ([`engage_core::Then::RunConformance`]). It runs only when the Worker has
//! a scratch D1 binding `CONFORMANCE_DB` (test.sh adds one to its local config; the
//! deployable wrangler.toml has none), each check on a freshly emptied scratch
//! database; otherwise the core's 404 stands. A failing check panics, as in
//! `cargo test`; the panic is logged and the request fails with 500.

use engage_core::store::conformance::{report, run_all};
use engage_core::Response;
use worker::Env;

use crate::d1::D1Store;

const BINDING: &str = "CONFORMANCE_DB";

/// An emptied scratch store.
async fn fresh(env: &Env) -> D1Store {
    let db = env.d1(BINDING).expect("the scratch binding was there a moment ago");
    db.exec(
        "DELETE FROM docs\nDELETE FROM idents\nDELETE FROM queue\nUPDATE queue_cursor SET applied = 0 WHERE id = 1",
    )
    .await
    .expect("empty the scratch database");
    D1Store::new(db, None)
}

/// Runs every check, or `None` when this Worker has no scratch database.
pub async fn run(env: &Env) -> Option<Response> {
    env.d1(BINDING).ok()?;
    let passed = run_all(async || fresh(env).await, |s| s).await;
    Some(report(&passed))
}
