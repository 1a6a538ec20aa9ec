//! The test kit's routes ([`crate::kit`]) where they need the engine: the queue's
//! gate (a reset applies everything queued first, in its turn), the request journal,
//! and the endpoints a fixtures file is loaded through.

use serde_json::json;

use super::state::workspace_param;
use super::Engine;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response, Then};
use crate::ids::WorkspaceName;
use crate::kit::documents::Doc;
use crate::kit::journal::{Answered, CAPACITY};
use crate::kit::seed::{Seed, SeedError, SeedRequest, SeedWorkspace};
use crate::kit::{clock, inspect, page, requests, reset, seed};
use crate::repo::codec::encode;
use crate::routes::{Api, Kit};
use crate::store::memory::MemoryStore;
use crate::store::{ChangeSet, Expect, Op, Store, Table};
use crate::subscriptions::fixtures::Listed;
use crate::{preference_center, scim, subscriptions};

/// What is remembered of a part of a fixtures file: when, and whether it is
/// loaded or being loaded.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Marker {
    loaded_at: String,
    state: String,
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
        let Some(admin) = self.kit.admin_token_hash.as_deref() else { return Err(ApiError::RouteNotFound) };
        // Over https the session's cookie is only ever sent over https.
        let secure = req.public_base(self.config.public_url.as_deref()).starts_with("https://");
        match kit {
            Kit::Inspector => page::show(&self.store, req, ctx.wall).await,
            Kit::Login => page::sign_in(&self.store, &self.kit.guard, req, admin, ctx, secure).await,
            Kit::Logout => page::sign_out(&self.store, req, secure).await,
            Kit::Reset => {
                let scope = reset::Scope::from_query(req)?;
                Ok(Response::json(200, &self.reset(&scope, ctx).await?))
            }
            Kit::SetClock => {
                // Without a test clock the route does not exist (a server started
                // with `--id-seed` has one: its clock stands still until moved).
                if !self.config.test_clock && self.kit.fixed.is_none() {
                    return Err(ApiError::RouteNotFound);
                }
                match workspace_param(req)? {
                    // One workspace's time: the engine keeps it.
                    Some(ws) => {
                        let now = clock::target(&req.body, self.kit.clocks.at(ws.as_str(), ctx).now)?;
                        self.kit.clocks.set(ws.as_str(), now, ctx.now);
                        Ok(Response::json(200, &json!({"now": now.to_rfc3339(), "workspace": ws.as_str()})))
                    }
                    None => {
                        let now = clock::target(&req.body, ctx.now)?;
                        if let Some(fixed) = &self.kit.fixed {
                            fixed.set_now(now);
                        }
                        Ok(Response::json(200, &json!({"now": now.to_rfc3339()})).then(Then::SetClock(now)))
                    }
                }
            }
            Kit::CreateWorkspace => self.create_workspace(req, ctx).await,
            Kit::SaveSnapshot(name) => self.save_snapshot(&name, req, ctx).await,
            Kit::RestoreSnapshot(name) => self.restore_snapshot(&name, req, ctx).await,
            Kit::ListSnapshots => self.list_snapshots(req),
            Kit::DeleteSnapshot(name) => self.delete_snapshot(&name, req),
            Kit::State => self.state(req, ctx).await,
            Kit::Seed => {
                let seed = seed::parse(&req.body).map_err(|e| ApiError::bad(e.to_string()))?;
                let base = req.public_base(self.config.public_url.as_deref());
                match self.load_seed(&seed, &base, ctx).await.map_err(|e| ApiError::bad(e.to_string()))? {
                    Loaded::Now(n) => Ok(Response::json(200, &json!({"loaded": n, "already_loaded": false}))),
                    Loaded::Before => Ok(Response::json(200, &json!({"loaded": 0, "already_loaded": true}))),
                }
            }
            Kit::Journal => {
                let pairs = req.query_pairs();
                let limit = match pairs.iter().find(|(k, _)| k == "limit") {
                    None => CAPACITY,
                    Some((_, v)) => v.parse::<usize>().map_err(|_| ApiError::bad("'limit' must be a whole number"))?,
                };
                let requests = self.kit.journal.recent(limit);
                Ok(Response::json(200, &json!({"requests": requests, "bodies": self.kit.journal.keeps_bodies()})))
            }
            Kit::FindRequests | Kit::CountRequests => {
                let filter = requests::Filter::parse(&req.body)?;
                if filter.reads_bodies() && !self.kit.journal.keeps_bodies() {
                    return Err(ApiError::bad(
                        "this server keeps no bodies: start it with --journal-bodies (or --ephemeral) to match them",
                    ));
                }
                Ok(match kit {
                    Kit::CountRequests => {
                        Response::json(200, &json!({"count": self.kit.journal.count(|e| filter.matches(e))}))
                    }
                    _ => {
                        let found = self.kit.journal.matching(usize::MAX, |e| filter.matches(e));
                        let shown: Vec<_> = found.iter().map(requests::shown).collect();
                        Response::json(200, &json!({"requests": shown}))
                    }
                })
            }
            Kit::ClearRequests => {
                let ws = workspace_param(req)?.map(|w| w.as_str().to_string());
                let cleared = self.kit.journal.forget(|e| ws.is_none() || e.workspace == ws);
                Ok(Response::json(200, &json!({"cleared": cleared})))
            }
            Kit::AddFault | Kit::ListFaults | Kit::ClearFaults | Kit::RemoveFault(_) if !self.config.faults => {
                Err(ApiError::RouteNotFound)
            }
            Kit::AddFault => {
                let n = self.kit.next_fault.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let id = self.kit.faults.add(&req.body, n)?;
                Ok(Response::json(201, &json!({"id": id})))
            }
            Kit::ListFaults => Ok(Response::json(200, &json!({"faults": self.kit.faults.list()}))),
            Kit::ClearFaults => {
                let ws = workspace_param(req)?;
                Ok(Response::json(
                    200,
                    &json!({"removed": self.kit.faults.clear(ws.as_ref().map(WorkspaceName::as_str))}),
                ))
            }
            Kit::RemoveFault(id) => match self.kit.faults.remove(&id) {
                true => Ok(Response::json(200, &json!({"removed": 1}))),
                false => Err(ApiError::NotFound(format!("no fault '{id}'"))),
            },
            Kit::FindUsers(ws) => {
                let ws = inspect::workspace(&ws)?;
                let idents = inspect::identifiers(req)?;
                self.catch_up(&ws, idents.clone(), ctx).await?;
                inspect::find_users(&self.store, &ws, &idents).await
            }
            Kit::Centers(ws) => preference_center::read::list(&self.store, &inspect::workspace(&ws)?).await,
            Kit::CenterLink(ws, id, user) => {
                let ws = inspect::workspace(&ws)?;
                preference_center::link::user_url(&self.store, &ws, &id, &user, req, &self.links(req), ctx).await
            }
            Kit::Integrations => inspect::integrations(&self.store, req).await,
        }
    }

    /// Notes a request the host answered in the journal (the host measured how long
    /// it took; it passes the request's body only when the journal keeps bodies).
    pub fn journal(&self, answered: Answered<'_>) {
        self.kit.journal.record(answered);
    }

    /// Whether the journal keeps bodies (a host keeps a copy of each request's body
    /// only then).
    pub fn journal_keeps_bodies(&self) -> bool {
        self.kit.journal.keeps_bodies()
    }

    /// Applies everything queued, then removes what `scope` names, in the queue's
    /// turn: no queued job is applied during the reset or after it.
    pub async fn reset(&self, scope: &reset::Scope, ctx: Ctx) -> Result<reset::Report, ApiError> {
        let backlog = self.caught_up_turn(ctx).await?;
        let report = reset::reset(&self.store, scope).await?;
        drop(backlog);
        let ws = scope.workspace.as_ref().map(WorkspaceName::as_str);
        self.limiter.forget(ws);
        // A reset's workspace keeps the deployment's time again; with `keep=none`
        // nothing of it stays, in the test kit either.
        self.kit.clocks.forget(ws);
        if scope.keep == reset::Keep::Nothing {
            self.kit.snapshots.clear(ws);
            self.kit.faults.clear(ws);
            self.kit.journal.forget(|e| ws.is_none_or(|w| e.workspace.as_deref() == Some(w)));
        }
        if ws.is_none() {
            self.kit.journal.clear();
        }
        Ok(report)
    }

    /// Applies everything queued, in the queue's turn.
    pub(super) async fn apply_all(&self, ctx: Ctx) -> Result<(), ApiError> {
        self.caught_up_turn(ctx).await.map(drop)
    }

    /// Loads a checked fixtures file: first on an empty in-memory store (a bad
    /// entry is refused, naming its path, before anything is stored here), then
    /// here, one part (a workspace, or the SCIM users) at a time. Each part is
    /// claimed before it is loaded (a mark written only if absent), so the same
    /// file loaded again, or by two requests or servers at once, loads each part
    /// once; a reset of a workspace lets that part load again.
    pub async fn load_seed(&self, seed: &Seed, base: &str, ctx: Ctx) -> Result<Loaded, SeedError> {
        let failed = |message: String| SeedError { path: String::new(), message };
        let _one_at_a_time = self.kit.seeding.lock().await;
        let mut pending = Vec::new();
        for part in parts(seed) {
            if self.store.get(Table::Seed, &part.key(&seed.digest)).await.map_err(|e| failed(e.to_string()))?.is_none()
            {
                pending.push(part);
            }
        }
        if pending.is_empty() {
            return Ok(Loaded::Before);
        }
        check_seed(seed, base, ctx).await?;
        let mut n = 0;
        for part in pending {
            let key = part.key(&seed.digest);
            let mark = |state: &str| -> Result<Vec<u8>, SeedError> {
                encode(&Marker { loaded_at: ctx.now.to_rfc3339(), state: state.into() })
                    .map_err(|e| failed(format!("{e:?}")))
            };
            let claim =
                Op::Put { table: Table::Seed, key: key.clone(), value: mark("loading")?, expect: Expect::Absent };
            match self.store.commit(ChangeSet { ops: vec![claim], ack: None }).await {
                Ok(()) => {}
                // Another request or server has this part.
                Err(crate::store::CommitError::Conflict) => continue,
                Err(crate::store::CommitError::Store(e)) => return Err(failed(e.to_string())),
            }
            let loaded = match part {
                Part::Workspace(w) => self.load_workspace(w, ctx, true).await,
                Part::Scim => self.load_scim(seed, base, ctx, true).await,
            };
            let (op, result) = match loaded {
                Ok(count) => {
                    n += count;
                    (Op::Put { table: Table::Seed, key, value: mark("loaded")?, expect: Expect::Any }, Ok(()))
                }
                // Unclaimed, so that the part can be tried again once the cause is fixed.
                Err(e) => (Op::Delete { table: Table::Seed, key, expect: Expect::Any }, Err(e)),
            };
            self.store.commit(ChangeSet { ops: vec![op], ack: None }).await.map_err(|e| failed(format!("{e:?}")))?;
            result?;
        }
        Ok(Loaded::Now(n))
    }

    /// Every part of a file, as the dry run loads it: `tolerant` as for
    /// [`Engine::load_workspace`].
    async fn load_entries(&self, seed: &Seed, base: &str, ctx: Ctx, tolerant: bool) -> Result<usize, SeedError> {
        let mut n = 0;
        for w in &seed.workspaces {
            n += self.load_workspace(w, ctx, tolerant).await?;
        }
        Ok(n + self.load_scim(seed, base, ctx, tolerant).await?)
    }

    /// Runs a workspace's entries through the endpoints that take them. `tolerant`:
    /// what exists already (a group id, a center's name) is left as it is rather
    /// than refused, so a changed file loads over an earlier one.
    async fn load_workspace(&self, w: &SeedWorkspace, ctx: Ctx, tolerant: bool) -> Result<usize, SeedError> {
        let ws = w.name.as_str();
        let mut step = 0u32;
        let mut next_ctx = || {
            step += 1;
            derive(ctx, step)
        };
        // A state file's documents go in as they are, before anything else.
        let mut n = put_documents(&self.store, &w.documents)
            .await
            .map_err(|e| at(&format!("workspaces.{ws}.documents"), &e))?;
        // The workspace exists (listed, its large profiles registered) even with no key.
        let made = crate::admin::workspace::new_workspace(&self.store, &w.name, ctx.now.0).await;
        let ops = made.map_err(|e| at(&format!("workspaces.{ws}"), &e))?;
        if !ops.is_empty() {
            let committed = self.store.commit(ChangeSet { ops, ack: None }).await;
            // A conflict: it was made meanwhile.
            if let Err(crate::store::CommitError::Store(e)) = committed {
                return Err(at(&format!("workspaces.{ws}"), &ApiError::from(e)));
            }
        }
        for (i, key) in w.keys.iter().enumerate() {
            crate::kit::key::ensure(&self.store, &w.name, key.permissions.clone(), &key.secret, next_ctx())
                .await
                .map_err(|e| at(&format!("workspaces.{ws}.keys[{i}]"), &e))?;
            n += 1;
        }
        for (i, g) in w.groups.iter().enumerate() {
            subscriptions::groups::create_with_id(&self.store, &w.name, &g.id, &g.name, g.channel, ctx.now)
                .await
                .map_err(|e| at(&format!("workspaces.{ws}.groups[{i}]"), &e))?;
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
        self.apply_all(next_ctx()).await.map_err(|e| at(&format!("workspaces.{ws}"), &e))?;
        for r in &w.subscriptions {
            let c = next_ctx();
            let set = self.dispatch(Api::SubscriptionSetV2, &request(r), &w.name, c, false).await;
            n += accept(set, r, |_| false)?;
        }
        if !w.lists.is_empty() {
            let c = next_ctx();
            let entries: Vec<Listed> = w
                .lists
                .iter()
                .map(|e| Listed { list: e.list, subject: e.subject.clone(), at: e.at.unwrap_or(c.now) })
                .collect();
            let path = format!("workspaces.{ws}");
            subscriptions::fixtures::seed(&self.store, &w.name, &entries, c).await.map_err(|e| at(&path, &e))?;
            n += entries.len();
        }
        Ok(n)
    }

    /// Creates the file's SCIM users; `tolerant`: a user name taken is left as it is.
    async fn load_scim(&self, seed: &Seed, base: &str, ctx: Ctx, tolerant: bool) -> Result<usize, SeedError> {
        let mut n = put_documents(&self.store, &seed.documents).await.map_err(|e| at("documents", &e))?;
        for (i, r) in seed.scim_users.iter().enumerate() {
            let created = scim::write::create(&self.store, &r.body, None, base, derive(ctx, 1 << 20 | i as u32)).await;
            match created {
                Ok(_) => n += 1,
                Err(scim::error::ScimError::Taken) if tolerant => n += 1,
                Err(e) => return Err(refused(r, &e.into_response())),
            }
        }
        Ok(n)
    }
}

/// A part of a fixtures file, loaded (and remembered) on its own.
enum Part<'a> {
    /// A workspace's entries.
    Workspace(&'a SeedWorkspace),
    /// The SCIM users (the deployment's).
    Scim,
}

impl Part<'_> {
    /// The key of its mark: the file's digest and the workspace (empty for SCIM).
    fn key(&self, digest: &str) -> String {
        let ws = match self {
            Part::Workspace(w) => w.name.as_str(),
            Part::Scim => "",
        };
        format!("{digest}{}{ws}", crate::repo::keys::SEP)
    }
}

fn parts(seed: &Seed) -> Vec<Part<'_>> {
    let mut out: Vec<Part<'_>> = seed.workspaces.iter().map(Part::Workspace).collect();
    if seed.has_deployment_part() {
        out.push(Part::Scim);
    }
    out
}

/// Puts a state file's documents in place, in one unit of work: how many.
async fn put_documents<S: Store>(store: &S, docs: &[Doc]) -> Result<usize, ApiError> {
    if docs.is_empty() {
        return Ok(0);
    }
    store.commit(ChangeSet { ops: docs.iter().map(Doc::put).collect(), ack: None }).await?;
    Ok(docs.len())
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
    Ctx { seed: crate::ids::derived_seed(&[&ctx.seed, &step.to_le_bytes()]), ..ctx }
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
    // A track body partly refused answers 2xx with `errors`: the file's entry is bad.
    let partly = resp.json_body()["errors"].as_array().is_some_and(|e| !e.is_empty());
    if ((200..300).contains(&resp.status) && !partly) || tolerated(&resp) {
        Ok(1)
    } else {
        Err(refused(r, &resp))
    }
}
