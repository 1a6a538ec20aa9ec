//! The test kit's routes over the whole state ([`crate::kit::documents`]): a new
//! workspace with its key, snapshots and their restore, the state as a fixtures
//! file. Each applies the queue first, in its turn, so that what it copies or puts
//! back holds every acknowledged write, and none is applied over it afterwards.

use serde_json::{json, Value};

use super::Engine;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::kit::documents::{self, Doc, Purpose};
use crate::kit::{inspect, snapshots};
use crate::store::{ChangeSet, Expect, Op, Store, Table};

impl<S: Store> Engine<S> {
    /// POST /_engage/snapshots/{name}(`?workspace=`).
    pub(super) async fn save_snapshot(&self, name: &str, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
        snapshots::check_name(name)?;
        let ws = workspace_param(req)?;
        let docs = {
            let _turn = self.caught_up_turn(ctx).await?;
            documents::collect(&self.store, ws.as_ref(), Purpose::Snapshot, snapshots::MAX_BYTES).await?
        };
        let taken_at = ws.as_ref().map_or(ctx, |w| self.kit.clocks.at(w.as_str(), ctx)).now;
        let saved = self.kit.snapshots.save(scope_name(ws.as_ref()), name, docs, taken_at)?;
        Ok(Response::json(201, &saved))
    }

    /// POST /_engage/snapshots/{name}/restore(`?workspace=`): the scope's documents
    /// become the snapshot's, in one unit of work.
    pub(super) async fn restore_snapshot(&self, name: &str, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
        snapshots::check_name(name)?;
        let ws = workspace_param(req)?;
        let Some(snapshot) = self.kit.snapshots.get(scope_name(ws.as_ref()), name) else {
            let of = ws.as_ref().map_or(String::new(), |w| format!(" of workspace '{}'", w.as_str()));
            return Err(ApiError::NotFound(format!("no snapshot '{name}'{of}")));
        };
        let (removed, written) = self.put_back(ws.as_ref(), &snapshot.docs, ctx).await?;
        let scope = ws.as_ref().map(WorkspaceName::as_str);
        self.limiter.forget(scope);
        Ok(Response::json(200, &json!({"name": name, "workspace": scope, "written": written, "removed": removed})))
    }

    /// Makes the scope's documents `docs`: removes the others, writes those that
    /// differ. Answers how many were removed and written.
    async fn put_back(&self, ws: Option<&WorkspaceName>, docs: &[Doc], ctx: Ctx) -> Result<(usize, usize), ApiError> {
        let turn = self.caught_up_turn(ctx).await?;
        let now = documents::collect(&self.store, ws, Purpose::Snapshot, snapshots::MAX_BYTES).await?;
        let wanted: std::collections::HashMap<(Table, &str), &[u8]> =
            docs.iter().map(|d| ((d.table, d.key.as_str()), d.value.as_slice())).collect();
        let held: std::collections::HashMap<(Table, &str), &[u8]> =
            now.iter().map(|d| ((d.table, d.key.as_str()), d.value.as_slice())).collect();
        let mut ops = Vec::new();
        for d in &now {
            if !wanted.contains_key(&(d.table, d.key.as_str())) {
                ops.push(Op::Delete { table: d.table, key: d.key.clone(), expect: Expect::Any });
            }
        }
        let removed = ops.len();
        for d in docs {
            if held.get(&(d.table, d.key.as_str())) != Some(&d.value.as_slice()) {
                ops.push(d.put());
            }
        }
        let written = ops.len() - removed;
        if !ops.is_empty() {
            self.store.commit(ChangeSet { ops, ack: None }).await?;
        }
        drop(turn);
        Ok((removed, written))
    }

    /// GET /_engage/snapshots(`?workspace=`).
    pub(super) fn list_snapshots(&self, req: &Request) -> Result<Response, ApiError> {
        let ws = workspace_param(req)?;
        let scope = ws.as_ref().map(|w| scope_name(Some(w)));
        Ok(Response::json(200, &json!({"snapshots": self.kit.snapshots.list(scope)})))
    }

    /// DELETE /_engage/snapshots/{name}(`?workspace=`).
    pub(super) fn delete_snapshot(&self, name: &str, req: &Request) -> Result<Response, ApiError> {
        let ws = workspace_param(req)?;
        match self.kit.snapshots.remove(scope_name(ws.as_ref()), name) {
            true => Ok(Response::json(200, &json!({"removed": 1}))),
            false => Err(ApiError::NotFound(format!("no snapshot '{name}'"))),
        }
    }

    /// GET /_engage/state(`?workspace=`): a fixtures file that loads back to this state.
    pub(super) async fn state(&self, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
        let ws = workspace_param(req)?;
        Ok(Response::json(200, &self.export_state(ws.as_ref(), ctx).await?))
    }

    /// The state of a workspace, or the deployment's, as a fixtures file (what
    /// `--state` writes at a clean stop).
    pub async fn export_state(&self, ws: Option<&WorkspaceName>, ctx: Ctx) -> Result<Value, ApiError> {
        let docs = {
            let _turn = self.caught_up_turn(ctx).await?;
            // Half the bound on a state file read back: written as JSON, the documents
            // take more (escapes, names), and a state written must load again.
            documents::collect(&self.store, ws, Purpose::Export, crate::kit::seed::MAX_STATE_BYTES / 2).await?
        };
        documents::state_file(&docs)
    }

    /// POST /_engage/workspaces `{"name", "api_key"?, "permissions"?}`: a workspace
    /// that did not exist, with one key (all permissions unless named; made up
    /// unless given), in one unit of work.
    pub(super) async fn create_workspace(&self, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
        let b = crate::input::object(&req.body).map_err(ApiError::bad)?;
        if let Some(k) = b.keys().find(|k| !["name", "api_key", "permissions"].contains(&k.as_str())) {
            return Err(ApiError::bad(format!("unknown field '{k}' (allowed: name, api_key, permissions)")));
        }
        let name = match b.get("name") {
            Some(Value::String(n)) => WorkspaceName::parse(n),
            _ => None,
        }
        .ok_or_else(|| ApiError::bad(format!("'name' is required: {}", WorkspaceName::RULE)))?;
        let secret = match b.get("api_key") {
            None | Some(Value::Null) => None,
            Some(Value::String(k)) => Some(k.as_str()),
            Some(_) => return Err(ApiError::bad("'api_key' must be a string")),
        };
        let permissions = crate::permission::parse_permission_value(b.get("permissions")).map_err(ApiError::bad)?;
        let key = crate::kit::key::create_workspace(&self.store, &name, permissions, secret, ctx).await?;
        Ok(Response::json(201, &json!({"name": name.as_str(), "api_key": key})))
    }
}

/// The shelf's name of a scope: the workspace's, empty for the deployment.
fn scope_name(ws: Option<&WorkspaceName>) -> &str {
    ws.map_or("", WorkspaceName::as_str)
}

/// The `workspace` a route is limited to (none: the deployment), its only parameter.
pub(super) fn workspace_param(req: &Request) -> Result<Option<WorkspaceName>, ApiError> {
    match req.query_pairs().as_slice() {
        [] => Ok(None),
        [(k, v)] if k == "workspace" => Ok(Some(inspect::workspace(v)?)),
        _ => Err(ApiError::bad("the only parameter is 'workspace', once")),
    }
}
