//! Warehouse syncs (CDI): real jobs from SQLite and PostgreSQL tables, read back
//! through `/users/export/ids` and the two status endpoints. Hosts that run no
//! syncs (the edge) answer the status endpoints from the same tables; the sync
//! steps are then skipped.

mod manage;
mod pages;
mod postgres;
mod sqlite;

use std::path::PathBuf;

use rusqlite::Connection;

/// A fresh SQLite warehouse file with the platform's user-data table layout.
pub(crate) struct Warehouse {
    pub path: PathBuf,
    pub conn: Connection,
}

impl Warehouse {
    pub(crate) fn new(tables: &[(&str, bool)]) -> Warehouse {
        let dir = std::env::temp_dir().join(format!("engage-warehouse-{}", engage_tests::unique_workspace()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("warehouse.db");
        let conn = Connection::open(&path).expect("warehouse");
        for (name, payload) in tables {
            let payload = if *payload { ", PAYLOAD TEXT" } else { "" };
            conn.execute_batch(&format!(
                "CREATE TABLE {name} (UPDATED_AT TEXT NOT NULL, EXTERNAL_ID TEXT, ALIAS_NAME TEXT, ALIAS_LABEL TEXT, \
                 BRAZE_ID TEXT, EMAIL TEXT, PHONE TEXT{payload})"
            ))
            .expect("table");
        }
        Warehouse { path, conn }
    }

    pub(crate) fn source(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    /// Adds rows of `(UPDATED_AT, EXTERNAL_ID, PAYLOAD)`.
    pub(crate) fn add(&self, table: &str, rows: &[(&str, Option<&str>, &str)]) {
        let mut stmt = self
            .conn
            .prepare(&format!("INSERT INTO {table} (UPDATED_AT, EXTERNAL_ID, PAYLOAD) VALUES (?1, ?2, ?3)"))
            .expect("insert");
        for (at, x, payload) in rows {
            stmt.execute(rusqlite::params![at, x, payload]).expect("row");
        }
    }
}
