//! A commit's document writes in its transaction, each expectation checked by the
//! statement that writes.

use engage_core::store::{Expect, Op, PartJob};

use super::Failed;

/// The statements a commit's writes use, prepared once a connection (a statement
/// prepared anew costs a round trip of its own).
struct Statements {
    update: tokio_postgres::Statement,
    insert: tokio_postgres::Statement,
    upsert: tokio_postgres::Statement,
    delete_version: tokio_postgres::Statement,
    delete: tokio_postgres::Statement,
    exists: tokio_postgres::Statement,
    update_many: tokio_postgres::Statement,
    insert_many: tokio_postgres::Statement,
    upsert_many: tokio_postgres::Statement,
}

impl Statements {
    async fn prepare(tx: &deadpool_postgres::Transaction<'_>) -> Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            update: tx
                .prepare_cached(
                    "UPDATE docs SET version = version + 1, value = $3 WHERE tbl = $1 AND key = $2 AND version = $4",
                )
                .await?,
            insert: tx
                .prepare_cached(
                    "INSERT INTO docs (tbl, key, version, value) VALUES ($1, $2, 1, $3) ON CONFLICT DO NOTHING",
                )
                .await?,
            upsert: tx
                .prepare_cached(
                    "INSERT INTO docs (tbl, key, version, value) VALUES ($1, $2, 1, $3)
                     ON CONFLICT (tbl, key) DO UPDATE SET version = docs.version + 1, value = excluded.value",
                )
                .await?,
            delete_version: tx.prepare_cached("DELETE FROM docs WHERE tbl = $1 AND key = $2 AND version = $3").await?,
            delete: tx.prepare_cached("DELETE FROM docs WHERE tbl = $1 AND key = $2").await?,
            exists: tx.prepare_cached("SELECT 1 FROM docs WHERE tbl = $1 AND key = $2 FOR UPDATE").await?,
            update_many: tx
                .prepare_cached(
                    "UPDATE docs d SET version = d.version + 1, value = u.value
                     FROM unnest($1::integer[], $2::text[], $3::bytea[], $4::bigint[]) AS u(tbl, key, value, version)
                     WHERE d.tbl = u.tbl AND d.key = u.key AND d.version = u.version",
                )
                .await?,
            insert_many: tx
                .prepare_cached(
                    "INSERT INTO docs (tbl, key, version, value)
                     SELECT tbl, key, 1, value FROM unnest($1::integer[], $2::text[], $3::bytea[]) AS u(tbl, key, value)
                     ON CONFLICT DO NOTHING",
                )
                .await?,
            upsert_many: tx
                .prepare_cached(
                    "INSERT INTO docs (tbl, key, version, value)
                     SELECT tbl, key, 1, value FROM unnest($1::integer[], $2::text[], $3::bytea[]) AS u(tbl, key, value)
                     ON CONFLICT (tbl, key) DO UPDATE SET version = docs.version + 1, value = excluded.value",
                )
                .await?,
        })
    }
}

/// Applies one write in the transaction, checking its expectation.
async fn apply(tx: &deadpool_postgres::Transaction<'_>, st: &Statements, op: &Op) -> Result<(), Failed> {
    let changed = match op {
        Op::Put { table, key, value, expect } => {
            let tbl = table.id() as i32;
            match expect {
                Expect::Version(v) => tx.execute(&st.update, &[&tbl, key, value, &(*v as i64)]).await?,
                Expect::Absent => tx.execute(&st.insert, &[&tbl, key, value]).await?,
                Expect::Any => tx.execute(&st.upsert, &[&tbl, key, value]).await?,
            }
        }
        Op::Delete { table, key, expect } => {
            let tbl = table.id() as i32;
            match expect {
                Expect::Version(v) => tx.execute(&st.delete_version, &[&tbl, key, &(*v as i64)]).await?,
                Expect::Any => {
                    tx.execute(&st.delete, &[&tbl, key]).await?;
                    1
                }
                Expect::Absent => u64::from(tx.query_opt(&st.exists, &[&tbl, key]).await?.is_none()),
            }
        }
    };
    if changed == 1 {
        Ok(())
    } else {
        Err(Failed::Conflict)
    }
}

/// Writes `ops` in the transaction, checking every expectation. When every
/// operation names a document of its own, the puts go in three statements (one per
/// kind of expectation, over arrays of rows); otherwise, or for deletes, one
/// statement each, all sent before the first answer is read (the driver pipelines
/// the statements of one connection, in order). Either way one failed expectation
/// fails the whole set.
pub(super) async fn write(tx: &deadpool_postgres::Transaction<'_>, ops: &[Op]) -> Result<(), Failed> {
    let distinct = {
        let mut seen = std::collections::HashSet::with_capacity(ops.len());
        ops.iter().all(|op| match op {
            Op::Put { table, key, .. } | Op::Delete { table, key, .. } => seen.insert((table.id(), key.as_str())),
        })
    };
    let st = Statements::prepare(tx).await?;
    if !distinct {
        let outcomes = futures_util::future::join_all(ops.iter().map(|op| apply(tx, &st, op))).await;
        return outcomes.into_iter().collect();
    }
    // Rows by kind of expectation: (tbl, key, value, expected version).
    type Rows<'a> = (Vec<i32>, Vec<&'a str>, Vec<&'a [u8]>, Vec<i64>);
    let (mut version, mut absent, mut any): (Rows<'_>, Rows<'_>, Rows<'_>) = Default::default();
    let mut deletes = Vec::new();
    for op in ops {
        match op {
            Op::Put { table, key, value, expect } => {
                let (rows, v) = match expect {
                    Expect::Version(v) => (&mut version, *v as i64),
                    Expect::Absent => (&mut absent, 0),
                    Expect::Any => (&mut any, 0),
                };
                rows.0.push(table.id() as i32);
                rows.1.push(key);
                rows.2.push(value);
                rows.3.push(v);
            }
            Op::Delete { .. } => deletes.push(op),
        }
    }
    let updated = async {
        if version.0.is_empty() {
            return Ok(0);
        }
        tx.execute(&st.update_many, &[&version.0, &version.1, &version.2, &version.3]).await
    };
    let inserted = async {
        if absent.0.is_empty() {
            return Ok(0);
        }
        tx.execute(&st.insert_many, &[&absent.0, &absent.1, &absent.2]).await
    };
    let upserted = async {
        if any.0.is_empty() {
            return Ok(0);
        }
        tx.execute(&st.upsert_many, &[&any.0, &any.1, &any.2]).await
    };
    let deleted = futures_util::future::join_all(deletes.into_iter().map(|op| apply(tx, &st, op)));
    let (updated, inserted, upserted, deleted) =
        futures_util::future::join4(updated, inserted, upserted, deleted).await;
    upserted?;
    if updated? != version.0.len() as u64 || inserted? != absent.0.len() as u64 {
        return Err(Failed::Conflict);
    }
    deleted.into_iter().collect()
}

/// Jobs appended to the queue in one statement, its own transaction: the tail's
/// row lock makes enqueues take turns until they commit, so jobs become visible in
/// the order of their numbers, and it is held for no round trip. Each job's names
/// are its slice of one array (an array of arrays must have rows of one length).
pub(super) const ENQUEUE: &str =
    "WITH t AS (UPDATE queue_tail SET tail = tail + cardinality($1::integer[]) WHERE id = 1 RETURNING tail)
     INSERT INTO queue (seq, part, job, names)
     SELECT t.tail - cardinality($1::integer[]) + u.n, u.part, u.job, ($3::bigint[])[u.lo:u.hi]
     FROM t, unnest($1::integer[], $2::bytea[], $4::integer[], $5::integer[]) WITH ORDINALITY AS u(part, job, lo, hi, n)
     RETURNING seq";

/// The parameters of [`ENQUEUE`].
pub(super) struct Enqueued {
    parts: Vec<i32>,
    jobs: Vec<Vec<u8>>,
    names: Vec<i64>,
    /// Each job's names, `names[lo..=hi]` counting from 1 (empty when `hi < lo`).
    lo: Vec<i32>,
    hi: Vec<i32>,
}

/// `jobs` as [`ENQUEUE`]'s parameters.
pub(super) fn enqueued(jobs: Vec<PartJob>) -> Enqueued {
    let mut e = Enqueued { parts: vec![], jobs: vec![], names: vec![], lo: vec![], hi: vec![] };
    for job in jobs {
        e.parts.push(i32::from(job.part));
        e.lo.push(e.names.len() as i32 + 1);
        e.names.extend(job.names);
        e.hi.push(e.names.len() as i32);
        e.jobs.push(job.job);
    }
    e
}

impl Enqueued {
    pub(super) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 5] {
        [&self.parts, &self.jobs, &self.names, &self.lo, &self.hi]
    }
}
