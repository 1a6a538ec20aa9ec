//! Replays: requests in the exact shapes public clients send, each with the answer
//! the hosted platform gave when public material records it (the clients' own test
//! suites' recordings), compared by status, body and rate-limit headers. One file
//! per client family. Where a recording depends on data the platform had, the
//! replay makes that data first.

mod braze_ruby;
mod edx_braze_client;

use engage_tests::{Api, Reply};
use serde_json::Value;

/// A recorded exchange: what the client sent, what the platform answered.
pub(super) struct Recorded {
    pub method: &'static str,
    pub path: &'static str,
    pub body: Option<Value>,
    pub status: u16,
    pub answer: Value,
}

/// Sends the recorded request with `api`'s key and compares: the status, the body
/// (whole), and on success the `X-RateLimit-*` headers the platform sends.
pub(super) async fn replay(api: &Api, r: Recorded) -> Reply {
    let body = r.body.as_ref().map(|b| b.to_string().into_bytes());
    let got = api.call(r.method, r.path, body).await;
    let what = format!("{} {} {}", r.method, r.path, r.body.map(|b| b.to_string()).unwrap_or_default());
    assert_eq!((got.status, &got.body), (r.status, &r.answer), "{what}");
    if (200..300).contains(&got.status) {
        for h in ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"] {
            assert!(got.header(h).is_some_and(|v| v.parse::<u64>().is_ok()), "{what}: {h}");
        }
    }
    got
}
