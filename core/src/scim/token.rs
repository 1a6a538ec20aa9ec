//! SCIM tokens: the deployment's (the company's) credentials for `/scim/v2`, apart
//! from API keys. Each is made for one request origin and is valid only with an
//! `X-Request-Origin` header naming it. Only a token's SHA-256 is stored; the
//! secret is shown once, when it is made.

use serde::{Deserialize, Serialize};

use super::error::ScimError;
use super::values::Department;
use crate::auth::{bearer_token, key_hash};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Request;
use crate::repo::codec::{decode, encode};
use crate::store::{ChangeSet, Expect, Op, Store, Table};
use crate::time::Timestamp;

/// Longest origin, in characters.
pub const MAX_ORIGIN_CHARS: usize = 255;

/// What is stored for one SCIM token (under the token's hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScimToken {
    /// The request origin the token was made for, normalised ([`normalize_origin`]).
    pub origin: String,
    /// A short, non-secret prefix of the token for humans to recognise it.
    pub hint: String,
    /// When it was made.
    pub created_at: Timestamp,
    /// The department a create without one gets (Okta's default profile sends none;
    /// the platform requires one). Tokens made before it existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_department: Option<Department>,
}

/// An origin as compared: trimmed, without a trailing `/`, ASCII lower case (scheme
/// and host are case-insensitive). `None` for an empty one, one with spaces or
/// control characters, or one over [`MAX_ORIGIN_CHARS`].
pub fn normalize_origin(text: &str) -> Option<String> {
    let t = text.trim().trim_end_matches('/');
    let ok = !t.is_empty()
        && t.chars().count() <= MAX_ORIGIN_CHARS
        && !t.chars().any(|c| c.is_whitespace() || c.is_control());
    ok.then(|| t.to_ascii_lowercase())
}

/// What a new token is made for: its origin and, perhaps, a default department
/// (both as given: [`create`] checks them).
#[derive(Clone, Copy, Debug, Default)]
pub struct TokenFor<'a> {
    /// The identity provider's request origin.
    pub origin: &'a str,
    /// The department of creates that name none.
    pub default_department: Option<&'a str>,
}

impl<'a> TokenFor<'a> {
    /// A token for `origin`, without a default department.
    pub fn origin(origin: &'a str) -> TokenFor<'a> {
        TokenFor { origin, default_department: None }
    }
}

/// Makes a SCIM token and returns the secret (only its hash is kept).
pub async fn create<S: Store>(store: &S, wanted: TokenFor<'_>, ctx: Ctx) -> Result<String, ApiError> {
    let origin = normalize_origin(wanted.origin)
        .ok_or_else(|| ApiError::bad(format!("'origin' must be 1 to {MAX_ORIGIN_CHARS} characters without spaces")))?;
    let default_department = wanted
        .default_department
        .map(|d| {
            Department::parse(d).ok_or_else(|| {
                ApiError::bad(format!("the default department '{d}' is not one of {}", Department::listing()))
            })
        })
        .transpose()?;
    // The secret is the host's 128 random bits, prefixed so that it is never taken
    // for an API key in a log or a config file.
    let hex: String = ctx.seed.iter().map(|b| format!("{b:02x}")).collect();
    let secret = format!("scim_{hex}");
    let record = ScimToken { origin, hint: secret[..9].to_string(), created_at: ctx.now, default_department };
    let put =
        Op::Put { table: Table::ScimToken, key: key_hash(&secret), value: encode(&record)?, expect: Expect::Absent };
    store.commit(ChangeSet { ops: vec![put], ack: None }).await?;
    Ok(secret)
}

/// The 401 detail for a request without a token or origin.
pub const MISSING: &str = "Missing credentials: send Authorization: Bearer <SCIM token> and X-Request-Origin";
/// The 401 detail for a token or origin that does not hold.
pub const INVALID: &str = "Invalid SCIM token or X-Request-Origin";

/// Checks a request's token and origin. A wrong origin answers the same as an
/// unknown token, so the answer does not tell which of the two was right.
pub async fn authenticate<S: Store>(store: &S, req: &Request) -> Result<ScimToken, ScimError> {
    let token = match bearer_token(req) {
        Ok(t) => t,
        Err(ApiError::MissingKey) => return Err(ScimError::Unauthorized(MISSING)),
        Err(_) => return Err(ScimError::Unauthorized(INVALID)),
    };
    let origin = req.header_value("x-request-origin").ok_or(ScimError::Unauthorized(MISSING))?;
    let entry = store.get(Table::ScimToken, &key_hash(token)).await?.ok_or(ScimError::Unauthorized(INVALID))?;
    let record: ScimToken = decode(&entry.value)?;
    if normalize_origin(origin).as_deref() != Some(record.origin.as_str()) {
        return Err(ScimError::Unauthorized(INVALID));
    }
    Ok(record)
}
