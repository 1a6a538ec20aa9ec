//! What every operation of a kind shares: the error shapes, the answers the engine
//! gives before a family's code runs (credentials, permission, body size, rate
//! limit, contention), the headers and the security schemes. The examples and the
//! headers of those answers are the error model's own ([`ApiError::into_response`],
//! [`ScimError::into_response`]), so they cannot differ from what a client gets.

use serde_json::{json, Map, Value};

use crate::describe::op::JSON;
use crate::describe::schema::{array, integer, object, string, values};
use crate::error::ApiError;
use crate::http::Response;
use crate::input::DEFAULT_MAX_BODY_BYTES;
use crate::routes::Auth;
use crate::scim::error::{ScimError, ScimType, ERROR_URN};
use crate::scim::protocol::CONTENT_TYPE as SCIM_JSON;
use crate::scim::token;

/// The headers the document describes once, by name: `(name, description, schema type)`.
const HEADERS: &[(&str, &str, &str)] = &[
    ("X-RateLimit-Limit", "Requests allowed in the current window of this route's rate limit.", "integer"),
    ("X-RateLimit-Remaining", "Requests left in the current window.", "integer"),
    ("X-RateLimit-Reset", "Seconds until the window resets.", "integer"),
    ("X-Ratelimit-Retry-After", "Seconds until requests may resume (on 429, instead of the `X-RateLimit-*` headers).", "integer"),
    ("Retry-After", "Seconds to wait before retrying.", "integer"),
    ("X-Request-Id", "The request's id: the client's `X-Request-Id` when it is 1 to 128 letters, digits and `-_.:`, else one the server made. The server's log line carries it too.", "string"),
    ("WWW-Authenticate", "The authentication scheme expected (`Bearer realm=\"scim\"`).", "string"),
];

/// The rate-limit headers an admitted request's answer carries.
pub const RATE_LIMIT_HEADERS: [&str; 3] = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"];

/// `#/components/headers`.
pub fn headers() -> Value {
    let map: Map<String, Value> = HEADERS
        .iter()
        .map(|(name, description, kind)| {
            (name.to_string(), json!({"description": description, "schema": {"type": kind}}))
        })
        .collect();
    Value::Object(map)
}

/// A reference to a header of [`headers`].
pub fn header_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/headers/{name}")})
}

/// `#/components/parameters`: the `X-Request-Id` a client may send.
pub fn parameters() -> Value {
    json!({"RequestId": {
        "name": "X-Request-Id", "in": "header", "required": false,
        "description": "An id for this request, echoed in the answer's `X-Request-Id` and in the server's log when it is 1 to 128 letters, digits and `-_.:`; any other value is replaced by one the server makes (the request is not refused for it).",
        "schema": {"type": "string"}
    }})
}

/// `#/components/schemas` of the error model.
pub fn schemas() -> Vec<(&'static str, Value)> {
    let message = string("What went wrong.");
    let error = object("The platform's error body.", &[("message", message.clone())], &["message"]);
    let entry = object(
        "One error: its message in `type`; for an object of the request, the array and index it is at.",
        &[
            ("type", string("The error message.")),
            ("input_array", values(&["attributes", "events", "purchases"], "The array of the object.")),
            ("index", integer("The object's index in that array.")),
        ],
        &["type"],
    );
    let track = object(
        "A track endpoint's fatal error: the message, and `errors` holding it and any details.",
        &[("message", message), ("errors", array(entry, "The errors."))],
        &["message", "errors"],
    );
    let scim_types: Vec<&str> = ScimType::ALL.iter().map(|t| t.as_str()).collect();
    let scim = object(
        "SCIM's error body (RFC 7644 §3.12); `status` is a number, as the platform's example writes it.",
        &[
            (
                "schemas",
                json!({"type": "array", "items": {"const": ERROR_URN}, "description": "The Error message URN."}),
            ),
            ("detail", string("What went wrong.")),
            ("status", integer("The HTTP status.")),
            ("scimType", values(&scim_types, "For 400 and 409: the kind of error (RFC 7644, table 9).")),
        ],
        &["schemas", "detail", "status"],
    );
    vec![("Error", error), ("TrackError", track), ("ScimError", scim)]
}

/// `#/components/securitySchemes`.
pub fn security_schemes() -> Value {
    json!({
        "apiKey": {
            "type": "http", "scheme": "bearer",
            "description": "A REST API key: `Authorization: Bearer <API_KEY>`. Each key belongs to a workspace and carries permissions; an operation names the permission it needs as the role of this requirement (and in `x-engage-permission`). Operators make keys with `engage keys create` or `POST /_engage/keys`."
        },
        "scimToken": {
            "type": "http", "scheme": "bearer",
            "description": "A SCIM token: `Authorization: Bearer <SCIM_TOKEN>`, valid only with the `X-Request-Origin` it was made for (`engage scim-tokens create`)."
        },
        "scimOrigin": {
            "type": "apiKey", "in": "header", "name": "X-Request-Origin",
            "description": "The origin the SCIM token was made for (`https://idp.example.com`)."
        },
        "adminToken": {
            "type": "http", "scheme": "bearer",
            "description": "The operator's admin token (`engage serve --admin-token`). Without one configured the operator routes do not exist (404)."
        }
    })
}

/// One answer: its examples are real answers of the error model, its headers the
/// ones those answers carry.
fn answer(description: &str, media: &str, schema: &str, examples: &[(&str, Response)]) -> Value {
    let mut content = json!({"schema": {"$ref": format!("#/components/schemas/{schema}")}});
    let mut headers = Map::new();
    headers.insert("X-Request-Id".into(), header_ref("X-Request-Id"));
    let mut list = Map::new();
    for (name, resp) in examples {
        list.insert(name.to_string(), json!({"value": resp.json_body()}));
        for (h, _) in &resp.headers {
            if !h.eq_ignore_ascii_case("content-type") {
                headers.insert(h.clone(), header_ref(h));
            }
        }
    }
    content["examples"] = Value::Object(list);
    json!({"description": description, "headers": headers, "content": {media: content}})
}

fn api(e: ApiError) -> Response {
    e.into_response()
}

fn scim(e: ScimError) -> Response {
    e.into_response()
}

/// `#/components/responses`: the answers the engine gives before (or around) a
/// family's code, shared by every operation of a kind.
pub fn responses() -> Value {
    let too_large = || ApiError::PayloadTooLarge { limit: DEFAULT_MAX_BODY_BYTES };
    let limited = || ApiError::RateLimited { retry_after: 30 };
    let key = [("missing", api(ApiError::MissingKey)), ("invalid", api(ApiError::InvalidKey))];
    let scim_who = [
        ("missing", scim(ScimError::Unauthorized(token::MISSING))),
        ("invalid", scim(ScimError::Unauthorized(token::INVALID))),
    ];
    let busy = "Busy, or a storage failure: retry after `Retry-After` seconds.";
    let over = "Over the rate limit: no `X-RateLimit-*` headers; `X-Ratelimit-Retry-After` says when to retry.";
    let large = "The body is over the server's limit.";
    json!({
        "Unauthorized": answer("No API key, or one the server does not know (named in the message, as the platform does).", JSON, "Error", &[key[0].clone(), key[1].clone(), ("unknown", api(ApiError::UnknownKey("00000000-0000-0000-0000-000000000000".into())))]),
        "PayloadTooLarge": answer(large, JSON, "Error", &[("too_large", api(too_large()))]),
        "RateLimited": answer(over, JSON, "Error", &[("limited", api(limited()))]),
        "Unavailable": answer(busy, JSON, "Error", &[("busy", api(ApiError::Busy))]),
        "ScimUnauthorized": answer("No SCIM token or `X-Request-Origin`, or ones that do not hold together.", SCIM_JSON, "ScimError", &scim_who),
        "ScimPayloadTooLarge": answer(large, SCIM_JSON, "ScimError", &[("too_large", scim(ScimError::Api(too_large())))]),
        "ScimRateLimited": answer("Over the company's daily SCIM limit.", SCIM_JSON, "ScimError", &[("limited", scim(ScimError::Api(limited())))]),
        "ScimUnavailable": answer(busy, SCIM_JSON, "ScimError", &[("busy", scim(ScimError::Api(ApiError::Busy)))]),
        "UriTooLong": answer("The request target (path and query) is longer than the server reads; the request is refused before it is routed.", JSON, "Error", &[("too_long", api(ApiError::UriTooLong { limit: crate::head::MAX_TARGET_BYTES }))]),
        "OperatorUnauthorized": answer("No admin token, or the wrong one.", JSON, "Error", &key),
        "OperatorAbsent": answer("The server has no admin token: the operator routes do not exist.", JSON, "Error", &[("absent", api(ApiError::RouteNotFound))]),
        "OperatorForbidden": answer("A change made with the inspector's session from a page that is not the server's own (`Origin` names another site, or a sandboxed page's `null`).", JSON, "Error", &[("other_origin", api(ApiError::Forbidden("a change made with the inspector's session must come from its own page".into())))]),
        "OperatorThrottled": answer("Too many wrong admin tokens from this client address in the last minute: every attempt from it waits `Retry-After` seconds.", JSON, "Error", &[("throttled", api(limited()))]),
    })
}

fn shared_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/responses/{name}")})
}

/// The answers the engine gives an operation before (or around) its family's code,
/// by its credentials, the permission it needs, and whether it is rate limited.
pub fn shared(auth: Auth, rate_limited: bool) -> Vec<(u16, Value)> {
    // Any route: a request target too long to read is refused before routing.
    let mut out = routed(auth, rate_limited);
    out.push((414, shared_ref("UriTooLong")));
    out
}

fn routed(auth: Auth, rate_limited: bool) -> Vec<(u16, Value)> {
    match auth {
        Auth::Key(permission, _) => {
            let denied = [("denied", api(ApiError::MissingPermission(permission)))];
            let why = format!("The key lacks the `{}` permission.", permission.as_str());
            vec![
                (401, shared_ref("Unauthorized")),
                (403, answer(&why, JSON, "Error", &denied)),
                (413, shared_ref("PayloadTooLarge")),
                (429, shared_ref("RateLimited")),
                (503, shared_ref("Unavailable")),
            ]
        }
        Auth::Scim => {
            let mut out = vec![(401, shared_ref("ScimUnauthorized")), (413, shared_ref("ScimPayloadTooLarge"))];
            if rate_limited {
                out.push((429, shared_ref("ScimRateLimited")));
            }
            out.push((503, shared_ref("ScimUnavailable")));
            out
        }
        Auth::Admin | Auth::SignIn => vec![
            (401, shared_ref("OperatorUnauthorized")),
            (403, shared_ref("OperatorForbidden")),
            (404, shared_ref("OperatorAbsent")),
            (429, shared_ref("OperatorThrottled")),
            (503, shared_ref("Unavailable")),
        ],
        Auth::Public => vec![],
    }
}

/// Whether [`headers`] describes this header.
pub fn known_header(name: &str) -> bool {
    HEADERS.iter().any(|(h, _, _)| *h == name)
}

/// A 400 answer in the family's error shape (`#/components/schemas/<schema>`).
pub fn bad_request(schema: Value, media: &str) -> Value {
    let mut headers = Map::new();
    headers.insert("X-Request-Id".into(), header_ref("X-Request-Id"));
    json!({"description": "The request is not valid; the body says why.", "headers": headers,
        "content": {media: {"schema": schema}}})
}
