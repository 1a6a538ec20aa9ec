//! The route table: every path, method, permission and rate-limit bucket in one
//! place, and the matcher that turns a request line into an [`Endpoint`].
//!
//! An endpoint's kind decides how it authenticates, so a route cannot pair an API
//! endpoint with a SCIM token or forget its permission: the table's rows are built
//! by one macro per kind, and [`Endpoint`] has one enum per kind. The engine's
//! dispatch matches those enums with no wildcard arm, so a new endpoint without a
//! handler does not compile.

use crate::error::ApiError;
use crate::http::{percent_decode, Method};
use crate::permission::Permission;
use crate::ratelimit::Bucket;

mod endpoint;

pub use self::endpoint::*;

/// How a route authenticates (derived from its endpoint's kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// REST API key with this permission, counted in this rate-limit bucket.
    Key(Permission, Bucket),
    /// SCIM token plus `X-Request-Origin`, counted in the SCIM bucket.
    Scim,
    /// The operator's admin token, or the inspector's session (routes absent unless
    /// an admin token is configured).
    Admin,
    /// The inspector's page and its sign-in and sign-out, which check the session or
    /// the token themselves: without a session the page is a sign-in form, not a 401
    /// (routes absent unless an admin token is configured).
    SignIn,
    /// Nothing.
    Public,
}

/// The endpoint family a route belongs to (for documentation and the playground).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `/users/track`, `/users/track/sync`.
    Track,
    /// `/users/export/ids`.
    Export,
    /// identify, merge, delete, aliases.
    Identity,
    /// Subscription groups and global email state.
    Subscriptions,
    /// Preference centers.
    PreferenceCenter,
    /// SCIM provisioning of dashboard users.
    Scim,
    /// Warehouse sync status.
    Cdi,
    /// Operator routes.
    Admin,
    /// The test kit: reset, the clock, the journal and the inspector.
    Kit,
    /// The playground's static files.
    Playground,
    /// The landing page, health, readiness, the API description and metrics.
    Service,
}

/// Path parameters matched by `{}` (and `{..}`, the rest of the path), in order.
pub type Params = Vec<String>;

/// One row of the table.
pub struct Route {
    /// Method.
    pub method: Method,
    /// Path pattern; `{}` matches one non-empty segment, a final `{..}` the rest.
    pub pattern: &'static str,
    /// Authentication, permission and rate-limit bucket.
    pub auth: Auth,
    /// The family it belongs to.
    pub family: Family,
    /// What it does, in a few words: the API description's summary.
    pub summary: &'static str,
    /// The names of its path parameters, one per `{}` (or `{..}`), in order.
    pub params: &'static [&'static str],
    endpoint: fn(Params) -> Endpoint,
}

impl Route {
    /// True for the platform's own API (API key or SCIM), as opposed to Engage's
    /// operator and playground routes.
    pub fn is_platform_api(&self) -> bool {
        matches!(self.auth, Auth::Key(..) | Auth::Scim)
    }

    /// The endpoint of this row for these path parameters, without a request (to
    /// describe the row, as the API description does).
    pub fn endpoint_with(&self, params: Params) -> Endpoint {
        (self.endpoint)(params)
    }
}

fn param(mut v: Params) -> String {
    v.pop().unwrap_or_default()
}

fn three(mut v: Params) -> (String, String, String) {
    let third = v.pop().unwrap_or_default();
    let (first, second) = two(v);
    (first, second, third)
}

fn two(mut v: Params) -> (String, String) {
    let second = v.pop().unwrap_or_default();
    (v.pop().unwrap_or_default(), second)
}

macro_rules! api {
    ($m:ident $p:literal $([$($n:ident),+])?, $perm:ident, $bucket:ident, $family:ident, $s:literal, $ep:expr) => {
        Route {
            method: Method::$m,
            pattern: $p,
            auth: Auth::Key(Permission::$perm, Bucket::$bucket),
            family: Family::$family,
            summary: $s,
            params: &[$($(stringify!($n)),+)?],
            endpoint: |v| Endpoint::Api(($ep)(v)),
        }
    };
}

macro_rules! scim {
    ($m:ident $p:literal $([$($n:ident),+])?, $s:literal, $ep:expr) => {
        Route {
            method: Method::$m,
            pattern: $p,
            auth: Auth::Scim,
            family: Family::Scim,
            summary: $s,
            params: &[$($(stringify!($n)),+)?],
            endpoint: |v| Endpoint::Scim(($ep)(v)),
        }
    };
}

macro_rules! operator {
    ($m:ident $p:literal $([$($n:ident),+])?, $s:literal, $ep:expr) => {
        Route {
            method: Method::$m,
            pattern: $p,
            auth: Auth::Admin,
            family: Family::Admin,
            summary: $s,
            params: &[$($(stringify!($n)),+)?],
            endpoint: |v| Endpoint::Operator(($ep)(v)),
        }
    };
}

macro_rules! kit {
    ($m:ident $p:literal $([$($n:ident),+])?, $s:literal, $ep:expr) => {
        kit!($m $p $([$($n),+])?, Admin, $s, $ep)
    };
    ($m:ident $p:literal $([$($n:ident),+])?, $auth:ident, $s:literal, $ep:expr) => {
        Route {
            method: Method::$m,
            pattern: $p,
            auth: Auth::$auth,
            family: Family::Kit,
            summary: $s,
            params: &[$($(stringify!($n)),+)?],
            endpoint: |v| Endpoint::Kit(($ep)(v)),
        }
    };
}

macro_rules! public {
    ($m:ident $p:literal $([$($n:ident),+])?, $family:ident, $s:literal, $ep:expr) => {
        Route {
            method: Method::$m,
            pattern: $p,
            auth: Auth::Public,
            family: Family::$family,
            summary: $s,
            params: &[$($(stringify!($n)),+)?],
            endpoint: |v| Endpoint::Public(($ep)(v)),
        }
    };
}

/// The whole API. Order matters only where a literal segment and a parameter
/// overlap (`/preference_center/v1/list` before `/preference_center/v1/{}`).
/// A row reads `kind!(Method "pattern" [path parameter names], <the kind's fields>,
/// "summary", endpoint)`; the API description (`GET /openapi.json`) is made from
/// these rows, so a route cannot go undescribed.
pub static ROUTES: &[Route] = &[
    api!(Post "/users/track", UsersTrack, Track, Track, "Record events, purchases and attributes (queued)", |_| Api::Track),
    api!(Post "/users/track/sync", UsersTrackSync, TrackSync, Track, "Record one object and answer with the result", |_| Api::TrackSync),
    api!(Post "/users/export/ids", UsersExportIds, Export, Export, "Export profiles by identifier", |_| Api::ExportIds),
    api!(Post "/users/identify", UsersIdentify, Identity, Identity, "Identify anonymous profiles", |_| Api::Identify),
    api!(Post "/users/merge", UsersMerge, Identity, Identity, "Merge profiles", |_| Api::Merge),
    api!(Post "/users/delete", UsersDelete, Identity, Identity, "Delete profiles", |_| Api::Delete),
    api!(Post "/users/alias/new", UsersAliasNew, Identity, Identity, "Add user aliases", |_| Api::AliasNew),
    api!(Post "/users/alias/update", UsersAliasUpdate, Identity, Identity, "Rename user aliases", |_| Api::AliasUpdate),
    api!(Post "/users/external_ids/rename", UsersExternalIdsRename, ExternalIds, Identity, "Give users new external ids, keeping the old ones as deprecated", |_| Api::ExternalIdsRename),
    api!(Post "/users/external_ids/remove", UsersExternalIdsRemove, ExternalIds, Identity, "Remove deprecated external ids", |_| Api::ExternalIdsRemove),
    api!(Post "/subscription/status/set", SubscriptionStatusSet, SubscriptionSet, Subscriptions, "Set users' state in one group (v1)", |_| Api::SubscriptionSetV1),
    api!(Post "/v2/subscription/status/set", SubscriptionStatusSet, SubscriptionSet, Subscriptions, "Set users' states in several groups (v2)", |_| Api::SubscriptionSetV2),
    api!(Get "/subscription/user/status", SubscriptionGroupsGet, EmailAndStatus, Subscriptions, "List the groups in users' histories", |_| Api::SubscriptionUserStatus),
    api!(Get "/subscription/status/get", SubscriptionStatusGet, EmailAndStatus, Subscriptions, "Read users' state in one group", |_| Api::SubscriptionStatusGet),
    api!(Post "/email/status", EmailStatus, EmailAndStatus, Subscriptions, "Set the global email subscription state", |_| Api::EmailStatus),
    api!(Post "/email/blacklist", EmailBlacklist, EmailAndStatus, Subscriptions, "Blocklist email addresses (former name)", |_| Api::EmailBlocklist),
    api!(Post "/email/blocklist", EmailBlacklist, EmailAndStatus, Subscriptions, "Blocklist email addresses", |_| Api::EmailBlocklist),
    api!(Get "/email/hard_bounces", EmailHardBounces, EmailAndStatus, Subscriptions, "List the addresses that hard-bounced", |_| Api::EmailHardBounces),
    api!(Get "/email/unsubscribes", EmailUnsubscribe, EmailAndStatus, Subscriptions, "List the addresses that unsubscribed", |_| Api::EmailUnsubscribes),
    api!(Post "/email/bounce/remove", EmailBounceRemove, EmailAndStatus, Subscriptions, "Remove addresses from the hard bounces", |_| Api::EmailBounceRemove),
    api!(Post "/email/spam/remove", EmailSpamRemove, EmailAndStatus, Subscriptions, "Remove addresses from the spam list", |_| Api::EmailSpamRemove),
    api!(Get "/sms/invalid_phone_numbers", SmsInvalidPhoneNumbers, EmailAndStatus, Subscriptions, "List the phone numbers found invalid", |_| Api::SmsInvalidPhones),
    api!(Post "/sms/invalid_phone_numbers/remove", SmsInvalidPhoneNumbersRemove, EmailAndStatus, Subscriptions, "Remove phone numbers from the invalid numbers", |_| Api::SmsInvalidPhonesRemove),
    api!(Post "/preference_center/v1", PreferenceCenterUpdate, PreferenceWrite, PreferenceCenter, "Create a preference center", |_| Api::PreferenceCenter(PreferenceCenter::Create)),
    api!(Get "/preference_center/v1/list", PreferenceCenterList, PreferenceRead, PreferenceCenter, "List preference centers", |_| Api::PreferenceCenter(PreferenceCenter::List)),
    api!(Get "/preference_center/v1/{}" [preferenceCenterExternalID], PreferenceCenterGet, PreferenceRead, PreferenceCenter, "Read a preference center", |v| Api::PreferenceCenter(PreferenceCenter::Get(param(v)))),
    api!(Put "/preference_center/v1/{}" [preferenceCenterExternalID], PreferenceCenterUpdate, PreferenceWrite, PreferenceCenter, "Update a preference center", |v| Api::PreferenceCenter(PreferenceCenter::Update(param(v)))),
    api!(Get "/preference_center/v1/{}/url/{}" [preferenceCenterExternalID, external_id], PreferenceCenterUserGet, PreferenceUrl, PreferenceCenter, "A user's link to a preference center", |v| {
        let (center, user) = two(v);
        Api::PreferenceCenter(PreferenceCenter::UserUrl(center, user))
    }),
    public!(Get "/preferences/{}" [token], PreferenceCenter, "A user's preference page (HTML)", |v| Public::PreferencePage(param(v))),
    public!(Post "/preferences/{}" [token], PreferenceCenter, "Submit a preference page's form", |v| Public::PreferenceSubmit(param(v))),
    scim!(Get "/scim/v2/Users", "Find dashboard users (filter, paging)", |_| Scim::Search),
    scim!(Post "/scim/v2/Users", "Create a dashboard user", |_| Scim::Create),
    scim!(Post "/scim/v2/Users/.search", "Find dashboard users (search request)", |_| Scim::SearchPost),
    scim!(Post "/scim/v2/.search", "Search every resource type (users)", |_| Scim::SearchRoot),
    scim!(Get "/scim/v2/Users/{}" [id], "Read a dashboard user", |v| Scim::Get(param(v))),
    scim!(Put "/scim/v2/Users/{}" [id], "Replace a dashboard user", |v| Scim::Replace(param(v))),
    scim!(Delete "/scim/v2/Users/{}" [id], "Delete a dashboard user", |v| Scim::Delete(param(v))),
    scim!(Patch "/scim/v2/Users/{}" [id], "Modify a dashboard user", |v| Scim::Patch(param(v))),
    scim!(Get "/scim/v2/ServiceProviderConfig", "What this SCIM server supports", |_| Scim::ServiceProviderConfig),
    scim!(Get "/scim/v2/ResourceTypes", "List SCIM resource types", |_| Scim::ResourceTypes),
    scim!(Get "/scim/v2/ResourceTypes/{}" [id], "Read a SCIM resource type", |v| Scim::ResourceType(param(v))),
    scim!(Get "/scim/v2/Schemas", "List SCIM schemas", |_| Scim::Schemas),
    scim!(Get "/scim/v2/Schemas/{}" [id], "Read a SCIM schema", |v| Scim::Schema(param(v))),
    scim!(Get "/scim/v2/Me", "Not offered: the token's own user (501)", |_| Scim::NotOffered(NotOffered::Me)),
    scim!(Post "/scim/v2/Me", "Not offered: create the token's own user (501)", |_| Scim::NotOffered(NotOffered::Me)),
    scim!(Put "/scim/v2/Me", "Not offered: replace the token's own user (501)", |_| Scim::NotOffered(NotOffered::Me)),
    scim!(Patch "/scim/v2/Me", "Not offered: modify the token's own user (501)", |_| Scim::NotOffered(NotOffered::Me)),
    scim!(Delete "/scim/v2/Me", "Not offered: delete the token's own user (501)", |_| Scim::NotOffered(NotOffered::Me)),
    scim!(Post "/scim/v2/Bulk", "Not offered: bulk operations (501)", |_| Scim::NotOffered(NotOffered::Bulk)),
    api!(Get "/cdi/integrations", CdiIntegrationList, CdiList, Cdi, "List warehouse integrations", |_| Api::Cdi(Cdi::Integrations)),
    api!(Get "/cdi/integrations/{}/job_sync_status" [integration_id], CdiIntegrationJobStatus, CdiJobs, Cdi, "List an integration's sync jobs", |v| Api::Cdi(Cdi::JobSyncStatus(param(v)))),
    operator!(Post "/_engage/keys", "Create an API key", |_| Operator::CreateKey),
    operator!(Get "/_engage/keys", "List API keys (without secrets)", |_| Operator::ListKeys),
    operator!(Delete "/_engage/keys/{}" [id], "Revoke an API key", |v| Operator::RevokeKey(param(v))),
    operator!(Get "/_engage/workspaces", "List workspaces", |_| Operator::ListWorkspaces),
    operator!(Post "/_engage/groups", "Create a subscription group", |_| Operator::CreateGroup),
    operator!(Post "/_engage/scim-tokens", "Create a SCIM token", |_| Operator::CreateScimToken),
    operator!(Post "/_engage/cdi/integrations", "Create a warehouse integration", |_| Operator::CreateIntegration),
    operator!(Post "/_engage/cdi/integrations/{}/sync" [id], "Start an integration's sync now", |v| Operator::RequestSync(param(v))),
    operator!(Get "/_engage/cdi/integrations/{}" [id], "An integration's job count and last status", |v| Operator::IntegrationState(param(v))),
    operator!(Get "/_engage/cdi/integrations/{}/jobs" [id], "An integration's jobs with their failures and row errors", |v| Operator::IntegrationJobs(param(v))),
    operator!(Patch "/_engage/cdi/integrations/{}" [id], "Change, pause or resume an integration", |v| Operator::UpdateIntegration(param(v))),
    operator!(Delete "/_engage/cdi/integrations/{}" [id], "Delete an integration and its jobs", |v| Operator::DeleteIntegration(param(v))),
    operator!(Post "/_engage/cdi/integrations/{}/rewind" [id], "Move an integration's cursor back (or forward)", |v| Operator::RewindIntegration(param(v))),
    operator!(Get "/_engage/groups", "List subscription groups", |_| Operator::ListGroups),
    operator!(Get "/_engage/queue/set-aside", "Queued jobs set aside as unreadable", |_| Operator::SetAsideJobs),
    operator!(Get "/_engage/queue", "The queue's backlog", |_| Operator::QueueState),
    operator!(Post "/_engage/conformance", "Run the store conformance suite", |_| Operator::Conformance),
    kit!(Post "/_engage/reset", "Remove the deployment's or a workspace's data (test kit)", |_| Kit::Reset),
    kit!(Post "/_engage/clock", "Set or advance the server's clock (with --test-clock)", |_| Kit::SetClock),
    kit!(Post "/_engage/seed", "Load a fixtures file (test kit)", |_| Kit::Seed),
    kit!(Get "/_engage/journal", "The most recent requests (test kit)", |_| Kit::Journal),
    kit!(Post "/_engage/requests/find", "The requests a filter matches, newest first (test kit)", |_| Kit::FindRequests),
    kit!(Post "/_engage/requests/count", "How many requests a filter matches (test kit)", |_| Kit::CountRequests),
    kit!(Delete "/_engage/requests", "Forget the journaled requests, of one workspace or all (test kit)", |_| Kit::ClearRequests),
    kit!(Post "/_engage/faults", "Make matching requests fail or wait (test kit, with --faults)", |_| Kit::AddFault),
    kit!(Get "/_engage/faults", "The faults injected (test kit, with --faults)", |_| Kit::ListFaults),
    kit!(Delete "/_engage/faults", "Remove every fault, of one workspace or all (test kit, with --faults)", |_| Kit::ClearFaults),
    kit!(Delete "/_engage/faults/{}" [id], "Remove one fault (test kit, with --faults)", |v| Kit::RemoveFault(param(v))),
    kit!(Post "/_engage/workspaces", "Make a workspace with an API key, in one call (test kit)", |_| Kit::CreateWorkspace),
    kit!(Post "/_engage/snapshots/{}" [name], "Keep a copy of the state, of one workspace or all (test kit)", |v| Kit::SaveSnapshot(param(v))),
    kit!(Post "/_engage/snapshots/{}/restore" [name], "Put a snapshot's state back (test kit)", |v| Kit::RestoreSnapshot(param(v))),
    kit!(Get "/_engage/snapshots", "The snapshots kept (test kit)", |_| Kit::ListSnapshots),
    kit!(Delete "/_engage/snapshots/{}" [name], "Forget a snapshot (test kit)", |v| Kit::DeleteSnapshot(param(v))),
    kit!(Get "/_engage/state", "The state, of one workspace or all, as a fixtures file (test kit)", |_| Kit::State),
    kit!(Get "/_engage/workspaces/{}/users" [workspace], "Find profiles by any identifier (test kit)", |v| Kit::FindUsers(param(v))),
    kit!(Get "/_engage/workspaces/{}/preference-centers" [workspace], "A workspace's preference centers (test kit)", |v| Kit::Centers(param(v))),
    kit!(Get "/_engage/workspaces/{}/preference-centers/{}/url/{}" [workspace, id, external_id], "A link to a center's page as a user (test kit)", |v| {
        let (ws, id, user) = three(v);
        Kit::CenterLink(ws, id, user)
    }),
    kit!(Get "/_engage/cdi/integrations", "Every warehouse integration (test kit)", |_| Kit::Integrations),
    kit!(Get "/_engage/inspector", SignIn, "The inspector: a page to see the data (test kit)", |_| Kit::Inspector),
    kit!(Post "/_engage/inspector/login", SignIn, "Sign in to the inspector with the admin token", |_| Kit::Login),
    kit!(Post "/_engage/inspector/logout", SignIn, "Sign out of the inspector", |_| Kit::Logout),
    // The file routes first: `/playground/` is a file path (the index), not the root.
    public!(Get "/playground/{..}" [path], Playground, "A file of the playground", |v| Public::PlaygroundFile(param(v))),
    public!(Head "/playground/{..}" [path], Playground, "A file of the playground (headers only)", |v| Public::PlaygroundFile(param(v))),
    public!(Get "/playground", Playground, "Redirect to the playground", |_| Public::PlaygroundRoot),
    public!(Head "/playground", Playground, "Redirect to the playground (headers only)", |_| Public::PlaygroundRoot),
    public!(Get "/", Service, "What this is, and where to go", |_| Public::Landing),
    public!(Get "/healthz", Service, "Whether the process answers", |_| Public::Health),
    public!(Get "/readyz", Service, "Whether the store answers and the queue moves", |_| Public::Ready),
    public!(Get "/openapi.json", Service, "This API description (OpenAPI 3.1)", |_| Public::OpenApi),
    public!(Get "/metrics", Service, "Prometheus metrics", |_| Public::Metrics),
];

fn match_pattern(pattern: &str, path: &str) -> Option<Params> {
    if let Some(prefix) = pattern.strip_suffix("/{..}") {
        // The rest of the path, raw (still percent-encoded): whoever serves it decodes
        // it with rules of its own (see `http::AssetPath`).
        let rest = path.strip_prefix(prefix)?.strip_prefix('/')?;
        return Some(vec![rest.to_string()]);
    }
    let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    let mut params = Vec::new();
    let mut pat = pattern.split('/');
    let mut segs = path.split('/');
    loop {
        match (pat.next(), segs.next()) {
            (None, None) => return Some(params),
            (Some("{}"), Some(s)) if !s.is_empty() => params.push(percent_decode(s)),
            (Some(p), Some(s)) if p == s => {}
            _ => return None,
        }
    }
}

/// Finds the route of a request: 404 when no pattern matches the path, 405 when
/// patterns match but none with this method.
pub fn find(method: Method, path: &str) -> Result<(&'static Route, Endpoint), ApiError> {
    match find_exact(method, path) {
        // HEAD is GET without the body (RFC 9110 §9.3.2): a route that has no HEAD
        // of its own answers it as its GET; the engine leaves the body out.
        Err(ApiError::MethodNotAllowed { allowed }) if method == Method::Head && allowed.contains(&Method::Get) => {
            find_exact(Method::Get, path)
        }
        Err(ApiError::MethodNotAllowed { mut allowed }) => {
            if let (Some(get), false) =
                (allowed.iter().position(|m| *m == Method::Get), allowed.contains(&Method::Head))
            {
                allowed.insert(get + 1, Method::Head);
            }
            Err(ApiError::MethodNotAllowed { allowed })
        }
        found => found,
    }
}

fn find_exact(method: Method, path: &str) -> Result<(&'static Route, Endpoint), ApiError> {
    let mut allowed: Vec<&Route> = Vec::new();
    for route in ROUTES {
        if let Some(params) = match_pattern(route.pattern, path) {
            if route.method == method {
                return Ok((route, (route.endpoint)(params)));
            }
            // A literal route shadows the parameter route for the same path.
            if route.pattern.contains('{') && allowed.iter().any(|r| !r.pattern.contains('{')) {
                continue;
            }
            allowed.push(route);
        }
    }
    if allowed.is_empty() {
        Err(ApiError::RouteNotFound)
    } else {
        Err(ApiError::MethodNotAllowed { allowed: allowed.into_iter().map(|r| r.method).collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(m: Method, p: &str) -> Endpoint {
        find(m, p).expect("routes").1
    }

    #[test]
    fn literal_segments_win_over_parameters() {
        assert_eq!(
            endpoint(Method::Get, "/preference_center/v1/list"),
            Endpoint::Api(Api::PreferenceCenter(PreferenceCenter::List))
        );
        assert_eq!(
            endpoint(Method::Get, "/preference_center/v1/abc"),
            Endpoint::Api(Api::PreferenceCenter(PreferenceCenter::Get("abc".into())))
        );
        assert_eq!(
            endpoint(Method::Get, "/cdi/integrations/x%20y/job_sync_status"),
            Endpoint::Api(Api::Cdi(Cdi::JobSyncStatus("x y".into())))
        );
    }

    #[test]
    fn unknown_paths_and_methods() {
        let err = |m, p| find(m, p).err().expect("an error");
        assert_eq!(err(Method::Get, "/users/nope"), ApiError::RouteNotFound);
        assert_eq!(err(Method::Get, "/users/track"), ApiError::MethodNotAllowed { allowed: vec![Method::Post] });
        assert_eq!(
            err(Method::Delete, "/preference_center/v1/list"),
            ApiError::MethodNotAllowed { allowed: vec![Method::Get, Method::Head] }
        );
        assert_eq!(err(Method::Head, "/users/track"), ApiError::MethodNotAllowed { allowed: vec![Method::Post] });
        assert!(find(Method::Post, "/users/track/").is_ok());
    }

    #[test]
    fn head_is_answered_by_the_get_route() {
        for path in ["/healthz", "/preference_center/v1/list", "/preferences/tok", "/scim/v2/Users"] {
            let (get, _) = find(Method::Get, path).expect(path);
            let (head, _) = find(Method::Head, path).expect(path);
            assert!(std::ptr::eq(get, head), "{path}");
        }
    }

    #[test]
    fn the_playground_route_takes_the_rest_of_the_path_raw() {
        assert_eq!(endpoint(Method::Get, "/playground"), Endpoint::Public(Public::PlaygroundRoot));
        assert_eq!(endpoint(Method::Get, "/playground/"), Endpoint::Public(Public::PlaygroundFile(String::new())));
        assert_eq!(
            endpoint(Method::Head, "/playground/pkg/a%20b.js"),
            Endpoint::Public(Public::PlaygroundFile("pkg/a%20b.js".into()))
        );
        assert_eq!(find(Method::Get, "/playgroundx").err(), Some(ApiError::RouteNotFound));
    }
}
