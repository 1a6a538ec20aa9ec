//! Time values. The core never reads a clock: hosts pass `now` in [`crate::Ctx`].

use chrono::{DateTime, NaiveDate, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Parses an ISO 8601 / RFC 3339 timestamp that carries an offset or `Z`
    /// (the spec requires one). Fractional seconds are kept to the millisecond.
    pub fn parse(text: &str) -> Option<Timestamp> {
        let dt = DateTime::parse_from_rfc3339(text.trim()).ok()?;
        Some(Timestamp(dt.timestamp_millis()))
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2024-05-01T10:00:00.000Z`.
    pub fn to_rfc3339(self) -> String {
        match Utc.timestamp_millis_opt(self.0).single() {
            Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Millis, true),
            None => String::from("1970-01-01T00:00:00.000Z"),
        }
    }

    /// RFC 3339 in UTC to the second, e.g. `2024-05-01T10:00:00Z` (as the platform
    /// writes preference-center times).
    pub fn to_rfc3339_seconds(self) -> String {
        match Utc.timestamp_millis_opt(self.0).single() {
            Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Secs, true),
            None => String::from("1970-01-01T00:00:00Z"),
        }
    }

    /// The platform's long date-time text in UTC, as its dashboard-user times are
    /// written, e.g. `Thursday, January 1, 1970 12:00:00 AM`.
    pub fn to_long_text(self) -> String {
        match Utc.timestamp_millis_opt(self.0).single() {
            Some(dt) => dt.format("%A, %B %-d, %Y %-I:%M:%S %p").to_string(),
            None => String::from("Thursday, January 1, 1970 12:00:00 AM"),
        }
    }

    /// Whole seconds since the epoch.
    pub fn seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
}

/// Validates a calendar date written `YYYY-MM-DD` (used for `dob`).
pub fn parse_date(text: &str) -> Option<NaiveDate> {
    if text.len() != 10 {
        return None;
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_normalises_to_utc() {
        let t = Timestamp::parse("2024-01-01T01:00:00+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-01-01T00:00:00.000Z");
        assert!(Timestamp::parse("2024-01-01T00:00:00").is_none());
        assert!(Timestamp::parse("yesterday").is_none());
    }

    #[test]
    fn long_text_is_the_platforms() {
        assert_eq!(Timestamp(0).to_long_text(), "Thursday, January 1, 1970 12:00:00 AM");
        assert_eq!(Timestamp(1_700_000_000_000).to_long_text(), "Tuesday, November 14, 2023 10:13:20 PM");
    }

    #[test]
    fn dates_must_be_real_calendar_days() {
        assert!(parse_date("1990-02-28").is_some());
        assert!(parse_date("1990-02-30").is_none());
        assert!(parse_date("1990-2-3").is_none());
    }
}
