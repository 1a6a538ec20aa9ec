//! Per-user links: `GET /preference_center/v1/{id}/url/{external_id}` and the signed
//! token the link carries.
//!
//! A token names the workspace, the center, the user (external id) and an expiry,
//! and is signed with HMAC-SHA-256 under the workspace's own secret, which the store
//! keeps ([`Table::LinkSecret`]: made on first use, never returned by any API). So
//! a link cannot be made for another user, center or workspace, nor kept past its
//! expiry, without the secret.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Sha256;

use super::center;
use super::write::NOT_FOUND;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::{ExternalId, IdGen, Identifier, WorkspaceName};
use crate::repo::transact::transact;
use crate::store::{Store, StoreError, Table};
use crate::time::Timestamp;

/// How long a link stays valid by default: 30 days.
pub const DEFAULT_LINK_TTL_SECS: u64 = 30 * 24 * 3600;

/// The path of a center's page for a token (GET shows it, POST submits its form).
pub const PAGE_PREFIX: &str = "/preferences/";

/// Where links point and how long they last.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// The server's public address, without a trailing slash.
    pub base: String,
    /// Lifetime of a link, in seconds.
    pub ttl_secs: u64,
}

impl LinkConfig {
    /// Links on [`Request::public_base`].
    pub fn new(public_url: Option<&str>, req: &Request, ttl_secs: u64) -> LinkConfig {
        LinkConfig { base: req.public_base(public_url), ttl_secs }
    }

    /// The page URL of a token.
    pub fn url(&self, token: &str) -> String {
        format!("{}{PAGE_PREFIX}{token}", self.base)
    }
}

/// The workspace's signing secret as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Secret {
    /// 32 random bytes, hex.
    key: String,
}

/// What a valid token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    /// The workspace.
    pub ws: WorkspaceName,
    /// The center's api id.
    pub center: String,
    /// The user's external id.
    pub external_id: ExternalId,
    /// Expiry, seconds since the epoch.
    pub expires: i64,
}

/// Why a token is refused (all answered alike, 403, without saying which).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token, or its signature does not match.
    Invalid,
    /// Signed, but past its expiry.
    Expired,
}

const SEP: char = '\u{1f}';

fn mac(key: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length: this cannot fail.
    <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!())
}

fn sign(key: &str, claims: &Claims) -> String {
    let payload = format!(
        "v1{SEP}{}{SEP}{}{SEP}{}{SEP}{}",
        claims.ws.as_str(),
        claims.center,
        claims.external_id.as_str(),
        claims.expires
    );
    let mut m = mac(key);
    m.update(payload.as_bytes());
    let sig = m.finalize().into_bytes();
    format!("{}.{}", B64.encode(payload), B64.encode(sig))
}

/// Reads a token's claims without checking them (to find the workspace whose
/// secret checks it).
fn unverified(token: &str) -> Option<(Claims, Vec<u8>, Vec<u8>)> {
    let (payload, sig) = token.split_once('.')?;
    let payload = B64.decode(payload).ok()?;
    let sig = B64.decode(sig).ok()?;
    let text = std::str::from_utf8(&payload).ok()?;
    let parts: Vec<&str> = text.split(SEP).collect();
    let [version, ws, center, external_id, expires] = parts.as_slice() else { return None };
    if *version != "v1" {
        return None;
    }
    let claims = Claims {
        ws: WorkspaceName::parse(ws)?,
        center: center.to_string(),
        external_id: ExternalId::parse(external_id)?,
        expires: expires.parse().ok()?,
    };
    Some((claims, payload, sig))
}

async fn secret<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Option<String>, StoreError> {
    match store.get(Table::LinkSecret, ws.as_str()).await? {
        Some(e) => Ok(Some(crate::repo::codec::decode::<Secret>(&e.value)?.key)),
        None => Ok(None),
    }
}

/// Checks a token: well formed, signed under its workspace's secret, not expired.
pub async fn verify<S: Store>(
    store: &S,
    token: &str,
    now: Timestamp,
) -> Result<Result<Claims, TokenError>, StoreError> {
    let Some((claims, payload, sig)) = unverified(token) else { return Ok(Err(TokenError::Invalid)) };
    let Some(key) = secret(store, &claims.ws).await? else { return Ok(Err(TokenError::Invalid)) };
    let mut m = mac(&key);
    m.update(&payload);
    if m.verify_slice(&sig).is_err() {
        return Ok(Err(TokenError::Invalid));
    }
    if now.seconds() >= claims.expires {
        return Ok(Err(TokenError::Expired));
    }
    Ok(Ok(claims))
}

/// The link's lifetime: the configured one, or a shorter `expires_in` (seconds; an
/// Engage extension for senders whose links should not outlive one message).
fn lifetime(req: &Request, links: &LinkConfig) -> Result<u64, ApiError> {
    let mut ttl = links.ttl_secs;
    for (k, v) in req.query_pairs() {
        if k != "expires_in" {
            return Err(ApiError::bad(format!("unknown query parameter '{k}'")));
        }
        ttl = v.parse().ok().filter(|n| (1..=links.ttl_secs).contains(n)).ok_or_else(|| {
            ApiError::bad(format!("'expires_in' must be a whole number of seconds from 1 to {}", links.ttl_secs))
        })?;
    }
    Ok(ttl)
}

/// GET /preference_center/v1/{id}/url/{external_id}: the user's link.
pub async fn user_url<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    center_id: &str,
    user: &str,
    req: &Request,
    links: &LinkConfig,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    let ttl = lifetime(req, links)?;
    if center::get(store, ws, center_id).await?.is_none() {
        return Err(ApiError::NotFound(NOT_FOUND.into()));
    }
    let no_user = || ApiError::NotFound(format!("User not found: no user has the external_id '{user}'"));
    let external_id = ExternalId::parse(user).ok_or_else(no_user)?;
    let key = transact(store, ws, ctx.seed, async |tx, _| {
        if tx.resolve_one(&Identifier::External(external_id.clone())).await?.is_none() {
            return Err(no_user());
        }
        if let Some(s) = tx.doc::<Secret>(Table::LinkSecret, ws.as_str()).await? {
            return Ok(s.key);
        }
        // The first link of the workspace makes its secret (32 bytes from the host's
        // randomness, hashed apart from the request's ids); a concurrent first link
        // conflicts, retries and uses the one that won.
        let s = Secret { key: IdGen::derive(ctx.seed, "link-secret", 0).token(32) };
        tx.put_doc(Table::LinkSecret, ws.as_str(), &s)?;
        Ok(s.key)
    })
    .await?;
    let expires = ctx.now.seconds().saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let claims = Claims { ws: ws.clone(), center: center_id.to_string(), external_id, expires };
    Ok(Response::json(200, &json!({"preference_center_url": links.url(&sign(&key, &claims))})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            ws: WorkspaceName::parse("w").unwrap(),
            center: "c".into(),
            external_id: ExternalId::parse("u").unwrap(),
            expires: 100,
        }
    }

    #[test]
    fn a_token_reads_back_and_any_change_breaks_its_signature() {
        let t = sign("k", &claims());
        let (c, payload, sig) = unverified(&t).expect("well formed");
        assert_eq!(c, claims());
        let mut m = mac("k");
        m.update(&payload);
        assert!(m.verify_slice(&sig).is_ok());
        let mut m = mac("other key");
        m.update(&payload);
        assert!(m.verify_slice(&sig).is_err());
        for bad in ["", ".", "x.y", "a", &t[1..], &format!("{t}x")] {
            let ok = unverified(bad).is_some_and(|(_, p, s)| {
                let mut m = mac("k");
                m.update(&p);
                m.verify_slice(&s).is_ok()
            });
            assert!(!ok, "{bad}");
        }
    }
}
