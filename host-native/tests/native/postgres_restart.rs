//! PostgreSQL restarting under load: a server of this test's own (Debian's
//! `postgresql`, as `tests/postgres.sh` installs; CI must have it), stopped and
//! started again while clients send `/users/track`. While it is down, answers are
//! 503 in the platform's shape; once it is back, engage serves again without a
//! restart, and every acknowledged request is applied.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::Server;

/// A PostgreSQL server on a temporary data directory, stopped and removed on drop.
struct PrivatePg {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivatePg {
    fn start() -> Option<PrivatePg> {
        let found = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|versions| {
            let mut bins: Vec<PathBuf> =
                versions.flatten().map(|v| v.path().join("bin")).filter(|b| b.join("pg_ctl").exists()).collect();
            bins.sort();
            bins.pop()
        });
        let Some(bin) = found else {
            assert!(std::env::var("CI").is_err(), "CI must run this: install postgresql (tests/postgres.sh does)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = PrivatePg { bin, dir, port };
        if is_root() {
            Command::new("chown").args(["postgres", pg.dir.path().to_str().unwrap()]).status().unwrap();
        }
        let data = pg.data();
        pg.run("initdb", &["-D", &data, "-A", "trust", "-U", "engage", "--no-sync"]);
        pg.ctl("start");
        pg.run("createdb", &["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "engage", "engage"]);
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_str().unwrap().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://engage@127.0.0.1:{}/engage", self.port)
    }

    /// Runs a PostgreSQL program (as the `postgres` user when this is root: it
    /// refuses to run as root).
    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).output().unwrap();
        assert!(out.status.success(), "{program}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn ctl(&self, what: &str) {
        let data = self.data();
        let log = self.dir.path().join("log");
        let options =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.path().display());
        let mut args = vec!["-D", &data, "-l", log.to_str().unwrap(), "-w", "-m", "fast"];
        if what == "start" {
            args.extend(["-o", &options]);
        }
        args.insert(0, what);
        self.run("pg_ctl", &args);
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.data();
        let _ = std::panic::catch_unwind(|| self.run("pg_ctl", &["stop", "-D", &data, "-w", "-m", "immediate"]));
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

#[test]
fn postgresql_restarting_under_load_gives_503s_then_engage_serves_again() {
    let Some(pg) = PrivatePg::start() else { return };
    let url = pg.url();
    let server = Server::start(Path::new(&url), &["--no-rate-limits"], &[]);
    let key = support::key(Path::new(&url));
    let load = support::Load::start(&[server.port], &key, 4, "r", 30, true);
    std::thread::sleep(Duration::from_millis(1500));
    pg.ctl("stop");
    std::thread::sleep(Duration::from_secs(2));
    pg.ctl("start");
    let back = Instant::now();
    // Serving again without a restart of engage: 201s after the restart.
    let before = load.acked();
    while load.acked() < before + 20 {
        assert!(back.elapsed() < Duration::from_secs(30), "engage did not serve again: {} acknowledged", load.acked());
        std::thread::sleep(Duration::from_millis(100));
    }
    let tally = load.stop();
    assert!(tally.statuses.get(&503).copied().unwrap_or(0) > 0, "the outage was seen: {:?}", tally.statuses);
    assert!(tally.unexpected.is_empty(), "only 201 and 503 answers: {:?}", tally.unexpected);
    // Every acknowledged request applied, whole, once.
    let acked = tally.acked;
    let users: Vec<String> = acked.keys().cloned().collect();
    let started = Instant::now();
    loop {
        let counts = support::read_counts(&server, &key, &users);
        let short: Vec<&String> = users.iter().filter(|u| counts.get(*u).map_or(0, |c| c.0) < acked[*u]).collect();
        if short.is_empty() {
            for u in &users {
                let (n, m, hits) = counts[u];
                assert!(n >= acked[u] && m == n && hits == n, "{u}: {:?} for {} acknowledged", counts[u], acked[u]);
            }
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "not applied: {short:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
