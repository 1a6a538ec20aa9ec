//! The server under test: the release `engage` binary in a process of its own (so
//! its resident memory is its own), on a fresh copy of a seed, with its peak RSS
//! sampled while it runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::seed;

const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";

/// A running `engage serve`.
pub struct Server {
    child: Child,
    pub base: String,
    pub key: String,
    pub db: PathBuf,
    /// A subscription group of the workspace (for the subscription endpoints).
    pub group: String,
    peak_rss_kib: Arc<AtomicU64>,
    /// Peak of the anonymous part (the heap; the rest is mapped files and code).
    peak_anon_kib: Arc<AtomicU64>,
    sampling: Arc<AtomicBool>,
}

fn engage() -> Command {
    Command::new(env!("CARGO_BIN_EXE_engage"))
}

fn cli(args: &[&str]) -> String {
    let out = engage().args(args).stderr(Stdio::inherit()).output().expect("run engage");
    assert!(out.status.success(), "engage {args:?} failed");
    String::from_utf8(out.stdout).expect("utf-8").trim().to_string()
}

/// Resident memory of a process now, KiB (0 once it is gone).
pub fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or("");
    line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().unwrap_or(0)
}

impl Server {
    /// Starts a server on a fresh copy of `seed` with the serve flags `extra`
    /// (default settings when empty), rate limits off (the benchmark measures the
    /// server, not the platform's budget).
    pub fn start(seed_db: &Path, extra: &[&str]) -> Server {
        let db = seed::root().join("run.db");
        seed::fresh_copy(seed_db, &db);
        let db_arg = db.to_str().unwrap();
        let key = cli(&["keys", "create", "--db", db_arg, "--workspace", "bench"]);
        let group =
            cli(&["groups", "create", "--db", db_arg, "--workspace", "bench", "--name", "News", "--channel", "email"]);
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("127.0.0.1:{port}");
        let child = engage()
            .args(["serve", "--db", db_arg, "--listen", &listen, "--no-rate-limits", "--admin-token", ADMIN_TOKEN])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start engage serve");
        let peak_rss_kib = Arc::new(AtomicU64::new(0));
        let peak_anon_kib = Arc::new(AtomicU64::new(0));
        let sampling = Arc::new(AtomicBool::new(true));
        let (pid, peak, anon, on) = (child.id(), peak_rss_kib.clone(), peak_anon_kib.clone(), sampling.clone());
        std::thread::spawn(move || {
            while on.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid, "VmRSS:"), Ordering::Relaxed);
                anon.fetch_max(rss_kib(pid, "RssAnon:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let server =
            Server { child, base: format!("http://{listen}"), key, db, group, peak_rss_kib, peak_anon_kib, sampling };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if let Ok(mut s) = std::net::TcpStream::connect(self.base.trim_start_matches("http://")) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                if out.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("engage serve did not answer /healthz within 60 s");
    }

    /// Where to send requests, with the key of workspace `bench`.
    pub fn target(&self) -> crate::load::Target {
        crate::load::Target { base: self.base.clone(), key: self.key.clone() }
    }

    /// Peak resident memory since the start, MiB (sampled every 100 ms, and the
    /// kernel's high-water mark while the process lives).
    pub fn peak_rss_mib(&self) -> f64 {
        let hwm = rss_kib(self.child.id(), "VmHWM:");
        self.peak_rss_kib.load(Ordering::Relaxed).max(hwm) as f64 / 1024.0
    }

    /// Peak of the anonymous part of the resident memory since the start, MiB.
    pub fn peak_anon_mib(&self) -> f64 {
        self.peak_anon_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }

    /// Forgets the peak so far (the next phase reports its own).
    pub fn reset_peak(&self) {
        self.peak_rss_kib.store(rss_kib(self.child.id(), "VmRSS:"), Ordering::Relaxed);
        self.peak_anon_kib.store(rss_kib(self.child.id(), "RssAnon:"), Ordering::Relaxed);
        // The kernel's high-water mark resets through clear_refs (5); without it the
        // sampled peak still holds.
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5");
    }

    /// Queued jobs not yet applied (the operator route `/_engage/queue`).
    pub fn pending(&self) -> u64 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.base.trim_start_matches("http://")).expect("connect");
        let req = format!(
            "GET /_engage/queue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let body = out.split("\r\n\r\n").nth(1).unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("queue state: {out}"));
        v["pending"].as_u64().unwrap_or_else(|| panic!("queue state: {v}"))
    }

    /// An operator route (`/_engage/...`) with a JSON body (none for `Null`): the answer's body.
    pub fn operator(&self, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.base.trim_start_matches("http://")).expect("connect");
        let body = if body.is_null() { String::new() } else { body.to_string() };
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let answer = out.split("\r\n\r\n").nth(1).unwrap_or("");
        serde_json::from_str(answer).unwrap_or_else(|_| panic!("{method} {path}: {out}"))
    }

    /// Waits until at most `left` jobs are pending or `limit` has passed; returns the
    /// jobs applied per second meanwhile.
    pub fn drain_rate(&self, limit: Duration) -> f64 {
        let (from, started) = (self.pending(), Instant::now());
        let mut now = from;
        while now > 0 && started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(250));
            now = self.pending();
        }
        (from - now) as f64 / started.elapsed().as_secs_f64()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.sampling.store(false, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Freeing GBs at the next run's start kept the disk busy into its first second.
        seed::remove_db(&self.db);
    }
}
