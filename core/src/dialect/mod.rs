//! What the hosted platform accepts beyond its API reference, and `--strict`.
//!
//! Real clients send what the platform has always taken: numbers where the
//! reference has string identifiers, event times in their language's own format,
//! an older shape of an alias, a singular field where the reference has an array.
//! Engage reads each of them as the platform does ([`Dialect::Platform`], the
//! default), and refuses each with a 400 that says what the reference expects
//! under `--strict` ([`Dialect::Strict`]), so a team can check that its own client
//! sends the documented forms. Every form is a [`Form`], with where it was seen
//! (docs/decisions/fidelity.md lists them).
//!
//! Two ways in: the parsers of `/users/track` (the hot path) call [`id_text`] and
//! [`time`] on the values they read; every other JSON body goes through
//! [`normalize`] first, which rewrites the lenient forms into the reference's.

mod bodies;
mod time;

pub use bodies::normalize;
pub use time::time;

use std::borrow::Cow;

use serde_json::Number;

/// How requests are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// As the hosted platform reads them: every [`Form`] accepted.
    #[default]
    Platform,
    /// As the reference writes them: every [`Form`] refused.
    Strict,
}

/// A form the platform accepts that the reference does not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A JSON integer where the reference has a string identifier (`external_id`,
    /// `external_ids`, `product_id`...), read as its decimal text.
    NumberAsId,
    /// An event or purchase time in another ISO 8601 form: a space for `T`, an
    /// offset `+hhmm`, `+hh` or `+h:mm`, a space before the offset, any number of
    /// fractional digits, the platform's `:SSS` milliseconds, no zone (UTC), or a
    /// date alone (midnight UTC).
    TimeText,
    /// `/users/alias/new` entries shaped `{"user_alias": {"alias_name", "alias_label"}}`.
    NestedUserAlias,
    /// A single string where the reference has an array (`external_id` in v1's
    /// `/subscription/status/set`, `external_ids` given as one string).
    SingleForArray,
    /// `/v2/subscription/status/set` entries naming users with v1's singular
    /// `external_id`, `email` or `phone` instead of `external_ids`, `emails`, `phones`.
    SingularField,
}

impl Form {
    /// What the reference expects instead (the end of a `--strict` refusal).
    pub fn expected(self) -> &'static str {
        match self {
            Form::NumberAsId => "a string (the platform reads a number as its decimal text; --strict refuses it)",
            Form::TimeText => {
                "an ISO 8601 time with 'T', seconds and an offset or Z, e.g. 2026-01-01T10:00:00Z \
                 (the platform reads other forms; --strict refuses them)"
            }
            Form::NestedUserAlias => {
                "'alias_name' and 'alias_label' in the entry itself (the platform reads a nested \
                 'user_alias'; --strict refuses it)"
            }
            Form::SingleForArray => "an array of strings (the platform reads one string; --strict refuses it)",
            Form::SingularField => {
                "'external_ids', 'emails' or 'phones' (the platform reads v1's singular fields; --strict refuses them)"
            }
        }
    }
}

/// The largest integer read as an identifier (JavaScript's largest safe integer,
/// 2^53 - 1): past it a JSON number may not be the one the client meant
/// (JavaScript and many parsers round it).
pub const MAX_ID_NUMBER: u64 = (1 << 53) - 1;

/// A refusal of a form under `--strict`: `field` and what the reference expects.
pub fn refusal(field: &str, form: Form) -> String {
    format!("'{field}' must be {}", form.expected())
}

/// The decimal text of a number given as an identifier, when the platform reads
/// it as one: an integer of at most 2^53 - 1 in magnitude.
pub fn number_text(n: &Number) -> Result<String, String> {
    let fits = |m: u64| m <= MAX_ID_NUMBER;
    if let Some(u) = n.as_u64() {
        if fits(u) {
            return Ok(u.to_string());
        }
    } else if let Some(i) = n.as_i64() {
        if fits(i.unsigned_abs()) {
            return Ok(i.to_string());
        }
    } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= MAX_ID_NUMBER as f64) {
        // JSON Schema's integers include `97.0`: the same whole number.
        return Ok(format!("{f:.0}"));
    } else {
        return Err(format!("must be a string or a whole number, not {n}"));
    }
    Err(format!("must be a string, or a whole number of at most 2^53 - 1 in magnitude (not {n})"))
}

/// An identifier's text from a [`crate::json::Json`] value: a string, or (the
/// platform's reading) an integer as its decimal text. `None` when the value is
/// neither; an error names the field and why.
pub fn id_text<'v>(v: &'v crate::json::Json<'_>, field: &str, dialect: Dialect) -> Result<Cow<'v, str>, String> {
    match v {
        crate::json::Json::Str(s) => Ok(Cow::Borrowed(s.as_ref())),
        crate::json::Json::Number(_) if dialect == Dialect::Strict => Err(refusal(field, Form::NumberAsId)),
        crate::json::Json::Number(n) => number_text(n).map(Cow::Owned).map_err(|why| format!("'{field}' {why}")),
        _ => Err(format!("'{field}' must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_up_to_2_53_read_as_their_decimal_text() {
        let n = |text: &str| serde_json::from_str::<Number>(text).unwrap();
        assert_eq!(number_text(&n("1")), Ok("1".into()));
        assert_eq!(number_text(&n("-42")), Ok("-42".into()));
        assert_eq!(number_text(&n("9007199254740991")), Ok("9007199254740991".into()));
        assert!(number_text(&n("9007199254740992")).unwrap_err().contains("2^53"));
        assert!(number_text(&n("1.5")).unwrap_err().contains("whole number"));
        assert_eq!(number_text(&n("1e3")), Ok("1000".into()));
        assert_eq!(number_text(&n("-97.0")), Ok("-97".into()));
        assert!(number_text(&n("1e300")).is_err());
        assert!(number_text(&n("-9007199254740992")).is_err());
    }
}
