//! Black-box harness: talks HTTP to an Engage host by base URL.
//!
//! - With `ENGAGE_BASE_URL` (and `ENGAGE_ADMIN_TOKEN`), it uses that host (native,
//!   edge, anything).
//! - Otherwise it starts the native binary (`ENGAGE_BIN`, default
//!   `target/debug/engage`) on a free loopback port with a fresh database, and the
//!   server exits when the test process does.
//!
//! Every test works in a workspace of its own, created through the operator routes,
//! so tests run in parallel without seeing each other's data.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

/// The host under test.
pub struct Host {
    /// Base URL without a trailing slash.
    pub base: String,
    /// With `ENGAGE_TEST_SERVERS=N` (and `ENGAGE_TEST_DB` a database several servers
    /// share): the other servers' base URLs. API requests go to each server in turn;
    /// the operator's and test kit's routes, whose journal, faults and clocks are a
    /// server's own, go to `base`.
    pub others: Vec<String>,
    /// The admin token the host was started with (operator and test-kit routes).
    pub admin_token: String,
    children: Vec<Child>,
}

impl Host {
    /// Every server's base URL, the first first.
    pub fn bases(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.base).chain(&self.others)
    }

    /// The base URL for a request to `path`: with several servers, the next in turn
    /// for the API, the first for the operator's and test kit's routes and metrics.
    pub fn base_for(&self, path: &str) -> &str {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // A server's metrics are its own counts, as its journal is.
        if self.others.is_empty() || path.starts_with("/_engage") || path == "/metrics" {
            return &self.base;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed) as usize % (self.others.len() + 1);
        if n == 0 {
            &self.base
        } else {
            &self.others[n - 1]
        }
    }
}

fn spawn_native() -> Host {
    let servers: usize = std::env::var("ENGAGE_TEST_SERVERS").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    let admin_token = format!("admin-token-{:032}", now_nanos());
    let mut hosts: Vec<Host> = (0..servers.max(1)).map(|_| spawn_one(&admin_token)).collect();
    let mut first = hosts.remove(0);
    for other in hosts {
        first.others.push(other.base.clone());
        first.children.extend(other.children);
    }
    first
}

fn spawn_one(admin_token: &str) -> Host {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin =
        std::env::var("ENGAGE_BIN").map(std::path::PathBuf::from).unwrap_or_else(|_| root.join("target/debug/engage"));
    assert!(
        bin.exists(),
        "engage binary not found at {} (run `cargo build -p engage` or set ENGAGE_BIN)",
        bin.display()
    );
    sweep_dead_runs();
    let dir = std::env::temp_dir().join(format!("engage-tests-{}-{}", std::process::id(), now_nanos()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("addr").port()
    };
    let child = Command::new(&bin)
        .args(["serve", "--exit-on-stdin-eof", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        // ENGAGE_TEST_DB: another database for the server (tests/run.sh runs the suite
        // again on PostgreSQL); by default a SQLite file of this run's own.
        .arg(std::env::var_os("ENGAGE_TEST_DB").map_or_else(|| dir.join("engage.db"), std::path::PathBuf::from))
        .env("ENGAGE_ADMIN_TOKEN", admin_token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start engage serve");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "engage serve did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    Host {
        base: format!("http://127.0.0.1:{port}"),
        admin_token: admin_token.into(),
        others: vec![],
        children: vec![child],
    }
}

/// Removes the data directories of earlier test processes that have ended. The host
/// lives in a static, which is never dropped, so a run cannot remove its own.
fn sweep_dead_runs() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("engage-tests-").and_then(|rest| rest.split('-').next()) else { continue };
        let alive = std::path::Path::new("/proc").join(pid).exists();
        if pid.parse::<u32>().is_ok() && !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// The shared host of this test process.
pub fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| match std::env::var("ENGAGE_BASE_URL") {
        Ok(base) => Host {
            base: base.trim_end_matches('/').to_string(),
            admin_token: std::env::var("ENGAGE_ADMIN_TOKEN")
                .expect("ENGAGE_ADMIN_TOKEN must be set with ENGAGE_BASE_URL"),
            others: vec![],
            children: vec![],
        },
        Err(_) => spawn_native(),
    })
}

/// A response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body parsed as JSON (`Null` if empty or not JSON).
    pub body: Value,
    /// Raw body.
    pub raw: Vec<u8>,
}

impl Reply {
    /// The body as text (pages are HTML).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// A client bound to one workspace's API key.
#[derive(Clone)]
pub struct Api {
    /// The API key.
    pub key: String,
    /// The workspace name.
    pub workspace: String,
    http: HyperClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    /// Every request to the first server ([`Api::pinned`]).
    pinned: bool,
}

fn client() -> HyperClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>> {
    HyperClient::builder(TokioExecutor::new()).build_http()
}

/// Sends one request.
pub async fn send(method: &str, path: &str, headers: &[(&str, &str)], body: Option<Vec<u8>>) -> Reply {
    let http = client();
    send_with(&http, host().base_for(path), method, path, headers, body).await
}

async fn send_with(
    http: &HyperClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Reply {
    let mut b = hyper::Request::builder().method(method).uri(format!("{base}{path}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(Full::new(Bytes::from(body.unwrap_or_default()))).expect("request");
    let resp = http.request(req).await.expect("the host answered");
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let raw = resp.into_body().collect().await.expect("body").to_bytes().to_vec();
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Reply { status, headers, body, raw }
}

/// Calls an operator route.
pub async fn admin(method: &str, path: &str, body: Value) -> Reply {
    let auth = format!("Bearer {}", host().admin_token);
    let body = if method == "GET" { None } else { Some(body.to_string().into_bytes()) };
    send(method, path, &[("Authorization", &auth), ("Content-Type", "application/json")], body).await
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh, unique workspace name.
/// Lets the clock move on, so that a later write gets a later time: times have
/// millisecond resolution, and two requests in one millisecond tie on every rule
/// that orders by time (most recently updated, oldest first).
pub async fn tick() {
    tokio::time::sleep(Duration::from_millis(5)).await;
}

pub fn unique_workspace() -> String {
    format!("t{}-{}-{}", std::process::id(), now_nanos() % 1_000_000_000, COUNTER.fetch_add(1, Ordering::SeqCst))
}

impl Api {
    /// A new workspace with an all-permissions key.
    pub async fn new() -> Api {
        Api::with_permissions(json!("all")).await
    }

    /// A new workspace with a key carrying `permissions` (`"all"` or a list).
    pub async fn with_permissions(permissions: Value) -> Api {
        Api::in_workspace(&unique_workspace(), permissions).await
    }

    /// Another key in the given workspace.
    pub async fn in_workspace(workspace: &str, permissions: Value) -> Api {
        let r = admin("POST", "/_engage/keys", json!({"workspace": workspace, "permissions": permissions})).await;
        assert_eq!(r.status, 201, "creating a key failed: {:?}", r.body);
        let key = r.body["key"].as_str().expect("key").to_string();
        Api { key, workspace: workspace.to_string(), http: client(), pinned: false }
    }

    /// This client, sending every request to the first server: for a test of what
    /// one server keeps of its own (its journal of requests, its count of what its
    /// acknowledged jobs add to a profile), when `ENGAGE_TEST_SERVERS` runs several.
    pub fn pinned(mut self) -> Api {
        self.pinned = true;
        self
    }

    /// Creates a subscription group in this workspace; returns its id.
    pub async fn group(&self, name: &str, channel: &str) -> String {
        let r =
            admin("POST", "/_engage/groups", json!({"workspace": self.workspace, "name": name, "channel": channel}))
                .await;
        assert_eq!(r.status, 201, "creating a group failed: {:?}", r.body);
        r.body["id"].as_str().expect("id").to_string()
    }

    /// Sends a request with this key.
    pub async fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Reply {
        let auth = format!("Bearer {}", self.key);
        let base = if self.pinned { host().base.as_str() } else { host().base_for(path) };
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        send_with(&self.http, base, method, path, &headers, body).await
    }

    /// POST with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.call("POST", path, Some(body.to_string().into_bytes())).await
    }

    /// PUT with a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> Reply {
        self.call("PUT", path, Some(body.to_string().into_bytes())).await
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None).await
    }

    /// POST /users/track, asserting 201.
    pub async fn track(&self, body: Value) -> Reply {
        let r = self.post("/users/track", body).await;
        assert_eq!(r.status, 201, "track failed: {}", r.body);
        r
    }

    /// Exports one user by external id (`Null` when absent).
    pub async fn user(&self, external_id: &str) -> Value {
        let r = self.post("/users/export/ids", json!({"external_ids": [external_id]})).await;
        assert_eq!(r.status, 201, "export failed: {}", r.body);
        r.body["users"].as_array().and_then(|u| u.first()).cloned().unwrap_or(Value::Null)
    }

    /// Exports users by an arbitrary export body; returns the `users` array.
    pub async fn users(&self, body: Value) -> Vec<Value> {
        let r = self.post("/users/export/ids", body).await;
        assert_eq!(r.status, 201, "export failed: {}", r.body);
        r.body["users"].as_array().cloned().unwrap_or_default()
    }
}

/// The path of a preference-center link, checked to point at the host under test
/// (any of its servers: a link names the server that made it).
pub fn link_path(url: &str) -> String {
    let h = host();
    let token = h
        .bases()
        .find_map(|base| url.strip_prefix(&format!("{base}/preferences/")))
        .unwrap_or_else(|| panic!("{url} does not start with {}/preferences/", h.base));
    format!("/preferences/{token}")
}

/// Opens a page, as a browser would (no credentials).
pub async fn open_page(path: &str) -> Reply {
    send("GET", path, &[], None).await
}

/// Submits a form to a page, as a browser would.
pub async fn submit_form(path: &str, form: &str) -> Reply {
    let headers = [("Content-Type", "application/x-www-form-urlencoded")];
    send("POST", path, &headers, Some(form.as_bytes().to_vec())).await
}

/// Removes fields that differ between runs (ids, times of creation) for snapshots.
pub fn redact(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, val) in m.iter_mut() {
                    if matches!(k.as_str(), "service_id" | "created_at" | "updated_at" | "id") && val.is_string() {
                        *val = json!("[redacted]");
                    } else {
                        walk(val);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// A SCIM client: a token made for its own origin through the operator route.
/// SCIM tokens and dashboard users belong to the deployment, so every client sees
/// the same users (unlike `Api`, whose workspaces are its own).
#[derive(Clone)]
pub struct Scim {
    /// The SCIM token.
    pub token: String,
    /// The origin it was made for (sent as `X-Request-Origin`).
    pub origin: String,
    http: HyperClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Scim {
    /// A new token for a fresh origin.
    pub async fn new() -> Scim {
        Scim::made(json!({})).await
    }

    /// A new token for a fresh origin whose creates without a department get this one.
    pub async fn with_default_department(department: &str) -> Scim {
        Scim::made(json!({"default_department": department})).await
    }

    async fn made(mut body: Value) -> Scim {
        let origin = format!("https://{}.idp.test", unique_workspace());
        body["origin"] = json!(origin);
        let r = admin("POST", "/_engage/scim-tokens", body).await;
        assert_eq!(r.status, 201, "creating a SCIM token failed: {:?}", r.body);
        Scim { token: r.body["token"].as_str().expect("token").to_string(), origin, http: client() }
    }

    /// Sends a request with the token, the origin and, with a body, SCIM's media type.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        self.call_with(method, path, &[], body).await
    }

    /// Sends a request with the token, the origin, these headers and, with a body,
    /// SCIM's media type.
    pub async fn call_with(&self, method: &str, path: &str, extra: &[(&str, &str)], body: Option<Value>) -> Reply {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![("Authorization", auth.as_str()), ("X-Request-Origin", self.origin.as_str())];
        if body.is_some() {
            headers.push(("Content-Type", "application/scim+json"));
        }
        headers.extend_from_slice(extra);
        // Deployment-wide, and outside the queue: one server answers, with its own
        // URL in every resource's location.
        send_with(&self.http, &host().base, method, path, &headers, body.map(|b| b.to_string().into_bytes())).await
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None).await
    }

    /// POST /scim/v2/Users, asserting 201; returns the created user.
    pub async fn create(&self, user: Value) -> Value {
        let r = self.call("POST", "/scim/v2/Users", Some(user)).await;
        assert_eq!(r.status, 201, "creating a dashboard user failed: {}", r.body);
        r.body
    }
}

/// A fresh, unique email address for a dashboard user.
pub fn unique_email(prefix: &str) -> String {
    format!("{prefix}.{}@example.com", unique_workspace().to_ascii_lowercase())
}

impl Api {
    /// Creates a warehouse integration in this workspace through the operator route;
    /// returns its id.
    pub async fn integration(&self, name: &str, source: &str, table: &str, kind: &str) -> String {
        let body = json!({"workspace": self.workspace, "name": name, "source": source, "table": table, "kind": kind,
                          "contact_emails": ["ops@example.com"]});
        let r = admin("POST", "/_engage/cdi/integrations", body).await;
        assert_eq!(r.status, 201, "creating an integration failed: {}", r.body);
        r.body["integration_id"].as_str().expect("id").to_string()
    }

    /// Runs one sync job of an integration and returns its `job_sync_status` entry
    /// once it ended; `None` when the host runs no syncs (the edge). It waits through
    /// the operator route, so that waiting spends none of the API's rate limit.
    pub async fn sync(&self, id: &str) -> Option<Value> {
        let state = format!("/_engage/cdi/integrations/{id}");
        let before = admin("GET", &state, Value::Null).await.body["jobs"].as_u64().expect("jobs");
        let r = admin("POST", &format!("/_engage/cdi/integrations/{id}/sync"), json!({})).await;
        if r.status == 400 && r.body["message"].as_str().is_some_and(|m| m.contains("does not run warehouse syncs")) {
            return None;
        }
        assert_eq!(r.status, 202, "asking for a sync failed: {}", r.body);
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = admin("GET", &state, Value::Null).await.body;
            if now["jobs"].as_u64() > Some(before) && now["last_job_status"] != "running" {
                let jobs = self.get(&format!("/cdi/integrations/{id}/job_sync_status")).await.body;
                return Some(jobs["results"][0].clone());
            }
            assert!(started.elapsed() < Duration::from_secs(60), "the sync did not end: {now}");
        }
    }
}

/// Waits for the next minute of the clock when fewer than `secs` seconds of this
/// one are left. Rate-limit windows are whole minutes of the clock: a test that fills
/// one starts with time to spare, so its requests fall in one window.
pub async fn wait_for_minute_with_secs_left(secs: u64) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let left = 60 - now % 60;
    if left < secs {
        tokio::time::sleep(Duration::from_secs(left + 1)).await;
    }
}
