//! The store conformance suite of the core (`engage_core::store::conformance`), run on
//! D1 inside the Worker, since that is the only place a D1 store can run.
//!
//! It exists only when the Worker has a scratch D1 binding `CONFORMANCE_DB` (test.sh
//! adds one to its local config; the deployable wrangler.toml has none): then
//! `POST /_engage/conformance` with the admin token runs every check on a freshly
//! emptied scratch database and answers 200 with their names. A failing check
//! panics, as in `cargo test`; the panic is logged and the request fails with 500.

use engage_core::store::conformance;
use engage_core::{admin, auth::key_hash, Request, Response};
use serde_json::json;
use worker::Env;

use crate::d1::D1Store;

/// The route, beside the core's operator routes.
pub const PATH: &str = "/_engage/conformance";
const BINDING: &str = "CONFORMANCE_DB";

/// Whether this Worker can run the suite.
pub fn available(env: &Env) -> bool {
    env.d1(BINDING).is_ok()
}

async fn fresh(env: &Env) -> worker::Result<D1Store> {
    let db = env.d1(BINDING)?;
    db.exec(
        "DELETE FROM docs\nDELETE FROM queue\nUPDATE queue_cursor SET applied = 0 WHERE id = 1",
    )
    .await?;
    Ok(D1Store::new(db, None))
}

/// Runs the suite; `admin_token` is the configured operator token.
pub async fn run(env: &Env, req: &Request, admin_token: Option<&str>) -> worker::Result<Response> {
    let expected = admin_token.map(key_hash);
    if let Err(e) = admin::authorize(req, expected.as_deref()) {
        return Ok(e.into_response());
    }
    conformance::versions_and_expectations(fresh(env).await?).await;
    conformance::a_failed_commit_stores_nothing(fresh(env).await?).await;
    conformance::deletes(fresh(env).await?).await;
    conformance::prefix_scans(fresh(env).await?).await;
    conformance::queue(fresh(env).await?).await;
    let passed = [
        "versions_and_expectations",
        "a_failed_commit_stores_nothing",
        "deletes",
        "prefix_scans",
        "queue",
    ];
    Ok(Response::json(200, &json!({"passed": passed})))
}
