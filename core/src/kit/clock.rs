//! POST /_engage/clock (a server started with a test clock only): set the time,
//! `{"now": "2026-01-01T00:00:00Z"}`, or move it on, `{"advance_secs": 3600}`. The
//! host keeps the offset; everything that reads the time (link expiry, event times
//! that default to now, rate-limit windows, sync schedules, `created_at` stamps)
//! follows it.
//!
//! With `?workspace=W` only that workspace's time moves ([`Offsets`], kept by the
//! engine): its requests (from its keys, and its preference pages) see it, so
//! tests running at once, each in a workspace of its own, move their clocks
//! without moving each other's. Background work (sync schedules, the inspector's
//! sessions) keeps the deployment's clock.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::ctx::Ctx;

use crate::error::ApiError;
use crate::input;
use crate::time::Timestamp;

/// The end of year 9999 (ms): the clock stays before it.
const LAST_MS: i64 = 253_402_300_800_000;

/// Most seconds one request may move the clock on: ten years.
pub const MAX_ADVANCE_SECS: i64 = 10 * 365 * 86_400;

/// The time a clock change asks for, from the server's time `now`.
pub fn target(body: &[u8], now: Timestamp) -> Result<Timestamp, ApiError> {
    let b = input::object(body).map_err(ApiError::bad)?;
    if let Some(k) = b.keys().find(|k| *k != "now" && *k != "advance_secs") {
        return Err(ApiError::bad(format!("unknown field '{k}': send 'now' or 'advance_secs'")));
    }
    match (b.get("now"), b.get("advance_secs")) {
        (Some(_), Some(_)) => Err(ApiError::bad("send 'now' or 'advance_secs', not both")),
        (Some(Value::String(text)), None) => match Timestamp::parse(text) {
            Some(t) if t.0 >= 0 && t.0 < LAST_MS => Ok(t),
            _ => Err(ApiError::bad(format!("'now' must be an RFC 3339 time from 1970 to 9999, not '{text}'"))),
        },
        (Some(_), None) => Err(ApiError::bad("'now' must be an RFC 3339 time such as 2026-01-01T00:00:00Z")),
        (None, Some(v)) => match v.as_i64() {
            Some(secs) if (0..=MAX_ADVANCE_SECS).contains(&secs) && now.0 + secs * 1000 < LAST_MS => {
                Ok(Timestamp(now.0 + secs * 1000))
            }
            _ => Err(ApiError::bad(format!(
                "'advance_secs' must be a whole number of seconds from 0 to {MAX_ADVANCE_SECS} (set 'now' to go back)"
            ))),
        },
        (None, None) => Err(ApiError::bad("send 'now' (an RFC 3339 time) or 'advance_secs' (seconds)")),
    }
}

/// Each workspace's clock, as milliseconds ahead of (or behind) the deployment's.
#[derive(Default)]
pub struct Offsets(Mutex<HashMap<String, i64>>);

impl Offsets {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The context of a request of `workspace`: its time, if a test moved it.
    pub fn at(&self, workspace: &str, ctx: Ctx) -> Ctx {
        match self.lock().get(workspace) {
            Some(offset) => Ctx { now: Timestamp(ctx.now.0.saturating_add(*offset).clamp(0, LAST_MS - 1)), ..ctx },
            None => ctx,
        }
    }

    /// Sets `workspace`'s time to `target`, the deployment's being `now`.
    pub fn set(&self, workspace: &str, target: Timestamp, now: Timestamp) {
        self.lock().insert(workspace.to_string(), target.0 - now.0);
    }

    /// Back to the deployment's time: `workspace`'s, or every workspace's (a reset).
    pub fn forget(&self, workspace: Option<&str>) {
        match workspace {
            Some(ws) => self.lock().remove(ws),
            None => {
                self.lock().clear();
                None
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_or_advance_and_every_bad_body_says_why() {
        let now = Timestamp(1_000_000);
        assert_eq!(target(br#"{"now": "2026-01-01T00:00:00Z"}"#, now), Ok(Timestamp(1_767_225_600_000)));
        assert_eq!(target(br#"{"advance_secs": 3600}"#, now), Ok(Timestamp(1_000_000 + 3_600_000)));
        for bad in [
            &br#"{}"#[..],
            br#"{"now": "tomorrow"}"#,
            br#"{"now": 5}"#,
            br#"{"advance_secs": -1}"#,
            br#"{"advance_secs": 1.5}"#,
            br#"{"advance_secs": "60"}"#,
            br#"{"now": "2026-01-01T00:00:00Z", "advance_secs": 1}"#,
            br#"{"at": 1}"#,
            b"[]",
        ] {
            assert!(matches!(target(bad, now), Err(ApiError::BadRequest(_))), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_workspace_clock_moves_that_workspace_only_and_keeps_ticking() {
        let clocks = Offsets::default();
        let ctx = Ctx::new(Timestamp(10_000), [0; 16]);
        clocks.set("a", Timestamp(70_000), ctx.now);
        assert_eq!(clocks.at("a", ctx).now, Timestamp(70_000));
        assert_eq!(clocks.at("b", ctx).now, Timestamp(10_000));
        // The deployment's time goes on: so does the workspace's, as far ahead.
        assert_eq!(clocks.at("a", Ctx::new(Timestamp(11_000), [0; 16])).now, Timestamp(71_000));
        assert_eq!(clocks.at("a", ctx).wall, Timestamp(10_000));
        clocks.forget(Some("a"));
        assert_eq!(clocks.at("a", ctx).now, Timestamp(10_000));
    }
}
