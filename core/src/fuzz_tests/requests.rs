//! Building requests from generated input: a route's request with the right
//! credentials, media type and body, its valid request changed, generated headers,
//! bytes and query strings applied, the route table in sending order (deletes
//! last), and the pieces of arbitrary paths and methods.

use proptest::prelude::*;
use serde_json::json;

use super::examples::{example, right_content_type, Body, Example};
use super::mutate::{mutate_json, mutate_pairs};
use super::strategies::{Bytes, ContentType, Credentials, Headers, Mutation, Param, QueryPart, RequestOrigin};
use super::world::{enc, World, ORIGIN};
use crate::http::{Method, Request};
use crate::routes::{Route, ROUTES};
use crate::testkit::ADMIN_TOKEN;

impl World {
    /// A request of `route` with the right credentials, `Content-Type` and body.
    pub(super) fn request(
        &self,
        route: &Route,
        path: String,
        query: String,
        body: Vec<u8>,
        ct: &ContentType,
    ) -> Request {
        let mut req = Request::new(route.method, "");
        req.path = path;
        req.query = query;
        req.headers = self.credentials(route.auth);
        match ct {
            ContentType::Right => req.headers.push(("Content-Type".into(), right_content_type(route).into())),
            ContentType::Missing => {}
            ContentType::Some(s) => req.headers.push(("Content-Type".into(), s.clone())),
        }
        req.body = body;
        req
    }

    /// The valid body of a route, as bytes (empty when it takes none).
    pub(super) fn body_bytes(&self, body: &Body) -> Vec<u8> {
        match body {
            Body::None => Vec::new(),
            Body::Json(v) => self.resolve_json(v.clone()).to_string().into_bytes(),
            Body::Form(pairs) => pairs_string(self, pairs).into_bytes(),
        }
    }

    /// A route's example, or a small object for routes that take no body.
    pub(super) fn example_or_default(route: &Route) -> Example {
        example(route).unwrap_or(Example { query: Vec::new(), body: Body::None })
    }

    /// A route's valid path (known ids) and query.
    pub(super) fn valid_path_and_query(&self, route: &Route) -> (String, String) {
        let ex = World::example_or_default(route);
        (self.path(route, &[Param::Known(0), Param::Known(0)], false), pairs_string(self, &ex.query))
    }

    /// A route's valid request with `mutations` applied to its body (or, when it
    /// has none, to its query).
    pub(super) fn changed_valid_request(&self, route: &Route, mutations: &[Mutation]) -> Request {
        let ex = World::example_or_default(route);
        let path = self.path(route, &[Param::Known(0), Param::Known(0)], false);
        let (query, body) = match ex.body {
            Body::None => (mutate_pairs(ex.query, mutations), Body::None),
            Body::Json(v) => (ex.query, Body::Json(mutate_json(v, mutations))),
            Body::Form(pairs) => (ex.query, Body::Form(mutate_pairs(pairs, mutations))),
        };
        self.request(route, path, pairs_string(self, &query), self.body_bytes(&body), &ContentType::Right)
    }

    /// Sends `make(route)` for every route, in table order but deletes last (so
    /// that the routes after them still find what they read and change).
    pub(super) fn every_route(&self, mut make: impl FnMut(&World, &Route) -> Request) -> Result<(), TestCaseError> {
        for route in routes_deletes_last() {
            let req = make(self, route);
            self.send(req)?;
        }
        Ok(())
    }
}

/// The route table, `DELETE` routes last.
pub(super) fn routes_deletes_last() -> Vec<&'static Route> {
    let mut routes: Vec<&'static Route> = ROUTES.iter().collect();
    routes.sort_by_key(|r| r.method == Method::Delete);
    routes
}

pub(super) fn apply_headers(world: &World, route: &Route, req: &mut Request, h: &Headers) {
    let right = world.credentials(route.auth);
    let right_auth = right.iter().find(|(k, _)| k == "Authorization").map(|(_, v)| v.clone());
    let right_token = right_auth.as_deref().and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("t").to_string();
    let mut headers: Vec<(String, String)> = Vec::new();
    let auth = |v: String| ("Authorization".to_string(), v);
    match &h.credentials {
        Credentials::Right => headers.extend(right_auth.clone().map(auth)),
        Credentials::Missing => {}
        Credentials::Scheme(s) => headers.push(auth(format!("{s} {right_token}"))),
        Credentials::Bearer(t) => headers.push(auth(format!("Bearer {}", world.resolve(t)))),
        Credentials::Other(i) => {
            let all = [world.key.clone(), ADMIN_TOKEN.to_string(), world.scim_token.clone(), format!("{}x", world.key)];
            headers.push(auth(format!("Bearer {}", all[i % all.len()])));
        }
        Credentials::Value(v) => headers.push(auth(world.resolve(v))),
        Credentials::WrongThenRight(t) => {
            headers.push(auth(format!("Bearer {t}")));
            headers.extend(right_auth.clone().map(auth));
        }
    }
    match &h.request_origin {
        RequestOrigin::Right => headers.push(("X-Request-Origin".into(), ORIGIN.into())),
        RequestOrigin::Missing => {}
        RequestOrigin::Some(s) => headers.push(("X-Request-Origin".into(), s.clone())),
    }
    match &h.content_type {
        ContentType::Right => headers.push(("Content-Type".into(), right_content_type(route).into())),
        ContentType::Missing => {}
        ContentType::Some(s) => headers.push(("Content-Type".into(), s.clone())),
    }
    headers.extend(h.extra.iter().map(|(k, v)| (k.clone(), world.resolve(v))));
    if h.lower_names {
        for (k, _) in &mut headers {
            *k = k.to_ascii_lowercase();
        }
    }
    req.headers = headers;
    req.origin = h.origin.clone();
}

pub(super) fn bytes_of(world: &World, route: &Route, b: &Bytes) -> Vec<u8> {
    let valid = match World::example_or_default(route).body {
        Body::None => world.body_bytes(&Body::Json(json!({"external_id": "u1"}))),
        body => world.body_bytes(&body),
    };
    match b {
        Bytes::Random(v) => v.clone(),
        Bytes::Text(s) => s.clone().into_bytes(),
        Bytes::Truncated(n) => valid[..n % (valid.len() + 1)].to_vec(),
        Bytes::Spliced(n, token) => {
            let at = n % (valid.len() + 1);
            [&valid[..at], token.as_slice(), &valid[at..]].concat()
        }
        Bytes::Flipped(flips) => {
            let mut v = valid;
            if !v.is_empty() {
                for (i, b) in flips {
                    let n = v.len();
                    v[i % n] = *b;
                }
            }
            v
        }
    }
}

pub(super) fn query_string(world: &World, parts: &[QueryPart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            QueryPart::Pair(k, v, true) => format!("{}={}", enc(&world.resolve(k)), enc(&world.resolve(v))),
            QueryPart::Pair(k, v, false) => format!("{}={}", world.resolve(k), world.resolve(v)),
            QueryPart::Bare(k) => enc(&world.resolve(k)),
            QueryPart::Raw(s) => world.resolve(s),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn pairs_string(world: &World, pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(&world.resolve(k)), enc(&world.resolve(v))))
        .collect::<Vec<_>>()
        .join("&")
}

pub(super) fn literal_segments() -> Vec<&'static str> {
    let mut all: Vec<&'static str> =
        ROUTES.iter().flat_map(|r| r.pattern.split('/')).filter(|s| !s.is_empty() && !s.starts_with('{')).collect();
    all.sort_unstable();
    all.dedup();
    all.extend(["", ".", "..", "v1", "v3", "%2F", "users%2Ftrack", "Users"]);
    all
}

pub(super) fn method_of(i: u8) -> Method {
    [
        Method::Get,
        Method::Post,
        Method::Put,
        Method::Patch,
        Method::Delete,
        Method::Head,
        Method::Options,
        Method::Other,
    ][usize::from(i) % 8]
}
