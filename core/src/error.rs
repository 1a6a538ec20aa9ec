//! The one error model: every failure a request can meet, and the one function that
//! turns it into a status and a body in the platform's shape.

use serde_json::{json, Value};

use crate::http::{Method, Response};
use crate::permission::Permission;
use crate::store::{CommitError, StoreError};

/// The start of the platform's answer to an unknown API key, which it ends with the
/// key as sent (recorded by public clients' test suites).
pub const UNKNOWN_KEY: &str = "Invalid API key: ";

/// SCIM's error message URN.
pub const SCIM_ERROR_URN: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
/// SCIM's media type, on every SCIM body.
pub const SCIM_CONTENT_TYPE: &str = "application/scim+json";

/// Whose shape an error answer takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The platform's: `{"message": ...}`.
    Platform,
    /// SCIM's: `{"schemas", "detail", "status"}`, on the SCIM family's paths (even
    /// one no route has).
    Scim,
}

/// Everything that ends a request without success.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApiError {
    /// No route has this path.
    RouteNotFound,
    /// The path exists but not with this method.
    MethodNotAllowed {
        /// The methods the path has.
        allowed: Vec<Method>,
    },
    /// No `Authorization: Bearer` header.
    MissingKey,
    /// The credential is not a bearer token, or not the admin token.
    InvalidKey,
    /// No API key is this one (echoed, as the platform does: `Invalid API key: <key>`).
    UnknownKey(String),
    /// The key lacks the endpoint's permission.
    MissingPermission(Permission),
    /// The credential is good but this use of it is refused (a write made with the
    /// inspector's session from a page that is not the inspector's): 403.
    Forbidden(String),
    /// The body exceeds the configured limit.
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Over the rate limit; retry after this many seconds.
    RateLimited {
        /// Seconds until the window resets.
        retry_after: u64,
    },
    /// Invalid input: `{"message": ...}`.
    BadRequest(String),
    /// A body whose `Content-Type` is not JSON, refused in strict mode (415).
    UnsupportedMediaType,
    /// Invalid input on endpoints whose errors also carry an `errors` array (track).
    Fatal {
        /// The message.
        message: String,
        /// The `errors` entries.
        errors: Vec<Value>,
    },
    /// A named resource does not exist: `{"message": ...}` with 404.
    NotFound(String),
    /// The request is valid but the resource's state refuses it now (a paused
    /// integration asked to sync, a running one asked to rewind): 409, since the same
    /// request succeeds once that state changes, which a 400 would deny.
    Conflict(String),
    /// The endpoint is listed in the spec but not built yet.
    NotImplemented,
    /// Contention did not settle after several retries.
    Busy,
    /// An error a test asked for (the test kit's faults): this status, in the
    /// platform's shape, with `Retry-After` on a 5xx.
    Injected {
        /// The status, 400 to 599.
        status: u16,
        /// Seconds a client is told to wait (5xx).
        retry_after: u64,
    },
    /// The request (its body) did not arrive in time.
    RequestTimeout {
        /// The limit, in seconds.
        secs: u64,
    },
    /// The server holds as many connections as it may.
    Overloaded,
    /// The request target is longer than the server reads (414).
    UriTooLong {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request head is larger than the server reads (431).
    HeadersTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A transfer coding other than `chunked` alone (501, RFC 9112 6.1).
    UnsupportedTransferCoding(String),
    /// The queue of acknowledged writes is as long as the server lets it grow:
    /// nothing was acknowledged; retry after this many seconds.
    Backlogged {
        /// Seconds to wait.
        retry_after: u64,
    },
    /// The storage backend failed; details go to the host's log, not to the client.
    Store(StoreError),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Store(e)
    }
}

impl From<CommitError> for ApiError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Conflict => ApiError::Busy,
            CommitError::Store(s) => ApiError::Store(s),
        }
    }
}

impl ApiError {
    /// Shorthand for a 400 with a message.
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest(message.into())
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::RouteNotFound | ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::MissingKey | ApiError::InvalidKey | ApiError::UnknownKey(_) => 401,
            ApiError::MissingPermission(_) | ApiError::Forbidden(_) => 403,
            ApiError::PayloadTooLarge { .. } => 413,
            ApiError::UnsupportedMediaType => 415,
            ApiError::RateLimited { .. } => 429,
            ApiError::BadRequest(_) | ApiError::Fatal { .. } => 400,
            ApiError::Conflict(_) => 409,
            ApiError::NotImplemented | ApiError::UnsupportedTransferCoding(_) => 501,
            ApiError::UriTooLong { .. } => 414,
            ApiError::HeadersTooLarge { .. } => 431,
            ApiError::Backlogged { .. } => 503,
            ApiError::RequestTimeout { .. } => 408,
            ApiError::Busy | ApiError::Store(_) | ApiError::Overloaded => 503,
            ApiError::Injected { status, .. } => *status,
        }
    }

    /// The message the response carries (for a caller that reports it elsewhere).
    pub fn message(&self) -> String {
        self.clone().into_response().json_body()["message"].as_str().unwrap_or("error").to_string()
    }

    /// The error in the shape its clients expect: the platform's, or SCIM's (RFC
    /// 7644 §3.12: the platform's status and headers, the message as `detail`).
    pub fn into_shaped(self, shape: Shape) -> Response {
        let mut resp = self.into_response();
        if shape == Shape::Scim {
            let detail = resp.json_body()["message"].as_str().unwrap_or("error").to_string();
            let body = json!({"schemas": [SCIM_ERROR_URN], "detail": detail, "status": resp.status});
            resp.body = serde_json::to_vec(&body).unwrap_or_default();
            resp.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            resp = resp.with_header("Content-Type", SCIM_CONTENT_TYPE);
        }
        resp
    }

    /// The one mapping from an error to a response in the platform's shape.
    pub fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            ApiError::RouteNotFound => json!({"message": "Invalid URL"}),
            ApiError::MethodNotAllowed { .. } => json!({"message": "Method Not Allowed"}),
            ApiError::MissingKey => {
                json!({"message": "Unauthorized: missing 'Authorization: Bearer <API_KEY>' header"})
            }
            ApiError::InvalidKey => json!({"message": "Invalid API key"}),
            ApiError::UnknownKey(key) => json!({"message": format!("{UNKNOWN_KEY}{key}")}),
            ApiError::MissingPermission(p) => {
                json!({"message": format!("Access Denied: this API key lacks the '{}' permission", p.as_str())})
            }
            ApiError::PayloadTooLarge { limit } => {
                json!({"message": format!("Request Entity Too Large: the body exceeds {limit} bytes")})
            }
            ApiError::RateLimited { .. } => json!({"message": "Over rate limit"}),
            ApiError::UnsupportedMediaType => {
                json!({"message": "Unsupported Media Type: send the body as 'Content-Type: application/json'"})
            }
            ApiError::BadRequest(m) | ApiError::NotFound(m) | ApiError::Conflict(m) | ApiError::Forbidden(m) => {
                json!({"message": m})
            }
            ApiError::Fatal { message, errors } => json!({"message": message, "errors": errors}),
            ApiError::NotImplemented => json!({"message": "Not Implemented: this endpoint is not available yet"}),
            ApiError::Busy => json!({"message": "Service Unavailable: too much contention, retry"}),
            ApiError::Store(_) => json!({"message": "Service Unavailable: storage failure, retry"}),
            ApiError::RequestTimeout { secs } => {
                json!({"message": format!("Request Timeout: the request did not arrive within {secs} s")})
            }
            ApiError::Overloaded => json!({"message": "Service Unavailable: too many connections, retry"}),
            ApiError::UriTooLong { limit } => {
                json!({"message": format!("URI Too Long: the request target exceeds {limit} bytes")})
            }
            ApiError::HeadersTooLarge { limit } => json!({
                "message": format!("Request Header Fields Too Large: the head exceeds {limit} bytes or 100 fields")
            }),
            ApiError::UnsupportedTransferCoding(codings) => json!({
                "message": format!("Not Implemented: transfer coding '{codings}' (only 'chunked' is supported)")
            }),
            ApiError::Backlogged { retry_after } => json!({
                "message": format!("Service Unavailable: too many writes are waiting to be applied, retry in {retry_after} s")
            }),
            ApiError::Injected { status, .. } => json!({"message": reason(*status)}),
        };
        let mut resp = Response::json(status, &body);
        match self {
            ApiError::MethodNotAllowed { allowed } => {
                let list: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
                resp = resp.with_header("Allow", list.join(", "));
            }
            ApiError::RateLimited { retry_after } => {
                // The platform's header, and the standard one generic clients read.
                resp = resp
                    .with_header("X-Ratelimit-Retry-After", retry_after.to_string())
                    .with_header("Retry-After", retry_after.to_string());
            }
            ApiError::Overloaded => {
                resp = resp.with_header("Retry-After", "1").with_header("Connection", "close");
            }
            ApiError::Backlogged { retry_after } => {
                resp = resp.with_header("Retry-After", retry_after.to_string());
            }
            ApiError::Injected { status, retry_after } if status >= 500 => {
                resp = resp.with_header("Retry-After", retry_after.to_string());
            }
            ApiError::Busy => {
                resp = resp.with_header("Retry-After", "1");
                resp.internal = Some("optimistic retries exhausted".into());
            }
            ApiError::Store(e) => {
                resp = resp.with_header("Retry-After", "1");
                resp.internal = Some(e.to_string());
            }
            _ => {}
        }
        resp
    }
}

/// The reason phrase of an error status, as the platform's messages begin.
fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Request Entity Too Large",
        429 => "Over rate limit",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        s if s >= 500 => "Server Error",
        _ => "Client Error",
    }
}
