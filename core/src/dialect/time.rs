//! Event and purchase times in the forms clients send.
//!
//! The reference asks for ISO 8601 with an offset or `Z` (RFC 3339). The platform
//! documents "ISO 8601 or `yyyy-MM-dd'T'HH:mm:ss:SSSZ`", and its clients send
//! their language's own text: Ruby's `Time#to_s` (`2019-02-15 00:00:00 -0500`),
//! PHP's `DATE_ATOM`, .NET's seven fractional digits, the platform's own Postman
//! examples (`+1:00`, no zone). Read here, with [`Dialect::Platform`]:
//!
//! - the date `YYYY-MM-DD`, then `T`, `t` or a space, then `HH:MM`, optionally
//!   `:SS`, optionally fractional seconds after `.`, `,` or the platform's `:`
//!   (any number of digits; kept to the millisecond);
//! - then, optionally after spaces, `Z`, `z`, `UTC`, or an offset `+hh:mm`,
//!   `+hhmm`, `+hh`, `+h:mm` or `+h` (at most 23:59);
//! - no zone: UTC (the platform's documented default); a date alone: midnight UTC.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

use super::{refusal, Dialect, Form};
use crate::time::Timestamp;

/// A time as the platform reads it; under `--strict`, RFC 3339 only. The error
/// names `field`.
pub fn time(text: &str, field: &str, dialect: Dialect) -> Result<Timestamp, String> {
    if let Some(t) = Timestamp::parse(text) {
        return Ok(t);
    }
    match lenient(text.trim()) {
        Some(_) if dialect == Dialect::Strict => Err(refusal(field, Form::TimeText)),
        Some(t) => Ok(t),
        None => Err(format!("'{field}' must be an ISO 8601 time with an offset or Z")),
    }
}

/// Splits off the leading run of ASCII digits.
fn digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

fn lenient(s: &str) -> Option<Timestamp> {
    let date = NaiveDate::parse_from_str(s.get(..10)?, "%Y-%m-%d").ok()?;
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(Timestamp(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis()));
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (hours, rest) = digits(rest);
    let rest = rest.strip_prefix(':')?;
    let (minutes, mut rest) = digits(rest);
    if hours.len() != 2 || minutes.len() != 2 {
        return None;
    }
    let mut seconds = "0";
    let mut millis = 0u32;
    if let Some(r) = rest.strip_prefix(':') {
        let (s, r) = digits(r);
        if s.len() != 2 {
            return None;
        }
        seconds = s;
        rest = r;
        // Fractional seconds: `.` or `,` (ISO 8601), or `:` (the platform's `:SSS`).
        if let Some(r) = rest.strip_prefix(['.', ',', ':']) {
            let (fraction, r) = digits(r);
            if fraction.is_empty() {
                return None;
            }
            let ms: String = fraction.chars().chain("000".chars()).take(3).collect();
            millis = ms.parse().ok()?;
            rest = r;
        }
    }
    let time =
        NaiveTime::from_hms_milli_opt(hours.parse().ok()?, minutes.parse().ok()?, seconds.parse().ok()?, millis)?;
    let local = NaiveDateTime::new(date, time);
    let offset = offset_secs(rest.trim_start())?;
    Some(Timestamp(local.and_utc().timestamp_millis() - offset * 1000))
}

/// The zone's offset east of UTC in seconds: none, `Z`, `UTC`, or `±h[h][[:]mm]`.
fn offset_secs(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone.eq_ignore_ascii_case("z") || zone.eq_ignore_ascii_case("utc") {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) => (h, m),
        None if rest.len() == 4 => rest.split_at(2),
        None => (rest, "0"),
    };
    let ok = (1..=2).contains(&h.len())
        && (1..=2).contains(&m.len())
        && (h.chars().chain(m.chars())).all(|c| c.is_ascii_digit());
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (ok && h <= 23 && m <= 59).then_some(sign * (h * 3600 + m * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Result<String, String> {
        time(text, "time", Dialect::Platform).map(Timestamp::to_rfc3339)
    }

    #[test]
    fn the_forms_clients_send_read_as_the_platform_reads_them() {
        for (text, want) in [
            ("2019-02-15T05:00:00Z", "2019-02-15T05:00:00.000Z"),
            ("2019-02-15 00:00:00 -0500", "2019-02-15T05:00:00.000Z"),
            ("2019-02-15 00:00:00 -05:00", "2019-02-15T05:00:00.000Z"),
            ("2019-02-15T00:00:00-05", "2019-02-15T05:00:00.000Z"),
            ("2013-07-16T19:20:30+1:00", "2013-07-16T18:20:30.000Z"),
            ("2024-01-01T00:00:00.1234567+00:00", "2024-01-01T00:00:00.123Z"),
            ("2024-01-01T00:00:00,5Z", "2024-01-01T00:00:00.500Z"),
            ("2019-02-15T00:00:00:250-0500", "2019-02-15T05:00:00.250Z"),
            ("2015-02-20T13:14:47", "2015-02-20T13:14:47.000Z"),
            ("2015-02-20 13:14", "2015-02-20T13:14:00.000Z"),
            ("2015-02-20 13:14:47 UTC", "2015-02-20T13:14:47.000Z"),
            ("2015-02-20", "2015-02-20T00:00:00.000Z"),
        ] {
            assert_eq!(at(text).as_deref(), Ok(want), "{text}");
        }
        for bad in [
            "",
            "yesterday",
            "2019-02-30",
            "2019-02-15T25:00:00Z",
            "2019-02-15 00:00:00 +2400",
            "2019-02-15T00",
            "1550188800",
            "2019-02-15T00:00:00 EST",
            "2019-02-15T00:00:00.Z",
        ] {
            assert!(at(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strict_reads_rfc_3339_only_and_says_what_it_expects() {
        assert!(time("2019-02-15T05:00:00.5+01:00", "time", Dialect::Strict).is_ok());
        let refused = time("2019-02-15 00:00:00 -0500", "time", Dialect::Strict).unwrap_err();
        assert!(refused.starts_with("'time' must be an ISO 8601 time with 'T'"), "{refused}");
        assert_eq!(
            time("nonsense", "time", Dialect::Strict).unwrap_err(),
            "'time' must be an ISO 8601 time with an offset or Z"
        );
    }
}
