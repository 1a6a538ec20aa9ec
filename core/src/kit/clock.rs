//! POST /_engage/clock (a server started with a test clock only): set the time,
//! `{"now": "2026-01-01T00:00:00Z"}`, or move it on, `{"advance_secs": 3600}`. The
//! host keeps the offset; everything that reads the time (link expiry, event times
//! that default to now, rate-limit windows, sync schedules, `created_at` stamps)
//! follows it.

use serde_json::Value;

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
}
