//! Combining two profiles, and `POST /users/merge`.
//!
//! [`absorb`] is the one rule for folding a source profile into a target profile;
//! `/users/identify` (an anonymous profile into an identified one) and
//! `/users/merge` both use it through [`combine`], which also links a newly gained
//! email and removes the source.
//!
//! `/users/merge` is documented as asynchronous; here the updates are applied before
//! the 202 is sent (a client cannot tell the difference, except that a read right
//! after sees the result). Updates are applied in request order in one unit of work,
//! so a chain inside one request (A into B, then B into C) ends with everything in C.

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias};
use crate::input;
use crate::profile::Profile;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::subscriptions::address::link_email;
use crate::time::Timestamp;
use crate::users::prioritization::{pick, Prioritization, Purpose};

/// Most merge updates in one request.
pub const MAX_UPDATES: usize = 50;

/// The spec's error messages for `/users/merge`, word for word.
pub mod messages {
    /// `merge_updates` is not an array of objects.
    pub const NOT_ARRAY: &str = "'merge_updates' must be an array of objects";
    /// More than 50 updates.
    pub const TOO_MANY: &str = "a single request may not contain more than 50 merge updates";
    /// An identifier of an update is invalid.
    pub const BAD_IDENTIFIER: &str = "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, 'email' property that is a string, or 'phone' property that is a string";
    /// An update has other keys than the two identifiers.
    pub const EXTRA_KEYS: &str = "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'";
}

/// Folds `source` into `target` (merge rules of the spec):
/// - identifiers and standard attributes missing on the target are filled from the
///   source (aliases only for labels the target does not use: one alias per label);
/// - `date_of_first_session` keeps the earlier value, `date_of_last_session` and
///   every other `..._at` time the later one;
/// - custom attributes: the target's are kept, absent ones are added;
/// - event and purchase summaries: counts summed, first the earlier, last the later;
///   total revenue summed;
/// - email and push states and subscription-group states fill the target only
///   where it has none; the hard-bounce flag comes with the email it belongs to.
///
/// Returns the email the target gained, if any (the caller links it).
pub fn absorb(target: &mut Profile, source: &Profile) -> Option<Email> {
    for (label, name) in &source.aliases {
        target.aliases.entry(label.clone()).or_insert_with(|| name.clone());
    }
    let mut gained = None;
    if target.email.is_none() {
        if let Some(e) = &source.email {
            target.email = Some(e.clone());
            target.email_hard_bounced |= source.email_hard_bounced;
            gained = Some(e.clone());
        }
    }
    if target.phone.is_none() {
        target.phone.clone_from(&source.phone);
    }
    for (k, v) in &source.standard {
        match target.standard.get_mut(k) {
            None => {
                target.standard.insert(k.clone(), v.clone());
            }
            Some(mine) => {
                let keep_earlier = k == "date_of_first_session";
                let keep_later = k == "date_of_last_session" || k.ends_with("_at");
                if keep_earlier || keep_later {
                    let t = |v: &Value| v.as_str().and_then(Timestamp::parse);
                    if let (Some(a), Some(b)) = (t(mine), t(v)) {
                        if (keep_earlier && b < a) || (keep_later && b > a) {
                            *mine = v.clone();
                        }
                    }
                }
            }
        }
    }
    for (k, v) in &source.custom {
        if !target.custom.contains_key(k) {
            target.custom.insert(k.clone(), v.clone());
        }
    }
    for (name, s) in &source.events {
        target.events.entry(name.clone()).and_modify(|t| t.absorb(s)).or_insert(*s);
    }
    for (name, s) in &source.purchases {
        target.purchases.entry(name.clone()).and_modify(|t| t.absorb(s)).or_insert(*s);
    }
    target.total_revenue = crate::profile::add_revenue(target.total_revenue, source.total_revenue);
    if target.email_subscribe.is_none() {
        target.email_subscribe = source.email_subscribe;
    }
    if target.push_subscribe.is_none() {
        target.push_subscribe = source.push_subscribe;
    }
    for (gid, state) in &source.groups {
        target.groups.entry(gid.clone()).or_insert(*state);
    }
    target.updated_at = target.updated_at.max(source.updated_at);
    gained
}

/// Folds profile `source` into profile `target` inside the unit of work and removes
/// the source. Returns false (and changes nothing) when either is missing or they
/// are the same profile.
pub async fn combine<S: Store>(
    tx: &mut Tx<'_, S>,
    source: &ServiceId,
    target: &ServiceId,
    now: Timestamp,
) -> Result<bool, StoreError> {
    if source == target {
        return Ok(false);
    }
    let Some(src) = tx.profile(source).await?.cloned() else { return Ok(false) };
    let gained = match tx.profile_mut(target).await? {
        Some(t) => {
            let gained = absorb(t, &src);
            t.updated_at = t.updated_at.max(now);
            gained
        }
        None => return Ok(false),
    };
    tx.delete_profile(source).await?;
    if let Some(e) = gained {
        link_email(tx, target, &e).await?;
    }
    Ok(true)
}

/// An identifier of a merge update: a user by external id, alias, email or phone
/// (the last two with their prioritization).
#[derive(Clone, Debug, PartialEq)]
pub struct MergeIdentifier {
    /// The identifier.
    pub ident: Identifier,
    /// Present for email and phone.
    pub prioritization: Option<Prioritization>,
}

impl MergeIdentifier {
    /// Parses `{"external_id": ..}`, `{"user_alias": {..}}`, `{"email": .., "prioritization": [..]}`
    /// or `{"phone": .., "prioritization": [..]}`.
    pub fn parse(v: &Value) -> Result<MergeIdentifier, ApiError> {
        let bad = || ApiError::bad(messages::BAD_IDENTIFIER);
        let obj = v.as_object().ok_or_else(bad)?;
        let kinds: Vec<&str> =
            ["external_id", "user_alias", "email", "phone"].into_iter().filter(|k| obj.contains_key(*k)).collect();
        if kinds.len() != 1 || obj.keys().any(|k| k != kinds[0] && k != "prioritization") {
            return Err(bad());
        }
        let raw = &obj[kinds[0]];
        let text = || raw.as_str().ok_or_else(bad);
        let ident = match kinds[0] {
            "external_id" => Identifier::External(ExternalId::parse(text()?).ok_or_else(bad)?),
            "user_alias" => Identifier::Alias(UserAlias::from_json(raw).ok_or_else(bad)?),
            "email" => Identifier::Email(Email::parse(text()?).ok_or_else(bad)?),
            _ => Identifier::Phone(Phone::parse(text()?).ok_or_else(bad)?),
        };
        let prioritization = match ident {
            Identifier::Email(_) | Identifier::Phone(_) => Some(
                Prioritization::parse(obj.get("prioritization"), Purpose::IdentifyOrMerge).map_err(ApiError::bad)?,
            ),
            _ => None,
        };
        Ok(MergeIdentifier { ident, prioritization })
    }

    /// The one profile this identifier names now, if exactly one.
    pub async fn resolve<S: Store>(&self, tx: &mut Tx<'_, S>) -> Result<Option<ServiceId>, StoreError> {
        Ok(pick(tx, &self.ident, self.prioritization.as_ref()).await?.one())
    }
}

/// One parsed merge update.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeUpdate {
    /// The profile that is folded in and removed.
    pub merge: MergeIdentifier,
    /// The profile that stays.
    pub keep: MergeIdentifier,
}

/// Parses a `/users/merge` body; every update is checked before anything is applied.
pub fn parse(body: &[u8]) -> Result<Vec<MergeUpdate>, ApiError> {
    let body = input::json(body).map_err(ApiError::bad)?;
    let updates = match body.get("merge_updates") {
        Some(Value::Array(items)) if items.iter().all(Value::is_object) => items,
        _ => return Err(ApiError::bad(messages::NOT_ARRAY)),
    };
    if updates.len() > MAX_UPDATES {
        return Err(ApiError::bad(messages::TOO_MANY));
    }
    let mut out = Vec::with_capacity(updates.len());
    for u in updates {
        let u: &Map<String, Value> = u.as_object().ok_or_else(|| ApiError::bad(messages::NOT_ARRAY))?;
        let (Some(merge), Some(keep), 2) = (u.get("identifier_to_merge"), u.get("identifier_to_keep"), u.len()) else {
            return Err(ApiError::bad(messages::EXTRA_KEYS));
        };
        out.push(MergeUpdate { merge: MergeIdentifier::parse(merge)?, keep: MergeIdentifier::parse(keep)? });
    }
    Ok(out)
}

/// Applies one update; an identifier that names no user or several users, or both
/// naming the same user, skips the update.
pub async fn apply_update<S: Store>(tx: &mut Tx<'_, S>, u: &MergeUpdate, now: Timestamp) -> Result<bool, StoreError> {
    let Some(source) = u.merge.resolve(tx).await? else { return Ok(false) };
    let Some(target) = u.keep.resolve(tx).await? else { return Ok(false) };
    combine(tx, &source, &target, now).await
}

/// POST /users/merge: 202 `{"message": "success"}` once every update is applied.
pub async fn merge<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let updates = parse(body)?;
    transact(store, ws, ctx.seed, async |tx, _| {
        for u in &updates {
            apply_update(tx, u, ctx.now).await?;
        }
        Ok(())
    })
    .await?;
    Ok(Response::json(202, &json!({"message": "success"})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::states::{GlobalState, GroupState};
    use crate::profile::Summary;
    use crate::testkit::Kit;
    use serde_json::json;

    fn profile(id: &str, at: i64) -> Profile {
        Profile::new(ServiceId::parse(id).unwrap(), Timestamp(at))
    }

    #[test]
    fn absorb_fills_missing_fields_and_keeps_the_targets() {
        let mut t = profile("t", 10);
        t.standard.insert("first_name".into(), json!("Al"));
        t.custom.insert("plan".into(), json!("gold"));
        let mut s = profile("s", 20);
        s.standard.insert("first_name".into(), json!("Alex"));
        s.standard.insert("last_name".into(), json!("Sterling"));
        s.custom.insert("plan".into(), json!("free"));
        s.custom.insert("pets".into(), json!(2));
        s.email = Email::parse("s@example.com");
        s.phone = Phone::parse("+14155550100");
        assert_eq!(absorb(&mut t, &s), Email::parse("s@example.com"));
        assert_eq!(t.standard["first_name"], json!("Al"));
        assert_eq!(t.standard["last_name"], json!("Sterling"));
        assert_eq!(Value::Object(t.custom.clone()), json!({"plan": "gold", "pets": 2}));
        assert_eq!(t.phone, Phone::parse("+14155550100"));
        assert_eq!(t.updated_at, Timestamp(20));
    }

    #[test]
    fn absorb_sums_summaries_and_takes_the_earlier_first_and_later_last() {
        let mut t = profile("t", 0);
        t.events.insert("play".into(), Summary { first: Timestamp(5), last: Timestamp(9), count: 2 });
        t.purchases.insert("sku".into(), Summary { first: Timestamp(5), last: Timestamp(5), count: 1 });
        t.total_revenue = 10.0;
        let mut s = profile("s", 0);
        s.events.insert("play".into(), Summary { first: Timestamp(1), last: Timestamp(7), count: 3 });
        s.events.insert("quit".into(), Summary::once(Timestamp(4)));
        s.purchases.insert("sku".into(), Summary { first: Timestamp(8), last: Timestamp(12), count: 2 });
        s.total_revenue = 2.5;
        absorb(&mut t, &s);
        assert_eq!(t.events["play"], Summary { first: Timestamp(1), last: Timestamp(9), count: 5 });
        assert_eq!(t.events["quit"], Summary::once(Timestamp(4)));
        assert_eq!(t.purchases["sku"], Summary { first: Timestamp(5), last: Timestamp(12), count: 3 });
        assert_eq!(t.total_revenue, 12.5);
    }

    #[test]
    fn absorb_keeps_earlier_first_session_and_later_last_x_at() {
        let mut t = profile("t", 0);
        t.standard.insert("date_of_first_session".into(), json!("2020-01-02T00:00:00.000Z"));
        t.standard.insert("date_of_last_session".into(), json!("2020-01-05T00:00:00.000Z"));
        t.standard.insert("marked_email_as_spam_at".into(), json!("2020-01-05T00:00:00.000Z"));
        let mut s = profile("s", 0);
        s.standard.insert("date_of_first_session".into(), json!("2020-01-01T00:00:00.000Z"));
        s.standard.insert("date_of_last_session".into(), json!("2020-01-09T00:00:00.000Z"));
        s.standard.insert("marked_email_as_spam_at".into(), json!("2020-01-03T00:00:00.000Z"));
        absorb(&mut t, &s);
        assert_eq!(t.standard["date_of_first_session"], json!("2020-01-01T00:00:00.000Z"));
        assert_eq!(t.standard["date_of_last_session"], json!("2020-01-09T00:00:00.000Z"));
        assert_eq!(t.standard["marked_email_as_spam_at"], json!("2020-01-05T00:00:00.000Z"));
    }

    #[test]
    fn absorb_fills_states_only_where_the_target_has_none_and_aliases_per_free_label() {
        let mut t = profile("t", 0);
        t.email = Email::parse("t@example.com");
        t.email_subscribe = Some(GlobalState::Unsubscribed);
        t.groups.insert("g1".into(), GroupState::Unsubscribed);
        t.aliases.insert("crm".into(), "t-crm".into());
        let mut s = profile("s", 0);
        s.email = Email::parse("s@example.com");
        s.email_hard_bounced = true;
        s.email_subscribe = Some(GlobalState::OptedIn);
        s.push_subscribe = Some(GlobalState::Subscribed);
        s.groups.insert("g1".into(), GroupState::Subscribed);
        s.groups.insert("g2".into(), GroupState::Subscribed);
        s.aliases.insert("crm".into(), "s-crm".into());
        s.aliases.insert("device".into(), "d1".into());
        assert_eq!(absorb(&mut t, &s), None);
        assert_eq!(t.email, Email::parse("t@example.com"));
        assert!(!t.email_hard_bounced, "the flag belongs to the source's address, which the target did not take");
        assert_eq!(t.email_subscribe, Some(GlobalState::Unsubscribed));
        assert_eq!(t.push_subscribe, Some(GlobalState::Subscribed));
        assert_eq!(t.groups["g1"], GroupState::Unsubscribed);
        assert_eq!(t.groups["g2"], GroupState::Subscribed);
        assert_eq!(t.aliases["crm"], "t-crm");
        assert_eq!(t.aliases["device"], "d1");
    }

    #[test]
    fn identifiers_are_parsed_strictly() {
        let bad = |v: Value| MergeIdentifier::parse(&v).unwrap_err();
        let msg = ApiError::bad(messages::BAD_IDENTIFIER);
        assert_eq!(bad(json!({"external_id": 5})), msg);
        assert_eq!(bad(json!({"external_id": "a", "user_alias": {"alias_name": "n", "alias_label": "l"}})), msg);
        assert_eq!(bad(json!({"user_alias": "n"})), msg);
        assert_eq!(bad(json!({"external_id": "a", "extra": 1})), msg);
        assert_eq!(bad(json!("a")), msg);
        assert_eq!(bad(json!({"email": "a@example.com"})), ApiError::bad(crate::users::prioritization::REQUIRED));
        let ok = MergeIdentifier::parse(&json!({"phone": "+14155550100", "prioritization": ["identified"]})).unwrap();
        assert!(ok.prioritization.is_some());
    }

    #[test]
    fn the_body_is_checked_before_anything_is_applied() {
        let err = |v: Value| parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(err(json!({})), ApiError::bad(messages::NOT_ARRAY));
        assert_eq!(err(json!({"merge_updates": [1]})), ApiError::bad(messages::NOT_ARRAY));
        let one = json!({"identifier_to_merge": {"external_id": "a"}, "identifier_to_keep": {"external_id": "b"}});
        assert_eq!(err(json!({"merge_updates": vec![one.clone(); 51]})), ApiError::bad(messages::TOO_MANY));
        assert_eq!(parse(json!({"merge_updates": vec![one; 50]}).to_string().as_bytes()).unwrap().len(), 50);
        assert_eq!(
            err(json!({"merge_updates": [{"identifier_to_merge": {"external_id": "a"}}]})),
            ApiError::bad(messages::EXTRA_KEYS)
        );
    }

    #[test]
    fn merge_moves_everything_into_the_kept_user_and_removes_the_other() {
        let kit = Kit::new();
        kit.track(json!({
            "attributes": [{"external_id": "old", "first_name": "Alex", "email": "old@example.com", "visits": 3}],
            "events": [{"external_id": "old", "name": "play", "time": "2024-01-01T00:00:00Z"}],
        }));
        kit.track(json!({"attributes": [{"external_id": "new", "visits": 9}]}));
        let (status, body) = kit.post(
            "/users/merge",
            json!({"merge_updates": [{"identifier_to_merge": {"external_id": "old"}, "identifier_to_keep": {"external_id": "new"}}]}),
        );
        assert_eq!((status, body), (202, json!({"message": "success"})));
        assert_eq!(kit.user("old"), Value::Null);
        let kept = kit.user("new");
        assert_eq!(kept["first_name"], json!("Alex"));
        assert_eq!(kept["email"], json!("old@example.com"));
        assert_eq!(kept["custom_attributes"], json!({"visits": 9}));
        assert_eq!(kept["custom_events"][0]["count"], json!(1));
    }

    #[test]
    fn a_chain_in_request_order_ends_in_the_last_user() {
        let kit = Kit::new();
        for (x, n) in [("a", 1), ("b", 2), ("c", 3)] {
            kit.track(json!({"attributes": [{"external_id": x, x: n}]}));
        }
        let upd = |m: &str, k: &str| json!({"identifier_to_merge": {"external_id": m}, "identifier_to_keep": {"external_id": k}});
        let (status, _) = kit.post("/users/merge", json!({"merge_updates": [upd("a", "b"), upd("b", "c")]}));
        assert_eq!(status, 202);
        assert_eq!(kit.user("a"), Value::Null);
        assert_eq!(kit.user("b"), Value::Null);
        assert_eq!(kit.user("c")["custom_attributes"], json!({"a": 1, "b": 2, "c": 3}));
    }
}
