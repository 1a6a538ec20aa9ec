//! The OpenAPI 3.1 description of the API (`GET /openapi.json`), made from the
//! route table rather than written beside it.
//!
//! Each row of [`ROUTES`] gives an operation its method, path, path parameter
//! names, summary, tag (its family), credentials, permission and rate limit. Its
//! endpoint gives the rest: [`describe`] matches every endpoint (no wildcard, as
//! the engine's dispatch) to its family's `schema.rs`, which writes the
//! description, parameters and bodies ([`op::Op`]) next to the code it describes.
//! The answers every operation of a kind shares, and their examples, come from the
//! error model ([`errors`]).

mod errors;

mod public;

#[cfg(test)]
mod tests;

use serde_json::{json, Map, Value};

use crate::describe::op::{In, Op, JSON};
use crate::describe::schema;
use crate::ratelimit::Bucket;
use crate::routes::{Api, Auth, Endpoint, Family, Route, ROUTES};
use crate::scim::protocol::CONTENT_TYPE as SCIM_JSON;
use crate::{admin, cdi, export, identity, preference_center, scim, subscriptions, track, users};

const OVERVIEW: &str = "Engage: a self-hostable implementation of a customer-engagement platform's REST API for user data (tracking, identify, merge and delete, subscription groups, email state, preference centers, SCIM provisioning of dashboard users, warehouse-sync status).

**Credentials.** The platform's endpoints take an API key (`Authorization: Bearer <API_KEY>`); each names the permission the key needs (the role in its security requirement, and `x-engage-permission`). SCIM endpoints take a SCIM token and `X-Request-Origin`. Operator routes under `/_engage/` (tag *Engage operator*) are Engage's own, not the platform's: they take the admin token and exist only when the server has one. The service routes (tag *Engage service*) and the playground need nothing.

**Errors.** Failures answer `{\"message\": ...}`; the track endpoints add an `errors` array; SCIM answers in its own shape (`schemas`, `detail`, `status`).

**Rate limits.** Each API operation is counted in a bucket (`x-engage-rate-limit`), per workspace. Admitted answers carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`; a 429 carries `X-Ratelimit-Retry-After` instead.

Every answer carries `X-Request-Id`.";

/// The OpenAPI document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let item = paths.entry(path_of(route)).or_insert_with(|| json!({}));
        item[method_key(route)] = operation(route);
    }
    let mut schemas = Map::new();
    let families = [
        errors::schemas(),
        users::schema::components(),
        track::schema::components(),
        preference_center::schema::components(),
        scim::schema::components(),
    ];
    for (name, schema) in families.into_iter().flatten() {
        schemas.insert(name.to_string(), schema);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Engage",
            "version": env!("CARGO_PKG_VERSION"),
            "summary": "User data, subscriptions, preference centers, SCIM and warehouse-sync status",
            "description": OVERVIEW,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
            "contact": {"name": "Engage maintainers (the project's issue tracker)"},
        },
        // Relative: the server that serves this document.
        "servers": [{"url": "/", "description": "This server"}],
        "tags": tags(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": errors::responses(),
            "headers": errors::headers(),
            "parameters": errors::parameters(),
            "securitySchemes": errors::security_schemes(),
        },
    })
}

/// A route's path as OpenAPI writes it: each `{}` (or `{..}`) named by the row.
pub fn path_of(route: &Route) -> String {
    let mut names = route.params.iter();
    let segments: Vec<String> = route
        .pattern
        .split('/')
        .map(|s| match s {
            "{}" | "{..}" => format!("{{{}}}", names.next().copied().unwrap_or("unnamed")),
            s => s.to_string(),
        })
        .collect();
    segments.join("/")
}

fn method_key(route: &Route) -> String {
    route.method.as_str().to_ascii_lowercase()
}

/// A unique id from the method and path: `post_users_track`.
fn operation_id(route: &Route) -> String {
    let mut id = method_key(route);
    for c in path_of(route).chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '_' };
        if !(c == '_' && id.ends_with('_')) {
            id.push(c);
        }
    }
    id.trim_end_matches('_').to_string()
}

/// What the endpoint's family says about it. Exhaustive, as the engine's dispatch:
/// a new endpoint is not described until its family describes it.
pub fn describe(endpoint: &Endpoint) -> Op {
    match endpoint {
        Endpoint::Api(api) => match api {
            Api::Track => track::schema::track(),
            Api::TrackSync => track::schema::track_sync(),
            Api::ExportIds => export::schema::export_ids(),
            Api::Identify => identity::schema::identify(),
            Api::Merge => identity::schema::merge(),
            Api::Delete => identity::schema::delete(),
            Api::AliasNew => identity::schema::alias_new(),
            Api::AliasUpdate => identity::schema::alias_update(),
            Api::ExternalIdsRename => identity::schema::external_ids_rename(),
            Api::ExternalIdsRemove => identity::schema::external_ids_remove(),
            Api::SubscriptionSetV1 => subscriptions::schema::set_v1(),
            Api::SubscriptionSetV2 => subscriptions::schema::set_v2(),
            Api::SubscriptionUserStatus => subscriptions::schema::user_status(),
            Api::SubscriptionStatusGet => subscriptions::schema::status_get(),
            Api::EmailStatus => subscriptions::schema::email_status(),
            Api::EmailBlocklist => subscriptions::schema::email_blocklist(),
            Api::EmailHardBounces => subscriptions::schema::email_list(subscriptions::lists::List::HardBounces),
            Api::EmailUnsubscribes => subscriptions::schema::email_list(subscriptions::lists::List::Unsubscribes),
            Api::EmailBounceRemove => subscriptions::schema::email_removal(subscriptions::lists::Removal::Bounce),
            Api::SmsInvalidPhones => subscriptions::schema::email_list(subscriptions::lists::List::InvalidPhones),
            Api::SmsInvalidPhonesRemove => {
                subscriptions::schema::email_removal(subscriptions::lists::Removal::InvalidPhones)
            }
            Api::EmailSpamRemove => subscriptions::schema::email_removal(subscriptions::lists::Removal::Spam),
            Api::PreferenceCenter(e) => preference_center::schema::describe(e),
            Api::Cdi(e) => cdi::schema::describe(e),
        },
        Endpoint::Scim(e) => scim::schema::describe(e),
        Endpoint::Operator(e) => admin::schema::describe(e),
        Endpoint::Kit(e) => crate::kit::schema::describe(e),
        Endpoint::Public(e) => public::describe(e),
    }
}

/// The endpoint a row stands for (its path parameters are placeholders).
pub fn endpoint_of(route: &Route) -> Endpoint {
    route.endpoint_with(route.params.iter().map(|p| format!("{{{p}}}")).collect())
}

/// A family's tag: name and description.
fn tag(family: Family) -> (&'static str, &'static str) {
    match family {
        Family::Track => ("Track", "Record events, purchases and profile attributes: queued (`/users/track`) or applied before answering (`/users/track/sync`)."),
        Family::Export => ("Export", "Read profiles back by identifier."),
        Family::Identity => ("Identity", "Identify anonymous profiles, merge and delete profiles, add and rename aliases."),
        Family::Subscriptions => ("Subscriptions", "Subscription-group states, the global email subscription state and the email blocklist."),
        Family::PreferenceCenter => ("Preference centers", "Hosted pages where a person manages their email subscriptions: the API that makes them and a user's link, and the pages themselves (no credentials: the link's token is the credential)."),
        Family::Scim => ("SCIM", "SCIM 2.0 provisioning of dashboard users (RFC 7643, RFC 7644), with a SCIM token and `X-Request-Origin`."),
        Family::Cdi => ("Warehouse sync (CDI)", "Warehouse integrations and their sync jobs."),
        Family::Admin => ("Engage operator", "Engage's operator routes under `/_engage/`, not part of the platform's API: provisioning and inspection over HTTP. They need the admin token and exist only when the server has one."),
        Family::Kit => ("Engage test kit", "Engage's test kit under `/_engage/`, not part of the platform's API: reset, fixtures, a settable clock (`--test-clock`), the request journal and the inspector. They need the admin token (or the inspector's session) and exist only when the server has one."),
        Family::Playground => ("Engage playground", "The playground's files: the API running in the browser, compiled to WebAssembly."),
        Family::Service => ("Engage service", "Engage's own service routes: landing page, health, readiness, this description and metrics. No credentials."),
    }
}

/// Every family's tag, in the table's order.
fn tags() -> Value {
    let mut seen: Vec<Family> = Vec::new();
    for r in ROUTES {
        if !seen.contains(&r.family) {
            seen.push(r.family);
        }
    }
    seen.into_iter().map(tag).map(|(name, description)| json!({"name": name, "description": description})).collect()
}

fn thousands(n: u64) -> String {
    let reversed: Vec<char> = n.to_string().chars().rev().collect();
    let groups: Vec<String> = reversed.chunks(3).map(|g| g.iter().rev().collect()).rev().collect();
    groups.join(",")
}

fn window(secs: i64) -> String {
    match secs {
        60 => "minute".into(),
        3_600 => "hour".into(),
        86_400 => "day".into(),
        s => format!("{s} seconds"),
    }
}

/// The sentence on credentials and limits that ends an operation's description.
fn terms(route: &Route, limit: Option<(Bucket, &str)>) -> String {
    let mut text = match route.auth {
        Auth::Key(p, _) => format!("Needs an API key with the `{}` permission.", p.as_str()),
        Auth::Scim => "Needs a SCIM token and the `X-Request-Origin` it was made for.".into(),
        Auth::Admin | Auth::SignIn => {
            "Engage operator route, not part of the platform's API: needs the admin token.".into()
        }
        Auth::Public => "No credentials.".into(),
    };
    if let Some((bucket, per)) = limit {
        let (n, secs) = bucket.limit();
        text.push_str(&format!(" Rate limit: {} requests per {} {per}", thousands(n), window(secs)));
        let shared: Vec<String> = ROUTES
            .iter()
            .filter(|r| !std::ptr::eq(*r, route) && matches!(r.auth, Auth::Key(_, b) if b == bucket))
            .map(|r| format!("`{} {}`", r.method.as_str(), path_of(r)))
            .collect();
        if !shared.is_empty() {
            text.push_str(&format!(", shared with {}", shared.join(", ")));
        }
        text.push('.');
    }
    text
}

/// The headers of an answer: `X-Request-Id`, the rate-limit headers where the
/// route sends them, and the reply's own.
fn reply_headers(limit_headers: bool, own: &[(&'static str, String)]) -> Value {
    let mut h = Map::new();
    h.insert("X-Request-Id".into(), errors::header_ref("X-Request-Id"));
    if limit_headers {
        for name in errors::RATE_LIMIT_HEADERS {
            h.insert(name.into(), errors::header_ref(name));
        }
    }
    for (name, description) in own {
        let v = if errors::known_header(name) {
            errors::header_ref(name)
        } else {
            json!({"description": description, "schema": {"type": "string"}})
        };
        h.insert(name.to_string(), v);
    }
    Value::Object(h)
}

/// The path parameters the row names (described by the family, by name), then the
/// family's query and header parameters, then `X-Request-Id`.
fn parameters(route: &Route, op: &Op) -> Vec<Value> {
    let mut params: Vec<Value> = route
        .params
        .iter()
        .map(|name| {
            let doc = op.params.iter().find(|p| p.at == In::Path && p.name == *name);
            let description = doc.map_or_else(|| format!("The `{name}` of the path."), |p| p.description.clone());
            let schema = doc.map_or_else(|| json!({"type": "string"}), |p| p.schema.clone());
            json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
        })
        .collect();
    for p in op.params.iter().filter(|p| p.at != In::Path) {
        params.push(json!({"name": p.name, "in": p.at.as_str(), "required": p.required, "description": p.description, "schema": p.schema}));
    }
    params.push(json!({"$ref": "#/components/parameters/RequestId"}));
    params
}

/// The family's answers, a 400 in the family's error shape when the operation takes
/// input and does not describe one, and the answers its credentials share.
fn responses(route: &Route, op: &Op, limited: bool) -> Map<String, Value> {
    // The rate-limit headers: API keys' answers, and counted SCIM requests'.
    let limit_headers = matches!(route.auth, Auth::Key(..)) || (route.auth == Auth::Scim && limited);
    let mut responses = Map::new();
    for r in &op.replies {
        let mut v = json!({"description": r.description, "headers": reply_headers(limit_headers && r.status != 429, &r.headers)});
        if let Some((media, schema)) = &r.body {
            let mut content = json!({"schema": schema});
            if !r.examples.is_empty() {
                let list: Map<String, Value> =
                    r.examples.iter().map(|(name, body)| (name.to_string(), json!({"value": body}))).collect();
                content["examples"] = Value::Object(list);
            }
            v["content"] = json!({*media: content});
        }
        responses.insert(r.status.to_string(), v);
    }
    let (error_schema, error_media) = match route.auth {
        Auth::Scim => (schema::refer("ScimError"), SCIM_JSON),
        _ => (op.error_schema.clone().unwrap_or_else(|| schema::refer("Error")), JSON),
    };
    let takes_input = op.body.is_some() || op.params.iter().any(|p| p.at == In::Query);
    if takes_input && route.auth != Auth::Public && !responses.contains_key("400") {
        let mut bad = errors::bad_request(error_schema, error_media);
        bad["headers"] = reply_headers(limit_headers, &[]);
        responses.insert("400".into(), bad);
    }
    for (status, answer) in errors::shared(route.auth, limited) {
        responses.entry(status.to_string()).or_insert(answer);
    }
    responses
}

/// One operation: the row and its family's description together.
fn operation(route: &Route) -> Value {
    let op = describe(&endpoint_of(route));
    let limit = match route.auth {
        Auth::Key(_, bucket) => Some((bucket, "per workspace")),
        _ => op.limit,
    };
    let params = parameters(route, &op);
    let responses = responses(route, &op, limit.is_some());
    let mut description = op.description.clone();
    description.push_str("\n\n");
    description.push_str(&terms(route, limit));
    let mut v = json!({
        "operationId": operation_id(route),
        "summary": route.summary,
        "description": description,
        "tags": [tag(route.family).0],
        "parameters": params,
        "responses": responses,
        "x-engage-pattern": route.pattern,
        "x-engage-route": match route.auth {
            Auth::Key(..) | Auth::Scim => "platform",
            Auth::Admin | Auth::SignIn => "operator",
            Auth::Public => "public",
        },
    });
    if let Some(body) = &op.body {
        let content: Map<String, Value> = body
            .media
            .iter()
            .map(|m| {
                let mut c = json!({"schema": body.schema});
                if let Some(example) = &body.example {
                    c["example"] = example.clone();
                }
                (m.to_string(), c)
            })
            .collect();
        v["requestBody"] = json!({"required": body.required, "content": content});
    }
    v["security"] = match route.auth {
        Auth::Key(p, _) => {
            v["x-engage-permission"] = json!(p.as_str());
            json!([{"apiKey": [p.as_str()]}])
        }
        Auth::Scim => json!([{"scimToken": [], "scimOrigin": []}]),
        Auth::Admin | Auth::SignIn => json!([{"adminToken": []}]),
        Auth::Public => json!([]),
    };
    if let Some((bucket, per)) = limit {
        let (n, secs) = bucket.limit();
        v["x-engage-rate-limit"] =
            json!({"bucket": format!("{bucket:?}"), "limit": n, "window_seconds": secs, "per": per});
    }
    v
}
