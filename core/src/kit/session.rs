//! The inspector's session: the admin token, typed once into a login form, becomes
//! a cookie (`HttpOnly`, `SameSite=Strict`, path `/_engage`) that stands for it on
//! the test kit's and operator's routes. The cookie holds its expiry and an HMAC of
//! it keyed by the admin token's hash: nothing to store, nothing that reveals the
//! token, and void when the token changes. Writes made with the cookie must carry
//! [`CSRF_HEADER`], which a form on another site cannot send (and `SameSite=Strict`
//! keeps the cookie off other sites' requests anyway).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::auth::{bearer_token, key_hash};
use crate::error::ApiError;
use crate::http::{Method, Request};
use crate::time::Timestamp;

/// The cookie's name.
pub const COOKIE: &str = "engage_inspector";
/// How long a session lasts: 12 hours.
pub const LIFETIME_MS: i64 = 12 * 3_600_000;
/// The header a write made with the session cookie must carry (any value).
pub const CSRF_HEADER: &str = "X-Engage-Inspector";

fn mac(admin_hash: &str) -> Hmac<Sha256> {
    // HMAC accepts a key of any length.
    <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(admin_hash.as_bytes()).unwrap_or_else(|_| unreachable!())
}

fn sign(admin_hash: &str, expires: i64) -> String {
    let mut m = mac(admin_hash);
    m.update(format!("inspector:{expires}").as_bytes());
    m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// A new session's cookie value, valid until `now` + [`LIFETIME_MS`].
pub fn issue(admin_hash: &str, now: Timestamp) -> String {
    let expires = now.0 + LIFETIME_MS;
    format!("{expires}.{}", sign(admin_hash, expires))
}

/// The `Set-Cookie` header of a new session (or, with `None`, of a cleared one).
pub fn set_cookie(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{COOKIE}={v}; Path=/_engage; HttpOnly; SameSite=Strict; Max-Age={}", LIFETIME_MS / 1000),
        None => format!("{COOKIE}=; Path=/_engage; HttpOnly; SameSite=Strict; Max-Age=0"),
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

/// Whether the request carries a session that holds now.
pub fn has_session(req: &Request, admin_hash: &str, now: Timestamp) -> bool {
    let Some((expires, signature)) = cookie(req).and_then(|v| v.split_once('.')) else { return false };
    let Ok(expires) = expires.parse::<i64>() else { return false };
    // Compare MACs, not strings: the comparison does not depend on where they differ.
    let Ok(given) = (0..signature.len() / 2)
        .map(|i| signature.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or(()))
        .collect::<Result<Vec<u8>, ()>>()
    else {
        return false;
    };
    let mut m = mac(admin_hash);
    m.update(format!("inspector:{expires}").as_bytes());
    m.verify_slice(&given).is_ok() && expires > now.0
}

/// Whether `given` is the admin token.
pub fn is_admin_token(given: &str, admin_hash: &str) -> bool {
    let mut a = mac("compare");
    a.update(key_hash(given).as_bytes());
    let mut b = mac("compare");
    b.update(admin_hash.as_bytes());
    a.verify_slice(&b.finalize().into_bytes()).is_ok()
}

/// Authorizes a test-kit or operator request: the admin token as a bearer token,
/// or a session cookie (with [`CSRF_HEADER`] on writes). Without an admin token
/// configured the routes do not exist.
pub fn authorize(req: &Request, admin_hash: Option<&str>, now: Timestamp) -> Result<(), ApiError> {
    let Some(admin_hash) = admin_hash else { return Err(ApiError::RouteNotFound) };
    if req.header_value("authorization").is_none() && has_session(req, admin_hash, now) {
        let safe = matches!(req.method, Method::Get | Method::Head);
        return if safe || req.header_value(CSRF_HEADER).is_some() {
            Ok(())
        } else {
            Err(ApiError::bad(format!("a change made with the inspector's session needs the {CSRF_HEADER} header")))
        };
    }
    let token = bearer_token(req)?;
    if is_admin_token(token, admin_hash) {
        Ok(())
    } else {
        Err(ApiError::InvalidKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(cookie: &str, method: Method) -> Request {
        Request::new(method, "/_engage/journal").header("Cookie", &format!("a=b; {COOKIE}={cookie}"))
    }

    #[test]
    fn a_session_holds_until_it_expires_and_only_for_its_token() {
        let hash = key_hash("admin-token");
        let value = issue(&hash, Timestamp(1_000));
        assert!(has_session(&with(&value, Method::Get), &hash, Timestamp(2_000)));
        assert!(!has_session(&with(&value, Method::Get), &hash, Timestamp(1_000 + LIFETIME_MS)));
        assert!(!has_session(&with(&value, Method::Get), &key_hash("another"), Timestamp(2_000)));
        let forged = format!("{}.{}", 1_000 + LIFETIME_MS * 100, value.split_once('.').unwrap().1);
        assert!(!has_session(&with(&forged, Method::Get), &hash, Timestamp(2_000)));
        for junk in ["", ".", "x.y", "1.zz", "1.", "é.é"] {
            assert!(!has_session(&with(junk, Method::Get), &hash, Timestamp(0)), "{junk}");
        }
    }

    #[test]
    fn writes_with_a_session_need_the_csrf_header() {
        let hash = key_hash("admin-token");
        let value = issue(&hash, Timestamp(0));
        assert_eq!(authorize(&with(&value, Method::Get), Some(&hash), Timestamp(1)), Ok(()));
        assert!(authorize(&with(&value, Method::Post), Some(&hash), Timestamp(1)).is_err());
        let post = with(&value, Method::Post).header(CSRF_HEADER, "1");
        assert_eq!(authorize(&post, Some(&hash), Timestamp(1)), Ok(()));
        assert_eq!(authorize(&with(&value, Method::Get), None, Timestamp(1)), Err(ApiError::RouteNotFound));
        let bearer = Request::new(Method::Post, "/_engage/reset").header("Authorization", "Bearer admin-token");
        assert_eq!(authorize(&bearer, Some(&hash), Timestamp(1)), Ok(()));
        let wrong = Request::new(Method::Post, "/_engage/reset").header("Authorization", "Bearer nope");
        assert_eq!(authorize(&wrong, Some(&hash), Timestamp(1)), Err(ApiError::InvalidKey));
    }
}
