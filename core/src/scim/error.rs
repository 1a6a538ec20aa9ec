//! SCIM's own error shape (RFC 7644 §3.12): `schemas` with the Error URN, `detail`,
//! `status` and, for 400s and 409s, a `scimType`. Every failure of a `/scim/v2`
//! request, the shared ones (rate limit, storage) included, leaves in this shape.

use serde_json::{json, Value};

use super::protocol::CONTENT_TYPE;
use crate::error::ApiError;
use crate::http::Response;

/// The URN of SCIM's error message.
pub use crate::error::SCIM_ERROR_URN as ERROR_URN;

/// The `scimType` of a 400 or 409 (RFC 7644, table 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScimType {
    /// The filter is not one this server evaluates, or is not a filter at all.
    InvalidFilter,
    /// A value is missing, of the wrong type, or not one the attribute allows.
    InvalidValue,
    /// The body is not JSON or not the resource's structure (an unknown attribute).
    InvalidSyntax,
    /// A unique value (`userName`) is taken.
    Uniqueness,
    /// An attempt to change an immutable attribute (`id`, `createdAt`).
    Mutability,
    /// A PATCH path that is not one of the resource's attributes, or has a filter.
    InvalidPath,
    /// A PATCH `remove` without a path.
    NoTarget,
}

impl ScimType {
    /// Every type, in RFC 7644's order (for the API description).
    pub const ALL: [ScimType; 7] = [
        ScimType::InvalidFilter,
        ScimType::InvalidValue,
        ScimType::InvalidSyntax,
        ScimType::Uniqueness,
        ScimType::Mutability,
        ScimType::InvalidPath,
        ScimType::NoTarget,
    ];

    /// The name SCIM writes in `scimType`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScimType::InvalidFilter => "invalidFilter",
            ScimType::InvalidValue => "invalidValue",
            ScimType::InvalidSyntax => "invalidSyntax",
            ScimType::Uniqueness => "uniqueness",
            ScimType::Mutability => "mutability",
            ScimType::InvalidPath => "invalidPath",
            ScimType::NoTarget => "noTarget",
        }
    }
}

/// Everything that ends a SCIM request without success.
#[derive(Clone, Debug, PartialEq)]
pub enum ScimError {
    /// 400 with a `scimType`.
    Bad(ScimType, String),
    /// 400 without a `scimType` (a bound of this server that no SCIM type names).
    Limit(String),
    /// 401: no token, an unknown one, or an `X-Request-Origin` it was not made for.
    Unauthorized(&'static str),
    /// 404: no dashboard user with this id (or no such discovery resource).
    NotFound(String),
    /// 409: `userName` is taken.
    Taken,
    /// 412: `If-Match` names a version that is no longer current.
    PreconditionFailed,
    /// 415: a body that is neither `application/scim+json` nor `application/json`.
    UnsupportedMediaType,
    /// 501: an endpoint SCIM defines that this server does not offer (`/Me`, `/Bulk`).
    NotImplemented(&'static str),
    /// Any shared failure (rate limit, storage, contention), in SCIM's shape.
    Api(ApiError),
}

impl From<ApiError> for ScimError {
    fn from(e: ApiError) -> Self {
        ScimError::Api(e)
    }
}

impl From<crate::store::StoreError> for ScimError {
    fn from(e: crate::store::StoreError) -> Self {
        ScimError::Api(e.into())
    }
}

impl ScimError {
    /// A 400 `invalidValue`.
    pub fn value(detail: impl Into<String>) -> ScimError {
        ScimError::Bad(ScimType::InvalidValue, detail.into())
    }

    /// A 400 `invalidSyntax`.
    pub fn syntax(detail: impl Into<String>) -> ScimError {
        ScimError::Bad(ScimType::InvalidSyntax, detail.into())
    }

    /// A 400 `invalidFilter`.
    pub fn filter(detail: impl Into<String>) -> ScimError {
        ScimError::Bad(ScimType::InvalidFilter, detail.into())
    }

    /// The response, in SCIM's shape. `status` is a number, as the spec's 404 shows
    /// it (RFC 7644 writes it as a string; see docs/decisions/scim.md#scim-errors).
    pub fn into_response(self) -> Response {
        let (status, scim_type, detail) = match self {
            ScimError::Bad(t, d) => (400, Some(t), d),
            ScimError::Limit(d) => (400, None, d),
            ScimError::Unauthorized(d) => (401, None, d.to_string()),
            ScimError::NotFound(d) => (404, None, d),
            ScimError::Taken => (409, Some(ScimType::Uniqueness), "User already exists in the database.".into()),
            ScimError::PreconditionFailed => {
                (412, None, "The resource has changed since the version named in If-Match".into())
            }
            ScimError::UnsupportedMediaType => {
                (415, None, "Content-Type must be application/scim+json or application/json".into())
            }
            ScimError::NotImplemented(d) => (501, None, d.to_string()),
            ScimError::Api(e) => return from_api(e),
        };
        let mut body = json!({"schemas": [ERROR_URN], "detail": detail, "status": status});
        if let Some(t) = scim_type {
            body["scimType"] = Value::from(t.as_str());
        }
        let resp = Response::json(status, &body);
        let mut resp = with_content_type(resp);
        if status == 401 {
            resp = resp.with_header("WWW-Authenticate", "Bearer realm=\"scim\"");
        }
        resp
    }
}

/// A shared error in SCIM's shape: the platform's status and headers (the rate
/// limit's `X-Ratelimit-Retry-After`, a 503's `Retry-After`, the log note), with
/// the message as `detail`.
fn from_api(e: ApiError) -> Response {
    e.into_shaped(crate::error::Shape::Scim)
}

/// Sets SCIM's media type on a JSON response.
pub fn with_content_type(mut resp: Response) -> Response {
    resp.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
    resp.with_header("Content-Type", CONTENT_TYPE)
}
