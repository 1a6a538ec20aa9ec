//! The one engine-level test kit: an [`Engine`] over a [`MemoryStore`] with one
//! all-permissions key and an admin token, a clock that advances one second per
//! request (so "most recently updated" is well defined), a seed that differs per
//! request, and blocking calls that return status and JSON body.

use std::cell::Cell;

use serde_json::{json, Value};

use crate::admin::workspace;
use crate::ctx::Ctx;
use crate::engine::{Config, Engine};
use crate::http::{Method, Request, Response};
use crate::ids::WorkspaceName;
use crate::permission::Permission;
use crate::store::memory::MemoryStore;
use crate::store::{ChangeSet, CommitError, Entry, QueuedJob, Store, StoreError, Table};
use crate::subscriptions::groups::Channel;
use crate::time::Timestamp;

/// The admin token of every kit.
pub(crate) const ADMIN_TOKEN: &str = "kit-admin-token-0123456789abcdef01";

/// An engine over any store (a test's wrapper of one), as a server's beside
/// others on a store they share.
pub(crate) fn shared_engine<S: Store>(store: S) -> Engine<S> {
    Engine::new(store, Config { applies_in_background: true, shared_store: true, ..Config::default() })
}

/// An engine, a key and a clock.
pub(crate) struct Kit {
    engine: Engine<MemoryStore>,
    ws: WorkspaceName,
    key: String,
    tick: Cell<i64>,
}

impl Kit {
    /// A fresh in-memory engine with one workspace, `test`.
    pub(crate) fn new() -> Kit {
        Kit::over(MemoryStore::new(), false)
    }

    /// An engine over `store` (a fresh one has workspace `test` created) whose host
    /// applies the queue in the background or not ([`Config::applies_in_background`]).
    pub(crate) fn over(store: MemoryStore, applies_in_background: bool) -> Kit {
        Kit::configured(store, |c| c.applies_in_background = applies_in_background)
    }

    /// An engine over `store` with the kit's configuration changed by `tune`.
    pub(crate) fn configured(store: MemoryStore, tune: impl FnOnce(&mut Config)) -> Kit {
        let mut config =
            Config { rate_limits: false, admin_token: Some(ADMIN_TOKEN.into()), test_clock: true, ..Config::default() };
        tune(&mut config);
        let engine = Engine::new(store, config);
        let ws = WorkspaceName::parse("test").expect("name");
        // A different seed per kit: a second kit over the same store makes another key.
        static KITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut seed = [9; 16];
        seed[..8].copy_from_slice(&KITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_le_bytes());
        let ctx = Ctx::new(Timestamp(1_700_000_000_000), seed);
        let key =
            pollster::block_on(workspace::create_key(engine.store(), &ws, Permission::ALL.to_vec(), ctx)).expect("key");
        Kit { engine, ws, key, tick: Cell::new(0) }
    }

    /// The store, for a new kit over it (as a server restarted on the same database).
    pub(crate) fn into_store(self) -> MemoryStore {
        self.engine.into_store()
    }

    /// The engine underneath.
    pub(crate) fn engine(&self) -> &Engine<MemoryStore> {
        &self.engine
    }

    /// A fresh context (the clock advances one second).
    pub(crate) fn ctx(&self) -> Ctx {
        let n = self.tick.get() + 1;
        self.tick.set(n);
        let mut seed = [0u8; 16];
        seed[..8].copy_from_slice(&n.to_le_bytes());
        Ctx::new(Timestamp(1_700_000_000_000 + n * 1000), seed)
    }

    /// Creates a subscription group in the kit's workspace; returns its id.
    pub(crate) fn group(&self, channel: Channel) -> String {
        pollster::block_on(workspace::create_group(self.engine.store(), &self.ws, "g", channel, self.ctx()))
            .expect("group")
            .id
    }

    /// Any request with the kit's key and, unless `Null`, a JSON body.
    pub(crate) fn send(&self, method: Method, path: &str, body: Value) -> Response {
        self.handle(self.request(method, path, body))
    }

    /// The request [`Kit::send`] sends, for a test that hands it to the engine itself.
    pub(crate) fn request(&self, method: Method, path: &str, body: Value) -> Request {
        let req = Request::new(method, path).header("Authorization", &format!("Bearer {}", self.key));
        match body.is_null() {
            true => req,
            false => req.header("Content-Type", "application/json").body(body.to_string()),
        }
    }

    /// Any request, handled as a host without a background applier does (the
    /// edge, the playground): a request answered `CatchUpFirst` runs again once
    /// everything queued is applied. Its `503` is the host's to act on, never a
    /// client's answer unless the host cannot.
    pub(crate) fn handle(&self, req: Request) -> Response {
        let again = self.engine.may_ask_to_catch_up(&req).then(|| req.clone());
        let resp = pollster::block_on(self.engine.handle(req, self.ctx()));
        match (&resp.then, again) {
            (crate::http::Then::CatchUpFirst, Some(req)) => {
                while !pollster::block_on(self.engine.apply_queued(self.ctx())).expect("apply").is_empty() {}
                pollster::block_on(self.engine.handle_caught_up(req, self.ctx(), &resp))
            }
            _ => resp,
        }
    }

    /// Any request; returns status and body.
    pub(crate) fn call(&self, method: Method, path: &str, body: Value) -> (u16, Value) {
        let resp = self.send(method, path, body);
        (resp.status, resp.json_body())
    }

    /// POST with a JSON body; returns status and body.
    pub(crate) fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::Post, path, body)
    }

    /// An operator route with the kit's admin token; returns status and body.
    pub(crate) fn operator(&self, method: Method, path: &str) -> (u16, Value) {
        let req = Request::new(method, path).header("Authorization", &format!("Bearer {ADMIN_TOKEN}"));
        let resp = pollster::block_on(self.engine.handle(req, self.ctx()));
        (resp.status, resp.json_body())
    }

    /// POST /users/track, asserting 201.
    pub(crate) fn track(&self, body: Value) {
        let (status, resp) = self.post("/users/track", body);
        assert_eq!(status, 201, "track failed: {resp}");
    }

    /// POST /users/track with these attribute objects, asserting 201.
    pub(crate) fn track_attributes(&self, attributes: Value) {
        self.track(json!({ "attributes": attributes }));
    }

    /// The exported users for an export body.
    pub(crate) fn users(&self, body: Value) -> Vec<Value> {
        let (status, resp) = self.post("/users/export/ids", body);
        assert_eq!(status, 201, "export failed: {resp}");
        resp["users"].as_array().cloned().unwrap_or_default()
    }

    /// One user by external id (`Null` when absent).
    pub(crate) fn user(&self, external_id: &str) -> Value {
        self.users(json!({"external_ids": [external_id]})).into_iter().next().unwrap_or(Value::Null)
    }

    /// One user by alias (`Null` when absent).
    pub(crate) fn by_alias(&self, name: &str, label: &str) -> Value {
        let alias = json!({"alias_name": name, "alias_label": label});
        self.users(json!({"user_aliases": [alias]})).into_iter().next().unwrap_or(Value::Null)
    }
}

/// What a [`Held`] store keeps in flight until it is awaited again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Commits: carried out in order as their outcomes are awaited, as a writer
    /// thread with work queued carries them out.
    Commits,
    /// Reads of the queue, as a slow database answers them.
    QueueReads,
}

/// A [`MemoryStore`] whose commits or queue reads stay in flight until awaited again.
pub(crate) struct Held<'a>(pub &'a MemoryStore, pub Hold);

impl Held<'_> {
    async fn hold(&self, what: Hold) {
        if self.1 == what {
            yield_once().await;
        }
    }
}

impl Store for Held<'_> {
    fn commits_in_order(&self) -> bool {
        self.0.commits_in_order()
    }
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.0.get(table, key).await
    }
    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        self.0.scan(table, prefix, limit).await
    }
    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        self.hold(Hold::Commits).await;
        self.0.commit(changes).await
    }
    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        self.0.enqueue(job).await
    }
    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        self.hold(Hold::QueueReads).await;
        self.0.queued(after, limit).await
    }
    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.0.queue_tail().await
    }
}

/// Pending once, then ready: a test's store awaits it to keep a commit or a read in
/// flight until the caller awaits it again.
pub(crate) async fn yield_once() {
    let mut polled = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut polled, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}
