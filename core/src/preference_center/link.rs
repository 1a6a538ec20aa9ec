//! Per-user links: `GET /preference_center/v1/{id}/url/{external_id}` and the signed
//! token the link carries.
//!
//! A token names the workspace, the center, the user (external id) and an expiry.
//! Links are mailed and pasted, and external ids are often email addresses or
//! customer numbers, so a token must be unreadable as well as tamper-proof:
//!
//! - **v2** (made now): the claims sealed with XChaCha20-Poly1305 (authenticated
//!   encryption) under the deployment's link key, with a random 24-byte nonce:
//!   `base64url(0x02 ‖ nonce ‖ ciphertext ‖ tag)`. Nothing in it can be read or
//!   changed without the key. The claims also carry a fingerprint of the
//!   workspace's own secret, so resetting a workspace (which removes its secret)
//!   still voids its links and only its links.
//! - **v1** (made before): the claims in base64, a dot, and their HMAC-SHA-256 under
//!   the workspace's secret. Still accepted until they expire (at most the link
//!   lifetime), so links already sent keep working; never made any more.
//!
//! Both keys live in the store ([`Table::LinkSecret`]: the workspace's under its
//! name, the deployment's under the empty name, which no workspace has), are made
//! on first use and are never returned by any API.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

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
    <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!())
}

/// A v1 token (kept for the tests of v1 links still in mail).
#[cfg(test)]
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

/// The claims of a v1 token, read without checking them (to find the workspace
/// whose secret checks it).
fn unverified(token: &str) -> Option<(Claims, Vec<u8>, Vec<u8>)> {
    let (payload, sig) = token.split_once('.')?;
    let payload = B64.decode(payload).ok()?;
    let sig = B64.decode(sig).ok()?;
    let text = std::str::from_utf8(&payload).ok()?;
    let parts: Vec<&str> = text.split(SEP).collect();
    let ["v1", ws, center, external_id, expires] = parts.as_slice() else { return None };
    Some((claims_of(ws, center, external_id, expires)?, payload, sig))
}

/// Claims from their text, checked as the API checks each part.
fn claims_of(ws: &str, center: &str, external_id: &str, expires: &str) -> Option<Claims> {
    Some(Claims {
        ws: WorkspaceName::parse(ws)?,
        center: center.to_string(),
        external_id: ExternalId::parse(external_id)?,
        expires: expires.parse().ok()?,
    })
}

/// The first byte of a v2 token.
const V2: u8 = 2;

/// Fewest bytes a v2 token holds: the version, the nonce, the tag and the shortest
/// claims (`v2` and five separators, one-character parts, the fingerprint).
const MIN_V2_BYTES: usize = 1 + 24 + 16 + 2 + 5 + 4 + 16;

/// Whether `text` has the shape of a link token (v2: base64url of a sealed token's
/// bytes; v1: claims and a signature), whoever made it. For hiding tokens where
/// they would be kept (the request journal): nothing is checked against a key.
pub fn looks_like_token(text: &str) -> bool {
    if text.contains('.') {
        return unverified(text).is_some_and(|(_, _, sig)| sig.len() == 32);
    }
    B64.decode(text).is_ok_and(|bytes| bytes.len() >= MIN_V2_BYTES && bytes[0] == V2)
}

/// `text` with every link token in it (by its value, wherever it stands: a
/// link's path, a bare token a page printed, a body's field) replaced by `mask`.
pub fn mask_tokens(text: &str, mask: &str) -> String {
    let b64 = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(b64) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        // A run of token characters, with at most one dot inside (a v1 token).
        let first = rest.find(|c: char| !b64(c)).unwrap_or(rest.len());
        let mut run = first;
        if rest[first..].starts_with('.') {
            let second = rest[first + 1..].find(|c: char| !b64(c)).unwrap_or(rest.len() - first - 1);
            if second > 0 && looks_like_token(&rest[..first + 1 + second]) {
                run = first + 1 + second;
            }
        }
        let word = &rest[..run];
        if run == first && !looks_like_token(word) {
            out.push_str(word);
        } else {
            out.push_str(mask);
        }
        rest = &rest[run..];
    }
    out.push_str(rest);
    out
}

/// Where the deployment's link key is kept in [`Table::LinkSecret`]: the empty
/// name, which [`WorkspaceName::parse`] never yields.
const DEPLOYMENT_KEY: &str = "";

/// The cipher of a stored key (hex text, hashed to the cipher's 32 bytes).
fn cipher(key: &str) -> XChaCha20Poly1305 {
    let bytes: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    XChaCha20Poly1305::new(&bytes.into())
}

/// A short fingerprint of a workspace's secret, sealed into its v2 links: a new
/// secret (after a reset) voids the links made under the old one.
fn fingerprint(ws_secret: &str) -> String {
    let d = Sha256::digest([b"engage link fingerprint\0".as_slice(), ws_secret.as_bytes()].concat());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Seals `claims` into a v2 token.
fn seal(key: &str, ws_secret: &str, claims: &Claims, nonce: [u8; 24]) -> String {
    let plain = format!(
        "v2{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}",
        claims.ws.as_str(),
        claims.center,
        claims.external_id.as_str(),
        claims.expires,
        fingerprint(ws_secret)
    );
    // Encrypting into a Vec cannot fail (the message is far below the cipher's bound).
    let sealed = cipher(key).encrypt(&XNonce::from(nonce), plain.as_bytes()).unwrap_or_default();
    let mut out = Vec::with_capacity(1 + 24 + sealed.len());
    out.push(V2);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    B64.encode(out)
}

/// Opens a v2 token: its claims and the fingerprint of the workspace secret it
/// was made under, or `None` when it was not sealed under `key` as it stands.
fn unseal(key: &str, token: &str) -> Option<(Claims, String)> {
    let bytes = B64.decode(token).ok()?;
    let (&version, rest) = bytes.split_first()?;
    if version != V2 || rest.len() < 24 {
        return None;
    }
    let (nonce, sealed) = rest.split_at(24);
    let plain = cipher(key).decrypt(&XNonce::try_from(nonce).ok()?, sealed).ok()?;
    let text = String::from_utf8(plain).ok()?;
    let parts: Vec<&str> = text.split(SEP).collect();
    let ["v2", ws, center, external_id, expires, print] = parts.as_slice() else { return None };
    Some((claims_of(ws, center, external_id, expires)?, print.to_string()))
}

async fn secret<S: Store>(store: &S, name: &str) -> Result<Option<String>, StoreError> {
    match store.get(Table::LinkSecret, name).await? {
        Some(e) => Ok(Some(crate::repo::codec::decode::<Secret>(&e.value)?.key)),
        None => Ok(None),
    }
}

/// Checks a token: well formed, sealed (v2) or signed (v1) under the right keys,
/// not expired.
pub async fn verify<S: Store>(
    store: &S,
    token: &str,
    now: Timestamp,
) -> Result<Result<Claims, TokenError>, StoreError> {
    Ok(match claims(store, token).await? {
        None => Err(TokenError::Invalid),
        Some(c) if c.expired(now) => Err(TokenError::Expired),
        Some(c) => Ok(c),
    })
}

/// What a well-formed token, sealed (v2) or signed (v1) under the right keys, says,
/// whatever its expiry: the workspace it names decides whose clock that is.
pub async fn claims<S: Store>(store: &S, token: &str) -> Result<Option<Claims>, StoreError> {
    if token.contains('.') {
        verify_v1(store, token).await
    } else {
        verify_v2(store, token).await
    }
}

impl Claims {
    /// Whether the link has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        now.seconds() >= self.expires
    }
}

async fn verify_v1<S: Store>(store: &S, token: &str) -> Result<Option<Claims>, StoreError> {
    let Some((claims, payload, sig)) = unverified(token) else { return Ok(None) };
    let Some(key) = secret(store, claims.ws.as_str()).await? else { return Ok(None) };
    let mut m = mac(&key);
    m.update(&payload);
    Ok(m.verify_slice(&sig).is_ok().then_some(claims))
}

async fn verify_v2<S: Store>(store: &S, token: &str) -> Result<Option<Claims>, StoreError> {
    let Some(key) = secret(store, DEPLOYMENT_KEY).await? else { return Ok(None) };
    let Some((claims, print)) = unseal(&key, token) else { return Ok(None) };
    let Some(ws_secret) = secret(store, claims.ws.as_str()).await? else { return Ok(None) };
    Ok((fingerprint(&ws_secret) == print).then_some(claims))
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
    let (key, ws_secret) = transact(store, ws, ctx.seed, async |tx, _| {
        if tx.resolve_one(&Identifier::External(external_id.clone())).await?.is_none() {
            return Err(no_user());
        }
        // The first link of the deployment, and of the workspace, makes its key (32
        // bytes from the host's randomness, hashed apart from the request's ids); a
        // concurrent first link conflicts, retries and uses the one that won.
        let mut made = 0;
        let mut key_of = async |tx: &mut crate::repo::Tx<'_, S>, name: &str| {
            if let Some(s) = tx.doc::<Secret>(Table::LinkSecret, name).await? {
                return Ok::<String, ApiError>(s.key);
            }
            made += 1;
            let s = Secret { key: IdGen::derive(ctx.seed, "link-secret", made).token(32) };
            tx.put_doc(Table::LinkSecret, name, &s)?;
            Ok(s.key)
        };
        let key = key_of(tx, DEPLOYMENT_KEY).await?;
        let ws_secret = key_of(tx, ws.as_str()).await?;
        Ok((key, ws_secret))
    })
    .await?;
    let expires = ctx.now.seconds().saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let claims = Claims { ws: ws.clone(), center: center_id.to_string(), external_id, expires };
    let nonce: [u8; 24] = IdGen::derive(ctx.seed, "link-nonce", 0).bytes(24).try_into().unwrap_or([0; 24]);
    let token = seal(&key, &ws_secret, &claims, nonce);
    Ok(Response::json(200, &json!({"preference_center_url": links.url(&token)})))
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

    #[test]
    fn a_sealed_token_reads_back_under_its_key_only_and_shows_nothing() {
        let c = Claims {
            ws: WorkspaceName::parse("acme-prod").unwrap(),
            center: "3f6c0a52-cd6e-4a3c-9a47-2b8e3b0c1d11".into(),
            external_id: ExternalId::parse("zoe@example.com").unwrap(),
            expires: 1_900_000_000,
        };
        let t = seal("k", "ws secret", &c, [7; 24]);
        assert_eq!(unseal("k", &t), Some((c.clone(), fingerprint("ws secret"))));
        assert_eq!(unseal("other key", &t), None);
        // Neither the token nor its bytes show the workspace, center, user or expiry.
        let bytes = B64.decode(&t).unwrap();
        for part in ["acme-prod", "3f6c0a52", "zoe@example.com", "zoe", "1900000000"] {
            assert!(!t.contains(part), "{part} in {t}");
            assert!(!bytes.windows(part.len()).any(|w| w == part.as_bytes()), "{part} in the bytes");
        }
        // Any change to any byte (version, nonce, ciphertext or tag) breaks it.
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x01;
            assert_eq!(unseal("k", &B64.encode(&b)), None, "byte {at}");
        }
        for bad in ["", "A", &t[..t.len() - 1], &format!("{t}A"), &B64.encode([2u8; 40])] {
            assert_eq!(unseal("k", bad), None, "{bad}");
        }
        // A fresh nonce each time: two links for one user differ.
        assert_ne!(seal("k", "ws secret", &c, [8; 24]), t);
    }

    #[test]
    fn links_of_both_formats_verify_and_a_new_workspace_secret_voids_v2_links() {
        use crate::store::memory::MemoryStore;
        use crate::store::{ChangeSet, Expect, Op};
        let store = MemoryStore::default();
        let put = |name: &str, key: &str| Op::Put {
            table: Table::LinkSecret,
            key: name.into(),
            value: crate::repo::codec::encode(&Secret { key: key.into() }).unwrap(),
            expect: Expect::Any,
        };
        let commit = |ops| pollster::block_on(store.commit(ChangeSet { ops, ack: None })).unwrap();
        commit(vec![put(DEPLOYMENT_KEY, "deployment"), put("w", "workspace")]);
        let now = Timestamp(50_000);
        let check = |t: &str| pollster::block_on(verify(&store, t, now)).unwrap();
        let v1 = sign("workspace", &claims());
        let v2 = seal("deployment", "workspace", &claims(), [1; 24]);
        assert_eq!(check(&v1), Ok(claims()));
        assert_eq!(check(&v2), Ok(claims()));
        assert_eq!(
            check(&seal("deployment", "workspace", &Claims { expires: 50, ..claims() }, [1; 24])),
            Err(TokenError::Expired)
        );
        assert_eq!(check(&sign("workspace", &Claims { expires: 50, ..claims() })), Err(TokenError::Expired));
        assert_eq!(check(&seal("another deployment", "workspace", &claims(), [1; 24])), Err(TokenError::Invalid));
        // The workspace was reset: its secret is new, and its old links are void.
        commit(vec![put("w", "new workspace secret")]);
        assert_eq!(check(&v2), Err(TokenError::Invalid));
        assert_eq!(check(&v1), Err(TokenError::Invalid));
    }
}
