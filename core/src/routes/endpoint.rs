//! The endpoints, one enum per kind of route: the platform's API (by family), SCIM,
//! the operator's routes and the public ones. The engine's dispatch matches them
//! with no wildcard arm.

/// An endpoint of the platform's REST API, authenticated by an API key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Api {
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
    /// POST /users/external_ids/rename
    ExternalIdsRename,
    /// POST /users/external_ids/remove
    ExternalIdsRemove,
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
    /// GET /email/hard_bounces
    EmailHardBounces,
    /// GET /email/unsubscribes
    EmailUnsubscribes,
    /// POST /email/bounce/remove
    EmailBounceRemove,
    /// POST /email/spam/remove
    EmailSpamRemove,
    /// GET /sms/invalid_phone_numbers
    SmsInvalidPhones,
    /// POST /sms/invalid_phone_numbers/remove
    SmsInvalidPhonesRemove,
    /// The preference-center family.
    PreferenceCenter(PreferenceCenter),
    /// The warehouse-sync family.
    Cdi(Cdi),
}

/// A preference-center endpoint (API key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreferenceCenter {
    /// POST /preference_center/v1
    Create,
    /// PUT /preference_center/v1/{id}
    Update(String),
    /// GET /preference_center/v1/list
    List,
    /// GET /preference_center/v1/{id}
    Get(String),
    /// GET /preference_center/v1/{id}/url/{external_id}
    UserUrl(String, String),
}

/// A warehouse-sync (CDI) endpoint (API key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cdi {
    /// GET /cdi/integrations
    Integrations,
    /// GET /cdi/integrations/{id}/job_sync_status
    JobSyncStatus(String),
}

/// A SCIM endpoint, authenticated by a SCIM token and `X-Request-Origin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scim {
    /// GET /scim/v2/Users?filter=...
    Search,
    /// POST /scim/v2/Users/.search
    SearchPost,
    /// POST /scim/v2/.search (every resource type: here, users)
    SearchRoot,
    /// POST /scim/v2/Users
    Create,
    /// GET /scim/v2/Users/{id}
    Get(String),
    /// PUT /scim/v2/Users/{id}
    Replace(String),
    /// DELETE /scim/v2/Users/{id}
    Delete(String),
    /// PATCH /scim/v2/Users/{id}
    Patch(String),
    /// GET /scim/v2/ServiceProviderConfig
    ServiceProviderConfig,
    /// GET /scim/v2/ResourceTypes
    ResourceTypes,
    /// GET /scim/v2/ResourceTypes/{id}
    ResourceType(String),
    /// GET /scim/v2/Schemas
    Schemas,
    /// GET /scim/v2/Schemas/{id}
    Schema(String),
    /// `/scim/v2/Me` (any method) and POST `/scim/v2/Bulk`: SCIM endpoints this
    /// server does not offer, answered 501 (RFC 7644 §3.11, §3.7).
    NotOffered(NotOffered),
}

/// A SCIM endpoint RFC 7644 defines and this server does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotOffered {
    /// `/Me`: the authenticated subject's own resource (a SCIM token is no user).
    Me,
    /// `/Bulk`: several operations in one request.
    Bulk,
}

impl Scim {
    /// Discovery endpoints describe the server: they count in no rate limit (the
    /// spec's limit is the user endpoints').
    pub fn is_discovery(&self) -> bool {
        match self {
            Scim::ServiceProviderConfig
            | Scim::ResourceTypes
            | Scim::ResourceType(_)
            | Scim::Schemas
            | Scim::Schema(_)
            | Scim::NotOffered(_) => true,
            Scim::Search
            | Scim::SearchPost
            | Scim::SearchRoot
            | Scim::Create
            | Scim::Get(_)
            | Scim::Replace(_)
            | Scim::Delete(_)
            | Scim::Patch(_) => false,
        }
    }
}

/// An operator route under `/_engage/`, authenticated by the admin token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operator {
    /// POST /_engage/keys
    CreateKey,
    /// POST /_engage/groups
    CreateGroup,
    /// POST /_engage/scim-tokens
    CreateScimToken,
    /// POST /_engage/cdi/integrations
    CreateIntegration,
    /// POST /_engage/cdi/integrations/{id}/sync
    RequestSync(String),
    /// GET /_engage/cdi/integrations/{id}/jobs: its newest jobs, with failures and row errors.
    IntegrationJobs(String),
    /// PATCH /_engage/cdi/integrations/{id}: name, source, table, schedule, contacts, paused.
    UpdateIntegration(String),
    /// DELETE /_engage/cdi/integrations/{id}.
    DeleteIntegration(String),
    /// POST /_engage/cdi/integrations/{id}/rewind `{"to": time | null}`.
    RewindIntegration(String),
    /// GET /_engage/cdi/integrations/{id}: how many jobs it had and the last one's status.
    IntegrationState(String),
    /// GET /_engage/groups
    ListGroups,
    /// GET /_engage/queue/set-aside: queued jobs set aside (undecodable, or too large to apply).
    SetAsideJobs,
    /// GET /_engage/queue: how many jobs wait, and since when the oldest.
    QueueState,
    /// GET /_engage/keys: every API key, without secrets.
    ListKeys,
    /// DELETE /_engage/keys/{id}: revoke a key.
    RevokeKey(String),
    /// GET /_engage/workspaces
    ListWorkspaces,
    /// POST /_engage/conformance: the store conformance suite, where the host can run it.
    Conformance,
}

/// A route of the test kit under `/_engage/` (admin token, or the inspector's
/// session): reset, the settable clock, the request journal, and what the inspector
/// reads. Like the operator's routes, none exists without an admin token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kit {
    /// POST /_engage/reset: remove the deployment's (or a workspace's) data.
    Reset,
    /// POST /_engage/clock: set or advance the server's time (with a test clock only).
    SetClock,
    /// POST /_engage/seed: load a fixtures file (the body).
    Seed,
    /// GET /_engage/journal: the most recent requests.
    Journal,
    /// POST /_engage/requests/find: the journaled requests a filter matches.
    FindRequests,
    /// POST /_engage/requests/count: how many journaled requests a filter matches.
    CountRequests,
    /// DELETE /_engage/requests: forget the journaled requests (of a workspace).
    ClearRequests,
    /// POST /_engage/faults: inject a fault.
    AddFault,
    /// GET /_engage/faults: the faults injected.
    ListFaults,
    /// DELETE /_engage/faults: remove every fault (of a workspace).
    ClearFaults,
    /// DELETE /_engage/faults/{id}: remove one fault.
    RemoveFault(String),
    /// POST /_engage/workspaces: a new workspace with a key, in one call.
    CreateWorkspace,
    /// POST /_engage/snapshots/{name}: keep a copy of the (a workspace's) state.
    SaveSnapshot(String),
    /// POST /_engage/snapshots/{name}/restore: put a snapshot's state back.
    RestoreSnapshot(String),
    /// GET /_engage/snapshots: the snapshots kept.
    ListSnapshots,
    /// DELETE /_engage/snapshots/{name}: forget a snapshot.
    DeleteSnapshot(String),
    /// GET /_engage/state: the (a workspace's) state as a fixtures file.
    State,
    /// GET /_engage/workspaces/{ws}/users: profiles found by any identifier.
    FindUsers(String),
    /// GET /_engage/workspaces/{ws}/preference-centers: a workspace's centers.
    Centers(String),
    /// GET /_engage/workspaces/{ws}/preference-centers/{id}/url/{external_id}: a link
    /// to a center's page as that user.
    CenterLink(String, String, String),
    /// GET /_engage/cdi/integrations: every warehouse integration (of a workspace).
    Integrations,
    /// GET /_engage/inspector: the inspector's page (its login form without a session).
    Inspector,
    /// POST /_engage/inspector/login: the admin token for a session cookie.
    Login,
    /// POST /_engage/inspector/logout: the session cookie cleared.
    Logout,
}

/// A route that needs no credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Public {
    /// GET /playground: redirects to `/playground/`.
    PlaygroundRoot,
    /// GET /playground/{..}: a file of the built playground.
    PlaygroundFile(String),
    /// GET /preferences/{token}: a preference center's page for the user the token names.
    PreferencePage(String),
    /// POST /preferences/{token}: its form.
    PreferenceSubmit(String),
    /// GET /: what this is, and where to go.
    Landing,
    /// GET /healthz: the process answers.
    Health,
    /// GET /readyz: the store answers and the queue is applied.
    Ready,
    /// GET /openapi.json: the API described from this table.
    OpenApi,
    /// GET /metrics: Prometheus text, from the host's counters.
    Metrics,
}

/// Every endpoint, by how it authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Platform API, API key.
    Api(Api),
    /// SCIM, SCIM token.
    Scim(Scim),
    /// Operator, admin token.
    Operator(Operator),
    /// The test kit, admin token or the inspector's session.
    Kit(Kit),
    /// No credentials.
    Public(Public),
}

impl Endpoint {
    /// What the request first applies of the work queued before it (read your
    /// writes). `/users/track` only appends to the queue, so it need not wait; nor
    /// do routes that touch no profile.
    pub fn catch_up(&self) -> CatchUp {
        match self {
            Endpoint::Api(Api::Track | Api::SmsInvalidPhones | Api::SmsInvalidPhonesRemove) => CatchUp::Nothing,
            // A list reads every user's state.
            Endpoint::Api(Api::EmailHardBounces | Api::EmailUnsubscribes) => CatchUp::All,
            Endpoint::Api(_) => CatchUp::Named,
            // The page shows, and its form changes, subscription states.
            Endpoint::Public(Public::PreferencePage(_) | Public::PreferenceSubmit(_)) => CatchUp::Named,
            // The inspector shows profiles as the API would read them; a reset and a
            // fixtures file apply the queue first (a host that serializes the queue's
            // turns, the edge, runs them in that turn).
            // So do a snapshot, its restore and the state's export.
            Endpoint::Kit(
                Kit::FindUsers(_)
                | Kit::Reset
                | Kit::Seed
                | Kit::SaveSnapshot(_)
                | Kit::RestoreSnapshot(_)
                | Kit::State,
            ) => CatchUp::Named,
            Endpoint::Scim(_) | Endpoint::Operator(_) | Endpoint::Kit(_) | Endpoint::Public(_) => CatchUp::Nothing,
        }
    }
}

/// What of the queued work a request applies before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUp {
    /// Nothing: it reads or writes no profile.
    Nothing,
    /// The work of the users it names (all of it where the store cannot tell).
    Named,
    /// All of it: it reads every user.
    All,
}
