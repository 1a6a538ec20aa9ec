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
    let store = PgStore::open(&format!("{url}{sep}options=-csearch_path%3D{schema}")).unwrap();
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
    for table in ["docs", "queue", "queue_cursor"] {
        let mut st = sqlite.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid").unwrap();
        let theirs: Vec<String> = st.query_map([table], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
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
