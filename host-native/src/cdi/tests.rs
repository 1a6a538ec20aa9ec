//! The runner's own tests: jobs cut short and resumed, on SQLite and PostgreSQL
//! sources (the PostgreSQL ones need `ENGAGE_TEST_POSTGRES_URL`; CI sets it).

use engage_core::provision::WorkspaceName;
use engage_core::warehouse::{DataKind, Spec};

use super::*;
use crate::store::SqliteStore;

/// A source that fails after handing out `left` rows, as a connection lost
/// part way through a job.
struct Failing {
    inner: Box<dyn Source>,
    left: usize,
}

impl Source for Failing {
    fn columns(&mut self, table: &str) -> Result<Vec<String>, SourceError> {
        self.inner.columns(table)
    }

    fn rows_after(
        &mut self,
        table: &str,
        columns: &Columns,
        after: Option<&Cursor>,
        each: &mut dyn FnMut(Read) -> Result<(), String>,
    ) -> Result<(), SourceError> {
        let mut left = self.left;
        self.inner.rows_after(table, columns, after, &mut |read| {
            if left == 0 {
                return Err("connection lost".into());
            }
            left -= 1;
            each(read)
        })
    }
}

#[test]
fn a_job_cut_short_keeps_its_committed_batches_and_the_next_resumes_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let conn = rusqlite::Connection::open(&warehouse).unwrap();
    conn.execute_batch("CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT)").unwrap();
    for n in 0..2500 {
        conn.execute(
            "INSERT INTO T VALUES (?1, ?2, '{\"visits\": {\"inc\": 1}}')",
            [format!("2024-01-01T00:{:02}:{:02}Z", n / 60, n % 60), format!("u{}", n % 10)],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&dir.path().join("engage.db")).unwrap();
    let ws = WorkspaceName::parse("w").unwrap();
    let spec = Spec {
        name: "t".into(),
        source: format!("sqlite:{}", warehouse.display()),
        table: "T".into(),
        kind: DataKind::Users,
        schedule_secs: None,
        contact_emails: vec![],
    };
    let i = pollster::block_on(warehouse::create(&store, &ws, &spec, ctx())).unwrap();
    // The first job loses its source after 1,500 rows: one batch of 1,000 is
    // committed, the rows after it are not.
    let begun = pollster::block_on(warehouse::begin(&store, &i.id, ctx())).unwrap();
    let mut failing = Failing { inner: Box::new(sqlite::SqliteSource::open(&spec.source).unwrap()), left: 1500 };
    let err = sync_from(&store, &begun, &mut failing, 1000, &ctx).unwrap_err();
    assert!(matches!(err, SourceError::Read(ref m) if m.contains("connection lost")), "{err:?}");
    let cut =
        pollster::block_on(warehouse::finish(&store, &begun, Some((JobStatus::Error, "lost".into())), ctx())).unwrap();
    assert_eq!((cut.status, cut.rows_synced), (JobStatus::Error, 1000));
    // The next job reads after the committed batch: 1,500 rows, none twice.
    let next = run(&store, &pollster::block_on(warehouse::integration(&store, &i.id)).unwrap().unwrap(), &ctx).unwrap();
    assert_eq!((next.status, next.rows_synced), (JobStatus::Success, 1500));
    assert_eq!(next.last_timestamp_synced, Some(Timestamp::parse("2024-01-01T00:41:39Z").unwrap()));
    // Every row counted once: ten users, 250 visits each.
    let engine = engage_core::Engine::new(store, engage_core::Config::default());
    let perms = engage_core::provision::Permission::ALL.to_vec();
    let key = pollster::block_on(engage_core::provision::create_key(engine.store(), &ws, perms, ctx())).unwrap();
    let ids: Vec<String> = (0..10).map(|n| format!("u{n}")).collect();
    let req = engage_core::Request::new(engage_core::Method::Post, "/users/export/ids")
        .header("Authorization", &format!("Bearer {key}"))
        .body(serde_json::json!({"external_ids": ids}).to_string());
    let users = pollster::block_on(engine.handle(req, ctx())).json_body()["users"].clone();
    let visits: Vec<i64> =
        users.as_array().unwrap().iter().map(|u| u["custom_attributes"]["visits"].as_i64().unwrap()).collect();
    assert_eq!(visits, vec![250; 10]);
}

fn integration_on(dir: &std::path::Path, store: &SqliteStore, table: &str) -> Integration {
    let spec = Spec {
        name: "t".into(),
        source: format!("sqlite:{}", dir.join("w.db").display()),
        table: table.into(),
        kind: DataKind::Users,
        schedule_secs: None,
        contact_emails: vec![],
    };
    let ws = WorkspaceName::parse("w").unwrap();
    pollster::block_on(warehouse::create(store, &ws, &spec, ctx())).unwrap()
}

#[test]
fn sqlite_timestamps_in_text_offsets_and_numbers_order_as_one_clock() {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("w.db")).unwrap();
    conn.execute_batch(
        "CREATE TABLE T (UPDATED_AT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
         INSERT INTO T VALUES ('2024-01-01T00:00:04+01:00', 'a', '{}');
         INSERT INTO T VALUES (1704067203, 'b', '{}');
         INSERT INTO T VALUES ('1704067202.5', 'c', '{}');
         INSERT INTO T VALUES ('2024-01-01 00:00:01', 'd', '{}');
         INSERT INTO T VALUES ('2024-01-01T00:00:00.250Z', 'e', '{}');",
    )
    .unwrap();
    let mut source = sqlite::SqliteSource::open(&format!("sqlite:{}", dir.path().join("w.db").display())).unwrap();
    let columns = Columns::check(&source.columns("T").unwrap(), DataKind::Users).unwrap();
    let mut seen = Vec::new();
    source
        .rows_after("T", &columns, None, &mut |r| {
            if let Read::Row(r) = r {
                seen.push((r.external_id.unwrap(), r.updated_at.0 - 1_704_067_200_000));
            }
            Ok(())
        })
        .unwrap();
    let expected = [("a", -3_596_000), ("e", 250), ("d", 1000), ("c", 2500), ("b", 3000)];
    assert_eq!(seen, expected.map(|(x, ms)| (x.to_string(), ms)));
}

/// Every profile's `visits`, by external id or alias name (the store is handed to
/// an engine to ask it).
fn visits(store: SqliteStore, ws: &WorkspaceName, who: &std::collections::BTreeMap<String, i64>) -> Vec<(String, i64)> {
    let engine = engage_core::Engine::new(store, engage_core::Config::default());
    let perms = engage_core::provision::Permission::ALL.to_vec();
    let key = pollster::block_on(engage_core::provision::create_key(engine.store(), ws, perms, ctx())).unwrap();
    let mut found = Vec::new();
    for name in who.keys() {
        let body = match name.strip_prefix("alias:") {
            Some(alias) => serde_json::json!({"user_aliases": [{"alias_name": alias, "alias_label": "lbl"}]}),
            None => serde_json::json!({"external_ids": [name]}),
        };
        let req = engage_core::Request::new(engage_core::Method::Post, "/users/export/ids")
            .header("Authorization", &format!("Bearer {key}"))
            .body(body.to_string());
        let users = pollster::block_on(engine.handle(req, ctx())).json_body()["users"].clone();
        found.push((name.clone(), users[0]["custom_attributes"]["visits"].as_i64().unwrap_or(0)));
    }
    found
}

/// One fixture row: its time as the source writes it, external id, alias name,
/// email and payload.
type FixtureRow = (String, Option<String>, Option<String>, Option<String>, &'static str);

/// 300 rows at distinct times, then 2,600 rows sharing one `UPDATED_AT` (written
/// two ways: `same` and `alt`, one millisecond), then 200 rows after: in the group,
/// runs of identical rows, null and non-null columns. Each row adds 1 to its
/// user's `visits`; returns the rows and every user's expected count.
fn group_fixture(same: &str, alt: &str) -> (Vec<FixtureRow>, std::collections::BTreeMap<String, i64>) {
    let mut rows: Vec<FixtureRow> = Vec::new();
    let one = r#"{"visits": {"inc": 1}}"#;
    for n in 0..300 {
        rows.push((
            format!("2024-01-01T{:02}:{:02}:00Z", n / 60, n % 60),
            Some(format!("b{}", n % 30)),
            None,
            None,
            one,
        ));
    }
    for n in 0..2600usize {
        let j = n % 50;
        let (external, alias) = if j % 5 == 0 { (None, Some(format!("a{j}"))) } else { (Some(format!("g{j}")), None) };
        let email = (j % 2 == 1).then(|| format!("g{j}@example.com"));
        // An alias-only profile is made only when asked for.
        let payload = match (n % 3 == 0, alias.is_some()) {
            (false, false) => one,
            (true, false) => r#"{"visits": {"inc": 1}, "x": 1}"#,
            (false, true) => r#"{"visits": {"inc": 1}, "_update_existing_only": false}"#,
            (true, true) => r#"{"visits": {"inc": 1}, "x": 1, "_update_existing_only": false}"#,
        };
        let time = if n % 4 == 0 { alt } else { same };
        rows.push((time.to_string(), external, alias, email, payload));
    }
    for n in 0..200 {
        rows.push((
            format!("2024-01-03T00:{:02}:{:02}Z", n / 60, n % 60),
            Some(format!("c{}", n % 20)),
            None,
            None,
            one,
        ));
    }
    let mut expected = std::collections::BTreeMap::new();
    for (_, external, alias, _, _) in &rows {
        let name = external.clone().unwrap_or_else(|| format!("alias:{}", alias.clone().unwrap()));
        *expected.entry(name).or_insert(0) += 1;
    }
    (rows, expected)
}

/// Syncs the fixture's table through two jobs cut short inside the group, then a
/// whole one, then one with nothing new: every row is applied once.
fn a_group_resumes_where_it_stopped(store: SqliteStore, i: &Integration, open: &dyn Fn() -> Box<dyn Source>) {
    let expected = group_fixture("", "").1;
    let total: i64 = expected.values().sum();
    let mut synced = 0;
    for left in [1500, 1200] {
        let begun = pollster::block_on(warehouse::begin(&store, &i.id, ctx())).unwrap();
        let err = sync_from(&store, &begun, &mut Failing { inner: open(), left }, 1000, &ctx).unwrap_err();
        assert!(matches!(err, SourceError::Read(ref m) if m.contains("connection lost")), "{err:?}");
        let cut = pollster::block_on(warehouse::finish(&store, &begun, Some((JobStatus::Error, "lost".into())), ctx()))
            .unwrap();
        assert_eq!(cut.rows_synced, 1000, "one batch committed");
        synced += cut.rows_synced;
        let now = pollster::block_on(warehouse::integration(&store, &i.id)).unwrap().unwrap();
        let within = now.cursor.and_then(|c| c.within).expect("the cursor stands inside the group");
        assert!(within.seen >= 1);
    }
    let current = pollster::block_on(warehouse::integration(&store, &i.id)).unwrap().unwrap();
    let last = run(&store, &current, &ctx).unwrap();
    assert_eq!((last.status, last.rows_synced + synced), (JobStatus::Success, total as u64));
    assert_eq!(last.last_timestamp_synced, Some(Timestamp::parse("2024-01-03T00:03:19Z").unwrap()));
    let current = pollster::block_on(warehouse::integration(&store, &i.id)).unwrap().unwrap();
    assert_eq!(current.cursor.as_ref().and_then(|c| c.within.as_ref()), None, "the group is done");
    assert_eq!(run(&store, &current, &ctx).unwrap().rows_synced, 0);
    let ws = i.workspace.clone();
    let want: Vec<(String, i64)> = expected.clone().into_iter().collect();
    assert_eq!(visits(store, &ws, &expected), want);
}

#[test]
fn a_sqlite_group_larger_than_a_batch_syncs_once_across_cut_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = rusqlite::Connection::open(dir.path().join("w.db")).unwrap();
    conn.execute_batch(
        "CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, ALIAS_NAME TEXT, ALIAS_LABEL TEXT, EMAIL TEXT, PAYLOAD TEXT)",
    )
    .unwrap();
    // One millisecond written two ways: the group is ordered by the text as well.
    let (rows, _) = group_fixture("2024-01-02T00:00:00Z", "2024-01-02 00:00:00");
    let tx = conn.transaction().unwrap();
    for (time, external, alias, email, payload) in &rows {
        let label = alias.as_ref().map(|_| "lbl");
        tx.execute(
            "INSERT INTO T VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![time, external, alias, label, email, payload],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let store = SqliteStore::open(&dir.path().join("engage.db")).unwrap();
    let i = integration_on(dir.path(), &store, "T");
    let source = i.source.clone();
    a_group_resumes_where_it_stopped(store, &i, &move || Box::new(sqlite::SqliteSource::open(&source).unwrap()));
}

#[test]
fn a_postgres_group_larger_than_a_batch_syncs_once_across_cut_jobs() {
    let url = std::env::var("ENGAGE_TEST_POSTGRES_URL").ok();
    assert!(url.is_some() || std::env::var("CI").is_err(), "CI must run this: set ENGAGE_TEST_POSTGRES_URL");
    let Some(url) = url else { return };
    let table = format!("group_{}", std::process::id());
    // Microseconds apart inside one millisecond: the group is ordered by them first.
    let (rows, _) = group_fixture("2024-01-02 00:00:00+00", "2024-01-02 00:00:00.00025+00");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (\"UPDATED_AT\" timestamptz, \"EXTERNAL_ID\" text, \
                 \"ALIAS_NAME\" text, \"ALIAS_LABEL\" text, \"EMAIL\" text, \"PAYLOAD\" jsonb)"
            ))
            .await
            .unwrap();
        let insert = format!("INSERT INTO {table} VALUES ($1::text::timestamptz, $2, $3, $4, $5, $6::text::jsonb)");
        client.batch_execute("BEGIN").await.unwrap();
        for (time, external, alias, email, payload) in &rows {
            let label = alias.as_ref().map(|_| "lbl");
            client.execute(&insert, &[time, external, alias, &label, email, payload]).await.unwrap();
        }
        client.batch_execute("COMMIT").await.unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("engage.db")).unwrap();
    let spec = Spec {
        name: "t".into(),
        source: url.clone(),
        table: table.clone(),
        kind: DataKind::Users,
        schedule_secs: None,
        contact_emails: vec![],
    };
    let ws = WorkspaceName::parse("w").unwrap();
    let i = pollster::block_on(warehouse::create(&store, &ws, &spec, ctx())).unwrap();
    a_group_resumes_where_it_stopped(store, &i, &|| Box::new(postgres::PostgresSource::open(&url).unwrap()));
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(&format!("DROP TABLE {table}")).await.unwrap();
    });
}
