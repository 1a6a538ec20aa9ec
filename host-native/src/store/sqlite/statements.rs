//! The SQL of reading and writing documents, one set per table of the schema
//! ([`SqlTable`]). The two tables have the same columns and key, so each set is the
//! same text with another name; only `docs` has rowids to hint an update with, and
//! only `idents` has `at`, the row of the profile an entry names (a hint too).

use engage_core::store::{SqlTable, Table};

/// The statements on one table.
pub(super) struct Statements {
    /// The update of a row found by its rowid, in a table that has rowids: there a
    /// write reports the rowid it wrote, for the next update (see
    /// [`super::doc_cache`]).
    pub update_by_rowid: Option<&'static str>,
    /// Rows read by rowid (`rowid, tbl, key, version, value`), followed by
    /// `(?, ?, ...)`: in a table that has rowids.
    pub read_rows: Option<&'static str>,
    /// True for `idents`: a write binds one more parameter, `at`, the profile's row.
    pub names_profiles: bool,
    pub read_one: &'static str,
    /// Followed by `(?, ?, ...)`: the keys. Its fourth column is the row (`docs`)
    /// or the named profile's row (`idents`), where known.
    pub read_many: &'static str,
    pub scan: &'static str,
    /// Answers the row's rowid (`docs`) or `at` (`idents`) when the expected version held.
    pub update: &'static str,
    pub insert_absent: &'static str,
    /// Answers the row's rowid (`docs`) or `at` (`idents`).
    pub upsert: &'static str,
    pub version: &'static str,
    pub delete: &'static str,
}

macro_rules! statements {
    ($table:literal, $rowid:literal) => {
        Statements {
            update_by_rowid: None,
            read_rows: None,
            names_profiles: false,
            read_one: concat!("SELECT version, value FROM ", $table, " WHERE tbl = ?1 AND key = ?2"),
            read_many: concat!("SELECT key, version, value, ", $rowid, " FROM ", $table, " WHERE tbl = ? AND key IN "),
            scan: concat!(
                "SELECT key, version, value FROM ",
                $table,
                " WHERE tbl = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4"
            ),
            update: concat!(
                "UPDATE ",
                $table,
                " SET version = ?1, value = ?2 WHERE tbl = ?3 AND key = ?4 AND version = ?5 RETURNING ",
                $rowid
            ),
            insert_absent: concat!(
                "INSERT OR IGNORE INTO ",
                $table,
                " (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)"
            ),
            upsert: concat!(
                "INSERT INTO ",
                $table,
                " (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)
                 ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value"
            ),
            version: concat!("SELECT version FROM ", $table, " WHERE tbl = ?1 AND key = ?2"),
            delete: concat!("DELETE FROM ", $table, " WHERE tbl = ?1 AND key = ?2"),
        }
    };
}

static DOCS: Statements = Statements {
    // The `+` keeps SQLite from looking the key up in its index instead.
    update_by_rowid: Some(
        "UPDATE docs SET version = ?1, value = ?2 WHERE rowid = ?3 AND +tbl = ?4 AND +key = ?5 AND version = ?6",
    ),
    read_rows: Some("SELECT rowid, tbl, key, version, value FROM docs WHERE rowid IN "),
    upsert: "INSERT INTO docs (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)
             ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value RETURNING rowid",
    ..statements!("docs", "rowid")
};
static IDENTS: Statements = Statements {
    names_profiles: true,
    read_many: "SELECT key, version, value, at FROM idents WHERE tbl = ? AND key IN ",
    // A write that does not know its profile's row keeps the one recorded (a hint,
    // checked at every read).
    update: "UPDATE idents SET version = ?1, value = ?2, at = coalesce(?6, at)
             WHERE tbl = ?3 AND key = ?4 AND version = ?5 RETURNING at",
    insert_absent: "INSERT OR IGNORE INTO idents (tbl, key, version, value, at) VALUES (?1, ?2, 1, ?3, ?4)",
    upsert: "INSERT INTO idents (tbl, key, version, value, at) VALUES (?1, ?2, 1, ?3, ?4)
             ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value,
                 at = coalesce(excluded.at, at)
             RETURNING at",
    ..statements!("idents", "NULL")
};

impl Statements {
    /// Whether the table has rowids.
    pub fn rowids(&self) -> bool {
        self.update_by_rowid.is_some()
    }
}

/// The statements on the table that holds `table`'s documents.
pub(super) fn of(table: Table) -> &'static Statements {
    match table.sql_table() {
        SqlTable::Docs => &DOCS,
        SqlTable::Idents => &IDENTS,
    }
}

/// True where a document is found by its key in one descent, with no rowid to
/// remember (the document cache keeps such documents without one).
pub(super) fn by_key(table: Table) -> bool {
    !of(table).rowids()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_prepares_on_the_migrated_schema() {
        let mut c = rusqlite::Connection::open_in_memory().unwrap();
        super::super::connection::migrate(&mut c).unwrap();
        for s in [&DOCS, &IDENTS] {
            let read_many = format!("{}(?, ?)", s.read_many);
            let read_rows = s.read_rows.map(|r| format!("{r}(?, ?)"));
            let all = [s.read_one, &read_many, s.scan, s.update, s.insert_absent, s.upsert, s.version, s.delete];
            for sql in all.into_iter().chain(s.update_by_rowid).chain(read_rows.as_deref()) {
                c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
    }

    #[test]
    fn identifier_entries_written_before_their_table_existed_move_to_it_versions_and_all() {
        use engage_core::store::{Entry, Store};

        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let (ident, profile) = ("w\u{1f}x\u{1f}u", "w\u{1f}s1");
        {
            let c = rusqlite::Connection::open(&db).unwrap();
            let before = super::super::connection::MIGRATIONS.iter().take_while(|(name, _)| *name != "0003_idents");
            let mut n = 0;
            for (_, sql) in before {
                c.execute_batch(sql).unwrap();
                n += 1;
            }
            c.pragma_update(None, "user_version", n).unwrap();
            c.execute(
                "INSERT INTO docs VALUES (4, ?1, 3, CAST('s1' AS BLOB)), (3, ?2, 2, CAST('{}' AS BLOB))",
                [ident, profile],
            )
            .unwrap();
        }
        let store = super::super::SqliteStore::open(&db).unwrap();
        let get = |table, key| pollster::block_on(store.get(table, key)).unwrap();
        assert_eq!(get(Table::Ident, ident), Some(Entry { version: 3, value: b"s1".to_vec() }));
        assert_eq!(get(Table::Profile, profile), Some(Entry { version: 2, value: b"{}".to_vec() }));
        drop(store);
        let c = rusqlite::Connection::open(&db).unwrap();
        let left: i64 = c.query_row("SELECT count(*) FROM docs WHERE tbl = 4", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0, "moved, not copied");
        let (at, row): (Option<i64>, i64) = c
            .query_row(
                "SELECT (SELECT at FROM idents WHERE key = ?1), (SELECT rowid FROM docs WHERE key = ?2)",
                [ident, profile],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(at, Some(row), "0004_ident_rows points an existing entry at its profile's row");
    }

    #[test]
    fn entries_say_where_their_profile_is_and_a_wrong_row_is_never_believed() {
        use engage_core::store::{ChangeSet, Expect, Op, Store};

        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let store = super::super::SqliteStore::open(&db).unwrap();
        let put = |table, key: &str, value: &str| Op::Put {
            table,
            key: key.into(),
            value: value.as_bytes().to_vec(),
            expect: Expect::Absent,
        };
        let commit = |ops| pollster::block_on(store.commit(ChangeSet { ops, ack: None })).unwrap();
        // Entries first, as the core orders them: the store writes them after their profiles.
        commit(vec![
            put(Table::Ident, "w\u{1f}x\u{1f}a", "s1"),
            put(Table::Ident, "w\u{1f}x\u{1f}b", "s2"),
            put(Table::Profile, "w\u{1f}s1", "one"),
            put(Table::Profile, "w\u{1f}s2", "two"),
        ]);
        let c = rusqlite::Connection::open(&db).unwrap();
        let at = |x: &str| -> (Option<i64>, i64) {
            c.query_row(
                "SELECT (SELECT at FROM idents WHERE key = 'w' || char(31) || 'x' || char(31) || ?1),
                        (SELECT rowid FROM docs WHERE key = 'w' || char(31) || (SELECT CAST(value AS TEXT) FROM idents WHERE key = 'w' || char(31) || 'x' || char(31) || ?1))",
                [x],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        let ((a_at, a_row), (b_at, b_row)) = (at("a"), at("b"));
        assert_eq!((a_at, b_at), (Some(a_row), Some(b_row)));
        // Each entry pointed at the other's profile: both still read their own.
        c.execute("UPDATE idents SET at = CASE at WHEN ?1 THEN ?2 ELSE ?1 END", [a_row, b_row]).unwrap();
        c.execute("UPDATE idents SET at = 999999 WHERE key = 'w' || char(31) || 'x' || char(31) || 'b'", []).unwrap();
        let keys = ["w\u{1f}x\u{1f}a".to_string(), "w\u{1f}x\u{1f}b".to_string()];
        let found = pollster::block_on(store.get_named(&keys, |_| false)).unwrap();
        let values: Vec<_> = found.into_iter().map(|f| f.and_then(|(_, p)| p).map(|p| p.value)).collect();
        assert_eq!(values, vec![Some(b"one".to_vec()), Some(b"two".to_vec())]);
    }

    #[test]
    fn a_database_of_a_newer_schema_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let newer = super::super::connection::MIGRATIONS.len() as i64 + 1;
        rusqlite::Connection::open(&db).unwrap().pragma_update(None, "user_version", newer).unwrap();
        let refused = super::super::SqliteStore::open(&db).err().expect("refused");
        assert!(refused.0.contains("newer engage"), "{}", refused.0);
        let c = rusqlite::Connection::open(&db).unwrap();
        assert_eq!(c.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).unwrap(), newer);
    }
}
