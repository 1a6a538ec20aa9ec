//! The route table: every path, method, permission and rate-limit bucket of the API
//! in one place, and the matcher that turns a request line into an [`Endpoint`].

use crate::auth::Permission;
use crate::error::ApiError;
use crate::http::Method;
use crate::ratelimit::Bucket;

/// Every endpoint, with its path parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// POST /users/track
    Track,
    /// POST /users/track/sync
    TrackSync,
    /// POST /users/export/ids
    ExportIds,
    /// POST /users/identify
    Identify,
    /// POST /users/merge
    Merge,
    /// POST /users/delete
    Delete,
    /// POST /users/alias/new
    AliasNew,
    /// POST /users/alias/update
    AliasUpdate,
    /// POST /subscription/status/set
    SubscriptionSetV1,
    /// POST /v2/subscription/status/set
    SubscriptionSetV2,
    /// GET /subscription/user/status
    SubscriptionUserStatus,
    /// GET /subscription/status/get
    SubscriptionStatusGet,
    /// POST /email/status
    EmailStatus,
    /// POST /email/blacklist and /email/blocklist
    EmailBlocklist,
    /// POST /preference_center/v1
    PreferenceCenterCreate,
    /// PUT /preference_center/v1/{id}
    PreferenceCenterUpdate(String),
    /// GET /preference_center/v1/list
    PreferenceCenterList,
    /// GET /preference_center/v1/{id}
    PreferenceCenterGet(String),
    /// GET /scim/v2/Users/{id}
    ScimGet(String),
    /// GET /scim/v2/Users?filter=...
    ScimSearch,
    /// POST /scim/v2/Users
    ScimCreate,
    /// PUT /scim/v2/Users/{id}
    ScimReplace(String),
    /// DELETE /scim/v2/Users/{id}
    ScimDelete(String),
    /// GET /cdi/integrations
    CdiIntegrations,
    /// GET /cdi/integrations/{id}/job_sync_status
    CdiJobSyncStatus(String),
    /// POST /_engage/keys (operator)
    AdminCreateKey,
    /// POST /_engage/groups (operator)
    AdminCreateGroup,
    /// GET /_engage/groups (operator)
    AdminListGroups,
}

/// How a route authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// REST API key with this permission.
    Key(Permission),
    /// SCIM token plus `X-Request-Origin`.
    Scim,
    /// The operator's admin token (routes absent unless one is configured).
    Admin,
}

/// One row of the table.
pub struct Route {
    /// Method.
    pub method: Method,
    /// Path pattern; `{}` matches one non-empty segment.
    pub pattern: &'static str,
    /// Authentication and permission.
    pub auth: Auth,
    /// Rate-limit bucket.
    pub bucket: Bucket,
    /// Builds the endpoint from the matched segments.
    pub endpoint: fn(Vec<String>) -> Endpoint,
}

macro_rules! route {
    ($m:ident $p:literal, $auth:expr, $bucket:ident, $ep:expr) => {
        Route { method: Method::$m, pattern: $p, auth: $auth, bucket: Bucket::$bucket, endpoint: $ep }
    };
}

fn param(mut v: Vec<String>) -> String {
    v.pop().unwrap_or_default()
}

use Permission as P;

/// The whole API. Order matters only where a literal segment and a parameter
/// overlap (`/preference_center/v1/list` before `/preference_center/v1/{}`).
pub static ROUTES: &[Route] = &[
    route!(Post "/users/track", Auth::Key(P::UsersTrack), Track, |_| Endpoint::Track),
    route!(Post "/users/track/sync", Auth::Key(P::UsersTrackSync), TrackSync, |_| Endpoint::TrackSync),
    route!(Post "/users/export/ids", Auth::Key(P::UsersExportIds), Export, |_| Endpoint::ExportIds),
    route!(Post "/users/identify", Auth::Key(P::UsersIdentify), Identity, |_| Endpoint::Identify),
    route!(Post "/users/merge", Auth::Key(P::UsersMerge), Identity, |_| Endpoint::Merge),
    route!(Post "/users/delete", Auth::Key(P::UsersDelete), Identity, |_| Endpoint::Delete),
    route!(Post "/users/alias/new", Auth::Key(P::UsersAliasNew), Identity, |_| Endpoint::AliasNew),
    route!(Post "/users/alias/update", Auth::Key(P::UsersAliasUpdate), Identity, |_| Endpoint::AliasUpdate),
    route!(Post "/subscription/status/set", Auth::Key(P::SubscriptionStatusSet), SubscriptionSet, |_| Endpoint::SubscriptionSetV1),
    route!(Post "/v2/subscription/status/set", Auth::Key(P::SubscriptionStatusSet), SubscriptionSet, |_| Endpoint::SubscriptionSetV2),
    route!(Get "/subscription/user/status", Auth::Key(P::SubscriptionGroupsGet), EmailAndStatus, |_| Endpoint::SubscriptionUserStatus),
    route!(Get "/subscription/status/get", Auth::Key(P::SubscriptionStatusGet), EmailAndStatus, |_| Endpoint::SubscriptionStatusGet),
    route!(Post "/email/status", Auth::Key(P::EmailStatus), EmailAndStatus, |_| Endpoint::EmailStatus),
    route!(Post "/email/blacklist", Auth::Key(P::EmailBlacklist), EmailAndStatus, |_| Endpoint::EmailBlocklist),
    route!(Post "/email/blocklist", Auth::Key(P::EmailBlacklist), EmailAndStatus, |_| Endpoint::EmailBlocklist),
    route!(Post "/preference_center/v1", Auth::Key(P::PreferenceCenterUpdate), PreferenceWrite, |_| Endpoint::PreferenceCenterCreate),
    route!(Get "/preference_center/v1/list", Auth::Key(P::PreferenceCenterList), PreferenceRead, |_| Endpoint::PreferenceCenterList),
    route!(Get "/preference_center/v1/{}", Auth::Key(P::PreferenceCenterGet), PreferenceRead, |v| Endpoint::PreferenceCenterGet(param(v))),
    route!(Put "/preference_center/v1/{}", Auth::Key(P::PreferenceCenterUpdate), PreferenceWrite, |v| Endpoint::PreferenceCenterUpdate(param(v))),
    route!(Get "/scim/v2/Users", Auth::Scim, Scim, |_| Endpoint::ScimSearch),
    route!(Post "/scim/v2/Users", Auth::Scim, Scim, |_| Endpoint::ScimCreate),
    route!(Get "/scim/v2/Users/{}", Auth::Scim, Scim, |v| Endpoint::ScimGet(param(v))),
    route!(Put "/scim/v2/Users/{}", Auth::Scim, Scim, |v| Endpoint::ScimReplace(param(v))),
    route!(Delete "/scim/v2/Users/{}", Auth::Scim, Scim, |v| Endpoint::ScimDelete(param(v))),
    route!(Get "/cdi/integrations", Auth::Key(P::CdiIntegrationList), CdiList, |_| Endpoint::CdiIntegrations),
    route!(Get "/cdi/integrations/{}/job_sync_status", Auth::Key(P::CdiIntegrationJobStatus), CdiJobs, |v| Endpoint::CdiJobSyncStatus(param(v))),
    route!(Post "/_engage/keys", Auth::Admin, Admin, |_| Endpoint::AdminCreateKey),
    route!(Post "/_engage/groups", Auth::Admin, Admin, |_| Endpoint::AdminCreateGroup),
    route!(Get "/_engage/groups", Auth::Admin, Admin, |_| Endpoint::AdminListGroups),
];

fn match_pattern(pattern: &str, path: &str) -> Option<Vec<String>> {
    let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    let mut params = Vec::new();
    let mut pat = pattern.split('/');
    let mut segs = path.split('/');
    loop {
        match (pat.next(), segs.next()) {
            (None, None) => return Some(params),
            (Some("{}"), Some(s)) if !s.is_empty() => params.push(crate::http::percent_decode(s)),
            (Some(p), Some(s)) if p == s => {}
            _ => return None,
        }
    }
}

/// Finds the route of a request: 404 when no pattern matches the path, 405 when
/// patterns match but none with this method.
pub fn find(method: Method, path: &str) -> Result<(&'static Route, Endpoint), ApiError> {
    let mut allowed = Vec::new();
    for route in ROUTES {
        if let Some(params) = match_pattern(route.pattern, path) {
            if route.method == method {
                return Ok((route, (route.endpoint)(params)));
            }
            // A literal route shadows the parameter route for the same path.
            if route.pattern.contains("{}") && allowed.iter().any(|(_, p): &(Method, &str)| !p.contains("{}")) {
                continue;
            }
            allowed.push((route.method, route.pattern));
        }
    }
    if allowed.is_empty() {
        Err(ApiError::RouteNotFound)
    } else {
        Err(ApiError::MethodNotAllowed { allowed: allowed.into_iter().map(|(m, _)| m).collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_segments_win_over_parameters() {
        assert_eq!(find(Method::Get, "/preference_center/v1/list").unwrap().1, Endpoint::PreferenceCenterList);
        assert_eq!(
            find(Method::Get, "/preference_center/v1/abc").unwrap().1,
            Endpoint::PreferenceCenterGet("abc".into())
        );
        assert_eq!(
            find(Method::Get, "/cdi/integrations/x%20y/job_sync_status").unwrap().1,
            Endpoint::CdiJobSyncStatus("x y".into())
        );
    }

    #[test]
    fn unknown_paths_and_methods() {
        let err = |m, p| find(m, p).err().expect("an error");
        assert_eq!(err(Method::Get, "/users/nope"), ApiError::RouteNotFound);
        assert_eq!(err(Method::Get, "/users/track"), ApiError::MethodNotAllowed { allowed: vec![Method::Post] });
        assert_eq!(err(Method::Delete, "/preference_center/v1/list"), ApiError::MethodNotAllowed { allowed: vec![Method::Get] });
        assert!(find(Method::Post, "/users/track/").is_ok());
    }
}
