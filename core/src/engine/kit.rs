//! The test kit's routes ([`crate::kit`]) where they need the engine: the queue's
//! gate (a reset applies everything queued first, in its turn), the request journal,
//! and the endpoints a fixtures file is loaded through.

use serde_json::json;

use super::{Engine, Waiting};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response, Then};
use crate::ids::WorkspaceName;
use crate::kit::journal::{Answered, CAPACITY};
use crate::kit::seed::{Seed, SeedError, SeedRequest};
use crate::kit::{clock, inspect, page, reset, seed, session};
use crate::repo::codec::{decode, encode};
use crate::routes::{Api, Kit};
use crate::store::memory::MemoryStore;
use crate::store::{ChangeSet, Expect, Op, Store, Table, MAX_SCAN};
use crate::{preference_center, scim, track};

/// What is remembered of a fixtures file loaded: when, and into which workspaces
/// (a reset of one of them lets the file load again).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Marker {
    loaded_at: String,
    workspaces: Vec<String>,
}

/// What loading a fixtures file did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// It was loaded: this many entries.
    Now(usize),
    /// The same file was loaded before: nothing changed.
    Before,
}

impl<S: Store> Engine<S> {
    /// Answers a test-kit route.
    pub(super) async fn kit(&self, kit: Kit, req: &Request, ctx: Ctx) -> Result<Response, ApiError> {
        let Some(admin) = self.admin_token_hash.as_deref() else { return Err(ApiError::RouteNotFound) };
        let authorized = || session::authorize(req, Some(admin), ctx.now);
        match kit {
            Kit::Inspector => Ok(page::show(req, admin, ctx.now)),
            Kit::Login => Ok(page::sign_in(req, admin, ctx.now)),
            Kit::Logout => Ok(page::sign_out()),
            Kit::Reset => {
                authorized()?;
                let scope = reset::Scope::from_query(req)?;
                Ok(Response::json(200, &self.reset(&scope, ctx).await?))
            }
            Kit::SetClock => {
                // Without a test clock the route does not exist.
                if !self.config.test_clock {
                    return Err(ApiError::RouteNotFound);
                }
                authorized()?;
                let now = clock::target(&req.body, ctx.now)?;
                Ok(Response::json(200, &json!({"now": now.to_rfc3339()})).then(Then::SetClock(now)))
            }
            Kit::Seed => {
                authorized()?;
                let seed = seed::parse(&req.body).map_err(|e| ApiError::bad(e.to_string()))?;
                let base = req.public_base(self.config.public_url.as_deref());
                match self.load_seed(&seed, &base, ctx).await.map_err(|e| ApiError::bad(e.to_string()))? {
                    Loaded::Now(n) => Ok(Response::json(200, &json!({"loaded": n, "already_loaded": false}))),
                    Loaded::Before => Ok(Response::json(200, &json!({"loaded": 0, "already_loaded": true}))),
                }
            }
            Kit::Journal => {
                authorized()?;
                let pairs = req.query_pairs();
                let limit = match pairs.iter().find(|(k, _)| k == "limit") {
                    None => CAPACITY,
                    Some((_, v)) => v.parse::<usize>().map_err(|_| ApiError::bad("'limit' must be a whole number"))?,
                };
                let requests = self.journal.recent(limit);
                Ok(Response::json(200, &json!({"requests": requests, "bodies": self.journal.keeps_bodies()})))
            }
            Kit::FindUsers(ws) => {
                authorized()?;
                let ws = inspect::workspace(&ws)?;
                let idents = inspect::identifiers(req)?;
                self.catch_up(&ws, idents.clone(), ctx).await?;
                inspect::find_users(&self.store, &ws, &idents).await
            }
            Kit::Centers(ws) => {
                authorized()?;
                preference_center::read::list(&self.store, &inspect::workspace(&ws)?).await
            }
            Kit::CenterLink(ws, id, user) => {
                authorized()?;
                let ws = inspect::workspace(&ws)?;
                preference_center::link::user_url(&self.store, &ws, &id, &user, req, &self.links(req), ctx).await
            }
            Kit::Integrations => {
                authorized()?;
                inspect::integrations(&self.store, req).await
            }
        }
    }

    /// Notes a request the host answered in the journal (the host measured how long
    /// it took; it passes the request's body only when the journal keeps bodies).
    pub fn journal(&self, answered: Answered<'_>) {
        self.journal.record(answered);
    }

    /// Whether the journal keeps bodies (a host keeps a copy of each request's body
    /// only then).
    pub fn journal_keeps_bodies(&self) -> bool {
        self.journal.keeps_bodies()
    }

    /// Applies everything queued, then removes what `scope` names, in the queue's
    /// turn: no queued job is applied during the reset or after it.
    pub async fn reset(&self, scope: &reset::Scope, ctx: Ctx) -> Result<reset::Report, ApiError> {
        let waiting = Waiting::new(&self.gate.waiting);
        let mut backlog = self.gate.backlog.lock().await;
        drop(waiting);
        track::queue::catch_up(&self.store, &mut backlog, ctx.seed, self.config.apply_batch).await?;
        let report = reset::reset(&self.store, scope).await?;
        drop(backlog);
        // A file loaded before loads again after a reset of what it loaded into.
        let mut markers = Vec::new();
        for (key, entry) in self.store.scan(Table::Seed, "", MAX_SCAN).await? {
            let loaded: Marker = decode(&entry.value).unwrap_or_default();
            let touched = match &scope.workspace {
                None => true,
                Some(ws) => loaded.workspaces.iter().any(|w| w == ws.as_str()),
            };
            if touched {
                markers.push(Op::Delete { table: Table::Seed, key, expect: Expect::Any });
            }
        }
        if !markers.is_empty() {
            self.store.commit(ChangeSet { ops: markers, ack: None }).await?;
        }
        self.limiter.forget(scope.workspace.as_ref().map(WorkspaceName::as_str));
        if scope.workspace.is_none() {
            self.journal.clear();
        }
        Ok(report)
    }

    /// Applies everything queued, in the queue's turn.
    async fn apply_all(&self, ctx: Ctx) -> Result<(), ApiError> {
        let waiting = Waiting::new(&self.gate.waiting);
        let mut backlog = self.gate.backlog.lock().await;
        drop(waiting);
        track::queue::catch_up(&self.store, &mut backlog, ctx.seed, self.config.apply_batch).await?;
        Ok(())
    }

    /// Loads a checked fixtures file: first on an empty in-memory store (a bad
    /// entry is refused, naming its path, before anything is stored here), then
    /// here. The same file again changes nothing.
    pub async fn load_seed(&self, seed: &Seed, base: &str, ctx: Ctx) -> Result<Loaded, SeedError> {
        let stored = |e: crate::store::StoreError| SeedError { path: String::new(), message: e.to_string() };
        if self.store.get(Table::Seed, &seed.digest).await.map_err(stored)?.is_some() {
            return Ok(Loaded::Before);
        }
        check_seed(seed, base, ctx).await?;
        let n = self.load_entries(seed, base, ctx, true).await?;
        let marker = Marker {
            loaded_at: ctx.now.to_rfc3339(),
            workspaces: seed.workspaces.iter().map(|w| w.name.as_str().to_string()).collect(),
        };
        let value = encode(&marker).map_err(|e| SeedError { path: String::new(), message: format!("{e:?}") })?;
        let mark = Op::Put { table: Table::Seed, key: seed.digest.clone(), value, expect: Expect::Any };
        self.store
            .commit(ChangeSet { ops: vec![mark], ack: None })
            .await
            .map_err(|e| SeedError { path: String::new(), message: format!("{e:?}") })?;
        Ok(Loaded::Now(n))
    }

    /// Runs every entry of the file through the endpoint that takes it. `tolerant`:
    /// what exists already (a group id, a center's name, a SCIM user name) is left
    /// as it is rather than refused, so a changed file loads over an earlier one.
    async fn load_entries(&self, seed: &Seed, base: &str, ctx: Ctx, tolerant: bool) -> Result<usize, SeedError> {
        let mut n = 0;
        let mut step = 0u32;
        let mut next_ctx = || {
            step += 1;
            derive(ctx, step)
        };
        for w in &seed.workspaces {
            for (i, key) in w.keys.iter().enumerate() {
                let path = format!("workspaces.{}.keys[{i}]", w.name.as_str());
                crate::kit::key::ensure(&self.store, &w.name, key.permissions.clone(), &key.secret, next_ctx())
                    .await
                    .map_err(|e| at(&path, &e))?;
                n += 1;
            }
            for (i, g) in w.groups.iter().enumerate() {
                let path = format!("workspaces.{}.groups[{i}]", w.name.as_str());
                crate::subscriptions::groups::create_with_id(&self.store, &w.name, &g.id, &g.name, g.channel, ctx.now)
                    .await
                    .map_err(|e| at(&path, &e))?;
                n += 1;
            }
            for r in &w.preference_centers {
                let created = preference_center::write::create(&self.store, &w.name, &r.body, next_ctx()).await;
                n += accept(created, r, |resp| tolerant && is_taken_name(resp))?;
            }
            for r in &w.users {
                let queued = self.track(&w.name, &r.body, next_ctx(), false).await;
                n += accept(queued, r, |_| false)?;
            }
            // The users' writes are applied before their subscription states are set.
            self.apply_all(next_ctx()).await.map_err(|e| at("", &e))?;
            for r in &w.subscriptions {
                let c = next_ctx();
                let set = self.dispatch(Api::SubscriptionSetV2, &request(r), &w.name, c, false).await;
                n += accept(set, r, |_| false)?;
            }
        }
        for r in &seed.scim_users {
            let created = scim::write::create(&self.store, &r.body, None, base, next_ctx()).await;
            let created = created.map_err(|e| match e {
                scim::error::ScimError::Taken if tolerant => None,
                e => Some(e.into_response()),
            });
            match created {
                Ok(_) | Err(None) => n += 1,
                Err(Some(resp)) => return Err(refused(r, &resp)),
            }
        }
        Ok(n)
    }
}

/// Loads a fixtures file on an empty in-memory store: a bad entry is refused,
/// naming its path, before anything is stored anywhere (or a database is made).
pub async fn check_seed(seed: &Seed, base: &str, ctx: Ctx) -> Result<(), SeedError> {
    let scratch = Engine::new(MemoryStore::new(), crate::engine::Config { rate_limits: false, ..Default::default() });
    scratch.load_entries(seed, base, ctx, false).await.map(|_| ())
}

/// A context of its own for each entry: the base one's time, and randomness
/// derived from its seed and the entry's number (the core makes none).
fn derive(ctx: Ctx, step: u32) -> Ctx {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new().chain_update(ctx.seed).chain_update(step.to_le_bytes()).finalize();
    let mut seed = [0u8; 16];
    seed.copy_from_slice(&digest[..16]);
    Ctx { now: ctx.now, seed }
}

fn request(r: &SeedRequest) -> Request {
    Request::new(crate::http::Method::Post, "/_engage/seed").body(String::from_utf8_lossy(&r.body).to_string())
}

fn at(path: &str, e: &ApiError) -> SeedError {
    SeedError { path: path.to_string(), message: e.message() }
}

fn refused(r: &SeedRequest, resp: &Response) -> SeedError {
    let body = resp.json_body();
    let message = body["message"].as_str().or(body["detail"].as_str()).unwrap_or("refused").to_string();
    let errors = body.get("errors").map(|e| format!(" {e}")).unwrap_or_default();
    SeedError { path: r.path.clone(), message: format!("{} {message}{errors}", resp.status) }
}

/// A preference center whose name is taken (a file loaded over an earlier one).
fn is_taken_name(resp: &Response) -> bool {
    resp.status == 400 && resp.json_body()["message"].as_str().is_some_and(|m| m.contains("already"))
}

/// Counts an entry's answer: a success, or a refusal `tolerated` says to leave be.
fn accept(
    answer: Result<Response, ApiError>,
    r: &SeedRequest,
    tolerated: impl Fn(&Response) -> bool,
) -> Result<usize, SeedError> {
    let resp = answer.unwrap_or_else(ApiError::into_response);
    if (200..300).contains(&resp.status) || tolerated(&resp) {
        Ok(1)
    } else {
        Err(refused(r, &resp))
    }
}
