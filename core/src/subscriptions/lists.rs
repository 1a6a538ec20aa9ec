//! The email lists the platform's clients read and trim (documented by the
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
//!
//! What they list is what Engage's own state knows: each global email state change
//! (`/email/status`, `/users/track`'s `email_subscribe`, a preference page) and each
//! blocklisting notes the address and when in its list entry ([`Table::EmailList`]).
//! Engage sends no email, so no spam report ever lands on the spam list; removing
//! from it succeeds and changes nothing.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::address::AddressState;
use super::values::GlobalState;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::{Email, Identifier, WorkspaceName};
use crate::repo::keys::{address_key, SEP};
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, StoreError, Table, MAX_SCAN};
use crate::time::Timestamp;

/// Most entries a list answers at once.
pub const MAX_LIMIT: usize = 500;
/// Entries a list answers when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// What the lists know of one address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// When the address last became globally unsubscribed (while it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsubscribed_at: Option<Timestamp>,
    /// When it was marked a hard bounce (while it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_bounced_at: Option<Timestamp>,
}

fn list_key(ws: &WorkspaceName, email: &Email) -> String {
    address_key(ws, email)
}

async fn entry<S: Store>(tx: &mut Tx<'_, S>, email: &Email) -> Result<ListEntry, StoreError> {
    let key = list_key(tx.workspace(), email);
    Ok(tx.doc::<ListEntry>(Table::EmailList, &key).await?.unwrap_or_default())
}

fn put<S: Store>(tx: &mut Tx<'_, S>, email: &Email, e: &ListEntry) -> Result<(), StoreError> {
    let key = list_key(tx.workspace(), email);
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

/// Notes that `email` was blocklisted at `at` (unsubscribed, a hard bounce).
pub async fn note_blocklisted<S: Store>(tx: &mut Tx<'_, S>, email: &Email, at: Timestamp) -> Result<(), StoreError> {
    let mut e = entry(tx, email).await?;
    e.unsubscribed_at.get_or_insert(at);
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
}

/// A list read's query.
#[derive(Debug, PartialEq)]
struct ListQuery {
    email: Option<Email>,
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
        ListQuery { email: None, from: i64::MIN, to: i64::MAX, limit: DEFAULT_LIMIT, offset: 0, oldest_first: false };
    let (mut start, mut end) = (None, None);
    for (k, v) in req.query_pairs() {
        match k.as_str() {
            "email" => {
                q.email =
                    Some(Email::parse(&v).ok_or_else(|| {
                        ApiError::bad("The value provided for the 'email' field is not a valid email.")
                    })?)
            }
            "start_date" => start = Some(day(&v, "start_date")?),
            "end_date" => end = Some(day(&v, "end_date")?),
            "limit" => q.limit = number(&v, "limit", 1..=MAX_LIMIT)?,
            "offset" => q.offset = number(&v, "offset", 0..=usize::MAX)?,
            "sort_direction" if list == List::Unsubscribes => {
                q.oldest_first = match v.as_str() {
                    "asc" => true,
                    "desc" => false,
                    _ => return Err(ApiError::bad("'sort_direction' must be 'asc' or 'desc'")),
                }
            }
            other => return Err(ApiError::bad(format!("unknown parameter '{other}'"))),
        }
    }
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis());
    match (q.email.is_some(), start, end) {
        // By address: the dates, if any, are not used (as the platform documents).
        (true, _, _) => {}
        (false, Some(s), Some(e)) if s <= e => {
            q.from = midnight(s);
            q.to = midnight(e) + 86_400_000;
        }
        (false, Some(_), Some(_)) => return Err(ApiError::bad("'start_date' must not be after 'end_date'")),
        (false, _, _) => return Err(ApiError::bad("give 'email', or 'start_date' and 'end_date'")),
    }
    Ok(q)
}

/// `GET /email/hard_bounces` or `GET /email/unsubscribes`.
pub async fn read<S: Store>(store: &S, ws: &WorkspaceName, req: &Request, list: List) -> Result<Response, ApiError> {
    let q = parse_query(req, list)?;
    let prefix = format!("{}{SEP}", ws.as_str());
    let mut found: Vec<(Timestamp, String)> = Vec::new();
    for (key, doc) in store.scan(Table::EmailList, &prefix, MAX_SCAN).await? {
        let Some(email) = key.strip_prefix(&prefix) else { continue };
        if q.email.as_ref().is_some_and(|e| e.as_str() != email) {
            continue;
        }
        let e: ListEntry = crate::repo::codec::decode(&doc.value)?;
        let at = match list {
            List::HardBounces => e.hard_bounced_at,
            List::Unsubscribes => e.unsubscribed_at,
        };
        if let Some(at) = at.filter(|at| (q.from..q.to).contains(&at.0)) {
            found.push((at, email.to_string()));
        }
    }
    found.sort();
    if !q.oldest_first {
        found.reverse();
    }
    let field = match list {
        List::HardBounces => "hard_bounced_at",
        List::Unsubscribes => "unsubscribed_at",
    };
    let emails: Vec<Value> = found
        .into_iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|(at, email)| json!({"email": email, field: at.to_rfc3339()}))
        .collect();
    Ok(Response::json(200, &json!({"emails": emails, "message": "success"})))
}

/// Which removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// `POST /email/bounce/remove`
    Bounce,
    /// `POST /email/spam/remove`
    Spam,
}

/// `POST /email/bounce/remove` or `POST /email/spam/remove`: 201 `{"message": "success"}`.
pub async fn remove<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    body: &[u8],
    removal: Removal,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    let b = super::body_object(body)?;
    let emails = super::email_addresses(&b)?;
    if removal == Removal::Bounce {
        transact(store, ws, ctx.seed, async |tx, _| {
            for email in &emails {
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
                            p.updated_at = p.updated_at.max(ctx.now);
                        }
                    }
                }
            }
            Ok(())
        })
        .await?;
    }
    Ok(Response::json(201, &json!({"message": "success"})))
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
