//! Two `engage serve` processes on one PostgreSQL database (`ENGAGE_TEST_POSTGRES_URL`,
//! which `tests/postgres.sh` starts; CI must have it), each test on a database of
//! its own: writes to one user from both never lose an update, the track queue is
//! applied once and in order whichever server took a request, and `kill -9` of one
//! server loses nothing it acknowledged.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{engage_result, Conn, Server};

fn url() -> Option<String> {
    let url = std::env::var("ENGAGE_TEST_POSTGRES_URL").ok();
    assert!(url.is_some() || std::env::var("CI").is_err(), "CI must run this: set ENGAGE_TEST_POSTGRES_URL");
    url
}

/// A new database on the test server, named for this test: its URL.
fn fresh_database(url: &str, name: &str) -> String {
    let db = format!("servers_{name}_{}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await.unwrap();
        client.batch_execute(&format!("CREATE DATABASE {db}")).await.unwrap();
    });
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let base = &base[..base.rfind('/').unwrap()];
    format!("{base}/{db}{}", query.map(|q| format!("?{q}")).unwrap_or_default())
}

fn two_servers(db: &str) -> (Server, Server, String) {
    let path = std::path::Path::new(db);
    let a = Server::start(path, &["--no-rate-limits"], &[]);
    let b = Server::start(path, &["--no-rate-limits"], &[]);
    (a, b, support::key(path))
}

#[test]
fn fifty_parallel_increments_over_two_servers_sum_to_fifty() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "sum");
    let (a, b, key) = two_servers(&db);
    let ports = [a.port, b.port];
    let threads: Vec<_> = (0..50)
        .map(|n| {
            let (port, key) = (ports[n % 2], key.clone());
            std::thread::spawn(move || {
                let body = json!({"attributes": [{"external_id": "c", "n": {"inc": 1}}]});
                Conn::open(port).unwrap().post("/users/track/sync", &key, &body).unwrap().status
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 201);
    }
    for server in [&a, &b] {
        let got = support::read_counts(server, &key, &["c".to_string()]);
        assert_eq!(got["c"].0, 50, "read through port {}", server.port);
    }
}

#[test]
fn queued_writes_to_one_user_apply_once_and_in_order_whichever_server_took_them() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "order");
    let (a, b, key) = two_servers(&db);
    let ports = [a.port, b.port];
    // Each user gets ten requests one after another, alternating servers: each
    // sets `last` to its number and counts once.
    let threads: Vec<_> = (0..20)
        .map(|u| {
            let key = key.clone();
            std::thread::spawn(move || {
                let user = format!("u{u}");
                let mut conns = ports.map(|p| Conn::open(p).unwrap());
                for i in 0..10 {
                    let mut body = support::counted_track(&user);
                    body["attributes"][0]["last"] = json!(i);
                    let reply = conns[i % 2].post("/users/track", &key, &body).unwrap();
                    assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let users: Vec<String> = (0..20).map(|u| format!("u{u}")).collect();
    for server in [&a, &b] {
        let counts = support::read_counts(server, &key, &users);
        for u in &users {
            assert_eq!(counts[u], (10, 10, 10), "{u} through port {}: each request once, whole", server.port);
        }
        let mut conn = server.conn();
        let body = json!({"external_ids": users, "fields_to_export": ["external_id", "custom_attributes"]});
        let reply = conn.post("/users/export/ids", &key, &body).unwrap();
        for user in reply.json()["users"].as_array().unwrap() {
            assert_eq!(user["custom_attributes"]["last"], 9, "the last acknowledged write wins: {user}");
        }
    }
}

#[test]
fn kill_9_of_one_server_under_load_loses_nothing_it_acknowledged() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "kill");
    let (mut a, b, key) = two_servers(&db);
    let ports = [a.port, b.port];
    let load = support::Load::start(&ports, &key, 8, "k", 40, false);
    std::thread::sleep(Duration::from_millis(1500));
    a.kill();
    std::thread::sleep(Duration::from_millis(1500));
    let support::Tally { acked, sent, .. } = load.stop();
    assert!(acked.values().sum::<u64>() > 50, "the load ran: {acked:?}");
    // The server left applies the whole queue, the killed server's jobs too.
    let users: Vec<String> = sent.keys().cloned().collect();
    let started = Instant::now();
    let counts = loop {
        let counts = support::read_counts(&b, &key, &users);
        let done = users.iter().all(|u| counts.get(u).map_or(0, |c| c.0) >= acked.get(u).copied().unwrap_or(0));
        if done || started.elapsed() > Duration::from_secs(30) {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for u in &users {
        let (n, m, hits) = counts.get(u).copied().unwrap_or((0, 0, 0));
        let (ok, tried) = (acked.get(u).copied().unwrap_or(0), sent[u]);
        assert!(n >= ok && n <= tried, "{u}: applied {n}, acknowledged {ok}, sent {tried}");
        assert_eq!((m, hits), (n, n), "{u}: every request applied whole");
    }
}

#[test]
fn one_server_runs_the_warehouse_syncs_and_another_takes_over_when_it_dies() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "runner");
    let (a, b, _) = two_servers(&db);
    let says = |s: &Server, what: &str| s.log_text().contains(what);
    let leader_line = "this server runs the warehouse syncs";
    let started = Instant::now();
    while !(says(&a, leader_line) || says(&b, leader_line)) {
        assert!(started.elapsed() < Duration::from_secs(20), "nobody runs the syncs");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(says(&a, leader_line) != says(&b, leader_line), "exactly one runs them");
    let (mut leader, other) = if says(&a, leader_line) { (a, b) } else { (b, a) };
    assert!(says(&other, "another server runs the warehouse syncs"));
    leader.kill();
    let started = Instant::now();
    while !says(&other, leader_line) {
        assert!(started.elapsed() < Duration::from_secs(20), "the other server did not take over");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_workspace_s_rate_limit_is_counted_across_servers() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "limits");
    let path = std::path::Path::new(&db);
    let (a, b) = (Server::start(path, &[], &[]), Server::start(path, &[], &[]));
    let key = support::key(path);
    // `GET /cdi/integrations` allows 50 a minute: not across a minute's end.
    let second = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() % 60;
    if second > 45 {
        std::thread::sleep(Duration::from_secs(61 - second));
    }
    let mut conns = [a.conn(), b.conn()];
    for n in 0..50 {
        let reply = conns[n % 2].send("GET", "/cdi/integrations", &key, None).unwrap();
        assert_eq!(reply.status, 200, "request {n}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.header("x-ratelimit-remaining"), Some((49 - n).to_string().as_str()), "request {n}");
    }
    for conn in &mut conns {
        let reply = conn.send("GET", "/cdi/integrations", &key, None).unwrap();
        assert_eq!(reply.status, 429, "the 51st, on either server");
        assert!(reply.header("x-ratelimit-retry-after").is_some());
    }
}

#[test]
fn commands_take_a_postgres_url_and_a_sync_asked_from_the_command_line_runs_once() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "cli");
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let conn = rusqlite::Connection::open(&warehouse).unwrap();
    conn.execute_batch(
        "CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
         INSERT INTO T VALUES ('2024-01-01T00:00:00Z', 'a', '{\"n\": 1}'), ('2024-01-02T00:00:00Z', 'b', '{\"n\": 2}');",
    )
    .unwrap();
    let source = format!("sqlite:{}", warehouse.display());
    let (ok, id, err) =
        engage_result(&["cdi", "create", "--db", &db, "--name", "t", "--source", &source, "--table", "T"]);
    assert!(ok, "{err}");
    // No server: the command runs the job itself.
    let (ok, out, err) = engage_result(&["cdi", "sync", id.trim(), "--db", &db]);
    assert!(ok && out.contains("\"rows_synced\":2"), "{out} {err}");
    // With a server: the server runs it, and the command waits for it.
    conn.execute("INSERT INTO T VALUES ('2024-01-03T00:00:00Z', 'c', '{\"n\": 3}')", []).unwrap();
    let server = Server::start(std::path::Path::new(&db), &["--no-rate-limits"], &[]);
    let started = Instant::now();
    while !server.log_text().contains("this server runs the warehouse syncs") {
        assert!(started.elapsed() < Duration::from_secs(20), "the server took no lease");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, out, err) = engage_result(&["cdi", "sync", id.trim(), "--db", &db]);
    assert!(ok && out.contains("\"rows_synced\":1") && out.contains("\"job\":2"), "{out} {err}");
    let (_, list, _) = engage_result(&["cdi", "list", "--db", &db]);
    assert!(list.contains("success"), "{list}");
    let (ok, _, err) = engage_result(&["backup", "--db", &db, "--to", dir.path().join("copy.db").to_str().unwrap()]);
    assert!(!ok && err.contains("pg_dump"), "{err}");
}

/// Servers on `db` whose database's queue gets eight partitions when they make it.
fn partitioned_servers(db: &str, n: usize) -> (Vec<Server>, String) {
    let path = std::path::Path::new(db);
    let servers =
        (0..n).map(|_| Server::start(path, &["--no-rate-limits"], &["env", "ENGAGE_QUEUE_PARTITIONS=8"])).collect();
    (servers, support::key(path))
}

#[test]
fn on_a_partitioned_queue_three_servers_apply_each_write_once_in_order_and_survive_a_kill_9() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "parts");
    let (mut servers, key) = partitioned_servers(&db, 3);
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    // In order: each user's ten requests one after another, round the servers.
    let threads: Vec<_> = (0..12)
        .map(|u| {
            let (key, ports) = (key.clone(), ports.clone());
            std::thread::spawn(move || {
                let user = format!("o{u}");
                let mut conns: Vec<Conn> = ports.iter().map(|p| Conn::open(*p).unwrap()).collect();
                for i in 0..10 {
                    let mut body = support::counted_track(&user);
                    body["attributes"][0]["last"] = json!(i);
                    let reply = conns[i % 3].post("/users/track", &key, &body).unwrap();
                    assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Under load, one of the three is killed: the others take its partitions over.
    let load = support::Load::start(&ports, &key, 8, "k", 40, false);
    std::thread::sleep(Duration::from_millis(1500));
    servers[0].kill();
    std::thread::sleep(Duration::from_millis(1500));
    let support::Tally { acked, sent, .. } = load.stop();
    assert!(acked.values().sum::<u64>() > 50, "the load ran: {acked:?}");
    let ordered: Vec<String> = (0..12).map(|u| format!("o{u}")).collect();
    let loaded: Vec<String> = sent.keys().cloned().collect();
    let started = Instant::now();
    let counts = loop {
        let counts = support::read_counts(&servers[1], &key, &loaded);
        let done = loaded.iter().all(|u| counts.get(u).map_or(0, |c| c.0) >= acked.get(u).copied().unwrap_or(0));
        if done || started.elapsed() > Duration::from_secs(30) {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for u in &loaded {
        let (n, m, hits) = counts.get(u).copied().unwrap_or((0, 0, 0));
        let (ok, tried) = (acked.get(u).copied().unwrap_or(0), sent[u]);
        assert!(n >= ok && n <= tried, "{u}: applied {n}, acknowledged {ok}, sent {tried}");
        assert_eq!((m, hits), (n, n), "{u}: every request applied whole");
    }
    for server in &servers[1..] {
        let counts = support::read_counts(server, &key, &ordered);
        for u in &ordered {
            assert_eq!(counts[u], (10, 10, 10), "{u} through port {}: each request once, whole", server.port);
        }
        let body = json!({"external_ids": ordered, "fields_to_export": ["external_id", "custom_attributes"]});
        let reply = server.conn().post("/users/export/ids", &key, &body).unwrap();
        for user in reply.json()["users"].as_array().unwrap() {
            assert_eq!(user["custom_attributes"]["last"], 9, "the last acknowledged write wins: {user}");
        }
    }
    // Everything queued is applied: the killed server's partitions were taken over.
    let started = Instant::now();
    loop {
        let text = servers[1].conn().send("GET", "/metrics", "", None).unwrap();
        let body = String::from_utf8_lossy(&text.body).to_string();
        let pending = body.lines().find(|l| l.starts_with("engage_queue_pending_jobs ")).map(|l| l.ends_with(" 0"));
        if pending == Some(true) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the queue did not drain: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_merge_racing_track_writes_to_both_users_on_two_servers_keeps_every_event_once() {
    let Some(url) = url() else { return };
    let db = fresh_database(&url, "merge");
    let (servers, key) = partitioned_servers(&db, 2);
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let hit = |user: &str| json!({"events": [{"external_id": user, "name": "hit", "time": "2026-11-01T00:00:00Z"}]});
    for user in ["src", "dst"] {
        let reply = Conn::open(ports[0]).unwrap().post("/users/track/sync", &key, &hit(user)).unwrap();
        assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
    }
    // Each user gets thirty events, half through each server, while the merge of
    // src into dst is asked of server b a third of the way in.
    let writers: Vec<_> = ["src", "dst"]
        .into_iter()
        .map(|user| {
            let (key, ports) = (key.clone(), ports.clone());
            std::thread::spawn(move || {
                let mut conns: Vec<Conn> = ports.iter().map(|p| Conn::open(*p).unwrap()).collect();
                let mut acked = Vec::new();
                for i in 0..30 {
                    let reply = conns[i % 2].post("/users/track", &key, &hit(user)).unwrap();
                    assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
                    acked.push(Instant::now());
                    std::thread::sleep(Duration::from_millis(5));
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(60));
    let merge = json!({"merge_updates": [{"identifier_to_merge": {"external_id": "src"}, "identifier_to_keep": {"external_id": "dst"}}]});
    let asked = Instant::now();
    let reply = Conn::open(ports[1]).unwrap().post("/users/merge", &key, &merge).unwrap();
    let answered = Instant::now();
    assert_eq!(reply.status, 202, "{}", String::from_utf8_lossy(&reply.body));
    let mut acked = writers.into_iter().map(|w| w.join().unwrap());
    let (src, _dst) = (acked.next().unwrap(), acked.next().unwrap());
    let before = src.iter().filter(|t| **t < asked).count() as u64;
    let after = src.iter().filter(|t| **t > answered).count() as u64;
    assert!(before > 0 && after > 0, "the merge came in the middle: {before} before, {after} after");
    for server in &servers {
        let counts = support::read_counts(server, &key, &["src".to_string(), "dst".to_string()]);
        let (dst, new_src) = (counts["dst"].2, counts.get("src").map_or(0, |c| c.2));
        // dst: its own 31, and src's 1 and every src event acknowledged before the
        // merge was asked; a new src: those acknowledged after it answered.
        assert_eq!(dst + new_src, 31 + 31, "through port {}: every event once", server.port);
        assert!(dst >= 31 + 1 + before, "through port {}: dst has {dst}, src had {before} before", server.port);
        assert!(new_src >= after, "through port {}: the new src has {new_src}, {after} came after", server.port);
    }
}
