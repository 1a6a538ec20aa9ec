//! What the server-level tests share: a server process they own (started on a free
//! port, optionally under a wrapper such as `prlimit`, killed with SIGKILL on
//! demand) and a small blocking HTTP/1.1 client that keeps its connection alive.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Runs `engage` with these arguments and returns its standard output, trimmed.
pub fn engage(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_engage")).args(args).output().expect("run engage");
    assert!(out.status.success(), "engage {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// An all-permissions key of workspace `default` in the database at `db`.
pub fn key(db: &Path) -> String {
    engage(&["keys", "create", "--db", db.to_str().unwrap()])
}

/// A running `engage serve`.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Server {
    /// Starts `engage serve --db DB` with `args`, under `wrapper` (a command and its
    /// arguments, the server's command line appended) when given.
    pub fn start(db: &Path, args: &[&str], wrapper: &[&str]) -> Server {
        Server::start_logging(db, args, wrapper, None)
    }

    /// [`Server::start`] with the server's standard error written to `log` (default:
    /// a file in the temporary directory).
    pub fn start_logging(db: &Path, args: &[&str], wrapper: &[&str], log: Option<PathBuf>) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = log.unwrap_or_else(|| std::env::temp_dir().join(format!("engage-test-{port}.log")));
        let listen = format!("127.0.0.1:{port}");
        let mut line: Vec<String> = wrapper.iter().map(|s| s.to_string()).collect();
        line.push(env!("CARGO_BIN_EXE_engage").to_string());
        line.extend(["serve", "--db", db.to_str().unwrap(), "--listen", &listen].map(String::from));
        line.extend(args.iter().map(|s| s.to_string()));
        let child = Command::new(&line[0])
            .args(&line[1..])
            .env("RUST_LOG", std::env::var("ENGAGE_TEST_LOG").unwrap_or("info".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server { child, port, log };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("the server exited ({status}): {}", server.log_text());
            }
            assert!(started.elapsed() < Duration::from_secs(60), "the server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_bytes(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// CPU time (user + system) the process has used so far.
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start after ')'.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("").split_whitespace().collect();
        let ticks: u64 = [11, 12].iter().filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok())).sum();
        Duration::from_millis(ticks * 10)
    }

    /// Resident memory of the process now, in bytes (`VmRSS`).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        kib.unwrap_or(0) * 1024
    }

    pub fn conn(&self) -> Conn {
        Conn::open(self.port).expect("connect")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One kept-alive HTTP/1.1 connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

/// A response: status, headers (lower-cased names) and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

impl Conn {
    pub fn open(port: u16) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.set_nodelay(true)?;
        Ok(Conn { reader: BufReader::new(stream) })
    }

    pub fn stream(&mut self) -> &mut TcpStream {
        self.reader.get_mut()
    }

    /// Sends a request with a JSON body (or none) and reads the response.
    pub fn send(&mut self, method: &str, path: &str, auth: &str, body: Option<&Value>) -> std::io::Result<Reply> {
        self.send_with(method, path, auth, &[], body)
    }

    /// [`Conn::send`] with more headers.
    pub fn send_with(
        &mut self,
        method: &str,
        path: &str,
        auth: &str,
        extra: &[(&str, &str)],
        body: Option<&Value>,
    ) -> std::io::Result<Reply> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {auth}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        self.stream().write_all(&bytes)?;
        self.read_reply()
    }

    pub fn post(&mut self, path: &str, auth: &str, body: &Value) -> std::io::Result<Reply> {
        self.send("POST", path, auth, Some(body))
    }

    /// Reads one response (its body by `Content-Length`).
    pub fn read_reply(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize =
            headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body)?;
        Ok(Reply { status, headers, body })
    }

    /// Waits until the server closes the connection (reads and drops anything it
    /// sends first); returns what it sent.
    pub fn read_until_closed(&mut self, limit: Duration) -> std::io::Result<Vec<u8>> {
        self.reader.get_ref().set_read_timeout(Some(limit))?;
        let mut all = Vec::new();
        self.reader.read_to_end(&mut all)?;
        Ok(all)
    }
}

/// Percentile `p` (0-100) of `samples` (sorted here).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p / 100.0).round() as usize;
    samples[i]
}

/// A track request for `user` that counts: two attributes and an event, each +1,
/// so a request applied half (or twice) shows in what is read back.
pub fn counted_track(user: &str) -> Value {
    json!({
        "attributes": [{"external_id": user, "n": {"inc": 1}, "m": {"inc": 1}}],
        "events": [{"external_id": user, "name": "hit", "time": "2026-11-01T00:00:00Z"}],
    })
}

/// `n`, `m` and the count of event `hit` of these users, read back (reads apply
/// what is queued for the users they name first).
pub fn read_counts(server: &Server, key: &str, users: &[String]) -> HashMap<String, (u64, u64, u64)> {
    let mut out = HashMap::new();
    let mut conn = server.conn();
    for chunk in users.chunks(50) {
        let body =
            json!({"external_ids": chunk, "fields_to_export": ["external_id", "custom_attributes", "custom_events"]});
        let reply = conn.post("/users/export/ids", key, &body).unwrap();
        assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
        for u in reply.json()["users"].as_array().unwrap() {
            let attrs = &u["custom_attributes"];
            let hits = u["custom_events"]
                .as_array()
                .and_then(|events| events.iter().find(|e| e["name"] == json!("hit")))
                .map_or(0, |e| e["count"].as_u64().unwrap());
            let id = u["external_id"].as_str().unwrap().to_string();
            out.insert(id, (attrs["n"].as_u64().unwrap_or(0), attrs["m"].as_u64().unwrap_or(0), hits));
        }
    }
    out
}

/// The size in bytes of the WAL beside the database `db` (0 when there is none).
pub fn wal_bytes(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len())
}

/// Runs `engage` with these arguments: whether it succeeded, its standard output and
/// its standard error (no `ENGAGE_LISTEN` from the environment that runs the tests).
pub fn engage_result(args: &[&str]) -> (bool, String, String) {
    let out = engage_output(args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `engage` with these arguments, whatever its outcome.
pub fn engage_output(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_engage")).args(args).env_remove("ENGAGE_LISTEN").output().expect("run engage")
}

/// What a [`Load`] saw, once stopped.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests sent, per user.
    pub sent: HashMap<String, u64>,
    /// Requests acknowledged (201), per user.
    pub acked: HashMap<String, u64>,
    /// Answers by status.
    pub statuses: HashMap<u16, u64>,
    /// Answers neither a 201 nor a 503 in the platform's shape, and connection errors
    /// while `reconnect` was on.
    pub unexpected: Vec<String>,
}

/// The load client the multi-server tests share: `clients` threads, each posting
/// counted `/users/track` writes ([`counted_track`]) over one kept-alive connection to
/// `ports[client % ports.len()]`, for users `{prefix}0` to `{prefix}{users - 1}`,
/// until stopped. A 503 in the platform's shape is waited out briefly. On a broken
/// connection a client connects again (`reconnect`: a server expected to stay) or
/// stops (a server killed on purpose).
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tally: std::sync::Arc<std::sync::Mutex<Tally>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start(ports: &[u16], key: &str, clients: usize, prefix: &str, users: u64, reconnect: bool) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally::default()));
        let threads = (0..clients)
            .map(|c| {
                let (stop, tally, key, prefix) = (stop.clone(), tally.clone(), key.to_string(), prefix.to_string());
                let port = ports[c % ports.len()];
                std::thread::spawn(move || {
                    let mut conn = Conn::open(port).ok();
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let Some(open) = conn.as_mut() else { break };
                        let user = format!("{prefix}{}", (c as u64 * 13 + n) % users);
                        n += 1;
                        *tally.lock().unwrap().sent.entry(user.clone()).or_default() += 1;
                        match open.post("/users/track", &key, &counted_track(&user)) {
                            Ok(reply) => {
                                let mut t = tally.lock().unwrap();
                                *t.statuses.entry(reply.status).or_default() += 1;
                                match reply.status {
                                    201 => *t.acked.entry(user).or_default() += 1,
                                    // The platform's shape: a JSON object with a message.
                                    503 if reply.json()["message"].is_string() => {
                                        drop(t);
                                        std::thread::sleep(Duration::from_millis(20));
                                    }
                                    other => {
                                        t.unexpected.push(format!("{other}: {}", String::from_utf8_lossy(&reply.body)))
                                    }
                                }
                            }
                            Err(e) if reconnect => {
                                tally.lock().unwrap().unexpected.push(format!("connection: {e}"));
                                conn = Conn::open(port).ok();
                            }
                            Err(_) => conn = None,
                        }
                    }
                })
            })
            .collect();
        Load { stop, tally, threads }
    }

    /// Acknowledged so far, in all.
    pub fn acked(&self) -> u64 {
        self.tally.lock().unwrap().statuses.get(&201).copied().unwrap_or(0)
    }

    /// Answers with this status so far.
    pub fn count(&self, status: u16) -> u64 {
        self.tally.lock().unwrap().statuses.get(&status).copied().unwrap_or(0)
    }

    /// Stops every client and answers what they saw.
    pub fn stop(self) -> Tally {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.tally.lock().unwrap())
    }
}
