//! Committing change sets in SQLite: every expectation checked, profiles updated by
//! rowid where the document cache knows it. The queue applier's change set is one
//! transaction of its own; the change sets of requests are committed in groups, one
//! savepoint each inside one transaction, so one fsync makes a whole group durable.

use engage_core::store::{expectation_holds, next_version, ChangeSet, CommitError, Expect, Op, Table, SEP};
use foldhash::{HashMap, HashMapExt, HashSetExt};
use rusqlite::{params, CachedStatement, Connection, OptionalExtension, TransactionBehavior};

use super::base::err;
use super::doc_cache::Admit;
use super::shared::{Shared, Writer, APPLY_SYNC_INTERVAL};
use super::statements;

/// The profile an identifier entry names, as the two halves of its key (workspace,
/// service id): see [`engage_core::store::named_profile_key`].
fn named<'a>(key: &'a str, value: &'a [u8]) -> Option<(&'a str, &'a str)> {
    Some((&key[..key.find(SEP)?], std::str::from_utf8(value).ok()?))
}

/// For each operation, whether it is a write of an identifier entry that no later
/// operation of `ops` touches: [`Shared::apply_ops`] may put those last.
fn last_entry_writes(ops: &[Op]) -> Vec<bool> {
    let mut seen: foldhash::HashSet<&str> = foldhash::HashSet::with_capacity(ops.len() / 2);
    let mut out = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        match op {
            Op::Put { table: Table::Ident, key, .. } => out[i] = seen.insert(key.as_str()),
            Op::Delete { table: Table::Ident, key, .. } => {
                seen.insert(key.as_str());
            }
            _ => {}
        }
    }
    out
}

/// What one operation of a commit did.
pub(super) enum Applied {
    /// Its expectation failed: the commit is refused.
    Refused,
    /// Written, in this row when known.
    Done(Option<i64>),
}

/// The statements of one transaction, each taken from the connection's cache the
/// first time the transaction uses it and held until it ends: rusqlite's cache
/// hashes a statement's SQL text at every lookup and every return, which was 7% of
/// the committing thread's time in a warehouse sync (2,000 rows a commit, perf).
pub(super) struct Held<'c> {
    conn: &'c Connection,
    held: Vec<(&'static str, CachedStatement<'c>)>,
}

impl<'c> Held<'c> {
    pub(super) fn new(conn: &'c Connection) -> Held<'c> {
        Held { conn, held: Vec::new() }
    }

    /// The statement `sql` (one of [`statements`]' texts: the same text is the same
    /// address, so a lookup compares pointers, a dozen at most).
    fn get(&mut self, sql: &'static str) -> Result<&mut CachedStatement<'c>, rusqlite::Error> {
        let at = match self.held.iter().position(|(s, _)| std::ptr::eq(*s, sql)) {
            Some(at) => at,
            None => {
                self.held.push((sql, self.conn.prepare_cached(sql)?));
                self.held.len() - 1
            }
        };
        Ok(&mut self.held[at].1)
    }

    /// Runs `sql` (savepoints and the like) on the transaction's connection.
    fn run(&self, sql: &str) -> Result<(), rusqlite::Error> {
        self.conn.execute_batch(sql)
    }
}

impl Shared {
    /// Applies `op`; `rowid` is where the document it updates was last seen (a hint:
    /// see [`super::doc_cache`]), `at` the row of the profile an identifier entry it
    /// writes names (see [`Shared::apply_ops`]).
    pub(super) fn apply_op(
        st: &mut Held<'_>,
        op: &Op,
        rowid: Option<i64>,
        at: Option<i64>,
    ) -> Result<Applied, rusqlite::Error> {
        match op {
            Op::Put { table, key, value, expect } => {
                let sql = statements::of(*table);
                let id = table.id();
                match expect {
                    Expect::Version(v) => {
                        let (version, expected) = (next_version(Some(*v)) as i64, *v as i64);
                        if let (Some(rowid), Some(update_by_rowid)) = (rowid, sql.update_by_rowid) {
                            let st = st.get(update_by_rowid)?;
                            if st.execute(params![version, value, rowid, id, key, expected])? == 1 {
                                return Ok(Applied::Done(Some(rowid)));
                            }
                        }
                        // No row: the expected version did not hold. A row: its rowid (or
                        // `at`, NULL where unknown).
                        let update = st.get(sql.update)?;
                        let updated: Option<Option<i64>> = if sql.names_profiles {
                            update.query_row(params![version, value, id, key, expected, at], |r| r.get(0))
                        } else {
                            update.query_row(params![version, value, id, key, expected], |r| r.get(0))
                        }
                        .optional()?;
                        Ok(updated.map_or(Applied::Refused, Applied::Done))
                    }
                    Expect::Absent => {
                        let insert = st.get(sql.insert_absent)?;
                        let written = if sql.names_profiles {
                            insert.execute(params![id, key, value, at])?
                        } else {
                            insert.execute(params![id, key, value])?
                        } == 1;
                        // `last_insert_rowid` is only this insert's in a table with rowids.
                        let row = if sql.names_profiles {
                            at
                        } else {
                            Some(st.conn.last_insert_rowid()).filter(|_| sql.rowids())
                        };
                        Ok(if written { Applied::Done(row) } else { Applied::Refused })
                    }
                    Expect::Any => {
                        let upsert = st.get(sql.upsert)?;
                        let row: Option<i64> = if sql.names_profiles {
                            upsert.query_row(params![id, key, value, at], |r| r.get(0))?
                        } else {
                            upsert.query_row(params![id, key, value], |r| r.get(0))?
                        };
                        Ok(Applied::Done(row))
                    }
                }
            }
            Op::Delete { table, key, expect } => {
                let sql = statements::of(*table);
                let current: Option<i64> =
                    st.get(sql.version)?.query_row(params![table.id(), key], |r| r.get(0)).optional()?;
                if !expectation_holds(*expect, current.map(|v| v as u64)) {
                    return Ok(Applied::Refused);
                }
                st.get(sql.delete)?.execute(params![table.id(), key])?;
                Ok(Applied::Done(None))
            }
        }
    }

    /// Commits the change sets of requests (no queue acknowledgement among them) in
    /// one transaction, each inside a savepoint of its own: a set whose expectation
    /// fails, or whose write fails, is rolled back alone and answered with its error;
    /// the others are committed together, synced once (`synchronous = FULL`), and
    /// only then answered. Each answer is exactly what committing that set alone, in
    /// this order, would have given.
    pub(super) fn commit_group(&self, sets: Vec<ChangeSet>) -> Vec<Result<(), CommitError>> {
        let all = |e: CommitError| sets.iter().map(|_| Err(e.clone())).collect();
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = w.conn.pragma_update(None, "synchronous", "FULL") {
            return all(CommitError::Store(err(e)));
        }
        let tx = match w.conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return all(CommitError::Store(err(e))),
        };
        let mut outcomes: Vec<Result<Vec<Option<i64>>, CommitError>> = Vec::with_capacity(sets.len());
        {
            let mut st = Held::new(&tx);
            for set in &sets {
                debug_assert!(set.ack.is_none(), "queue acknowledgements commit alone");
                // A set alone needs no savepoint: should it fail, the whole transaction
                // rolls back (`tx` dropped below). Its savepoint's statements and
                // sub-journal were 1.5% of a warehouse sync's committing thread
                // (callgrind), where every batch commits alone.
                outcomes.push(match sets.len() {
                    1 => self.apply_ops(&mut st, &set.ops),
                    _ => self.commit_one(&mut st, set),
                });
            }
        }
        if let [Err(e)] = outcomes.as_slice() {
            return vec![Err(e.clone())];
        }
        if let Err(e) = tx.commit() {
            return all(CommitError::Store(err(e)));
        }
        if let Some(cache) = &self.cache {
            for (set, outcome) in sets.into_iter().zip(&outcomes) {
                if let Ok(rowids) = outcome {
                    cache.committed(set.ops.into_iter().zip(rowids.iter().copied()), Admit::Known);
                }
            }
        }
        // A FULL commit syncs the whole WAL, the applier's earlier commits with it.
        self.synced(&mut w);
        outcomes.into_iter().map(|o| o.map(|_| ())).collect()
    }

    /// Applies one change set of a group inside a savepoint of its own (by SQL, so
    /// the group's statements stay held across savepoints): a set whose expectation
    /// fails, or whose write fails, is rolled back alone. Returns the rows it wrote.
    fn commit_one(&self, st: &mut Held<'_>, set: &ChangeSet) -> Result<Vec<Option<i64>>, CommitError> {
        let store = |e: rusqlite::Error| CommitError::Store(err(e));
        st.run("SAVEPOINT one_set").map_err(store)?;
        match self.apply_ops(st, &set.ops) {
            Ok(rowids) => {
                st.run("RELEASE one_set").map_err(store)?;
                Ok(rowids)
            }
            // Only this set is undone; the group's transaction goes on.
            Err(e) => {
                st.run("ROLLBACK TO one_set; RELEASE one_set").map_err(store)?;
                Err(e)
            }
        }
    }

    /// Applies `ops` in order, each by the row the document cache hints at; stops at
    /// the first whose expectation fails (a conflict) or whose write fails. Returns
    /// the rows they wrote (for an identifier entry, its profile's row). An
    /// identifier entry's write that is the last operation on its key waits until
    /// the others are done, so that it records the row its profile was written to
    /// in this change set (the core writes an entry before its profile): a change
    /// set is atomic, and moving a write past operations on other documents only
    /// changes what it sees of them, so the outcome is the one of the given order.
    fn apply_ops(&self, st: &mut Held<'_>, ops: &[Op]) -> Result<Vec<Option<i64>>, CommitError> {
        let hints = self.hints(ops);
        let mut rowids = vec![None; ops.len()];
        // Profiles written so far, by (workspace, service id), the two halves of the key.
        // Sized for a change set of new users (a profile and an identifier each):
        // grown from empty, rehashing was 1.6% of a warehouse sync's commit thread
        // (callgrind).
        let mut profiles: HashMap<(&str, &str), i64> = HashMap::with_capacity(ops.len() / 2);
        let deferred = last_entry_writes(ops);
        for later in [false, true] {
            for (i, op) in ops.iter().enumerate().filter(|(i, _)| deferred[*i] == later) {
                let row = match op {
                    Op::Put { table: Table::Ident, key, value, .. } => {
                        named(key, value).and_then(|n| profiles.get(&n).copied())
                    }
                    _ => None,
                };
                match Self::apply_op(st, op, hints[i], row).map_err(|e| CommitError::Store(err(e)))? {
                    Applied::Done(rowid) => rowids[i] = rowid,
                    Applied::Refused => return Err(CommitError::Conflict),
                }
                if let (Op::Put { table: Table::Profile, key, .. }, Some(rowid)) = (op, rowids[i]) {
                    if let Some(halves) = key.split_once(SEP) {
                        profiles.insert(halves, rowid);
                    }
                }
            }
        }
        Ok(rowids)
    }

    /// The rows the document cache last saw the documents `ops` write in (none without a cache).
    fn hints(&self, ops: &[Op]) -> Vec<Option<i64>> {
        match &self.cache {
            Some(cache) => cache.rowids(ops),
            None => vec![None; ops.len()],
        }
    }

    /// Everything committed so far is durable: the queue rows the durable cursor
    /// covers can go. Failing to trim only leaves rows that `queued` already skips.
    fn synced(&self, w: &mut Writer) {
        w.last_sync = std::time::Instant::now();
        if let Some(through) = w.applied_not_synced.take() {
            if let Some(q) = &self.queue {
                q.trim(through);
            }
        }
    }

    pub(super) fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        // The queue's tail only grows: jobs at or below it now exist at commit too.
        // Without the queue (another process owns it) there is nothing to acknowledge.
        let tail = self.queue.as_ref().map_or(0, |q| q.log.tail());
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Applying queued jobs need not be synced at once: the jobs stay durable in the
        // queue file until the cursor that covers them is on disk, and replaying them
        // after a power loss gives the same result. Skipping that fsync keeps the
        // applier's large commits from stalling the queue's small ones. Every other
        // commit answers a request, so it is synced before the 2xx (and syncs the
        // applier's earlier commits with it: one WAL, in order).
        let applying = changes.ack.is_some();
        w.conn.pragma_update(None, "synchronous", if applying { "NORMAL" } else { "FULL" }).map_err(err)?;
        let tx = w.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        // On a conflict or an error, dropping `tx` rolls back.
        let rowids = self.apply_ops(&mut Held::new(&tx), &changes.ops)?;
        if let Some(ack) = changes.ack {
            let applied: i64 =
                tx.query_row("SELECT applied FROM queue_cursor WHERE id = 1", [], |r| r.get(0)).map_err(err)?;
            // Queue sequence numbers above the cursor have no gaps (AUTOINCREMENT, and
            // rows are deleted only at or below a durable cursor), so the jobs in
            // (applied, through] number exactly through - applied. Another applier
            // that got there first moved the cursor: conflict.
            let applied = applied as u64;
            if applied >= ack.through || ack.through > tail || ack.through - applied != ack.count {
                return Err(CommitError::Conflict);
            }
            tx.execute("UPDATE queue_cursor SET applied = ?1 WHERE id = 1", params![ack.through as i64])
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        if let Some(cache) = &self.cache {
            // The change set is done with: its documents move into the cache.
            cache.committed(changes.ops.into_iter().zip(rowids), Admit::New);
        }
        if let Some(ack) = changes.ack {
            w.applied_not_synced = Some(ack.through);
        }
        let durable = !applying || (w.last_sync.elapsed() >= APPLY_SYNC_INTERVAL && Self::sync_wal(&w));
        if durable {
            self.synced(&mut w);
        }
        Ok(())
    }

    /// A small FULL commit: it syncs the whole WAL, and with it every earlier commit.
    fn sync_wal(w: &Writer) -> bool {
        w.conn.pragma_update(None, "synchronous", "FULL").is_ok()
            && w.conn.execute("UPDATE queue_cursor SET applied = applied WHERE id = 1", []).is_ok()
    }

    /// Makes the applier's last commits durable once no commit has for a while (an
    /// idle server: no request's commit syncs them), so the queue forgets the jobs
    /// they applied and can be seen drained. The checkpointer calls it, with the
    /// writer locked.
    pub(super) fn sync_applied(&self, w: &mut Writer) {
        if w.applied_not_synced.is_some() && w.last_sync.elapsed() >= APPLY_SYNC_INTERVAL && Self::sync_wal(w) {
            self.synced(w);
        }
    }
}

/// The queue log and its writer thread.
#[cfg(test)]
mod rowid_hints {
    use engage_core::store::{Expect, Op, Table};
    use rusqlite::{params, Connection, TransactionBehavior};

    use super::super::connection::{migrate, open, MAIN_PAGE_SIZE};
    use super::super::shared::Shared;
    use super::super::statements;
    use super::Applied;

    /// A migrated database in a directory of its own (removed when dropped).
    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(&dir.path().join("t.db"), MAIN_PAGE_SIZE).unwrap();
        migrate(&mut c).unwrap();
        (dir, c)
    }

    fn put(key: &str, value: &str, expect: Expect) -> Op {
        Op::Put { table: Table::Profile, key: key.into(), value: value.as_bytes().to_vec(), expect }
    }

    fn apply(c: &mut Connection, op: &Op, hint: Option<i64>) -> Option<Option<i64>> {
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let out = match Shared::apply_op(&mut super::Held::new(&tx), op, hint, None).unwrap() {
            Applied::Done(rowid) => Some(rowid),
            Applied::Refused => None,
        };
        tx.commit().unwrap();
        out
    }

    fn value(c: &Connection, key: &str) -> (i64, String) {
        c.query_row(
            "SELECT version, CAST(value AS TEXT) FROM docs WHERE tbl = ?1 AND key = ?2",
            params![Table::Profile.id(), key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }

    /// A store's shared state on a new database in `dir`, with no queue or cache.
    fn shared(dir: &tempfile::TempDir) -> Shared {
        let conn = open(&dir.path().join("t.db"), MAIN_PAGE_SIZE).unwrap();
        let writer =
            super::super::shared::Writer { conn, applied_not_synced: None, last_sync: std::time::Instant::now() };
        Shared { writer: std::sync::Mutex::new(writer), queue: None, cache: None }
    }

    fn set(ops: Vec<Op>) -> engage_core::store::ChangeSet {
        engage_core::store::ChangeSet { ops, ack: None }
    }

    fn profiles_named(c: &Connection, key: &str) -> i64 {
        c.query_row("SELECT count(*) FROM docs WHERE tbl = ?1 AND key = ?2", params![Table::Profile.id(), key], |r| {
            r.get(0)
        })
        .unwrap()
    }

    #[test]
    fn a_set_committed_alone_is_whole_or_not_at_all() {
        use engage_core::store::CommitError;

        let (dir, _) = db();
        let shared = shared(&dir);
        assert_eq!(shared.commit_group(vec![set(vec![put("a", "a1", Expect::Absent)])]), vec![Ok(())]);
        // Its first write would succeed; its second is refused, so neither is kept.
        let refused = set(vec![put("b", "b1", Expect::Absent), put("a", "a2", Expect::Version(7))]);
        assert_eq!(shared.commit_group(vec![refused]), vec![Err(CommitError::Conflict)]);
        {
            let w = shared.writer.lock().unwrap();
            assert_eq!(profiles_named(&w.conn, "b"), 0, "the refused set left nothing behind");
            assert_eq!(value(&w.conn, "a"), (1, "a1".into()));
        }
        // The writer's connection is out of the rolled-back transaction: the next set commits.
        let next = set(vec![put("b", "b1", Expect::Absent), put("a", "a2", Expect::Version(1))]);
        assert_eq!(shared.commit_group(vec![next]), vec![Ok(())]);
        let w = shared.writer.lock().unwrap();
        assert_eq!(value(&w.conn, "a"), (2, "a2".into()));
        assert_eq!(value(&w.conn, "b"), (1, "b1".into()));
    }

    #[test]
    fn a_group_commits_each_set_whole_or_not_at_all() {
        use engage_core::store::CommitError;

        let (dir, _) = db();
        let shared = shared(&dir);
        let sets = [
            set(vec![put("a", "a1", Expect::Absent), put("b", "b1", Expect::Absent)]),
            // Its second write expects what the first set of the group has just changed.
            set(vec![put("c", "c1", Expect::Absent), put("a", "a2", Expect::Absent)]),
            set(vec![put("d", "d1", Expect::Absent), put("a", "a2", Expect::Version(1))]),
        ];
        assert_eq!(shared.commit_group(sets.to_vec()), vec![Ok(()), Err(CommitError::Conflict), Ok(())]);
        let w = shared.writer.lock().unwrap();
        assert_eq!(value(&w.conn, "a"), (2, "a2".into()));
        assert_eq!(value(&w.conn, "b"), (1, "b1".into()));
        assert_eq!(value(&w.conn, "d"), (1, "d1".into()));
        assert_eq!(profiles_named(&w.conn, "c"), 0, "the refused set left nothing behind");
    }

    #[test]
    fn updates_go_by_the_hinted_row_and_a_wrong_hint_falls_back_to_the_key() {
        let (_dir, mut c) = db();
        let a = apply(&mut c, &put("a", "a1", Expect::Absent), None).unwrap().unwrap();
        let b = apply(&mut c, &put("b", "b1", Expect::Absent), None).unwrap().unwrap();
        assert_ne!(a, b);
        assert_eq!(apply(&mut c, &put("a", "a2", Expect::Version(1)), Some(a)), Some(Some(a)));
        // A hint naming another document's row never writes that row.
        assert_eq!(apply(&mut c, &put("a", "a3", Expect::Version(2)), Some(b)), Some(Some(a)));
        assert_eq!(apply(&mut c, &put("a", "a4", Expect::Version(3)), Some(9_999)), Some(Some(a)));
        assert_eq!(value(&c, "a"), (4, "a4".into()));
        assert_eq!(value(&c, "b"), (1, "b1".into()));
        // A stale version is refused, whichever way the row is found.
        assert_eq!(apply(&mut c, &put("a", "x", Expect::Version(1)), Some(a)), None);
        assert_eq!(apply(&mut c, &put("a", "x", Expect::Version(1)), None), None);
        assert_eq!(value(&c, "a"), (4, "a4".into()));
    }

    #[test]
    fn the_hinted_update_finds_its_row_by_rowid_not_by_the_key_index() {
        let (_dir, c) = db();
        let update = statements::of(Table::Profile).update_by_rowid.expect("docs has rowids");
        let plan = plan(&c, update, params![2, "", 1, 1, "", 1]);
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(plan[0].contains("INTEGER PRIMARY KEY (rowid=?)"), "{plan:?}");
    }

    /// The steps of the plan SQLite chose for `sql` with `args` bound.
    fn plan(c: &Connection, sql: &str, args: impl rusqlite::Params) -> Vec<String> {
        c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map(args, |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn an_identifier_is_read_from_its_own_table_by_its_primary_key_and_a_profile_through_the_key_index() {
        let (_dir, c) = db();
        let ident = plan(&c, statements::of(Table::Ident).read_one, params![4, "k"]);
        assert_eq!(ident.len(), 1, "{ident:?}");
        assert!(ident[0].starts_with("SEARCH idents USING PRIMARY KEY (tbl=? AND key=?)"), "{ident:?}");
        let profile = plan(&c, statements::of(Table::Profile).read_one, params![3, "k"]);
        assert!(profile[0].starts_with("SEARCH docs USING INDEX"), "{profile:?}");
    }

    #[test]
    fn identifier_entries_are_written_without_rowids_and_a_stale_hint_changes_nothing() {
        let (_dir, mut c) = db();
        let ident = |value: &str, expect| Op::Put {
            table: Table::Ident,
            key: "ws\u{1f}x\u{1f}u".into(),
            value: value.as_bytes().to_vec(),
            expect,
        };
        assert_eq!(apply(&mut c, &ident("s1", Expect::Absent), None), Some(None));
        assert_eq!(apply(&mut c, &ident("s1", Expect::Absent), None), None, "present: refused");
        // A hint (a rowid of `docs`) is no use here and is not used.
        assert_eq!(apply(&mut c, &ident("s2", Expect::Version(1)), Some(1)), Some(None));
        assert_eq!(apply(&mut c, &ident("s3", Expect::Version(1)), None), None, "stale version: refused");
        let stored: (i64, i64, String) = c
            .query_row("SELECT tbl, version, CAST(value AS TEXT) FROM idents", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(stored, (4, 2, "s2".into()));
        let in_docs: i64 = c.query_row("SELECT count(*) FROM docs WHERE tbl = 4", [], |r| r.get(0)).unwrap();
        assert_eq!(in_docs, 0);
        let delete = Op::Delete { table: Table::Ident, key: "ws\u{1f}x\u{1f}u".into(), expect: Expect::Version(2) };
        assert_eq!(apply(&mut c, &delete, None), Some(None));
        let left: i64 = c.query_row("SELECT count(*) FROM idents", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0);
    }
}
