//! GET /cdi/integrations and GET /cdi/integrations/{id}/job_sync_status: ten items
//! a page, newest first, paged by signed cursors with the `Link` header.

use serde_json::{json, Value};

use super::cursor::{self, Direction, Position};
use super::integration::{all, get, Integration};
use super::job::{jobs_prefix, Job};
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::repo::codec::decode;
use crate::store::{Store, Table, MAX_SCAN};

/// The spec's message for a cursor that is not one of ours.
pub const INVALID_CURSOR: &str = "Invalid cursor";
/// The spec's message for an integration id that names none of the workspace's.
pub const INVALID_INTEGRATION: &str = "Invalid integration ID";

fn param(req: &Request, name: &str) -> Option<String> {
    req.query_pairs().into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

async fn secret<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Option<String>, ApiError> {
    match store.get(Table::CdiSecret, ws.as_str()).await? {
        Some(e) => Ok(Some(decode(&e.value)?)),
        None => Ok(None),
    }
}

/// One page of `items` (newest first, each with its sort key) as the response.
async fn respond<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    req: &Request,
    list: &str,
    items: Vec<(String, Value)>,
) -> Result<Response, ApiError> {
    let secret = secret(store, ws).await?;
    let from = match param(req, "cursor") {
        None => None,
        Some(c) => {
            let p = secret.as_deref().and_then(|s| cursor::decode(s, list, &c));
            Some(p.ok_or_else(|| ApiError::bad(INVALID_CURSOR))?)
        }
    };
    let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
    let (range, has_prev, has_next) = cursor::page(&keys, from.as_ref());
    let sign = |i: usize, direction| {
        let p = Position { list: list.to_string(), direction, key: keys[i].clone() };
        secret.as_deref().map(|s| cursor::encode(s, &p))
    };
    let prev = if has_prev { sign(range.start, Direction::Prev) } else { None };
    let next = if has_next { sign(range.end - 1, Direction::Next) } else { None };
    let results: Vec<Value> = items[range].iter().map(|(_, v)| v.clone()).collect();
    let mut resp = Response::json(200, &json!({"results": results, "message": "success"}));
    if let Some(link) = cursor::link(&req.path, items.len(), prev, next) {
        resp = resp.with_header("Link", link);
    }
    Ok(resp)
}

/// The workspace's integrations, newest first, each with its sort key.
async fn integrations_of<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Vec<Integration>, ApiError> {
    let mut mine: Vec<Integration> = all(store).await?.into_iter().filter(|i| i.workspace == *ws).collect();
    mine.reverse();
    Ok(mine)
}

fn sort_key(i: &Integration) -> String {
    format!("{:020}{}", i.created_at.0.max(0), i.id)
}

/// GET /cdi/integrations (`integration_id` narrows it to one).
pub async fn integrations<S: Store>(store: &S, ws: &WorkspaceName, req: &Request) -> Result<Response, ApiError> {
    let mut mine = integrations_of(store, ws).await?;
    // A narrowed list is a list of its own: the full list's cursors are not its.
    let list = match param(req, "integration_id") {
        Some(id) => {
            mine.retain(|i| i.id == id);
            if mine.is_empty() {
                return Err(ApiError::bad(INVALID_INTEGRATION));
            }
            format!("i:{id}")
        }
        None => "i".to_string(),
    };
    let items = mine.iter().map(|i| (sort_key(i), i.render())).collect();
    respond(store, ws, req, &list, items).await
}

/// GET /cdi/integrations/{id}/job_sync_status.
pub async fn jobs<S: Store>(store: &S, ws: &WorkspaceName, id: &str, req: &Request) -> Result<Response, ApiError> {
    let found = get(store, id).await?;
    if found.is_none_or(|i| i.workspace != *ws) {
        return Err(ApiError::bad(INVALID_INTEGRATION));
    }
    let mut jobs = Vec::new();
    for (_, e) in store.scan(Table::CdiJob, &jobs_prefix(ws, id), MAX_SCAN).await? {
        jobs.push(decode::<Job>(&e.value)?);
    }
    jobs.reverse();
    let items = jobs.iter().map(|j| (format!("{:020}", j.seq), j.render())).collect();
    respond(store, ws, req, &format!("j:{id}"), items).await
}

/// Most jobs `GET /_engage/cdi/integrations/{id}/jobs` lists.
pub const MAX_DETAILED_JOBS: usize = 100;

/// The operator's view of an integration's jobs: the newest [`MAX_DETAILED_JOBS`],
/// each with why it failed and its first row errors (`None`: no such integration).
pub async fn job_details<S: Store>(store: &S, id: &str) -> Result<Option<Value>, ApiError> {
    let Some(i) = get(store, id).await? else { return Ok(None) };
    let mut jobs = Vec::new();
    for (_, e) in store.scan(Table::CdiJob, &jobs_prefix(&i.workspace, id), MAX_SCAN).await? {
        jobs.push(decode::<Job>(&e.value)?);
    }
    let details: Vec<Value> = jobs.iter().rev().take(MAX_DETAILED_JOBS).map(Job::detail).collect();
    Ok(Some(json!({"integration_id": i.id, "jobs": details})))
}
