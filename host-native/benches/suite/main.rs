//! The performance suite: one command, one table.
//!
//! `cargo bench -p engage --bench suite` seeds the data sets once (10k, 1M and 10M
//! profiles, through the store in bulk, kept under `target/bench`), runs the
//! release `engage serve` in a process of its own with default settings on a fresh
//! copy for each phase, loads it from this process, and prints one Markdown table:
//! endpoint, data set, offered and achieved req/s, p50/p95/p99, the server's peak
//! RSS, and what the phase compares (applied rate, backlog, ratio to a baseline).
//!
//! Phases (`BENCH_ONLY=scale,cache,sustained,burst,endpoints,baselines,rate,cdi` picks some):
//! - scale: full track batches offered at 1,000/s on every data set, uniform and
//!   Zipf users: acknowledgements, the rate applied during the load, memory;
//! - cache: the same on 1M with the old 1 GiB profile cache, against the default;
//! - sustained: 1,000/s for 10 minutes on 1M; burst: 2,000/s for 60 s;
//! - endpoints: closed loop, 32 connections, 15 s each, on 1M;
//! - baselines: acknowledged throughput against a bare hyper + serde server, and
//!   applied throughput against a bare rusqlite writer of the same objects;
//! - rate: the sustainable rate of full track batches on 1M (backlog flat for a
//!   minute), searched for Engage and for a bare pipeline the same way (`rate.rs`);
//! - cdi: a warehouse sync of 1M users rows from SQLite and PostgreSQL against a
//!   plain copy of the same table (see `cdi.rs`).
//!
//! `BENCH_ONLY=seed-only` only makes the seeds. `BENCH_QUICK=1` runs every phase
//! briefly on 100k profiles (a smoke run);
//! `BENCH_SETS=10k,1m` picks the data sets of the scale phase; `BENCH_TIME=0.25`
//! runs every phase a quarter as long; `BENCH_ENDPOINTS=export` runs only the
//! endpoints (and their baselines) whose line holds that text.

mod baseline;
mod bodies;
mod cdi;
mod load;
mod rate;
mod seed;
mod server;
mod warehouse;

use std::sync::Arc;
use std::time::Duration;

use bodies::{Rng, Users, BATCH_OBJECTS};
use load::{Outcome, Req, Target};
use server::Server;

/// One line of the table.
struct Row {
    endpoint: String,
    set: String,
    offered: String,
    outcome: Outcome,
    rss_mib: f64,
    /// Its anonymous part (heap), MiB.
    anon_mib: f64,
    note: String,
}

struct Settings {
    quick: bool,
    only: Option<Vec<String>>,
    sets: Vec<u64>,
    /// The data set of the single-size phases.
    main_set: u64,
    /// Scales every phase's duration (`BENCH_TIME`, e.g. 0.25 for a quarter).
    time: f64,
}

impl Settings {
    fn from_env() -> Settings {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
        let only = std::env::var("BENCH_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
        let parse = |s: &str| match s.trim().to_ascii_lowercase().as_str() {
            "10k" => 10_000,
            "100k" => 100_000,
            "1m" => 1_000_000,
            "10m" => 10_000_000,
            other => other.parse().unwrap_or_else(|_| panic!("BENCH_SETS: unknown data set '{other}'")),
        };
        let default_sets = if quick { "100k" } else { "10k,1m,10m" };
        let sets = std::env::var("BENCH_SETS").unwrap_or_else(|_| default_sets.into()).split(',').map(parse).collect();
        let time = std::env::var("BENCH_TIME").ok().map_or(1.0, |t| t.parse().expect("BENCH_TIME: a number"));
        Settings { quick, only, sets, main_set: if quick { 100_000 } else { 1_000_000 }, time }
    }

    fn runs(&self, phase: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.iter().any(|p| p == phase))
    }

    /// `full` seconds, or a few in a quick run, times `BENCH_TIME` (default 1).
    fn secs(&self, full: u64) -> u64 {
        let secs = if self.quick { (full / 20).clamp(3, 10) } else { full };
        ((secs as f64 * self.time).round() as u64).max(3)
    }
}

fn set_name(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// 1,000 distinct full batches (the load cycles through them).
fn batches(profiles: u64, users: Users) -> Arc<Vec<Req>> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    Arc::new((0..1000).map(|_| Req::post("/users/track", bodies::track_batch(&mut rng, profiles, users))).collect())
}

/// Offers full track batches at `rate`/s for `seconds` on a fresh server, and reads
/// how much of it was applied by the end of the load.
fn track_open_loop(
    rt: &tokio::runtime::Runtime,
    profiles: u64,
    users: Users,
    rate: u64,
    seconds: u64,
    serve_flags: &[&str],
    label: &str,
) -> (Row, f64) {
    let server = Server::start(&seed::seed(profiles), serve_flags);
    let requests = batches(profiles, users);
    server.reset_peak();
    let out = load::open_loop(rt, &server.target(), requests, 201, rate, seconds, 64);
    let pending = server.pending();
    let applied = (out.ok as u64).saturating_sub(pending) as f64 / seconds as f64;
    let note = format!(
        "{users}: applied {applied:.0} batches/s ({:.0}k objects/s) during the load; backlog at the end {pending} = {:.1} s of load",
        applied * BATCH_OBJECTS / 1000.0,
        pending as f64 / rate as f64,
        users = users.name(),
    );
    let row = Row {
        endpoint: format!("POST /users/track (75+75+75){label}"),
        set: set_name(profiles),
        offered: format!("{rate}/s × {seconds} s"),
        rss_mib: server.peak_rss_mib(),
        anon_mib: server.peak_anon_mib(),
        outcome: out,
        note,
    };
    (row, applied)
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` probes; nothing to run there.
    }
    let s = Settings::from_env();
    let rt = load::runtime();
    let mut rows: Vec<Row> = Vec::new();
    let main_set = s.main_set;
    let started = std::time::Instant::now();
    // Other work on the machine skews every figure: the table says how busy it was.
    let load_at_start = load_average();
    // Every data set first, so no phase includes seeding; the time of any seeded now is reported.
    let mut seeded = Vec::new();
    let mut needed = s.sets.clone();
    needed.push(main_set);
    needed.sort_unstable();
    needed.dedup();
    // The cdi phase needs no seeded profiles.
    let seeded_phases = ["scale", "cache", "sustained", "burst", "endpoints", "baselines", "rate", "seed-only"];
    if !seeded_phases.iter().any(|p| s.only.as_ref().is_none_or(|o| o.iter().any(|x| x == p))) {
        needed.clear();
    }
    for &n in &needed {
        let t = std::time::Instant::now();
        let fresh = !seed::root().join(format!("seed-v5-{n}.db")).exists();
        seed::seed(n);
        if fresh {
            seeded.push(format!("{} profiles seeded in {:.0} s", set_name(n), t.elapsed().as_secs_f64()));
        }
    }
    if s.only.as_ref().is_some_and(|o| o.iter().any(|p| p == "seed-only")) {
        return;
    }

    if s.runs("scale") {
        rows.extend(scale(&rt, &s));
    }
    if s.runs("cache") {
        let (small_row, small) = track_open_loop(&rt, main_set, Users::Uniform, 1000, s.secs(60), &[], "");
        let (mut big_row, big) =
            track_open_loop(&rt, main_set, Users::Uniform, 1000, s.secs(60), &["--cache-mib", "1024"], ", 1 GiB cache");
        big_row.note += &format!("; default cache applies {:.0}% of this", 100.0 * small / big.max(1e-9));
        for row in [small_row, big_row] {
            eprintln!("{}", line(&row));
            rows.push(row);
        }
    }
    if s.runs("sustained") {
        let (row, _) = track_open_loop(&rt, main_set, Users::Uniform, 1000, s.secs(600), &[], ", sustained");
        eprintln!("{}", line(&row));
        rows.push(row);
    }
    if s.runs("burst") {
        let (row, _) = track_open_loop(&rt, main_set, Users::Uniform, 2000, s.secs(60), &[], ", burst");
        eprintln!("{}", line(&row));
        rows.push(row);
    }
    if s.runs("endpoints") {
        let server = Server::start(&seed::seed(main_set), &[]);
        let group = server.group.clone();
        let p = main_set;
        type Next = Arc<dyn Fn(u64) -> Req + Send + Sync>;
        let endpoints: Vec<(&str, u16, Next)> = vec![
            (
                "POST /users/track/sync (1 event)",
                201,
                Arc::new(move |n| Req::post("/users/track/sync", bodies::sync_event(n, p))),
            ),
            (
                "POST /users/export/ids (50 users)",
                201,
                Arc::new(move |n| Req::post("/users/export/ids", bodies::export_50(n, p))),
            ),
            ("GET /subscription/user/status", 200, Arc::new(move |n| Req::get(bodies::user_status(n, p)))),
            (
                "POST /users/identify (1 alias)",
                201,
                Arc::new(move |n| Req::post("/users/identify", bodies::identify(n, p))),
            ),
            (
                "POST /v2/subscription/status/set (1 user)",
                201,
                Arc::new(move |n| Req::post("/v2/subscription/status/set", bodies::status_set(n, p, &group))),
            ),
            // Last: merging removes the merged profiles.
            ("POST /users/merge (1 pair)", 202, Arc::new(move |n| Req::post("/users/merge", bodies::merge(n, p)))),
        ];
        let picked = |name: &str| std::env::var("BENCH_ENDPOINTS").map_or(true, |f| name.contains(f.as_str()));
        for (name, expect, next) in endpoints.into_iter().filter(|(name, ..)| picked(name)) {
            server.reset_peak();
            let seconds = s.secs(15);
            let out = load::closed_loop(&rt, &server.target(), next, expect, 32, seconds);
            let row = Row {
                endpoint: name.into(),
                set: set_name(p),
                offered: "closed loop, 32 conns".into(),
                rss_mib: server.peak_rss_mib(),
                anon_mib: server.peak_anon_mib(),
                outcome: out,
                note: String::new(),
            };
            eprintln!("{}", line(&row));
            rows.push(row);
        }
        drop(server);
        // Their baselines in the same run, on the same requests (issue 39's ratios).
        let bare: [(&str, &str, u16, String, Next); 3] = [
            (
                "POST /users/track/sync (1 event)",
                "bare hyper + rusqlite, one durable read-modify-write transaction per request",
                201,
                baseline::bare_sync_server(&rt, p),
                Arc::new(move |n| Req::post("/users/track/sync", bodies::sync_event(n, p))),
            ),
            (
                "POST /users/export/ids (50 users)",
                "bare hyper + rusqlite, 50 documents read by key and written as JSON",
                201,
                baseline::bare_export_server(&rt, p),
                Arc::new(move |n| Req::post("/users/export/ids", bodies::export_50(n, p))),
            ),
            (
                "POST /users/export/ids (50 users)",
                "the same bare reader on a copy of Engage's seed: each identifier entry by key, then its profile by row",
                201,
                baseline::bare_export_on_seed_server(&rt, &seed::seed(p)),
                Arc::new(move |n| Req::post("/users/export/ids", bodies::export_50(n, p))),
            ),
        ];
        for (ours, what, expect, base, next) in bare.into_iter().filter(|(ours, ..)| picked(ours)) {
            let out = load::closed_loop(&rt, &Target { base, key: String::new() }, next, expect, 32, s.secs(15));
            if let Some(row) = rows.iter_mut().find(|r| r.endpoint == ours) {
                // The first baseline of an endpoint is its target's; a second one (the
                // export's floor on Engage's own tables) is added after it.
                let label = if row.note.is_empty() { "bare" } else { "bare on Engage's tables" };
                let ratio = format!(
                    "Engage / {label} = {:.2} ({label} {:.0} req/s)",
                    row.outcome.rate / out.rate.max(1e-9),
                    out.rate
                );
                row.note = if row.note.is_empty() { ratio } else { format!("{}; {ratio}", row.note) };
            }
            let row = Row {
                endpoint: what.into(),
                set: set_name(p),
                offered: "closed loop, 32 conns".into(),
                rss_mib: f64::NAN,
                anon_mib: f64::NAN,
                outcome: out,
                note: format!("baseline of {ours}"),
            };
            eprintln!("{}", line(&row));
            rows.push(row);
        }
    }
    if s.runs("baselines") {
        let seconds = s.secs(15);
        let requests = batches(main_set, Users::Uniform);
        let bare = load::closed_loop(
            &rt,
            &Target { base: baseline::bare_server(&rt), key: String::new() },
            cycle(requests.clone()),
            201,
            32,
            seconds,
        );
        let durable = load::closed_loop(
            &rt,
            &Target { base: baseline::bare_durable_server(&rt), key: String::new() },
            cycle(requests.clone()),
            201,
            32,
            seconds,
        );
        // Acknowledging capacity: without the backlog bound, which (on by default) turns
        // a closed loop into quick 503s once 30 s of applying is queued.
        let server = Server::start(&seed::seed(main_set), &["--max-backlog-secs", "0"]);
        server.reset_peak();
        let ours = load::closed_loop(&rt, &server.target(), cycle(requests.clone()), 201, 32, seconds);
        let ack_ratio = ours.rate / bare.rate.max(1e-9);
        let durable_ratio = ours.rate / durable.rate.max(1e-9);
        let (rss, anon) = (server.peak_rss_mib(), server.peak_anon_mib());
        // The backlog that load left, applied with nothing else running, against the
        // bare writer applying the same kind of objects.
        let applied = server.drain_rate(Duration::from_secs(s.secs(30))) * BATCH_OBJECTS;
        drop(server);
        // The bare durable server that also applies what it acknowledges, as Engage
        // must (the sustainable rate needs its applier running): the floor of
        // acknowledging on these cores once applying takes its share of them.
        let pipeline = baseline::bare_pipeline(&rt, main_set);
        let piped = load::closed_loop(
            &rt,
            &Target { base: pipeline.base.clone(), key: String::new() },
            cycle(requests.clone()),
            201,
            32,
            seconds,
        );
        drop(pipeline);
        let piped_ratio = ours.rate / piped.rate.max(1e-9);
        let piped_durable = piped.rate / durable.rate.max(1e-9);
        let bare_applied = baseline::bare_writer(main_set, Users::Uniform, s.secs(30));
        rows.push(Row {
            endpoint: "bare hyper + serde server, track batches".into(),
            set: "-".into(),
            offered: "closed loop, 32 conns".into(),
            rss_mib: f64::NAN,
            anon_mib: f64::NAN,
            outcome: bare,
            note: "parses into serde_json::Value, answers 201, stores nothing".into(),
        });
        rows.push(Row {
            endpoint: "bare hyper + serde + group fdatasync, track batches".into(),
            set: "-".into(),
            offered: "closed loop, 32 conns".into(),
            rss_mib: f64::NAN,
            anon_mib: f64::NAN,
            outcome: durable,
            note: "parses, appends the body to a file, one fdatasync per group of waiting requests, then 201".into(),
        });
        rows.push(Row {
            endpoint: "bare pipeline under the same load: group fdatasync, rusqlite writer applying behind".into(),
            set: set_name(main_set),
            offered: "closed loop, 32 conns".into(),
            rss_mib: f64::NAN,
            anon_mib: f64::NAN,
            outcome: piped,
            note: format!("acknowledged / bare server with group fdatasync = {piped_durable:.2}"),
        });
        rows.push(Row {
            endpoint: "POST /users/track (75+75+75), max".into(),
            set: set_name(main_set),
            offered: "closed loop, 32 conns".into(),
            rss_mib: rss,
            anon_mib: anon,
            outcome: ours,
            note: format!(
                "acknowledged / bare server = {ack_ratio:.2}, / bare server with group fdatasync = {durable_ratio:.2}, / bare pipeline = {piped_ratio:.2}; backlog then applied at {:.0}k objects/s, bare rusqlite writer {:.0}k objects/s: ratio {:.2}",
                applied / 1000.0,
                bare_applied / 1000.0,
                applied / bare_applied.max(1e-9)
            ),
        });
        for row in &rows[rows.len() - 4..] {
            eprintln!("{}", line(row));
        }
    }

    if s.runs("rate") {
        rows.extend(sustainable_rates(&rt, &s));
    }

    if s.runs("cdi") {
        rows.extend(cdi::phase(if s.quick { 100_000 } else { 1_000_000 }));
    }

    let generator_peak = server::rss_kib(std::process::id(), "VmHWM:") as f64 / 1024.0;
    println!();
    println!(
        "Engage performance suite: {} cores, {}, load average {} at the start and {} at the end, {:.0} min{}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu(),
        load_at_start,
        load_average(),
        started.elapsed().as_secs_f64() / 60.0,
        if s.quick { " (BENCH_QUICK: short phases, 100k profiles)" } else { "" }
    );
    println!();
    println!("| endpoint | data set | offered | achieved req/s | ok / sent | p50 ms | p95 ms | p99 ms | server peak RSS (heap) MiB | notes |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", line(row));
    }
    println!();
    println!("Load generator (this process) peak RSS: {generator_peak:.0} MiB");
    for line in seeded {
        println!("Seed: {line} (through the store, 20,000 profiles per commit)");
    }
}

/// The scale phase: full batches at 1,000/s on every data set, uniform and Zipf.
/// Each set's applied rate is put against the main set's, and beside it the bare
/// writer's (`baseline::bare_writer`, nothing else running) on tables of the same
/// sizes: how much of the fall with size the storage alone makes (issue 68's floor
/// for applied at 10M against 1M).
fn scale(rt: &tokio::runtime::Runtime, s: &Settings) -> Vec<Row> {
    let mut rows = Vec::new();
    for users in [Users::Uniform, Users::Zipf] {
        let mut applied = Vec::new();
        for &profiles in &s.sets {
            let (row, rate) = track_open_loop(rt, profiles, users, 1000, s.secs(60), &[], "");
            eprintln!("{}", line(&row));
            rows.push(row);
            applied.push((profiles, rate));
        }
        let Some(&(_, main)) = applied.iter().find(|a| a.0 == s.main_set) else { continue };
        let bare: Vec<(u64, f64)> =
            s.sets.iter().map(|&p| (p, baseline::bare_writer(p, users, s.secs(30)) / BATCH_OBJECTS)).collect();
        let bare_main = bare.iter().find(|b| b.0 == s.main_set).map_or(f64::NAN, |b| b.1);
        for (&(profiles, ours), &(_, theirs)) in applied.iter().zip(&bare) {
            let row = Row {
                endpoint: "bare rusqlite writer, full batches' objects".into(),
                set: set_name(profiles),
                offered: "as fast as it goes, alone".into(),
                rss_mib: f64::NAN,
                anon_mib: f64::NAN,
                outcome: Outcome { sent: 0, ok: 0, rate: theirs, latencies: Vec::new(), first_failure: None },
                note: format!(
                    "{}: batches/s applied; at {} / at {} = {:.2}; Engage's applied at {} / at {} = {:.2}",
                    users.name(),
                    set_name(profiles),
                    set_name(s.main_set),
                    theirs / bare_main.max(1e-9),
                    set_name(profiles),
                    set_name(s.main_set),
                    ours / main.max(1e-9),
                ),
            };
            eprintln!("{}", line(&row));
            rows.push(row);
        }
    }
    rows
}

/// The sustainable rate of full track batches on the main data set, Engage's and the
/// bare pipeline's, searched the same way; two rows: each one's highest flat probe.
fn sustainable_rates(rt: &tokio::runtime::Runtime, s: &Settings) -> Vec<Row> {
    let (set, seconds) = (s.main_set, s.secs(60));
    let requests = batches(set, Users::Uniform);
    // Both start near what Engage applies under overload at 1M (176-260 batches/s).
    let start = if s.quick { 400 } else { 160 };
    let mut peaks = Vec::new();
    let (ours, our_probes) = rate::search(start, |r| {
        let server = Server::start(&seed::seed(set), &[]);
        server.reset_peak();
        let p = rate::probe(rt, &server.target(), requests.clone(), r, seconds, || server.pending());
        peaks.push((r, server.peak_rss_mib(), server.peak_anon_mib()));
        p
    });
    let (bare, bare_probes) = rate::search(start, |r| {
        let pipeline = baseline::bare_pipeline(rt, set);
        let target = Target { base: pipeline.base.clone(), key: String::new() };
        rate::probe(rt, &target, requests.clone(), r, seconds, || pipeline.pending())
    });
    let ratio = ours as f64 / (bare as f64).max(1e-9);
    let row = |endpoint: &str, best: u64, probes: Vec<rate::Probe>, note: String, mem: Option<(f64, f64)>| {
        let trail = probes.iter().map(rate::Probe::describe).collect::<Vec<_>>().join("; ");
        let outcome = probes.into_iter().find(|p| p.rate == best && p.flat()).map(|p| p.out).unwrap_or(Outcome {
            sent: 0,
            ok: 0,
            rate: 0.0,
            latencies: Vec::new(),
            first_failure: Some("no rate probed was flat".into()),
        });
        Row {
            endpoint: endpoint.into(),
            set: set_name(set),
            offered: format!("sustainable: {best}/s × {seconds} s"),
            outcome,
            rss_mib: mem.map_or(f64::NAN, |m| m.0),
            anon_mib: mem.map_or(f64::NAN, |m| m.1),
            note: format!("{note}; probes: {trail}"),
        }
    };
    let mem = peaks.iter().find(|p| p.0 == ours).map(|p| (p.1, p.2));
    let rows = vec![
        row(
            "POST /users/track (75+75+75), sustainable rate",
            ours,
            our_probes,
            format!("Engage / bare pipeline = {ratio:.2} ({ours} vs {bare} batches/s)"),
            mem,
        ),
        row(
            "bare pipeline: hyper + serde, group fdatasync, rusqlite writer",
            bare,
            bare_probes,
            "baseline of the sustainable rate".into(),
            None,
        ),
    ];
    for r in &rows {
        eprintln!("{}", line(r));
    }
    rows
}

/// A closed loop's requests taken in turn from a fixed list.
fn cycle(requests: Arc<Vec<Req>>) -> Arc<dyn Fn(u64) -> Req + Send + Sync> {
    Arc::new(move |n| requests[(n % requests.len() as u64) as usize].clone())
}

fn line(r: &Row) -> String {
    let o = &r.outcome;
    let failure = o.first_failure.as_ref().map(|f| format!("; first failure: {f}")).unwrap_or_default();
    format!(
        "| {} | {} | {} | {:.0} | {} / {} | {:.1} | {:.1} | {:.1} | {} | {}{} |",
        r.endpoint,
        r.set,
        r.offered,
        o.rate,
        o.ok,
        o.sent,
        o.pct(0.5),
        o.pct(0.95),
        o.pct(0.99),
        if r.rss_mib.is_nan() { "-".to_string() } else { format!("{:.0} ({:.0})", r.rss_mib, r.anon_mib) },
        r.note,
        failure
    )
}

/// The 1-minute load average.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .unwrap_or_default()
}

fn cpu() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    cpu
}
