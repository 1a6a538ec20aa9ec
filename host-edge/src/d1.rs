//! The D1 store: the same tables as the native host (`migrations/`), one `batch()`
//! per commit.
//!
//! D1 has no interactive transactions, and an `UPDATE ... WHERE version = ?` that
//! matches nothing is not an error. So every expectation of a [`ChangeSet`] becomes a
//! *guard* statement placed in the same batch, before the write it protects:
//!
//! ```sql
//! INSERT INTO guard (ok) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM docs WHERE ... AND version = ?)
//! ```
//!
//! When the expectation holds the guard inserts nothing; when it fails it inserts
//! `ok = 0`, which violates `CHECK (ok = 1)` (constraint `expectation_failed`,
//! migrations/0002_guard.sql), and D1 rolls the whole batch back. That one error is
//! [`CommitError::Conflict`]; every other failure is [`CommitError::Store`]. The
//! `guard` table therefore stays empty forever. D1 runs the statements of a batch
//! in order on one connection, so a guard sees the writes of earlier statements of
//! the same batch, exactly as the memory store's staged check does.
//!
//! Contention: when many requests of one isolate race for one document, each round
//! of the core's retries lets only one win, and D1 runs every query of a database
//! in turn, so lockstep retries cost rounds × contenders × queries. On a conflict
//! the store therefore waits a random time (full jitter) before reporting it, in a
//! window that grows with the number of requests of this isolate backing off at
//! the same moment and with the measured cost of a batch: the losers spread out
//! and retry mostly one at a time. Waits are timers (workerd cancels a request that
//! awaits a promise only another request can resolve, so there is no cross-request
//! lock). Correctness never depends on this: the guards do that.
//!
//! Pacing: every few D1 calls the store waits for a 1 ms timer. Under `wrangler dev`
//! workerd runs the Worker and the local D1 on one event loop, and a long chain of
//! D1 calls (a drain pass applying batch after batch) keeps that loop busy without
//! ever polling the network, so new requests were not even accepted until the chain
//! ended (a 10 s apply stalled every `/users/track`). The timer lets the loop poll.
//! On Cloudflare, D1 calls are network I/O and the pause costs ~1 ms per
//! [`PACE_EVERY`] calls.
//!
//! Batched reads: [`Store::get_many`] (the queue applier reads the profiles and
//! identifier entries of a batch with it, and so does every `/users/track` checking
//! its job's size) is one query per call, the keys bound as one JSON array and
//! unpacked by `json_each`: D1 binds at most 100 parameters per statement. One round
//! trip per document had held the applier to ~300 objects/s under `wrangler dev`
//! (~10,000 with this) and `/users/track` to a few acknowledgements a second. It
//! reads D1 for every table: API-key records, cached in KV for `get`, are never
//! read in batches.
//!
//! Documents and queue jobs are JSON: they are bound as text (D1 sends blobs as
//! arrays of numbers) and read back with `CAST(... AS TEXT)`, so a row stored as a
//! blob (for example imported from the native host) reads the same.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::Duration;

use engage_core::store::{
    ChangeSet, CommitError, Entry, Expect, KeyRange, Op, QueuedJob, Store, StoreError, Table, MAX_SCAN,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Date, Delay};

use crate::keycache::KeyCache;

/// The name of the CHECK constraint a failed guard violates.
const GUARD_CONSTRAINT: &str = "expectation_failed";

/// D1 calls between two pacing pauses (see the module docs).
const PACE_EVERY: u32 = 16;

/// Most bytes of keys (a JSON array) one `get_many` query binds: D1 takes strings of
/// up to 1,000,000 bytes, and the keys of a batch (identifiers of up to 987 bytes
/// each) can exceed that.
const KEYS_JSON_MAX: usize = 500_000;

/// Longest conflict backoff, in milliseconds.
const BACKOFF_CAP_MS: f64 = 2_000.0;

/// A [`Store`] over a D1 database, with API-key reads cached in KV.
pub struct D1Store {
    db: D1Database,
    keys: Option<KeyCache>,
    /// Requests of this isolate currently waiting after a conflict.
    backing_off: Cell<u32>,
    /// Moving average of a commit batch's duration, in milliseconds.
    batch_ms: Cell<f64>,
    /// D1 calls since the last pacing pause.
    calls: Cell<u32>,
}

#[derive(Deserialize)]
struct DocRow {
    version: f64,
    value: String,
}

#[derive(Deserialize)]
struct KeyedRow {
    key: String,
    version: f64,
    value: String,
}

#[derive(Deserialize)]
struct JobRow {
    seq: f64,
    job: String,
}

#[derive(Deserialize)]
struct NumberRow {
    n: f64,
}

/// Text of a worker error, including D1's cause (where SQLite's message is).
pub(crate) fn error_text(e: &worker::Error) -> String {
    match e {
        worker::Error::D1(d1) => {
            let js: &worker::js_sys::Error = d1.as_ref();
            let message: String = js.message().into();
            format!("{message} ({})", d1.cause())
        }
        other => other.to_string(),
    }
}

fn store_err(e: worker::Error) -> StoreError {
    let text = error_text(&e);
    worker::console_error!("D1: {text}");
    StoreError(format!("D1: {text}"))
}

fn num(n: u64) -> JsValue {
    // D1 numbers are JavaScript numbers: versions and sequence numbers stay far below 2^53.
    JsValue::from_f64(n as f64)
}

fn text(bytes: &[u8]) -> Result<JsValue, StoreError> {
    std::str::from_utf8(bytes)
        .map(JsValue::from_str)
        .map_err(|_| StoreError("documents and jobs must be UTF-8 JSON".into()))
}

fn entry(version: f64, value: String) -> Entry {
    Entry { version: version as u64, value: value.into_bytes() }
}

/// `keys` as JSON arrays of at most [`KEYS_JSON_MAX`] bytes each (a single longer
/// key gets an array of its own).
fn key_arrays(keys: &[String]) -> Vec<String> {
    let mut arrays = Vec::new();
    let mut array = String::from("[");
    for key in keys {
        let quoted = serde_json::Value::from(key.as_str()).to_string();
        // Room for the key, its comma and the closing bracket.
        if array.len() > 1 && array.len() + quoted.len() + 2 > KEYS_JSON_MAX {
            array.push(']');
            arrays.push(std::mem::replace(&mut array, String::from("[")));
        }
        if array.len() > 1 {
            array.push(',');
        }
        array.push_str(&quoted);
    }
    if array.len() > 1 {
        array.push(']');
        arrays.push(array);
    }
    arrays
}

impl D1Store {
    /// A store over `db`, caching API-key records in `keys` when given.
    pub fn new(db: D1Database, keys: Option<KeyCache>) -> D1Store {
        D1Store { db, keys, backing_off: Cell::new(0), batch_ms: Cell::new(5.0), calls: Cell::new(0) }
    }

    /// Lets the event loop poll for new requests every [`PACE_EVERY`] D1 calls.
    async fn pace(&self) {
        let n = self.calls.get() + 1;
        if n < PACE_EVERY {
            self.calls.set(n);
            return;
        }
        self.calls.set(0);
        Delay::from(Duration::from_millis(1)).await;
    }

    /// Waits a random time after a lost commit (see the module docs).
    async fn back_off(&self) {
        let waiting = self.backing_off.get() + 1;
        self.backing_off.set(waiting);
        // A retry re-reads a few documents and commits again: about four batches' worth.
        let window = (4.0 * self.batch_ms.get() * f64::from(waiting)).clamp(1.0, BACKOFF_CAP_MS);
        let mut b = [0u8; 4];
        let _ = getrandom::fill(&mut b);
        let wait = f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX) * window;
        Delay::from(Duration::from_millis(wait as u64)).await;
        self.backing_off.set(self.backing_off.get().saturating_sub(1));
    }

    fn stmt(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StoreError> {
        self.db.prepare(sql).bind(args).map_err(store_err)
    }

    /// Every row a query returns.
    async fn all<T: DeserializeOwned>(&self, sql: &str, args: &[JsValue]) -> Result<Vec<T>, StoreError> {
        self.stmt(sql, args)?.all().await.map_err(store_err)?.results::<T>().map_err(store_err)
    }

    async fn read_doc(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.pace().await;
        let row: Option<DocRow> = self
            .stmt(
                &format!(
                    "SELECT version, CAST(value AS TEXT) AS value FROM {} WHERE tbl = ?1 AND key = ?2",
                    name(table)
                ),
                &[num(table.id() as u64), JsValue::from_str(key)],
            )?
            .first(None)
            .await
            .map_err(store_err)?;
        Ok(row.map(|r| entry(r.version, r.value)))
    }

    /// The guard statement for one expectation (none for [`Expect::Any`]).
    fn guard(&self, table: Table, key: &str, expect: Expect) -> Result<Option<D1PreparedStatement>, StoreError> {
        let t = num(table.id() as u64);
        let k = JsValue::from_str(key);
        let stmt = match expect {
            Expect::Any => return Ok(None),
            Expect::Absent => self.stmt(
                &format!(
                    "INSERT INTO guard (ok) SELECT 0 WHERE EXISTS (SELECT 1 FROM {} WHERE tbl = ?1 AND key = ?2)",
                    name(table)
                ),
                &[t, k],
            )?,
            Expect::Version(v) => self.stmt(
                &format!(
                    "INSERT INTO guard (ok) SELECT 0 WHERE NOT EXISTS
                     (SELECT 1 FROM {} WHERE tbl = ?1 AND key = ?2 AND version = ?3)",
                    name(table)
                ),
                &[t, k, num(v)],
            )?,
        };
        Ok(Some(stmt))
    }

    fn statements(&self, changes: &ChangeSet) -> Result<Vec<D1PreparedStatement>, StoreError> {
        let mut out = Vec::with_capacity(changes.ops.len() * 2 + 3);
        for op in &changes.ops {
            match op {
                Op::Put { table, key, value, expect } => {
                    out.extend(self.guard(*table, key, *expect)?);
                    // After the guard, an upsert is right for every expectation: the
                    // guard already refused a present key for `Absent` and a missing
                    // or other version for `Version`.
                    out.push(self.stmt(
                        &format!(
                            "INSERT INTO {} (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)
                             ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value",
                            name(*table)
                        ),
                        &[num(table.id() as u64), JsValue::from_str(key), text(value)?],
                    )?);
                }
                Op::Delete { table, key, expect } => {
                    out.extend(self.guard(*table, key, *expect)?);
                    out.push(self.stmt(
                        &format!("DELETE FROM {} WHERE tbl = ?1 AND key = ?2", name(*table)),
                        &[num(table.id() as u64), JsValue::from_str(key)],
                    )?);
                }
            }
        }
        if let Some(ack) = changes.ack {
            // The jobs acknowledged must be exactly the `count` rows after the cursor
            // up to `through`: if another applier moved the cursor meanwhile, fewer
            // rows (or none) lie in that range, or the cursor is already past it.
            out.push(self.stmt(
                "INSERT INTO guard (ok) SELECT 0 WHERE
                    (SELECT applied FROM queue_cursor WHERE id = 1) >= ?1
                 OR (SELECT count(*) FROM queue
                     WHERE seq > (SELECT applied FROM queue_cursor WHERE id = 1) AND seq <= ?1) <> ?2",
                &[num(ack.through), num(ack.count)],
            )?);
            out.push(self.stmt("UPDATE queue_cursor SET applied = ?1 WHERE id = 1", &[num(ack.through)])?);
            out.push(self.stmt("DELETE FROM queue WHERE seq <= ?1", &[num(ack.through)])?);
        }
        Ok(out)
    }
}

impl Store for D1Store {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        if table != Table::ApiKey {
            return self.read_doc(table, key).await;
        }
        if let Some(cache) = &self.keys {
            if let Some(hit) = cache.get(key).await {
                return Ok(Some(hit));
            }
        }
        let found = self.read_doc(table, key).await?;
        if let (Some(cache), Some(entry)) = (&self.keys, &found) {
            cache.put(key, entry).await;
        }
        Ok(found)
    }

    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        let mut found: HashMap<String, Entry> = HashMap::with_capacity(keys.len());
        for array in key_arrays(keys) {
            self.pace().await;
            let rows: Vec<KeyedRow> = self
                .all(
                    &format!(
                        "SELECT key, version, CAST(value AS TEXT) AS value FROM {}
                         WHERE tbl = ?1 AND key IN (SELECT value FROM json_each(?2))",
                        name(table)
                    ),
                    &[num(table.id() as u64), JsValue::from_str(&array)],
                )
                .await?;
            found.extend(rows.into_iter().map(|r| (r.key, entry(r.version, r.value))));
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        self.pace().await;
        let range = KeyRange::prefix(prefix, limit);
        let rows: Vec<KeyedRow> = self
            .all(
                &format!(
                    "SELECT key, version, CAST(value AS TEXT) AS value FROM {}
                     WHERE tbl = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4",
                    name(table)
                ),
                &[
                    num(table.id() as u64),
                    JsValue::from_str(&range.start),
                    JsValue::from_str(&range.end),
                    num(range.limit),
                ],
            )
            .await?;
        Ok(rows.into_iter().filter(|r| range.contains(&r.key)).map(|r| (r.key, entry(r.version, r.value))).collect())
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.pace().await;
        let statements = self.statements(&changes)?;
        let started = Date::now().as_millis();
        let result = self.db.batch(statements).await;
        let took = Date::now().as_millis().saturating_sub(started) as f64;
        self.batch_ms.set(0.8 * self.batch_ms.get() + 0.2 * took);
        match result {
            Ok(_) => {
                // A key record changed (its last use noted) or went (revoked): this
                // isolate and KV forget it now; other isolates within the TTL.
                if let Some(cache) = &self.keys {
                    for op in &changes.ops {
                        if let Op::Put { table: Table::ApiKey, key, .. }
                        | Op::Delete { table: Table::ApiKey, key, .. } = op
                        {
                            cache.forget(key).await;
                        }
                    }
                }
                Ok(())
            }
            Err(e) => {
                let text = error_text(&e);
                if text.contains(GUARD_CONSTRAINT) {
                    self.back_off().await;
                    Err(CommitError::Conflict)
                } else {
                    worker::console_error!("D1 batch failed: {text}");
                    Err(CommitError::Store(StoreError(format!("D1: {text}"))))
                }
            }
        }
    }

    /// Jobs are bound as text (see the module's notes).
    fn queues_json(&self) -> bool {
        true
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        self.pace().await;
        let row: Option<NumberRow> = self
            .stmt("INSERT INTO queue (job) VALUES (?1) RETURNING seq AS n", &[text(&job)?])?
            .first(None)
            .await
            .map_err(store_err)?;
        row.map(|r| r.n as u64).ok_or_else(|| StoreError("D1: enqueue returned no sequence number".into()))
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        self.pace().await;
        let limit = limit.min(MAX_SCAN) as u64;
        let rows: Vec<JobRow> = self
            .all(
                "SELECT seq, CAST(job AS TEXT) AS job FROM queue
                 WHERE seq > (SELECT applied FROM queue_cursor WHERE id = 1) AND seq > ?2 ORDER BY seq LIMIT ?1",
                &[num(limit), num(after)],
            )
            .await?;
        Ok(rows.into_iter().map(|r| QueuedJob { seq: r.seq as u64, part: 0, job: r.job.into_bytes() }).collect())
    }

    /// Without reading a job: D1 would otherwise send the oldest job's whole text.
    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        self.pace().await;
        let row: Option<NumberRow> = self
            .stmt(
                "SELECT EXISTS (SELECT 1 FROM queue
                 WHERE seq > (SELECT applied FROM queue_cursor WHERE id = 1)) AS n",
                &[],
            )?
            .first(None)
            .await
            .map_err(store_err)?;
        Ok(row.is_some_and(|r| r.n == 0.0))
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.pace().await;
        // Rows are deleted only up to the cursor, so every sequence number ever
        // assigned is either <= the cursor or still in the queue.
        let row: Option<NumberRow> = self
            .stmt(
                "SELECT max(coalesce((SELECT max(seq) FROM queue), 0),
                            (SELECT applied FROM queue_cursor WHERE id = 1)) AS n",
                &[],
            )?
            .first(None)
            .await
            .map_err(store_err)?;
        Ok(row.map_or(0, |r| r.n as u64))
    }
}

/// The table of the shared schema that holds `table`'s documents.
fn name(table: Table) -> &'static str {
    table.sql_table().name()
}
