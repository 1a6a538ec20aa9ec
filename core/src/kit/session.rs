//! The inspector's session and the admin token's guard.
//!
//! The admin token, typed once into a login form, becomes a session: a random
//! cookie value (`HttpOnly`, `SameSite=Strict`, path `/_engage`, `Secure` when the
//! server's public URL is https) whose hash this database keeps with the session's
//! end ([`Table::InspectorSession`]). So a session:
//! - ends at sign-out (its record is deleted: the cookie is void at once, also if
//!   it was copied);
//! - holds only on the database that issued it (another server started with the
//!   same token does not know it);
//! - lasts [`LIFETIME_MS`] of real time ([`Ctx::wall`]), whatever a test clock says.
//!
//! Writes made with the cookie must carry [`CSRF_HEADER`] (a form on another site
//! cannot send it) and, when the browser names the page that made them (`Origin`),
//! come from this server's own pages: a document with an opaque origin (a
//! preference page, sandboxed) or another site is refused.
//!
//! Failed admin-token attempts are counted per client address ([`Guard`]): past
//! [`MAX_FAILURES`] in a window of [`FAILURE_WINDOW_MS`] every attempt from that
//! address is answered 429 until the window ends, so guessing is slow and the
//! operator is never locked out for longer than a window.

use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::auth::{bearer_token, key_hash};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Method, Request};
use crate::repo::codec::{decode, encode};
use crate::store::{ChangeSet, Expect, Op, Store, Table};
use crate::time::Timestamp;

/// The cookie's name.
pub const COOKIE: &str = "engage_inspector";
/// How long a session lasts: 12 hours of real time.
pub const LIFETIME_MS: i64 = 12 * 3_600_000;
/// The header a write made with the session cookie must carry (any value).
pub const CSRF_HEADER: &str = "X-Engage-Inspector";
/// The shortest admin token accepted, as for API keys.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;
/// Failed admin-token attempts one client may make in a window, by default
/// ([`crate::Config::admin_failures_per_minute`]).
pub const MAX_FAILURES: u32 = 20;
/// The window failed attempts are counted in: one minute.
pub const FAILURE_WINDOW_MS: i64 = 60_000;
/// Clients whose failures are remembered at once; beyond it the oldest windows go.
const MAX_CLIENTS: usize = 10_000;

/// Checks an admin token before a server uses it.
pub fn check_admin_token(token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_ADMIN_TOKEN_CHARS {
        return Err(format!(
            "the admin token must be at least {MIN_ADMIN_TOKEN_CHARS} characters (it guards every key and all data)"
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the admin token must not contain spaces or control characters".into());
    }
    Ok(())
}

/// A stored session.
#[derive(Serialize, Deserialize)]
struct Record {
    /// When it ends (real time, ms since the epoch).
    expires: i64,
}

fn record_key(cookie: &str) -> String {
    Sha256::digest(cookie.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Opens a session: its cookie's value, stored as a hash until [`LIFETIME_MS`] of
/// real time from now.
pub async fn open<S: Store>(store: &S, ctx: Ctx) -> Result<String, ApiError> {
    let value: String = Sha256::new()
        .chain_update(b"engage inspector session")
        .chain_update(ctx.seed)
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let record = encode(&Record { expires: ctx.wall.0 + LIFETIME_MS }).map_err(ApiError::from)?;
    let put =
        Op::Put { table: Table::InspectorSession, key: record_key(&value), value: record, expect: Expect::Absent };
    store.commit(ChangeSet { ops: vec![put], ack: None }).await.map_err(ApiError::from)?;
    Ok(value)
}

/// Ends the request's session, if it has one.
pub async fn close<S: Store>(store: &S, req: &Request) -> Result<(), ApiError> {
    if let Some(value) = cookie(req) {
        let delete = Op::Delete { table: Table::InspectorSession, key: record_key(value), expect: Expect::Any };
        store.commit(ChangeSet { ops: vec![delete], ack: None }).await.map_err(ApiError::from)?;
    }
    Ok(())
}

/// The `Set-Cookie` header of a new session (or, with `None`, of a cleared one);
/// `secure` when the server is reached over https.
pub fn set_cookie(value: Option<&str>, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match value {
        Some(v) => {
            format!("{COOKIE}={v}; Path=/_engage; HttpOnly; SameSite=Strict; Max-Age={}{secure}", LIFETIME_MS / 1000)
        }
        None => format!("{COOKIE}=; Path=/_engage; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// The session cookie's value in a request, if it has one.
fn cookie(req: &Request) -> Option<&str> {
    req.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Whether the request carries a session this database holds open at `wall`.
pub async fn holds<S: Store>(store: &S, req: &Request, wall: Timestamp) -> Result<bool, ApiError> {
    let Some(value) = cookie(req) else { return Ok(false) };
    // A value we never issue is not looked up.
    if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(false);
    }
    let Some(entry) = store.get(Table::InspectorSession, &record_key(value)).await? else { return Ok(false) };
    let record: Record = decode(&entry.value)?;
    Ok(record.expires > wall.0)
}

fn mac(key: &str) -> Hmac<Sha256> {
    // HMAC accepts a key of any length.
    <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!())
}

/// Whether `given` is the admin token, compared in constant time (MACs of both
/// hashes, so neither the length nor where they differ shows in the time taken).
pub fn is_admin_token(given: &str, admin_hash: &str) -> bool {
    let mut a = mac("compare");
    a.update(key_hash(given).as_bytes());
    let mut b = mac("compare");
    b.update(admin_hash.as_bytes());
    a.verify_slice(&b.finalize().into_bytes()).is_ok()
}

/// Failed admin-token attempts per client address, in fixed windows (in memory:
/// per process, per isolate at the edge).
#[derive(Debug)]
pub struct Guard {
    failures: Mutex<HashMap<String, (i64, u32)>>,
    /// Failures allowed in a window.
    allowed: u32,
}

impl Default for Guard {
    fn default() -> Guard {
        Guard::new(MAX_FAILURES)
    }
}

impl Guard {
    /// A guard allowing `allowed` failures per client and window (at least one).
    pub fn new(allowed: u32) -> Guard {
        Guard { failures: Mutex::new(HashMap::new()), allowed: allowed.max(1) }
    }

    fn client(req: &Request) -> String {
        req.client.clone().unwrap_or_default()
    }

    /// Refuses the attempt when its client failed too often in this window.
    pub fn check(&self, req: &Request, wall: Timestamp) -> Result<(), ApiError> {
        let start = wall.0.div_euclid(FAILURE_WINDOW_MS) * FAILURE_WINDOW_MS;
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match failures.get(&Self::client(req)) {
            Some(&(window, n)) if window == start && n >= self.allowed => {
                let retry_after = ((start + FAILURE_WINDOW_MS - wall.0 + 999) / 1000).max(1) as u64;
                Err(ApiError::RateLimited { retry_after })
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed attempt.
    pub fn failed(&self, req: &Request, wall: Timestamp) {
        let start = wall.0.div_euclid(FAILURE_WINDOW_MS) * FAILURE_WINDOW_MS;
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_CLIENTS {
            failures.retain(|_, (window, _)| *window == start);
            if failures.len() >= MAX_CLIENTS {
                failures.clear();
            }
        }
        let slot = failures.entry(Self::client(req)).or_insert((start, 0));
        if slot.0 != start {
            *slot = (start, 0);
        }
        slot.1 = slot.1.saturating_add(1);
    }
}

/// Whether a write made with the session cookie comes from this server's own
/// pages: an `Origin` header, when the browser sent one, names the host the
/// request went to (a sandboxed page's `null`, or another site, does not).
fn same_origin(req: &Request) -> bool {
    let Some(origin) = req.header_value("origin") else { return true };
    let Some(host) = req.header_value("host") else { return false };
    let origin_host = origin.split_once("://").map(|(_, rest)| rest);
    origin_host.is_some_and(|o| o.eq_ignore_ascii_case(host))
}

/// Authorizes a test-kit or operator request: the admin token as a bearer token,
/// or a live session (with [`CSRF_HEADER`] and a same-origin `Origin` on writes).
/// Without an admin token configured the routes do not exist.
pub async fn authorize<S: Store>(
    store: &S,
    guard: &Guard,
    req: &Request,
    admin_hash: Option<&str>,
    wall: Timestamp,
) -> Result<(), ApiError> {
    let Some(admin_hash) = admin_hash else { return Err(ApiError::RouteNotFound) };
    if req.header_value("authorization").is_none() && holds(store, req, wall).await? {
        let safe = matches!(req.method, Method::Get | Method::Head);
        if safe {
            return Ok(());
        }
        if req.header_value(CSRF_HEADER).is_none() {
            return Err(ApiError::bad(format!(
                "a change made with the inspector's session needs the {CSRF_HEADER} header"
            )));
        }
        if !same_origin(req) {
            return Err(ApiError::Forbidden(
                "a change made with the inspector's session must come from its own page".into(),
            ));
        }
        return Ok(());
    }
    // No credential is no guess: only a token presented counts (and waits).
    let token = bearer_token(req)?;
    guard.check(req, wall)?;
    if is_admin_token(token, admin_hash) {
        Ok(())
    } else {
        guard.failed(req, wall);
        Err(ApiError::InvalidKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn with(cookie: &str, method: Method) -> Request {
        Request::new(method, "/_engage/journal").header("Cookie", &format!("a=b; {COOKIE}={cookie}"))
    }

    fn ctx(wall: i64, now: i64) -> Ctx {
        Ctx { now: Timestamp(now), wall: Timestamp(wall), seed: [wall as u8; 16] }
    }

    #[test]
    fn a_session_holds_by_real_time_until_it_is_closed() {
        pollster::block_on(async {
            let store = MemoryStore::new();
            // Opened while a test clock points far ahead: its end follows the real time.
            let value = open(&store, ctx(1_000, 9_999_000_000_000)).await.unwrap();
            let get = with(&value, Method::Get);
            assert!(holds(&store, &get, Timestamp(2_000)).await.unwrap());
            assert!(!holds(&store, &get, Timestamp(1_000 + LIFETIME_MS)).await.unwrap());
            // Another database does not know it.
            assert!(!holds(&MemoryStore::new(), &get, Timestamp(2_000)).await.unwrap());
            close(&store, &get).await.unwrap();
            assert!(!holds(&store, &get, Timestamp(2_000)).await.unwrap());
            for junk in ["", ".", "x.y", "1.zz", "1.", "é.é", &"g".repeat(64)] {
                assert!(!holds(&store, &with(junk, Method::Get), Timestamp(0)).await.unwrap(), "{junk}");
            }
        });
    }

    #[test]
    fn writes_with_a_session_need_the_csrf_header_and_their_own_origin() {
        pollster::block_on(async {
            let store = MemoryStore::new();
            let guard = Guard::default();
            let hash = key_hash(&"a".repeat(32));
            let value = open(&store, ctx(0, 0)).await.unwrap();
            let auth = |req: Request| {
                let (store, guard, hash) = (&store, &guard, hash.clone());
                async move { authorize(store, guard, &req, Some(&hash), Timestamp(1)).await }
            };
            assert_eq!(auth(with(&value, Method::Get)).await, Ok(()));
            assert!(auth(with(&value, Method::Post)).await.is_err());
            let post = with(&value, Method::Post).header(CSRF_HEADER, "1").header("Host", "127.0.0.1:8080");
            assert_eq!(auth(post.clone()).await, Ok(()));
            assert_eq!(auth(post.clone().header("Origin", "http://127.0.0.1:8080")).await, Ok(()));
            assert!(auth(post.clone().header("Origin", "null")).await.is_err());
            assert!(auth(post.header("Origin", "http://evil.example")).await.is_err());
            let none = authorize(&store, &guard, &with(&value, Method::Get), None, Timestamp(1)).await;
            assert_eq!(none, Err(ApiError::RouteNotFound));
            let bearer = Request::new(Method::Post, "/_engage/reset")
                .header("Authorization", &format!("Bearer {}", "a".repeat(32)));
            assert_eq!(auth(bearer).await, Ok(()));
            let wrong = Request::new(Method::Post, "/_engage/reset").header("Authorization", "Bearer nope");
            assert_eq!(auth(wrong).await, Err(ApiError::InvalidKey));
        });
    }

    #[test]
    fn failed_attempts_are_throttled_per_client_for_a_window_only() {
        let guard = Guard::default();
        let from = |ip: &str| {
            let mut r = Request::new(Method::Get, "/_engage/journal");
            r.client = Some(ip.into());
            r
        };
        for _ in 0..MAX_FAILURES {
            assert_eq!(guard.check(&from("10.0.0.1"), Timestamp(1_000)), Ok(()));
            guard.failed(&from("10.0.0.1"), Timestamp(1_000));
        }
        assert_eq!(guard.check(&from("10.0.0.1"), Timestamp(1_000)), Err(ApiError::RateLimited { retry_after: 59 }));
        assert_eq!(guard.check(&from("10.0.0.2"), Timestamp(1_000)), Ok(()));
        assert_eq!(guard.check(&from("10.0.0.1"), Timestamp(FAILURE_WINDOW_MS)), Ok(()));
    }

    #[test]
    fn admin_tokens_are_long_and_plain() {
        assert!(check_admin_token("a").is_err());
        assert!(check_admin_token(&"a".repeat(31)).is_err());
        assert!(check_admin_token(&format!("{} ", "a".repeat(32))).is_err());
        assert_eq!(check_admin_token(&"a".repeat(32)), Ok(()));
    }
}
