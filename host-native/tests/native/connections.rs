//! Hostile and slow clients against the native server: timeouts cut off slow
//! headers, idle connections and bodies that never finish; broken framing is a 400;
//! a full descriptor table is refused cleanly, and the server serves again once the
//! clients go away, without a restart.

use crate::support;

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

#[test]
fn a_kept_alive_connection_is_closed_the_idle_timeout_after_its_last_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &SHORT, &[]);
    // Whatever the connection served before: a read, a write, two requests.
    let mut conns: Vec<Conn> = (0..20).map(|_| server.conn()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let reply = match i % 3 {
            0 => c.send("GET", "/healthz", "", None).unwrap(),
            1 => c.post("/users/track", &key, &track("idle")).unwrap(),
            _ => {
                c.send("GET", "/healthz", "", None).unwrap();
                c.post("/users/export/ids", &key, &json!({"external_ids": ["idle"]})).unwrap()
            }
        };
        assert!(reply.status < 300, "{reply:?}");
    }
    let started = Instant::now();
    for c in &mut conns {
        let rest = c.read_until_closed(Duration::from_secs(15)).expect("closed by the server, not held");
        assert!(rest.is_empty(), "nothing more was sent");
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(8), "closed after about 2 s: {took:?}");
}

/// Sends raw bytes on a fresh connection; returns every answer until the server closes.
fn exchange(server: &Server, bytes: &[u8]) -> Vec<support::Reply> {
    let mut c = server.conn();
    c.stream().write_all(bytes).unwrap();
    let mut replies = Vec::new();
    while let Ok(reply) = c.read_reply() {
        let closing = reply.header("connection") == Some("close");
        replies.push(reply);
        if closing {
            assert!(c.read_until_closed(Duration::from_secs(10)).is_ok(), "closed after the refusal");
            break;
        }
    }
    replies
}

#[test]
fn a_declared_body_over_the_limit_is_refused_at_once_and_the_connection_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &["--max-connections", "20", "--body-timeout-secs", "30"], &[]);
    let head = format!(
        "POST /users/track HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: 1000000000\r\n\r\n"
    );
    // More such clients than the cap, each then silent: none holds its slot.
    for _ in 0..30 {
        let started = Instant::now();
        let replies = exchange(&server, head.as_bytes());
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].status, 413);
        assert_eq!(replies[0].json(), json!({"message": "Request Entity Too Large: the body exceeds 4194304 bytes"}));
        assert!(replies[0].header("x-request-id").is_some());
        assert!(started.elapsed() < Duration::from_secs(5), "answered and closed at once: {:?}", started.elapsed());
    }
    let reply = server.conn().post("/users/track", &key, &track("after")).unwrap();
    assert_eq!(reply.status, 201);
}

#[test]
fn each_pipelined_request_is_judged_by_its_own_head_never_by_body_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &[], &[]);
    let chunked = |body: &str| format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let track_head = |framing: &str| {
        format!("POST /users/track HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n{framing}\r\n")
    };

    // A read, then in the same write a request with both framings: 200, then 400 and close.
    let smuggled = track_head("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
        + &chunked(r#"{"attributes":[{"external_id":"smuggled","x":1}]}"#);
    let replies = exchange(&server, format!("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n{smuggled}").as_bytes());
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 400]);
    assert_eq!(replies[1].json(), json!({"message": "Bad Request: both Content-Length and Transfer-Encoding are set"}));

    // A chunked body whose text holds header-like lines is an ordinary body.
    let body = r#"{"attributes":[{"external_id":"texty","note":"content-length: 3\r\ntransfer-encoding: chunked"}]}"#;
    let mut c = server.conn();
    let req = track_head("Transfer-Encoding: chunked\r\n") + &chunked(body);
    c.stream().write_all(req.as_bytes()).unwrap();
    assert_eq!(c.read_reply().unwrap().status, 201);

    // Nothing of the smuggled request was applied; the texty one was.
    let reply = server.conn().post("/users/export/ids", &key, &json!({"external_ids": ["smuggled", "texty"]})).unwrap();
    let users = reply.json()["users"].clone();
    let ids: Vec<&str> = users.as_array().unwrap().iter().filter_map(|u| u["external_id"].as_str()).collect();
    assert_eq!(ids, ["texty"]);
}

#[test]
fn errors_of_the_http_layer_have_the_platform_shape_a_request_id_and_the_rfc_status() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let _key = key(&db);
    let server = Server::start(&db, &SHORT, &[]);
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    let big_head = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(70_000));
    let many_fields = format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{}\r\n", "X-A: b\r\n".repeat(120));
    // A target longer than the whole head's bound: still the target that is too long.
    let huge_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000));
    let cases: [(&str, &[u8], u16, &str); 10] = [
        (
            "two lengths",
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            400,
            "Bad Request: conflicting Content-Length values",
        ),
        (
            "a bad length",
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n{}",
            400,
            "Bad Request: Content-Length is not a number",
        ),
        (
            "a length past any limit",
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551614\r\n\r\n",
            413,
            "Request Entity Too Large: the body exceeds 4194304 bytes",
        ),
        ("no Host", b"GET /healthz HTTP/1.1\r\n\r\n", 400, "Bad Request: an HTTP/1.1 request needs a Host header"),
        (
            "gzip then chunked",
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
            "Not Implemented: transfer coding 'gzip, chunked' (only 'chunked' is supported)",
        ),
        ("a long target", long_target.as_bytes(), 414, "URI Too Long: the request target exceeds 8192 bytes"),
        ("a 100 KB target", huge_target.as_bytes(), 414, "URI Too Long: the request target exceeds 8192 bytes"),
        (
            "a large head",
            big_head.as_bytes(),
            431,
            "Request Header Fields Too Large: the head exceeds 65536 bytes or 100 fields",
        ),
        (
            "many fields",
            many_fields.as_bytes(),
            431,
            "Request Header Fields Too Large: the head exceeds 65536 bytes or 100 fields",
        ),
        (
            "not HTTP",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            400,
            "Bad Request: malformed request head",
        ),
    ];
    for (what, bytes, status, message) in cases {
        let replies = exchange(&server, bytes);
        assert_eq!(replies.len(), 1, "{what}");
        assert_eq!((replies[0].status, replies[0].json()), (status, json!({ "message": message })), "{what}");
        assert!(replies[0].header("x-request-id").is_some_and(|id| !id.is_empty()), "{what}");
    }
    // A head that never ends: 408 in the same shape, once the header timeout passes.
    let replies = exchange(&server, b"GET /healthz HTTP/1.1\r\nHo");
    assert_eq!(replies[0].status, 408);
    assert_eq!(replies[0].json(), json!({"message": "Request Timeout: the request did not arrive within 2 s"}));
    // HTTP/1.0 needs no Host.
    let replies = exchange(&server, b"GET /healthz HTTP/1.0\r\n\r\n");
    assert_eq!(replies.first().map(|r| r.status), Some(200));
}

/// A stop does not wait for kept-alive connections between requests: they are
/// closed at once (a test suite's client keeps one open), while a request in
/// flight still gets its answer.
#[test]
fn a_stop_closes_idle_kept_alive_connections_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let mut server = Server::start(&db, &[], &[]);
    let mut idle: Vec<Conn> = (0..4).map(|_| server.conn()).collect();
    for c in &mut idle {
        assert_eq!(c.post("/users/track", &key, &track("stop")).unwrap().status, 201);
    }
    let started = Instant::now();
    let _ = std::process::Command::new("kill").arg(server.child.id().to_string()).status();
    for c in &mut idle {
        let rest = c.read_until_closed(Duration::from_secs(15)).expect("closed by the server");
        assert!(rest.is_empty(), "nothing more was sent");
    }
    while server.child.try_wait().ok().flatten().is_none() {
        assert!(started.elapsed() < Duration::from_secs(15), "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    // It used to wait out five seconds for them.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "stopped {took:?} after the signal");
    assert!(server.log_text().contains("stopped"), "{}", server.log_text());
}
