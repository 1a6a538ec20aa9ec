//! The PostgreSQL store against a real server (`ENGAGE_TEST_POSTGRES_URL`, which
//! `tests/postgres.sh` starts; CI must have it): the store conformance suite, each
//! check in a schema of its own, and the schema beside SQLite's.

use super::PgStore;

fn url() -> Option<String> {
    let url = std::env::var("ENGAGE_TEST_POSTGRES_URL").ok();
    assert!(url.is_some() || std::env::var("CI").is_err(), "CI must run this: set ENGAGE_TEST_POSTGRES_URL");
    url
}

/// Runs `sql` on the test server.
fn admin(url: &str, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
    });
}

/// A schema of its own (dropped when the fixture is), and a store in it.
struct Fresh {
    url: String,
    schema: String,
    store: Option<PgStore>,
}

impl Drop for Fresh {
    fn drop(&mut self) {
        drop(self.store.take());
        admin(&self.url, &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
    }
}

fn fresh(url: &str, n: u32) -> Fresh {
    let schema = format!("conformance_{}_{n}", std::process::id());
    admin(url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"));
    let sep = if url.contains('?') { '&' } else { '?' };
    // Partitions, so that the conformance check of partitions runs.
    let store = PgStore::open_with(&format!("{url}{sep}options=-csearch_path%3D{schema}"), 4).unwrap();
    Fresh { url: url.to_string(), schema, store: Some(store) }
}

/// One test per check, each on a schema of its own.
mod checks {
    use super::*;

    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1000);

    fn next() -> Fresh {
        let url = url().expect("checked before");
        fresh(&url, N.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
    }

    engage_core::store_conformance_tests!(when url().is_some(); async || next(), |f: &Fresh| f.store.as_ref().unwrap());
}

#[test]
fn opening_twice_migrates_once() {
    let Some(url) = url() else { return };
    let f = fresh(&url, 100);
    let sep = if url.contains('?') { '&' } else { '?' };
    let again = PgStore::open(&format!("{url}{sep}options=-csearch_path%3D{}", f.schema)).unwrap();
    drop(again);
}

/// The tables both stores have hold the same columns (`migrations/` and
/// `migrations/postgres/` differ in dialect only).
#[test]
fn the_schema_has_the_columns_of_sqlite_s() {
    let Some(url) = url() else { return };
    let f = fresh(&url, 200);
    let dir = tempfile::tempdir().unwrap();
    drop(crate::store::SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let sqlite = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    // PostgreSQL's queue has partitions and its jobs' names: columns more, and no one cursor.
    for (table, extra) in [("docs", &[][..]), ("queue", &["part", "names"][..])] {
        let mut st = sqlite.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid").unwrap();
        let mut theirs: Vec<String> = st.query_map([table], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        theirs.extend(extra.iter().map(|c| c.to_string()));
        let store = f.store.as_ref().unwrap();
        let (schema, table_name) = (f.schema.clone(), table.to_string());
        let ours: Vec<String> = store
            .block(async move {
                let url = std::env::var("ENGAGE_TEST_POSTGRES_URL").unwrap();
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
                tokio::spawn(conn);
                client
                    .query(
                        "SELECT column_name::text FROM information_schema.columns
                         WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                        &[&schema, &table_name],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect()
            })
            .unwrap();
        assert_eq!(ours, theirs, "table {table}");
    }
}

/// A database of the one queue, with a backlog, opened by this version: its jobs
/// are split into partitions, each user's operations in one partition in the order
/// they were queued, none lost, none of those applied before queued again.
#[test]
fn a_queue_with_one_cursor_becomes_partitions_without_losing_or_reordering_a_job() {
    let Some(url) = url() else { return };
    let schema = format!("migrate_{}", std::process::id());
    let mut sql =
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; SET search_path = {schema};");
    sql += "CREATE TABLE engage_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());";
    for (name, migration) in &super::schema::MIGRATIONS[..2] {
        sql += migration;
        sql += &format!("INSERT INTO engage_migrations (name) VALUES ('{name}');");
    }
    // Jobs 1-5 were applied (and deleted) before the upgrade; 6-40 wait, each an
    // event for ten users; job 41 is a record no version reads.
    for seq in 6..=40 {
        let ops: Vec<serde_json::Value> = (0..10)
            .map(|u| {
                let ident = serde_json::json!({"external": format!("u{u}")});
                serde_json::json!({"event": {"target": {"ident": ident, "create": true}, "name": format!("e{seq}"), "time": 1}})
            })
            .collect();
        let job = serde_json::json!({"workspace": "w", "at": 1, "ops": ops}).to_string().replace('\'', "''");
        sql += &format!("INSERT INTO queue (seq, job) VALUES ({seq}, convert_to('{job}', 'UTF8'));");
    }
    sql += "INSERT INTO queue (seq, job) VALUES (41, '\\x00ff'::bytea);";
    sql += "UPDATE queue_cursor SET applied = 5; UPDATE queue_tail SET tail = 41;";
    admin(&url, &sql);
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PgStore::open_with(&format!("{url}{sep}options=-csearch_path%3D{schema}"), 8).unwrap();
    let jobs = pollster::block_on(engage_core::Store::queued(&store, 0, 100_000)).unwrap();
    let mut by_user: std::collections::BTreeMap<String, Vec<(u16, String)>> = Default::default();
    let mut unreadable = Vec::new();
    for job in &jobs {
        assert!(job.seq > 41, "numbered after every job queued before");
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&job.job) else {
            unreadable.push((job.part, job.job.clone()));
            continue;
        };
        for op in value["ops"].as_array().unwrap() {
            let user = op["event"]["target"]["ident"]["external"].as_str().unwrap().to_string();
            by_user.entry(user).or_default().push((job.part, op["event"]["name"].as_str().unwrap().to_string()));
        }
    }
    assert_eq!(unreadable, vec![(0, vec![0x00, 0xff])], "kept whole, for the applier to set aside");
    assert_eq!(by_user.len(), 10);
    let parts: std::collections::BTreeSet<u16> = by_user.values().map(|ops| ops[0].0).collect();
    assert!(parts.len() > 1, "ten users over more than one partition: {parts:?}");
    for (user, ops) in &by_user {
        let names: Vec<String> = ops.iter().map(|(_, n)| n.clone()).collect();
        let want: Vec<String> = (6..=40).map(|s| format!("e{s}")).collect();
        assert_eq!(names, want, "{user}: every job once, in order");
        assert!(ops.iter().all(|(p, _)| *p == ops[0].0), "{user}: in one partition");
    }
    // Each job is found by the names of its users; none is left without names (one
    // would be found by any name).
    let naming = |names: &[i64]| pollster::block_on(engage_core::Store::queued_naming(&store, names)).unwrap();
    for job in jobs.iter().filter(|j| j.job[0] == b'{') {
        let names = engage_core::queue::record_names(&job.job);
        let users = serde_json::from_slice::<serde_json::Value>(&job.job).unwrap()["ops"].as_array().unwrap().len();
        assert_eq!(names.len(), users, "a name for each user of its partition");
        for name in names {
            assert!(naming(&[name]).iter().any(|j| j.seq == job.seq), "found by each of its users' names");
        }
    }
    assert!(naming(&[12_345]).is_empty(), "no job without names");
    drop(store);
    admin(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}

/// Two servers' stores share the partitions out by leases: the first holds them all,
/// the second gets half once the first renews, and all once the first gives its up.
#[test]
fn partitions_are_shared_out_by_leases_and_given_back_at_a_stop() {
    use engage_core::Store;
    let Some(url) = url() else { return };
    let f = fresh(&url, 300);
    let sep = if url.contains('?') { '&' } else { '?' };
    let other = PgStore::open(&format!("{url}{sep}options=-csearch_path%3D{}", f.schema)).unwrap();
    let first = f.store.as_ref().unwrap();
    let lease = |s: &PgStore| pollster::block_on(s.lease_partitions()).unwrap();
    assert_eq!(lease(first), vec![0, 1, 2, 3], "alone: every partition");
    assert_eq!(lease(&other), Vec::<u16>::new(), "none free yet");
    assert_eq!(lease(first), vec![0, 1], "two appliers: the first gives back its extra half");
    assert_eq!(lease(&other), vec![2, 3]);
    assert_eq!(lease(first), vec![0, 1], "renewed, not moved");
    pollster::block_on(first.release_partitions()).unwrap();
    assert_eq!(lease(&other), vec![0, 1, 2, 3], "a stopped server's partitions are taken at once");
    drop(other);
}
