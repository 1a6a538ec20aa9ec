//! The email and SMS lists the platform's clients read and trim (documented by the
//! platform; its public clients call them):
//!
//! - `GET /email/hard_bounces` and `GET /email/unsubscribes`: the addresses that
//!   hard-bounced (here: blocklisted) or unsubscribed globally, with when, newest
//!   first (`sort_direction=asc` for unsubscribes: oldest first); by `email`, or by
//!   a range of days `start_date` to `end_date` (both days in, UTC); `limit` 1 to
//!   500 (default 100) and `offset`.
//! - `POST /email/bounce/remove` and `POST /email/spam/remove`: `email`, an address
//!   or up to 50; the address is no longer a hard bounce (on every profile with it,
//!   and for profiles that get it later), or no longer on the spam list.
//! - `GET /sms/invalid_phone_numbers` (by `phone_numbers`, or a range of days, as
//!   above) and `POST /sms/invalid_phone_numbers/remove` (`phone_numbers`, up to 50).
//!
//! What they list is what Engage's own state knows: each global email state change
//! (`/email/status`, `/users/track`'s `email_subscribe`, a preference page) and each
//! blocklisting notes the address and when in its list entry ([`Table::EmailList`]).
//! Engage sends no email, so no spam report ever lands on the spam list; removing
//! from it succeeds and changes nothing. Nor does it send SMS: a number is invalid
//! only when a fixtures file says so ([`seed`]), which is also how a test puts an
//! address on the hard bounces or the unsubscribes at a time of its choosing.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::address::AddressState;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::{Email, Identifier, Phone, WorkspaceName};
use crate::profile::states::GlobalState;
use crate::repo::keys::{address_key, SEP};
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table, MAX_SCAN};
use crate::time::Timestamp;

/// Most entries a list answers at once.
pub const MAX_LIMIT: usize = 500;
/// Entries a list answers when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;
/// Most phone numbers one request names.
pub const MAX_PHONES: usize = 50;

/// What the email lists know of one address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// When the address last became globally unsubscribed (while it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsubscribed_at: Option<Timestamp>,
    /// When it was marked a hard bounce (while it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_bounced_at: Option<Timestamp>,
}

/// An invalid phone number's entry ([`Table::PhoneList`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhoneEntry {
    /// When it was found invalid.
    pub invalid_detected_at: Timestamp,
}

async fn entry<S: Store>(tx: &mut Tx<'_, S>, email: &Email) -> Result<ListEntry, StoreError> {
    let key = address_key(tx.workspace(), email);
    Ok(tx.doc::<ListEntry>(Table::EmailList, &key).await?.unwrap_or_default())
}

fn put<S: Store>(tx: &mut Tx<'_, S>, email: &Email, e: &ListEntry) -> Result<(), StoreError> {
    let key = address_key(tx.workspace(), email);
    tx.put_doc(Table::EmailList, &key, e)
}

/// Notes a global email state set for `email` at `at`.
pub async fn note_global<S: Store>(
    tx: &mut Tx<'_, S>,
    email: &Email,
    state: GlobalState,
    at: Timestamp,
) -> Result<(), StoreError> {
    let mut e = entry(tx, email).await?;
    let before = e.clone();
    match state {
        GlobalState::Unsubscribed => {
            e.unsubscribed_at.get_or_insert(at);
        }
        GlobalState::Subscribed | GlobalState::OptedIn => e.unsubscribed_at = None,
    }
    if e != before {
        put(tx, email, &e)?;
    }
    Ok(())
}

/// Notes that `email` was marked a hard bounce at `at` (and, when `unsubscribed`,
/// unsubscribed then too: a blocklisting).
pub async fn note_hard_bounce<S: Store>(
    tx: &mut Tx<'_, S>,
    email: &Email,
    unsubscribed: bool,
    at: Timestamp,
) -> Result<(), StoreError> {
    let mut e = entry(tx, email).await?;
    if unsubscribed {
        e.unsubscribed_at.get_or_insert(at);
    }
    e.hard_bounced_at.get_or_insert(at);
    put(tx, email, &e)
}

/// Which list a read lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// `GET /email/hard_bounces`
    HardBounces,
    /// `GET /email/unsubscribes`
    Unsubscribes,
    /// `GET /sms/invalid_phone_numbers`
    InvalidPhones,
}

impl List {
    /// The answer's array, an entry's subject and an entry's time, as the platform
    /// names them.
    pub fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            List::HardBounces => ("emails", "email", "hard_bounced_at"),
            List::Unsubscribes => ("emails", "email", "unsubscribed_at"),
            List::InvalidPhones => ("sms", "phone", "invalid_detected_at"),
        }
    }

    fn table(self) -> Table {
        match self {
            List::HardBounces | List::Unsubscribes => Table::EmailList,
            List::InvalidPhones => Table::PhoneList,
        }
    }

    /// A subject as the list keys it: an address as [`Email`] reads it; a number in
    /// E.164, its `+` optional (the platform's own examples leave it out).
    pub fn subject(self, text: &str) -> Option<String> {
        match self {
            List::HardBounces | List::Unsubscribes => Email::parse(text).map(|e| e.as_str().to_string()),
            List::InvalidPhones => {
                let phone = Phone::parse(text).or_else(|| Phone::parse(&format!("+{text}")))?;
                Some(phone.as_str().to_string())
            }
        }
    }

    fn bad_subject(self) -> ApiError {
        match self {
            List::HardBounces | List::Unsubscribes => {
                ApiError::bad("The value provided for the 'email' field is not a valid email.")
            }
            List::InvalidPhones => ApiError::bad(BAD_PHONE),
        }
    }
}

/// The message for a number out of form.
pub const BAD_PHONE: &str =
    "'phone_numbers' must be an array of 1 to 50 phone numbers in E.164 form, e.g. \"+12183095514\"";

/// A list read's query.
#[derive(Debug, PartialEq)]
struct ListQuery {
    /// Only these subjects (as keyed); the dates are then not used.
    only: Option<BTreeSet<String>>,
    /// From, inclusive (ms).
    from: i64,
    /// To, exclusive (ms).
    to: i64,
    limit: usize,
    offset: usize,
    oldest_first: bool,
}

/// A day given as `YYYY-MM-DD`, or an RFC 3339 time whose day (as written) it is:
/// clients that build queries from their language's dates send those.
fn day(v: &str, name: &str) -> Result<NaiveDate, ApiError> {
    let whole = v.len() == 10 || chrono::DateTime::parse_from_rfc3339(v).is_ok();
    v.get(..10)
        .filter(|_| whole)
        .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        .ok_or_else(|| ApiError::bad(format!("'{name}' must be a date, YYYY-MM-DD (or an RFC 3339 time)")))
}

fn number(v: &str, name: &str, range: std::ops::RangeInclusive<usize>) -> Result<usize, ApiError> {
    v.parse::<usize>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
        ApiError::bad(format!("'{name}' must be a whole number from {} to {}", range.start(), range.end()))
    })
}

fn parse_query(req: &Request, list: List) -> Result<ListQuery, ApiError> {
    let mut q =
        ListQuery { only: None, from: i64::MIN, to: i64::MAX, limit: DEFAULT_LIMIT, offset: 0, oldest_first: false };
    let (mut start, mut end) = (None, None);
    for (k, v) in req.query_pairs() {
        match (list, k.as_str()) {
            (List::HardBounces | List::Unsubscribes, "email")
            | (List::InvalidPhones, "phone_numbers" | "phone_numbers[]") => {
                let only = q.only.get_or_insert_with(BTreeSet::new);
                only.insert(list.subject(&v).ok_or_else(|| list.bad_subject())?);
                if only.len() > MAX_PHONES {
                    return Err(ApiError::bad(BAD_PHONE));
                }
            }
            (_, "start_date") => start = Some(day(&v, "start_date")?),
            (_, "end_date") => end = Some(day(&v, "end_date")?),
            (_, "limit") => q.limit = number(&v, "limit", 1..=MAX_LIMIT)?,
            (_, "offset") => q.offset = number(&v, "offset", 0..=usize::MAX)?,
            (List::Unsubscribes, "sort_direction") => {
                q.oldest_first = match v.as_str() {
                    "asc" => true,
                    "desc" => false,
                    _ => return Err(ApiError::bad("'sort_direction' must be 'asc' or 'desc'")),
                }
            }
            (_, other) => return Err(ApiError::bad(format!("unknown parameter '{other}'"))),
        }
    }
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis());
    let by = list.names().1;
    match (q.only.is_some(), start, end) {
        // By subject: the dates, if any, are not used (as the platform documents).
        (true, _, _) => {}
        (false, Some(s), Some(e)) if s <= e => {
            q.from = midnight(s);
            q.to = midnight(e) + 86_400_000;
        }
        (false, Some(_), Some(_)) => return Err(ApiError::bad("'start_date' must not be after 'end_date'")),
        (false, _, _) if list == List::InvalidPhones => {
            return Err(ApiError::bad("give 'phone_numbers', or 'start_date' and 'end_date'"))
        }
        (false, _, _) => return Err(ApiError::bad(format!("give '{by}', or 'start_date' and 'end_date'"))),
    }
    Ok(q)
}

/// `GET /email/hard_bounces`, `GET /email/unsubscribes` or
/// `GET /sms/invalid_phone_numbers`.
pub async fn read<S: Store>(store: &S, ws: &WorkspaceName, req: &Request, list: List) -> Result<Response, ApiError> {
    let q = parse_query(req, list)?;
    let prefix = format!("{}{SEP}", ws.as_str());
    let mut found: Vec<(Timestamp, String)> = Vec::new();
    for (key, doc) in store.scan(list.table(), &prefix, MAX_SCAN).await? {
        let Some(subject) = key.strip_prefix(&prefix) else { continue };
        if q.only.as_ref().is_some_and(|only| !only.contains(subject)) {
            continue;
        }
        let at = match list {
            List::HardBounces => crate::repo::codec::decode::<ListEntry>(&doc.value)?.hard_bounced_at,
            List::Unsubscribes => crate::repo::codec::decode::<ListEntry>(&doc.value)?.unsubscribed_at,
            List::InvalidPhones => Some(crate::repo::codec::decode::<PhoneEntry>(&doc.value)?.invalid_detected_at),
        };
        if let Some(at) = at.filter(|at| (q.from..q.to).contains(&at.0)) {
            // The platform answers numbers without their `+`.
            let shown = if list == List::InvalidPhones { subject.trim_start_matches('+') } else { subject };
            found.push((at, shown.to_string()));
        }
    }
    found.sort();
    if !q.oldest_first {
        found.reverse();
    }
    let (array, by, when) = list.names();
    let entries: Vec<Value> =
        found.into_iter().skip(q.offset).take(q.limit).map(|(at, s)| json!({by: s, when: at.to_rfc3339()})).collect();
    Ok(Response::json(200, &json!({array: entries, "message": "success"})))
}

/// Which removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// `POST /email/bounce/remove`
    Bounce,
    /// `POST /email/spam/remove`
    Spam,
    /// `POST /sms/invalid_phone_numbers/remove`
    InvalidPhones,
}

/// `phone_numbers`: an array of 1 to 50 numbers, as keyed.
fn phone_numbers(b: &serde_json::Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let items = super::field(b, "phone_numbers")
        .and_then(Value::as_array)
        .filter(|a| (1..=MAX_PHONES).contains(&a.len()))
        .ok_or_else(|| ApiError::bad(BAD_PHONE))?;
    let mut out: Vec<String> = Vec::new();
    for i in items {
        let phone = i.as_str().and_then(|t| List::InvalidPhones.subject(t)).ok_or_else(|| ApiError::bad(BAD_PHONE))?;
        if !out.contains(&phone) {
            out.push(phone);
        }
    }
    Ok(out)
}

/// `POST /email/bounce/remove`, `POST /email/spam/remove` or
/// `POST /sms/invalid_phone_numbers/remove`: 201 `{"message": "success"}`.
pub async fn remove<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    body: &[u8],
    removal: Removal,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    let b = super::body_object(body)?;
    match removal {
        Removal::Bounce => {
            let emails = super::email_addresses(&b)?;
            transact(store, ws, ctx.seed, async |tx, _| {
                for email in &emails {
                    clear_hard_bounce(tx, email, ctx.now).await?;
                }
                Ok(())
            })
            .await?;
        }
        // Checked, and nothing to change (see the module's comment).
        Removal::Spam => drop(super::email_addresses(&b)?),
        Removal::InvalidPhones => {
            let phones = phone_numbers(&b)?;
            transact(store, ws, ctx.seed, async |tx, _| {
                for phone in &phones {
                    let key = phone_key(tx.workspace(), phone);
                    if tx.doc::<PhoneEntry>(Table::PhoneList, &key).await?.is_some() {
                        tx.delete_doc(Table::PhoneList, &key);
                    }
                }
                Ok(())
            })
            .await?;
        }
    }
    Ok(Response::json(201, &json!({"message": "success"})))
}

/// `email` is no longer a hard bounce: off the list, and the flag cleared on every
/// profile with it and on the address's remembered state.
async fn clear_hard_bounce<S: Store>(tx: &mut Tx<'_, S>, email: &Email, now: Timestamp) -> Result<(), StoreError> {
    let mut e = entry(tx, email).await?;
    if e.hard_bounced_at.take().is_some() {
        put(tx, email, &e)?;
    }
    let key = address_key(tx.workspace(), email);
    if let Some(mut a) = tx.doc::<AddressState>(Table::Address, &key).await? {
        a.hard_bounced = false;
        tx.put_doc(Table::Address, &key, &a)?;
    }
    for id in tx.resolve(&Identifier::Email(email.clone())).await? {
        if let Some(p) = tx.profile_mut(&id).await? {
            if p.email_hard_bounced {
                p.email_hard_bounced = false;
                p.updated_at = p.updated_at.max(now);
            }
        }
    }
    Ok(())
}

/// The key of `phone`'s entry on the invalid numbers (the email lists' are
/// [`address_key`]s).
fn phone_key(ws: &WorkspaceName, phone: &str) -> String {
    format!("{}{SEP}{phone}", ws.as_str())
}

/// Puts `phone` (as keyed) on the invalid numbers since `at`.
pub fn put_invalid_phone<S: Store>(tx: &mut Tx<'_, S>, phone: &str, at: Timestamp) -> Result<(), StoreError> {
    let key = phone_key(tx.workspace(), phone);
    tx.put_doc(Table::PhoneList, &key, &PhoneEntry { invalid_detected_at: at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Kit;

    #[test]
    fn lists_follow_the_state_and_bounces_can_be_removed() {
        let kit = Kit::new();
        kit.track(
            json!({"attributes": [{"external_id": "u1", "email": "a@example.com", "email_subscribe": "unsubscribed"}]}),
        );
        kit.post("/email/blocklist", json!({"email": ["b@example.com"]}));
        let (status, body) = kit.call(
            crate::http::Method::Get,
            "/email/unsubscribes?start_date=2000-01-01&end_date=2099-12-31",
            Value::Null,
        );
        assert_eq!(status, 200, "{body}");
        let emails: Vec<&str> =
            body["emails"].as_array().unwrap().iter().map(|e| e["email"].as_str().unwrap()).collect();
        assert_eq!(emails.len(), 2, "{body}");
        let (_, bounces) = kit.call(crate::http::Method::Get, "/email/hard_bounces?email=b@example.com", Value::Null);
        assert_eq!(bounces["emails"][0]["email"], "b@example.com", "{bounces}");
        let (status, _) = kit.post("/email/bounce/remove", json!({"email": "b@example.com"}));
        assert_eq!(status, 201);
        let (_, bounces) = kit.call(crate::http::Method::Get, "/email/hard_bounces?email=b@example.com", Value::Null);
        assert_eq!(bounces["emails"], json!([]));
        // Subscribed again: off the unsubscribes.
        kit.post("/email/status", json!({"email": "a@example.com", "subscription_state": "subscribed"}));
        let (_, body) = kit.call(crate::http::Method::Get, "/email/unsubscribes?email=a@example.com", Value::Null);
        assert_eq!(body["emails"], json!([]));
        for bad in [
            "",
            "?start_date=2020-01-01",
            "?start_date=2020-02-01&end_date=2020-01-01",
            "?email=x&limit=5",
            "?email=a@example.com&limit=501",
        ] {
            assert_eq!(
                kit.call(crate::http::Method::Get, &format!("/email/unsubscribes{bad}"), Value::Null).0,
                400,
                "{bad}"
            );
        }
    }
}
