//! What the inspector reads (and a test may read too): profiles found by any
//! identifier, a workspace's preference centers with links to open them as a
//! user, and the warehouse integrations. Read-only.

use serde_json::{json, Value};

use crate::cdi::integration;
use crate::error::ApiError;
use crate::export;
use crate::http::{Request, Response};
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
use crate::repo::Tx;
use crate::store::Store;

/// Most profiles one search returns.
pub const MAX_FOUND: usize = 50;

/// The workspace named by a kit route's path.
pub fn workspace(name: &str) -> Result<WorkspaceName, ApiError> {
    WorkspaceName::parse(name).ok_or_else(|| ApiError::NotFound(format!("no workspace '{name}'")))
}

/// The identifiers a search names: `external_id`, `email`, `phone`, `braze_id`,
/// `alias_name` with `alias_label`, or `q`, tried as each of them (`label:name` as
/// an alias).
pub fn identifiers(req: &Request) -> Result<Vec<Identifier>, ApiError> {
    let pairs = req.query_pairs();
    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    let mut any = |ident: Option<Identifier>| out.extend(ident);
    if let Some(q) = get("q") {
        any(ExternalId::parse(q).map(Identifier::External));
        any(Email::parse(q).map(Identifier::Email));
        any(Phone::parse(q).map(Identifier::Phone));
        any(ServiceId::parse(q).map(Identifier::Service));
        if let Some((label, name)) = q.split_once(':') {
            let alias = UserAlias { alias_name: name.to_string(), alias_label: label.to_string() };
            any(Some(Identifier::Alias(alias)));
        }
    }
    any(get("external_id").and_then(ExternalId::parse).map(Identifier::External));
    any(get("email").and_then(Email::parse).map(Identifier::Email));
    any(get("phone").and_then(Phone::parse).map(Identifier::Phone));
    any(get("braze_id").and_then(ServiceId::parse).map(Identifier::Service));
    if let (Some(name), Some(label)) = (get("alias_name"), get("alias_label")) {
        any(Some(Identifier::Alias(UserAlias { alias_name: name.to_string(), alias_label: label.to_string() })));
    }
    if out.is_empty() {
        return Err(ApiError::bad(
            "name a user: q, external_id, email, phone, braze_id, or alias_name with alias_label",
        ));
    }
    Ok(out)
}

/// GET /_engage/workspaces/{ws}/users: every profile an identifier names, each as
/// the export endpoint renders it with every field.
pub async fn find_users<S: Store>(store: &S, ws: &WorkspaceName, idents: &[Identifier]) -> Result<Response, ApiError> {
    let mut tx = Tx::new(store, ws.clone());
    let mut seen: Vec<ServiceId> = Vec::new();
    let mut users = Vec::new();
    for ident in idents {
        for id in tx.resolve(ident).await? {
            if seen.contains(&id) || users.len() >= MAX_FOUND {
                continue;
            }
            if let Some(p) = tx.profile(&id).await? {
                users.push(export::render(store, ws, p, None).await?);
                seen.push(id);
            }
        }
    }
    Ok(Response::json(200, &json!({"users": users})))
}

/// GET /_engage/cdi/integrations: every integration (of `?workspace=`), without
/// its source (which may hold a password).
pub async fn integrations<S: Store>(store: &S, req: &Request) -> Result<Response, ApiError> {
    let pairs = req.query_pairs();
    let only = pairs.iter().find(|(k, _)| k == "workspace").map(|(_, v)| v.as_str());
    let list: Vec<Value> = integration::all(store)
        .await?
        .into_iter()
        .filter(|i| only.is_none_or(|w| i.workspace.as_str() == w))
        .map(|i| {
            json!({
                "integration_id": i.id,
                "workspace": i.workspace.as_str(),
                "name": i.name,
                "kind": i.kind.as_str(),
                "table": i.table,
                "paused": i.paused,
                "jobs": i.jobs,
                "last_job": i.last_job.map(|(at, status)| json!({"started_at": at.to_rfc3339(), "status": status.as_str()})),
                "synced_up_to": i.cursor.map(|c| c.updated_at.to_rfc3339()),
            })
        })
        .collect();
    Ok(Response::json(200, &json!({"integrations": list})))
}
