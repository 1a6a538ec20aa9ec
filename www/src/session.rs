//! One playground session: an [`Engine`] over a [`MemoryStore`], the workspace and
//! the all-permissions key provisioned for it, and the snapshot that keeps it across
//! page reloads. Plain Rust: the time and the randomness come in through [`Ctx`], so
//! the same code runs in the browser, under Node and in native unit tests.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use engage_core::provision::{self, key_hash, Channel, Group, Permission, WorkspaceName};
use engage_core::store::memory::MemoryStore;
use engage_core::store::{Entry, Table};
use engage_core::{ApiError, Config, Ctx, Engine, Request, Response, Then};
use serde::{Deserialize, Serialize};

/// The workspace every playground session works in.
pub const WORKSPACE: &str = "playground";

/// The subscription group created with a session, so the subscription examples work.
pub const EXAMPLE_GROUP: &str = "Newsletter";

/// Version of the snapshot format; a snapshot of another version is refused
/// (2: sessions carry a SCIM token).
pub const SNAPSHOT_FORMAT: u32 = 2;

/// The request origin the session's SCIM token is made for (`X-Request-Origin`).
pub const SCIM_ORIGIN: &str = "https://playground.engage.test";

/// Most rounds of queued jobs applied before a snapshot (each round is one batch).
const MAX_APPLY_ROUNDS: usize = 10_000;

/// Runs a core future to completion. The memory store never waits, so every future
/// the engine returns over it is ready at its first poll; no executor or thread is needed.
fn block_on<F: Future>(future: F) -> Result<F::Output, String> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(out) => Ok(out),
        Poll::Pending => Err("the in-memory engine unexpectedly waited".into()),
    }
}

/// A playground session.
pub struct Session {
    engine: Engine<MemoryStore>,
    workspace: WorkspaceName,
    key: String,
    scim_token: String,
}

/// One stored document in a snapshot.
#[derive(Serialize, Deserialize)]
struct SnapshotDoc {
    table: i64,
    key: String,
    version: u64,
    /// The document's JSON text (documents are always UTF-8 JSON).
    value: String,
}

/// What is kept in the browser between page loads.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    engage_playground: u32,
    workspace: String,
    key: String,
    scim_token: String,
    documents: Vec<SnapshotDoc>,
}

fn engine(store: MemoryStore) -> Engine<MemoryStore> {
    // The platform's limits apply in the playground too, so what works here works on a server.
    Engine::new(store, Config::default())
}

impl Session {
    /// A new session on an empty store: creates the workspace, an API key with every
    /// permission (from `key_ctx`), one email subscription group (from `group_ctx`;
    /// a separate seed, so the group's id reveals nothing about the key) and a SCIM
    /// token for [`SCIM_ORIGIN`] (from `scim_ctx`).
    pub fn provision(key_ctx: Ctx, group_ctx: Ctx, scim_ctx: Ctx) -> Result<Session, String> {
        let ws = WorkspaceName::parse(WORKSPACE).ok_or("invalid workspace name")?;
        let engine = engine(MemoryStore::new());
        let key = block_on(provision::create_key(engine.store(), &ws, Permission::ALL.to_vec(), key_ctx))?
            .map_err(|e| format!("cannot create the API key: {e:?}"))?;
        block_on(provision::create_group(engine.store(), &ws, EXAMPLE_GROUP, Channel::Email, group_ctx))?
            .map_err(|e| format!("cannot create the example group: {e:?}"))?;
        let scim_token =
            block_on(provision::create_scim_token(engine.store(), provision::TokenFor::origin(SCIM_ORIGIN), scim_ctx))?
                .map_err(|e| format!("cannot create the SCIM token: {e:?}"))?;
        Ok(Session { engine, workspace: ws, key, scim_token })
    }

    /// The session's SCIM token (valid with `X-Request-Origin:` [`SCIM_ORIGIN`]).
    pub fn scim_token(&self) -> &str {
        &self.scim_token
    }

    /// The session's API key (all permissions).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The session's workspace.
    pub fn workspace(&self) -> &str {
        self.workspace.as_str()
    }

    /// The workspace's subscription groups.
    pub fn groups(&self) -> Vec<Group> {
        block_on(provision::list_groups(self.engine.store(), &self.workspace))
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    }

    /// Handles one request exactly as a server would.
    pub fn handle(&self, req: Request, ctx: Ctx) -> Response {
        let again = self.engine.may_ask_to_catch_up(&req).then(|| req.clone());
        let response = block_on(self.engine.handle(req, ctx)).unwrap_or_else(|_| ApiError::Busy.into_response());
        match (&response.then, again) {
            // Nothing was done: apply the queue, then the same request again.
            (Then::CatchUpFirst, Some(req)) => match self.drain_queue(ctx) {
                Ok(()) => block_on(self.engine.handle_caught_up(req, ctx, &response))
                    .unwrap_or_else(|_| ApiError::Busy.into_response()),
                Err(_) => response,
            },
            _ => response,
        }
    }

    /// Applies every queued track job, so a snapshot loses nothing acknowledged.
    fn drain_queue(&self, ctx: Ctx) -> Result<(), String> {
        for round in 0..MAX_APPLY_ROUNDS {
            let mut ctx = ctx;
            ctx.seed[15] ^= round as u8;
            ctx.seed[14] ^= (round >> 8) as u8;
            match block_on(self.engine.apply_queued(ctx))? {
                Ok(run) if run.is_empty() => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(format!("applying queued jobs failed: {e:?}")),
            }
        }
        Err("the queue did not drain".into())
    }

    /// The whole session as JSON text, after applying every queued job.
    pub fn save(&self, ctx: Ctx) -> Result<String, String> {
        self.drain_queue(ctx)?;
        let mut documents = Vec::new();
        for (table, key, entry) in self.engine.store().export_documents() {
            let value = String::from_utf8(entry.value).map_err(|_| format!("document {key} is not UTF-8"))?;
            documents.push(SnapshotDoc { table: table.id(), key, version: entry.version, value });
        }
        let snapshot = Snapshot {
            engage_playground: SNAPSHOT_FORMAT,
            workspace: self.workspace.as_str().to_string(),
            key: self.key.clone(),
            scim_token: self.scim_token.clone(),
            documents,
        };
        serde_json::to_string(&snapshot).map_err(|e| e.to_string())
    }

    /// Rebuilds a session from [`Session::save`]'s text. All or nothing: a snapshot
    /// that is malformed, of another format, or whose key is missing is refused.
    pub fn restore(text: &str) -> Result<Session, String> {
        let snapshot: Snapshot = serde_json::from_str(text).map_err(|e| format!("unreadable snapshot: {e}"))?;
        if snapshot.engage_playground != SNAPSHOT_FORMAT {
            return Err(format!("snapshot format {} is not {SNAPSHOT_FORMAT}", snapshot.engage_playground));
        }
        let ws = WorkspaceName::parse(&snapshot.workspace).ok_or("the snapshot's workspace name is invalid")?;
        let mut docs = Vec::with_capacity(snapshot.documents.len());
        for d in snapshot.documents {
            let table =
                Table::ALL.into_iter().find(|t| t.id() == d.table).ok_or(format!("unknown table {}", d.table))?;
            if d.version == 0 {
                return Err(format!("document {} has version 0", d.key));
            }
            docs.push((table, d.key, Entry { version: d.version, value: d.value.into_bytes() }));
        }
        let hash = key_hash(&snapshot.key);
        if !docs.iter().any(|(t, k, _)| *t == Table::ApiKey && *k == hash) {
            return Err("the snapshot's API key is not in its store".into());
        }
        let hash = key_hash(&snapshot.scim_token);
        if !docs.iter().any(|(t, k, _)| *t == Table::ScimToken && *k == hash) {
            return Err("the snapshot's SCIM token is not in its store".into());
        }
        let store = MemoryStore::new();
        store.import_documents(docs);
        Ok(Session { engine: engine(store), workspace: ws, key: snapshot.key, scim_token: snapshot.scim_token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engage_core::{Method, Timestamp};
    use serde_json::{json, Value};

    fn ctx(n: u8) -> Ctx {
        Ctx::new(Timestamp(1_714_557_600_000 + n as i64), [n; 16])
    }

    fn post(s: &Session, path: &str, body: Value, n: u8) -> Response {
        let req = Request::new(Method::Post, path)
            .header("Authorization", &format!("Bearer {}", s.key()))
            .header("Content-Type", "application/json")
            .body(body.to_string());
        s.handle(req, ctx(n))
    }

    fn favorite_color(s: &Session, n: u8) -> Value {
        let resp = post(s, "/users/export/ids", json!({"external_ids": ["user-1"]}), n);
        assert_eq!(resp.status, 201);
        resp.json_body()["users"][0]["custom_attributes"]["favorite_color"].clone()
    }

    fn track(s: &Session, n: u8) {
        let body = json!({"attributes": [{"external_id": "user-1", "favorite_color": "blue"}]});
        assert_eq!(post(s, "/users/track", body, n).status, 201);
    }

    #[test]
    fn a_provisioned_key_has_every_permission_and_a_group_exists() {
        let s = Session::provision(ctx(1), ctx(2), ctx(102)).unwrap();
        assert_eq!(s.workspace(), WORKSPACE);
        assert_eq!(s.groups().len(), 1);
        assert_eq!(s.groups()[0].name, EXAMPLE_GROUP);
        track(&s, 3);
        assert_eq!(favorite_color(&s, 4), json!("blue"));
    }

    #[test]
    fn a_snapshot_keeps_queued_tracks_and_the_key() {
        let s = Session::provision(ctx(1), ctx(2), ctx(102)).unwrap();
        track(&s, 3);
        // The track is only queued; saving must apply it rather than drop it.
        let saved = s.save(ctx(4)).unwrap();
        let restored = Session::restore(&saved).unwrap();
        assert_eq!(restored.key(), s.key());
        assert_eq!(restored.scim_token(), s.scim_token());
        assert_eq!(restored.groups(), s.groups());
        assert_eq!(favorite_color(&restored, 5), json!("blue"));
    }

    #[test]
    fn a_fresh_session_does_not_see_another_sessions_data() {
        let s = Session::provision(ctx(1), ctx(2), ctx(102)).unwrap();
        track(&s, 3);
        let fresh = Session::provision(ctx(6), ctx(7), ctx(107)).unwrap();
        assert_ne!(fresh.key(), s.key());
        assert_eq!(favorite_color(&fresh, 8), Value::Null);
        // The old key is unknown to the new store.
        let req = Request::new(Method::Post, "/users/export/ids")
            .header("Authorization", &format!("Bearer {}", s.key()))
            .body(r#"{"external_ids":["user-1"]}"#);
        assert_eq!(fresh.handle(req, ctx(9)).status, 401);
    }

    #[test]
    fn broken_snapshots_are_refused() {
        let s = Session::provision(ctx(1), ctx(2), ctx(102)).unwrap();
        let saved: Value = serde_json::from_str(&s.save(ctx(3)).unwrap()).unwrap();
        assert!(Session::restore("not json").is_err());
        assert!(Session::restore("{}").is_err());
        let mut other_format = saved.clone();
        other_format["engage_playground"] = json!(99);
        assert!(Session::restore(&other_format.to_string()).is_err());
        let mut wrong_key = saved.clone();
        wrong_key["key"] = json!("not-the-key");
        assert!(Session::restore(&wrong_key.to_string()).err().unwrap().contains("API key"));
        let mut bad_table = saved.clone();
        bad_table["documents"][0]["table"] = json!(99);
        assert!(Session::restore(&bad_table.to_string()).is_err());
        assert!(Session::restore(&saved.to_string()).is_ok());
    }
}
