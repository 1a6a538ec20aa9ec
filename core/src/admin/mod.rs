//! Operator routes under `/_engage/`: create API keys, SCIM tokens and subscription groups over
//! HTTP, so every host (including the edge, which has no shell) can be provisioned
//! the same way. They exist only when the host configures an admin token, and they
//! are not part of the platform's API.

pub mod keys;
pub mod schema;
pub mod workspace;

use serde_json::{json, Map, Value};

use crate::cdi::integration::{self, DataKind, Spec};
use crate::cdi::manage;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response, Then};
use crate::ids::WorkspaceName;
use crate::input;
use crate::repo::codec::decode;
use crate::routes::Operator;
use crate::scim;
use crate::store::{Store, Table, MAX_SCAN};
use crate::subscriptions::groups::{self, Channel};
use crate::track::queue::SetAside;

/// Most set-aside jobs one listing returns.
const SET_ASIDE_PAGE: usize = 100;

/// Runs an operator route (the caller is already authorized).
pub async fn handle<S: Store>(
    store: &S,
    op: Operator,
    req: &Request,
    runs_syncs: bool,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    match op {
        Operator::CreateKey => create_key(store, req, ctx).await,
        Operator::CreateGroup => create_group(store, req, ctx).await,
        Operator::CreateScimToken => create_scim_token(store, req, ctx).await,
        Operator::CreateIntegration => create_integration(store, req, ctx).await,
        Operator::RequestSync(id) => request_sync(store, &id, runs_syncs, ctx).await,
        Operator::IntegrationState(id) => integration_state(store, &id).await,
        Operator::UpdateIntegration(id) => update_integration(store, &id, req, ctx).await,
        Operator::DeleteIntegration(id) => match manage::delete(store, &id, ctx).await? {
            true => Ok(Response::json(200, &json!({"deleted": id}))),
            false => Err(ApiError::NotFound(format!("no integration '{id}'"))),
        },
        Operator::RewindIntegration(id) => rewind_integration(store, &id, req, ctx).await,
        Operator::IntegrationJobs(id) => match crate::cdi::read::job_details(store, &id).await? {
            Some(jobs) => Ok(Response::json(200, &jobs)),
            None => Err(ApiError::NotFound(format!("no integration '{id}'"))),
        },
        Operator::ListGroups => list_groups(store, req).await,
        Operator::SetAsideJobs => set_aside_jobs(store).await,
        Operator::QueueState => queue_state(store, ctx).await,
        Operator::ListKeys => Ok(Response::json(200, &json!({"keys": keys::list(store).await?}))),
        Operator::RevokeKey(id) => match keys::revoke(store, &id).await? {
            true => Ok(Response::json(200, &json!({"revoked": id}))),
            false => Err(ApiError::NotFound(format!("no API key with id '{id}'"))),
        },
        Operator::ListWorkspaces => Ok(Response::json(200, &json!({"workspaces": keys::workspaces(store).await?}))),
        // Only the host can make a scratch store; one that cannot answers the 404.
        Operator::Conformance => Ok(ApiError::RouteNotFound.into_response().then(Then::RunConformance)),
    }
}

fn body(req: &Request) -> Result<Map<String, Value>, ApiError> {
    input::object(&req.body).map_err(ApiError::bad)
}

fn workspace_of(v: Option<&Value>) -> Result<WorkspaceName, ApiError> {
    let name = match v {
        None | Some(Value::Null) => "default",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(ApiError::bad("'workspace' must be a string")),
    };
    WorkspaceName::parse(name).ok_or_else(|| ApiError::bad(format!("'workspace' must be {}", WorkspaceName::RULE)))
}

/// POST /_engage/keys `{"workspace": "...", "permissions": "all" | [..]}` → `{"key": "..."}`.
async fn create_key<S: Store>(store: &S, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    let ws = workspace_of(b.get("workspace"))?;
    let perms = crate::permission::parse_permission_value(b.get("permissions")).map_err(ApiError::bad)?;
    let key = workspace::create_key(store, &ws, perms, ctx).await?;
    Ok(Response::json(201, &json!({"key": key, "workspace": ws.as_str()})))
}

/// POST /_engage/scim-tokens `{"origin": "...", "default_department": "..."}` →
/// `{"token": "...", "origin": "...", "default_department": ...}`: a SCIM token for the
/// deployment, valid with `X-Request-Origin: <origin>`; creates that name no
/// department get the default, if there is one.
async fn create_scim_token<S: Store>(store: &S, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    let origin = b.get("origin").and_then(Value::as_str).ok_or_else(|| ApiError::bad("'origin' is required"))?;
    let default_department = match b.get("default_department") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.as_str()),
        Some(_) => return Err(ApiError::bad("'default_department' must be a string")),
    };
    let token = scim::token::create(store, scim::token::TokenFor { origin, default_department }, ctx).await?;
    let origin = scim::token::normalize_origin(origin).unwrap_or_default();
    Ok(Response::json(201, &json!({"token": token, "origin": origin, "default_department": default_department})))
}

/// POST /_engage/cdi/integrations `{"workspace", "name", "source", "table", "kind",
/// "schedule_secs", "contact_emails"}` → `{"integration_id": ...}`: what
/// `engage cdi create` does, for hosts without a shell.
async fn create_integration<S: Store>(store: &S, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    let ws = workspace_of(b.get("workspace"))?;
    let text = |k: &str| -> Result<String, ApiError> {
        b.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| ApiError::bad(format!("'{k}' is required")))
    };
    let kind = match b.get("kind") {
        None | Some(Value::Null) => Some(DataKind::Users),
        Some(Value::String(k)) => DataKind::parse(k),
        Some(_) => None,
    }
    .ok_or_else(|| ApiError::bad("'kind' must be users, events, purchases or deletes"))?;
    let schedule_secs = match b.get("schedule_secs") {
        None | Some(Value::Null) => None,
        Some(v) => Some(whole(v).ok_or_else(|| ApiError::bad("'schedule_secs' must be a whole number"))?),
    };
    let contact_emails = match b.get("contact_emails") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::bad("'contact_emails' must hold strings"))?,
        Some(_) => return Err(ApiError::bad("'contact_emails' must be an array")),
    };
    let spec = Spec {
        name: text("name")?,
        source: text("source")?,
        table: text("table")?,
        kind,
        schedule_secs,
        contact_emails,
    };
    let i = manage::create(store, &ws, &spec, ctx).await?;
    Ok(Response::json(201, &json!({"integration_id": i.id, "workspace": ws.as_str()})))
}

/// A whole number of seconds: JSON's `60` or `60.0` (JSON Schema's `integer` takes both).
fn whole(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(f)).map(|f| f as u64))
}

/// The state of an integration as the operator routes that change one answer it.
fn integration_reply(i: &integration::Integration) -> Response {
    let mut v = i.render();
    v["table"] = json!(i.table);
    v["schedule_secs"] = json!(i.schedule_secs);
    Response::json(200, &v)
}

/// PATCH /_engage/cdi/integrations/{id} `{"name", "source", "table", "schedule_secs",
/// "contact_emails", "paused"}` (each optional; `schedule_secs: null`: on demand only).
async fn update_integration<S: Store>(store: &S, id: &str, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    const FIELDS: [&str; 6] = ["name", "source", "table", "schedule_secs", "contact_emails", "paused"];
    if let Some(k) = b.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad(format!("unknown field '{k}' (one of {})", FIELDS.join(", "))));
    }
    let text = |k: &str| -> Result<Option<String>, ApiError> {
        match b.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::bad(format!("'{k}' must be a string"))),
        }
    };
    let update = manage::Update {
        name: text("name")?,
        source: text("source")?,
        table: text("table")?,
        schedule_secs: match b.get("schedule_secs") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => {
                Some(Some(whole(v).ok_or_else(|| ApiError::bad("'schedule_secs' must be a whole number or null"))?))
            }
        },
        contact_emails: match b.get("contact_emails") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| ApiError::bad("'contact_emails' must hold strings"))?,
            ),
            Some(_) => return Err(ApiError::bad("'contact_emails' must be an array")),
        },
        paused: match b.get("paused") {
            None => None,
            Some(Value::Bool(p)) => Some(*p),
            Some(_) => return Err(ApiError::bad("'paused' must be true or false")),
        },
    };
    Ok(integration_reply(&manage::update(store, id, &update, ctx).await?))
}

/// POST /_engage/cdi/integrations/{id}/rewind `{"to": RFC 3339 time | null}`: the next
/// job reads the rows after `to` (null: the whole table).
async fn rewind_integration<S: Store>(store: &S, id: &str, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    let to = match b.get("to") {
        Some(Value::Null) => None,
        Some(Value::String(t)) => Some(
            crate::time::Timestamp::parse(t).ok_or_else(|| ApiError::bad("'to' must be an ISO 8601 time or null"))?,
        ),
        _ => return Err(ApiError::bad("'to' is required: an ISO 8601 time, or null for the whole table")),
    };
    Ok(integration_reply(&manage::rewind(store, id, to, ctx).await?))
}

/// POST /_engage/cdi/integrations/{id}/sync → 202: the host's runner starts a job
/// at once. A host that runs no syncs (the edge) says so.
async fn request_sync<S: Store>(store: &S, id: &str, runs_syncs: bool, ctx: Ctx) -> Result<Response, ApiError> {
    if !runs_syncs {
        return Err(ApiError::bad(
            "this host does not run warehouse syncs: they run on the native host (engage serve)",
        ));
    }
    manage::request_run(store, id, ctx).await?;
    Ok(Response::json(202, &json!({"message": "success"})))
}

/// GET /_engage/cdi/integrations/{id} → `{"jobs": n, "last_job_status": ...}`, for
/// an operator (or a test) waiting for a job without spending the API's rate limit.
async fn integration_state<S: Store>(store: &S, id: &str) -> Result<Response, ApiError> {
    let i = integration::get(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
    Ok(Response::json(
        200,
        &json!({"integration_id": i.id, "jobs": i.jobs, "last_job_status": i.last_job.map(|(_, s)| s.as_str())}),
    ))
}

/// POST /_engage/groups `{"workspace", "name", "channel"}` → the group.
async fn create_group<S: Store>(store: &S, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
    let b = body(req)?;
    let ws = workspace_of(b.get("workspace"))?;
    let name = b.get("name").and_then(Value::as_str).ok_or_else(|| ApiError::bad("'name' is required"))?;
    let channel = b
        .get("channel")
        .and_then(Value::as_str)
        .and_then(Channel::parse)
        .ok_or_else(|| ApiError::bad("'channel' must be one of email, sms, whatsapp, rcs, line"))?;
    let g = workspace::create_group(store, &ws, name, channel, ctx).await?;
    Ok(Response::json(201, &json!({"id": g.id, "name": g.name, "channel": g.channel.as_str()})))
}

/// GET /_engage/groups?workspace=... → `{"groups": [...]}`.
async fn list_groups<S: Store>(store: &S, req: &Request) -> Result<Response, ApiError> {
    let ws = req.query_pairs().into_iter().find(|(k, _)| k == "workspace").map(|(_, v)| Value::String(v));
    let ws = workspace_of(ws.as_ref())?;
    let list: Vec<Value> = groups::list(store, &ws)
        .await?
        .into_iter()
        .map(|g| json!({"id": g.id, "name": g.name, "channel": g.channel.as_str()}))
        .collect();
    Ok(Response::json(200, &json!({"groups": list})))
}

/// GET /_engage/queue: the queue's backlog (see [`crate::track::waiting::backlog_state`]).
async fn queue_state<S: Store>(store: &S, ctx: Ctx) -> Result<Response, ApiError> {
    Ok(Response::json(200, &crate::track::waiting::backlog_state(store, ctx.now).await?))
}

/// GET /_engage/queue/set-aside → `{"count": n, "jobs": [...]}`: queued jobs that
/// were set aside, undecodable or too large to apply (the oldest 100), kept for an operator.
async fn set_aside_jobs<S: Store>(store: &S) -> Result<Response, ApiError> {
    let all = store.scan(Table::SetAside, "", MAX_SCAN).await?;
    let mut jobs = Vec::new();
    for (_, entry) in all.iter().take(SET_ASIDE_PAGE) {
        jobs.push(decode::<SetAside>(&entry.value)?);
    }
    Ok(Response::json(200, &json!({"count": all.len(), "jobs": jobs})))
}
