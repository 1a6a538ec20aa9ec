//! SCIM 2.0 provisioning of dashboard users (`/scim/v2`, RFC 7643 / 7644 where the
//! spec is silent). Dashboard users and SCIM tokens belong to the deployment (the
//! company), not to a workspace.
//!
//! One way through: the token and `X-Request-Origin` ([`token`], whose default
//! department a create may take) → the company's
//! daily limit (user endpoints only) → the body's media type → the operation:
//! [`write`] (create, replace, [`patch`], delete: parse pure, one unit of work over the user
//! and its name's index entry), [`read`] (one user; listings with the [`filter`],
//! paging and attribute selection), [`discovery`]. Every failure leaves in SCIM's
//! error shape ([`error`]). [`user`] is the resource, [`permissions`] and
//! [`values`] its permission object and closed lists, [`attrs`] the body reader,
//! [`protocol`] the URNs, media type and bounds every file shares.

pub mod attrs;
pub mod discovery;
pub mod error;
pub mod evaluate;
pub mod filter;
pub mod patch;
pub mod permissions;
pub mod protocol;
pub mod read;
pub mod schema;
pub mod select;
pub mod token;
pub mod user;
pub mod values;
pub mod write;

use self::error::{with_content_type, ScimError};
use self::protocol::CONTENT_TYPE;
use self::token::ScimToken;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::ratelimit::{Bucket, Decision, RateLimiter};
use crate::routes::Scim;
use crate::store::Store;

/// Answers a SCIM endpoint the engine admitted ([`admit`]) with `token`, counted as
/// `decision`; `base` is the server's public address.
pub async fn handle<S: Store>(
    store: &S,
    endpoint: Scim,
    req: &Request,
    (token, decision): (ScimToken, Decision),
    base: &str,
    ctx: Ctx,
) -> Response {
    let mut resp = operation(store, endpoint, req, &token, base, ctx).await.unwrap_or_else(ScimError::into_response);
    if let Decision::Allowed { limit, remaining, reset } = decision {
        resp = resp
            .with_header("X-RateLimit-Limit", limit.to_string())
            .with_header("X-RateLimit-Remaining", remaining.to_string())
            .with_header("X-RateLimit-Reset", reset.to_string());
    }
    if resp.body.is_empty() {
        resp
    } else {
        with_content_type(resp)
    }
}

/// The token and its origin, then the company's daily count: the spec's 5,000 a
/// day are shared by the user endpoints; discovery is not counted.
pub async fn admit<S: Store>(
    store: &S,
    limiter: &RateLimiter,
    endpoint: &Scim,
    req: &Request,
    ctx: Ctx,
) -> Result<(ScimToken, Decision), ScimError> {
    let token = token::authenticate(store, req).await?;
    if endpoint.is_discovery() {
        return Ok((token, Decision::Unlimited));
    }
    match limiter.check(store, WorkspaceName::company().as_str(), Bucket::Scim, ctx.now).await {
        Decision::Limited { retry_after } => Err(ApiError::RateLimited { retry_after }.into()),
        decision => Ok((token, decision)),
    }
}

async fn operation<S: Store>(
    store: &S,
    endpoint: Scim,
    req: &Request,
    token: &ScimToken,
    base: &str,
    ctx: Ctx,
) -> Result<Response, ScimError> {
    match endpoint {
        Scim::Search => read::list(store, &read::Query::from_query(req)?, base).await,
        Scim::SearchPost | Scim::SearchRoot => {
            check_media_type(req)?;
            read::list(store, &read::Query::from_search(&req.body)?, base).await
        }
        Scim::Create => {
            check_media_type(req)?;
            write::create(store, &req.body, token.default_department, base, ctx).await
        }
        Scim::Get(id) => read::get(store, &id, req, base).await,
        Scim::Replace(id) => {
            check_media_type(req)?;
            write::replace(store, &id, req, base, ctx).await
        }
        Scim::Delete(id) => write::delete(store, &id, req, ctx).await,
        Scim::Patch(id) => {
            check_media_type(req)?;
            write::patch(store, &id, req, base, ctx).await
        }
        Scim::ServiceProviderConfig => Ok(discovery::service_provider_config(base)),
        Scim::ResourceTypes => Ok(discovery::resource_types(base)),
        Scim::ResourceType(id) => discovery::resource_type(base, &id),
        Scim::Schemas => Ok(discovery::schemas(base, token.default_department.is_none())),
        Scim::Schema(id) => discovery::schema(base, &id, token.default_department.is_none()),
        Scim::NotOffered(what) => Err(discovery::not_offered(what)),
    }
}

/// A body must be `application/scim+json` or `application/json` (or unlabelled).
fn check_media_type(req: &Request) -> Result<(), ScimError> {
    let Some(ct) = req.header_value("content-type") else { return Ok(()) };
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case(CONTENT_TYPE) || essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ScimError::UnsupportedMediaType)
    }
}

#[cfg(test)]
mod tests;
