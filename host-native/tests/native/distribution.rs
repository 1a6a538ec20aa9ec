//! The binary as it is handed out: `engage --version`, `engage health` (a
//! container's health check) against a server that is ready and one that is not
//! there, and a playground directory that is still being built when the server
//! starts (`serve.sh` starts the API first): the landing page and `/playground/` say
//! so, then serve it once its files appear, or say its build failed.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{engage_result, Server};

fn get(server: &Server, path: &str) -> support::Reply {
    server.conn().send("GET", path, "", None).unwrap()
}

fn text(reply: &support::Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let (ok, out, _) = engage_result(&["--version"]);
    assert!(ok);
    let version = env!("CARGO_PKG_VERSION");
    let commit =
        Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok().filter(|o| o.status.success());
    match commit {
        Some(c) => {
            let c = String::from_utf8_lossy(&c.stdout).trim().to_string();
            assert_eq!(out.trim(), format!("engage {version} (commit {c})"));
        }
        None => assert!(out.starts_with(&format!("engage {version}")), "{out}"),
    }
}

#[test]
fn health_exits_zero_only_when_a_server_answers_ready() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("engage.db"), &[], &[]);
    let listen = format!("127.0.0.1:{}", server.port);
    let (ok, out, err) = engage_result(&["health", "--listen", &listen]);
    assert!(ok, "{out} {err}");
    assert_eq!(out.trim(), format!("ready: http://{listen}"));
    // The variable the container sets, an every-interface address asked on loopback.
    let out = Command::new(env!("CARGO_BIN_EXE_engage"))
        .arg("health")
        .env("ENGAGE_LISTEN", format!("0.0.0.0:{}", server.port))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(server);
    let (ok, _, err) = engage_result(&["health", "--listen", &listen]);
    assert!(!ok);
    assert!(err.contains(&format!("cannot connect to {listen}")), "{err}");
    let (ok, _, err) = engage_result(&["health", "--listen", "127.0.0.1:0"]);
    assert!(!ok && err.contains("names no port"), "{err}");
}

/// Waits (at most 20 s) until the landing page holds `needle`.
fn landing_until(server: &Server, needle: &str) -> String {
    let started = Instant::now();
    loop {
        let page = text(&get(server, "/"));
        if page.contains(needle) {
            return page;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the landing page never said {needle:?}: {page}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_playground_being_built_is_announced_then_served_once_its_files_are_there() {
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    std::fs::create_dir(&dist).unwrap();
    let server = Server::start(&dir.path().join("engage.db"), &["--playground-dir", dist.to_str().unwrap()], &[]);
    // The API answers at once; the page says the playground is on its way.
    let page = text(&get(&server, "/"));
    assert!(page.contains("being built") && !page.contains(r#"href="/playground/""#), "{page}");
    let waiting = get(&server, "/playground/");
    assert_eq!((waiting.status, waiting.header("retry-after")), (503, Some("5")), "{}", text(&waiting));
    assert!(text(&waiting).contains("is being built"));
    assert_eq!(get(&server, "/playground/pkg/engage_www.js").status, 404, "only the page waits");
    assert_eq!(server.conn().post("/users/export/ids", "nokey", &serde_json::json!({})).unwrap().status, 401);

    // serve.sh leaves a note when the build fails: the page says so.
    std::fs::write(dist.join(".build-failed"), "failed").unwrap();
    landing_until(&server, "its build failed");

    // A build in place: served from then on, and the page links it.
    std::fs::remove_file(dist.join(".build-failed")).unwrap();
    std::fs::create_dir(dist.join("pkg")).unwrap();
    std::fs::write(dist.join("pkg/engage_www.js"), "export {}").unwrap();
    std::fs::write(dist.join("index.html"), "<!doctype html><title>playground</title>").unwrap();
    landing_until(&server, r#"href="/playground/""#);
    let index = get(&server, "/playground/");
    assert_eq!((index.status, text(&index).as_str()), (200, "<!doctype html><title>playground</title>"));
    assert_eq!(text(&get(&server, "/playground/pkg/engage_www.js")), "export {}");
    assert!(server.log_text().contains("the playground is built"), "{}", server.log_text());
}
