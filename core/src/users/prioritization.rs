//! Prioritization: which one of several profiles sharing an email or phone an
//! identify, merge or delete entry means. One parser and one chooser, used by all
//! three endpoints.
//!
//! The array is applied in order, each value narrowing the candidates:
//! `identified` keeps the profiles with an external id and `unidentified` those
//! without one (each only when at least one candidate qualifies: the spec says
//! "prefer"), `most_recently_updated` / `least_recently_updated` keep the profiles
//! with the latest / earliest update time. When more than one profile is left, the
//! entry is not performed.

use serde_json::Value;

use crate::ids::{Identifier, ServiceId};
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// One value of a prioritization array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Prefer profiles with an external id.
    Identified,
    /// Prefer profiles without an external id.
    Unidentified,
    /// Prefer the most recently updated profile.
    MostRecentlyUpdated,
    /// Prefer the least recently updated profile (not allowed for delete).
    LeastRecentlyUpdated,
}

impl Priority {
    fn parse(text: &str) -> Option<Priority> {
        match text {
            "identified" => Some(Priority::Identified),
            "unidentified" => Some(Priority::Unidentified),
            "most_recently_updated" => Some(Priority::MostRecentlyUpdated),
            "least_recently_updated" => Some(Priority::LeastRecentlyUpdated),
            _ => None,
        }
    }
}

/// Which endpoint the array is for: delete refuses `least_recently_updated`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// `/users/identify` and `/users/merge`.
    IdentifyOrMerge,
    /// `/users/delete`.
    Delete,
}

/// A validated prioritization array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prioritization(Vec<Priority>);

/// The message for a missing `prioritization`.
pub const REQUIRED: &str = "'prioritization' is required with an 'email' or 'phone' identifier";

impl Prioritization {
    /// Parses the `prioritization` value of an email or phone entry.
    pub fn parse(v: Option<&Value>, purpose: Purpose) -> Result<Prioritization, String> {
        let allowed = match purpose {
            Purpose::IdentifyOrMerge => {
                "'identified', 'unidentified', 'most_recently_updated' or 'least_recently_updated'"
            }
            Purpose::Delete => "'identified', 'unidentified' or 'most_recently_updated'",
        };
        let shape = || format!("'prioritization' must be a non-empty array of {allowed}");
        let items = match v {
            None | Some(Value::Null) => return Err(REQUIRED.into()),
            Some(Value::Array(items)) if !items.is_empty() => items,
            Some(_) => return Err(shape()),
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let p = item.as_str().and_then(Priority::parse).ok_or_else(shape)?;
            if p == Priority::LeastRecentlyUpdated && purpose == Purpose::Delete {
                return Err("'least_recently_updated' is not allowed in the prioritization of /users/delete".into());
            }
            out.push(p);
        }
        if out.contains(&Priority::Identified) && out.contains(&Priority::Unidentified) {
            return Err("'prioritization' may contain only one of 'identified' and 'unidentified'".into());
        }
        Ok(Prioritization(out))
    }

    /// Narrows the candidates (id, identified?, updated_at); `Some` when exactly one is left.
    pub fn choose(&self, candidates: &[(ServiceId, bool, Timestamp)]) -> Choice {
        let mut left: Vec<&(ServiceId, bool, Timestamp)> = candidates.iter().collect();
        for p in &self.0 {
            match p {
                Priority::Identified | Priority::Unidentified => {
                    let want = *p == Priority::Identified;
                    if left.iter().any(|c| c.1 == want) {
                        left.retain(|c| c.1 == want);
                    }
                }
                Priority::MostRecentlyUpdated => {
                    if let Some(max) = left.iter().map(|c| c.2).max() {
                        left.retain(|c| c.2 == max);
                    }
                }
                Priority::LeastRecentlyUpdated => {
                    if let Some(min) = left.iter().map(|c| c.2).min() {
                        left.retain(|c| c.2 == min);
                    }
                }
            }
        }
        match left.as_slice() {
            [] => Choice::None,
            [one] => Choice::One(one.0.clone()),
            more => Choice::Ambiguous(more.len()),
        }
    }
}

/// The outcome of resolving an identifier with prioritization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// No profile has the identifier.
    None,
    /// Exactly one profile.
    One(ServiceId),
    /// This many profiles are still left: the entry is not performed.
    Ambiguous(usize),
}

impl Choice {
    /// The chosen profile, if exactly one.
    pub fn one(self) -> Option<ServiceId> {
        match self {
            Choice::One(id) => Some(id),
            _ => None,
        }
    }
}

/// Resolves an identifier to the one profile it names. Email and phone go through
/// the prioritization (`None` for them behaves like an empty array: one match or
/// nothing); unique identifiers ignore it.
pub async fn pick<S: Store>(
    tx: &mut Tx<'_, S>,
    ident: &Identifier,
    prioritization: Option<&Prioritization>,
) -> Result<Choice, StoreError> {
    let found = tx.resolve(ident).await?;
    let shared = matches!(ident, Identifier::Email(_) | Identifier::Phone(_));
    if !shared || found.len() <= 1 {
        return Ok(match found.len() {
            0 => Choice::None,
            1 => Choice::One(found[0].clone()),
            n => Choice::Ambiguous(n),
        });
    }
    let mut candidates = Vec::with_capacity(found.len());
    for id in found {
        if let Some(p) = tx.profile(&id).await? {
            candidates.push((id, p.is_identified(), p.updated_at));
        }
    }
    let empty = Prioritization(Vec::new());
    Ok(prioritization.unwrap_or(&empty).choose(&candidates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value, purpose: Purpose) -> Result<Prioritization, String> {
        Prioritization::parse(Some(&v), purpose)
    }

    fn sid(s: &str) -> ServiceId {
        ServiceId::parse(s).unwrap()
    }

    fn candidates() -> Vec<(ServiceId, bool, Timestamp)> {
        vec![
            (sid("anon-old"), false, Timestamp(1)),
            (sid("anon-new"), false, Timestamp(5)),
            (sid("known-mid"), true, Timestamp(3)),
        ]
    }

    #[test]
    fn values_are_validated() {
        assert!(parse(json!(["identified", "most_recently_updated"]), Purpose::Delete).is_ok());
        assert_eq!(Prioritization::parse(None, Purpose::Delete), Err(REQUIRED.into()));
        assert!(parse(json!([]), Purpose::IdentifyOrMerge).is_err());
        assert!(parse(json!("identified"), Purpose::IdentifyOrMerge).is_err());
        assert!(parse(json!(["newest"]), Purpose::IdentifyOrMerge).is_err());
        assert!(parse(json!([1]), Purpose::IdentifyOrMerge).is_err());
    }

    #[test]
    fn identified_and_unidentified_exclude_each_other() {
        let err = parse(json!(["identified", "unidentified"]), Purpose::IdentifyOrMerge).unwrap_err();
        assert_eq!(err, "'prioritization' may contain only one of 'identified' and 'unidentified'");
    }

    #[test]
    fn least_recently_updated_is_refused_for_delete_only() {
        assert!(parse(json!(["least_recently_updated"]), Purpose::IdentifyOrMerge).is_ok());
        let err = parse(json!(["least_recently_updated"]), Purpose::Delete).unwrap_err();
        assert_eq!(err, "'least_recently_updated' is not allowed in the prioritization of /users/delete");
    }

    #[test]
    fn values_narrow_in_order() {
        let c = candidates();
        let p = |v: Value| parse(v, Purpose::IdentifyOrMerge).unwrap();
        assert_eq!(p(json!(["identified"])).choose(&c), Choice::One(sid("known-mid")));
        assert_eq!(p(json!(["unidentified"])).choose(&c), Choice::Ambiguous(2));
        assert_eq!(p(json!(["unidentified", "most_recently_updated"])).choose(&c), Choice::One(sid("anon-new")));
        assert_eq!(p(json!(["unidentified", "least_recently_updated"])).choose(&c), Choice::One(sid("anon-old")));
        assert_eq!(p(json!(["most_recently_updated"])).choose(&c), Choice::One(sid("anon-new")));
        // Applied in order: the most recent is unidentified, so `identified` after it changes nothing.
        assert_eq!(p(json!(["most_recently_updated", "identified"])).choose(&c), Choice::One(sid("anon-new")));
    }

    #[test]
    fn preferring_a_kind_that_is_absent_keeps_every_candidate() {
        let only_anonymous = &candidates()[..2];
        let p = parse(json!(["identified"]), Purpose::IdentifyOrMerge).unwrap();
        assert_eq!(p.choose(only_anonymous), Choice::Ambiguous(2));
    }

    #[test]
    fn ties_on_update_time_stay_ambiguous() {
        let c = vec![(sid("a"), false, Timestamp(7)), (sid("b"), false, Timestamp(7))];
        let p = parse(json!(["most_recently_updated"]), Purpose::Delete).unwrap();
        assert_eq!(p.choose(&c), Choice::Ambiguous(2));
        assert_eq!(p.choose(&[]), Choice::None);
    }
}
