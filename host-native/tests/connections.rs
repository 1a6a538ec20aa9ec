//! Hostile and slow clients against the native server: timeouts cut off slow
//! headers, idle connections and bodies that never finish; broken framing is a 400;
//! a full descriptor table is refused cleanly, and the server serves again once the
//! clients go away, without a restart.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{key, Conn, Server};

fn track(user: &str) -> serde_json::Value {
    json!({"attributes": [{"external_id": user, "n": {"inc": 1}}]})
}

const SHORT: [&str; 6] = ["--header-timeout-secs", "2", "--body-timeout-secs", "2", "--idle-timeout-secs", "2"];

#[test]
fn slow_headers_idle_connections_and_unfinished_bodies_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &SHORT, &[]);

    // An idle connection is closed (it would otherwise be held forever).
    let started = Instant::now();
    let sent = server.conn().read_until_closed(Duration::from_secs(20)).expect("closed by the server");
    assert!(sent.is_empty());
    assert!(started.elapsed() >= Duration::from_secs(1), "not before the idle timeout");

    // Headers at one byte every 300 ms: closed once the header timeout passes.
    let mut slow = server.conn();
    let head = format!(
        "POST /users/track HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nX-Pad: {}\r\n",
        "p".repeat(200)
    );
    let started = Instant::now();
    let closed = head.bytes().any(|b| {
        std::thread::sleep(Duration::from_millis(300));
        slow.stream().write_all(&[b]).is_err() || started.elapsed() > Duration::from_secs(20)
    });
    assert!(closed && started.elapsed() < Duration::from_secs(20), "slow headers were cut off");

    // A body shorter than its Content-Length, and a chunked body that never ends: 408.
    for (framing, partial) in
        [("Content-Length: 100", "{\"attributes\":"), ("Transfer-Encoding: chunked", "20\r\n{\"attr")]
    {
        let mut c = server.conn();
        let req = format!(
            "POST /users/track HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n{framing}\r\n\r\n{partial}"
        );
        c.stream().write_all(req.as_bytes()).unwrap();
        let reply = c.read_reply().expect("an answer");
        assert_eq!(reply.status, 408, "{framing}");
        assert_eq!(reply.json(), json!({"message": "Request Timeout: the request did not arrive within 2 s"}));
        assert_eq!(reply.header("connection"), Some("close"));
    }

    // 300 clients sending headers slowly do not keep a normal request from an answer.
    let slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.write_all(b"POST /users/track HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    let reply = server.conn().post("/users/track", &key, &track("u1")).expect("answered");
    assert_eq!(reply.status, 201);
    drop(slow);
}

#[test]
fn broken_framing_is_a_400_and_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &[], &[]);
    let cases = [
        (
            "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            "Bad Request: malformed body framing (chunked encoding)",
        ),
        (
            "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            "Bad Request: both Content-Length and Transfer-Encoding are set",
        ),
        (
            "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            "Bad Request: both Content-Length and Transfer-Encoding are set",
        ),
    ];
    for (rest, message) in cases {
        let mut c = server.conn();
        let req = format!("POST /users/track HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n{rest}");
        c.stream().write_all(req.as_bytes()).unwrap();
        let reply = c.read_reply().expect("an answer");
        assert_eq!((reply.status, reply.json()), (400, json!({"message": message})), "{rest:?}");
        assert_eq!(reply.header("connection"), Some("close"));
        assert!(c.read_until_closed(Duration::from_secs(10)).is_ok(), "closed after the answer");
    }
    // Nothing of those requests was applied.
    let reply = server.conn().post("/users/export/ids", &key, &json!({"external_ids": ["u1"]})).unwrap();
    assert_eq!(reply.json()["users"], json!([]));
}

/// Opens `n` connections, each sending nothing; returns those the server took.
fn hold(port: u16, n: usize) -> Vec<Conn> {
    (0..n).filter_map(|_| Conn::open(port).ok()).collect()
}

/// Polls until a track request is answered 201 (the server serves again).
fn serves_again(port: u16, key: &str) {
    let started = Instant::now();
    loop {
        if let Ok(mut c) = Conn::open(port) {
            if c.post("/users/track", key, &track("again")).is_ok_and(|r| r.status == 201) {
                return;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not serve again");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn connections_beyond_the_cap_are_answered_503_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    // 512 open files: the server keeps 256 for itself and caps connections at 128.
    let server = Server::start(&db, &[], &["prlimit", "--nofile=512:512", "--"]);
    let mut held = hold(server.port, 200);
    let mut refused = 0;
    for c in held.iter_mut().skip(140) {
        let reply = c.read_reply().expect("an answer, not a dropped connection");
        assert_eq!(reply.status, 503);
        assert_eq!(reply.json(), json!({"message": "Service Unavailable: too many connections, retry"}));
        assert_eq!(reply.header("retry-after"), Some("1"));
        refused += 1;
    }
    assert_eq!(refused, 60);
    drop(held);
    serves_again(server.port, &key);
    assert!(server.log_text().contains("at most 128 connections"), "{}", server.log_text());
}

#[test]
fn a_full_descriptor_table_does_not_spin_or_flood_the_log_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    // A cap above what the open-files limit allows: accepts fail with EMFILE.
    let server = Server::start(&db, &["--max-connections", "5000"], &["prlimit", "--nofile=256:256", "--"]);
    let t = Instant::now();
    let held = hold(server.port, 400);
    eprintln!("held {} in {:?}", held.len(), t.elapsed());
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, log) = (server.cpu(), server.log_bytes());
    std::thread::sleep(Duration::from_secs(3));
    let spent = server.cpu() - cpu;
    let logged = server.log_bytes() - log;
    assert!(server.log_text().contains("accept failed"), "the descriptor table was full: {}", server.log_text());
    assert!(spent < Duration::from_millis(1500), "the accept loop backs off: {spent:?} of CPU in 3 s");
    assert!(logged < 4096, "accept errors are logged at a bounded rate: {logged} bytes in 3 s");
    drop(held);
    let t = Instant::now();
    serves_again(server.port, &key);
    eprintln!("served again in {:?}", t.elapsed());
}
