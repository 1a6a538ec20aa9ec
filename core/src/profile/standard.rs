//! Standard (default) profile attributes: which keys they are and what each accepts.
//! A key that is not listed here is a custom attribute.

use serde_json::Value;

use crate::profile::custom::normalise_time;
use crate::time::parse_date;

/// Keys of an attribute object that are identifiers or flags, never attributes.
pub const RESERVED: &[&str] = &[
    "external_id",
    "user_alias",
    "braze_id",
    "service_id",
    "_update_existing_only",
    "_merge_objects",
    "push_token_import",
];

fn string_max(v: &Value, max: usize) -> Result<Value, String> {
    match v {
        Value::String(s) if s.chars().count() <= max => Ok(v.clone()),
        Value::String(_) => Err(format!("must be at most {max} characters")),
        _ => Err("must be a string".into()),
    }
}

fn time_zone(v: &Value) -> Result<Value, String> {
    // Without a bundled time-zone database, accept the shapes of IANA names
    // ("UTC", "Area/Location", "America/Argentina/Buenos_Aires", "Etc/GMT+5").
    let s = v.as_str().ok_or("must be a string")?;
    let ok = s == "UTC"
        || s == "GMT"
        || (s.contains('/')
            && s.len() <= 64
            && s.split('/').all(|part| {
                !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-+".contains(&b))
            }));
    if ok {
        Ok(v.clone())
    } else {
        Err("must be an IANA time zone name such as 'America/New_York'".into())
    }
}

/// Validates a standard attribute. `None` when `key` is not a standard attribute;
/// otherwise the value to store (`Null` removes it) or why it was refused.
pub fn parse(key: &str, v: &Value) -> Option<Result<Value, String>> {
    let checked = |r: Result<Value, String>| Some(r.map_err(|why| format!("'{key}' {why}")));
    if v.is_null() && !matches!(key, "email_open_tracking_disabled" | "email_click_tracking_disabled") {
        // `null` removes a standard attribute, but only of a key we know.
        return STANDARD_KEYS.contains(&key).then_some(Ok(Value::Null));
    }
    match key {
        "first_name" | "last_name" | "home_city" => checked(string_max(v, 255)),
        "image_url" => checked(string_max(v, 1024)),
        "gender" => checked(match v.as_str() {
            Some(g @ ("M" | "F" | "O" | "N" | "P")) => Ok(Value::from(g)),
            Some(g) if matches!(g.to_ascii_uppercase().as_str(), "M" | "F" | "O" | "N" | "P") => {
                Ok(Value::from(g.to_ascii_uppercase()))
            }
            _ => Err("must be one of M, F, O, N, P or null".into()),
        }),
        "dob" => checked(match v.as_str().and_then(parse_date) {
            Some(d) => Ok(Value::from(d.format("%Y-%m-%d").to_string())),
            None => Err("must be a date written YYYY-MM-DD".into()),
        }),
        "country" => checked(match v.as_str() {
            Some(c) if c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {
                Ok(Value::from(c.to_ascii_uppercase()))
            }
            _ => Err("must be an ISO-3166-1 alpha-2 country code".into()),
        }),
        "language" => checked(match v.as_str() {
            Some(c) if c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {
                Ok(Value::from(c.to_ascii_lowercase()))
            }
            _ => Err("must be an ISO-639-1 language code".into()),
        }),
        "time_zone" => checked(time_zone(v)),
        "email_open_tracking_disabled" | "email_click_tracking_disabled" => checked(match v {
            Value::Bool(_) => Ok(v.clone()),
            _ => Err("must be a boolean".into()),
        }),
        "date_of_first_session" | "date_of_last_session" | "marked_email_as_spam_at" => {
            checked(match v.as_str().and_then(normalise_time) {
                Some(t) => Ok(Value::from(t)),
                None => Err("must be an ISO 8601 time".into()),
            })
        }
        "current_location" => checked(match v.as_object() {
            Some(o)
                if o.len() == 2
                    && o.get("latitude").and_then(Value::as_f64).is_some_and(|l| (-90.0..=90.0).contains(&l))
                    && o.get("longitude").and_then(Value::as_f64).is_some_and(|l| (-180.0..=180.0).contains(&l)) =>
            {
                Ok(v.clone())
            }
            _ => Err("must be an object with numeric 'latitude' and 'longitude'".into()),
        }),
        _ => None,
    }
}

/// Every standard attribute key handled by [`parse`].
pub const STANDARD_KEYS: &[&str] = &[
    "first_name",
    "last_name",
    "home_city",
    "image_url",
    "gender",
    "dob",
    "country",
    "language",
    "time_zone",
    "email_open_tracking_disabled",
    "email_click_tracking_disabled",
    "date_of_first_session",
    "date_of_last_session",
    "marked_email_as_spam_at",
    "current_location",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_and_normalised() {
        assert_eq!(parse("country", &json!("de")), Some(Ok(json!("DE"))));
        assert!(parse("country", &json!("Germany")).unwrap().is_err());
        assert_eq!(parse("gender", &json!("f")), Some(Ok(json!("F"))));
        assert!(parse("dob", &json!("1990-13-01")).unwrap().is_err());
        assert_eq!(parse("time_zone", &json!("America/New_York")), Some(Ok(json!("America/New_York"))));
        assert!(parse("time_zone", &json!("nowhere")).unwrap().is_err());
        assert_eq!(parse("first_name", &Value::Null), Some(Ok(Value::Null)));
        assert_eq!(parse("favourite_colour", &json!("red")), None);
    }
}
