// The D1 behaviour the edge store relies on, checked under the pinned
// wrangler/Miniflare/workerd (older Miniflare releases did not roll back a failed
// batch). Run: `node --test tests/` in host-edge/ (test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getPlatformProxy } from "wrangler";

const here = new URL("..", import.meta.url).pathname;
const state = mkdtempSync(join(tmpdir(), "engage-d1-test-"));
let db;
let dispose;

// The guard statements of host-edge/src/d1.rs.
const GUARD_VERSION =
  "INSERT INTO guard (ok) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM docs WHERE tbl = ?1 AND key = ?2 AND version = ?3)";
const GUARD_ABSENT = "INSERT INTO guard (ok) SELECT 0 WHERE EXISTS (SELECT 1 FROM docs WHERE tbl = ?1 AND key = ?2)";
const UPSERT =
  "INSERT INTO docs (tbl, key, version, value) VALUES (?1, ?2, 1, ?3) " +
  "ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value";

before(async () => {
  const proxy = await getPlatformProxy({ configPath: join(here, "wrangler.toml"), persist: { path: state } });
  db = proxy.env.DB;
  dispose = proxy.dispose;
  // Apply every migration, as `wrangler d1 migrations apply` does.
  const dir = join(here, "..", "migrations");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()) {
    const sql = readFileSync(join(dir, file), "utf8").replace(/--.*$/gm, "");
    for (const stmt of sql.split(";").map((s) => s.trim()).filter(Boolean)) {
      await db.prepare(stmt).run();
    }
  }
});

after(async () => {
  await dispose?.();
  rmSync(state, { recursive: true, force: true });
});

async function doc(key) {
  return db.prepare("SELECT version, CAST(value AS TEXT) AS value FROM docs WHERE tbl = 3 AND key = ?1").bind(key).first();
}

test("an update that matches no row is not an error (why guards are needed)", async () => {
  const r = await db.prepare("UPDATE docs SET version = 2 WHERE tbl = 3 AND key = 'nobody' AND version = 1").run();
  assert.equal(r.success, true);
  assert.equal(r.meta.changes, 0);
});

test("a failing guard rolls back the statements before it in the batch", async () => {
  await assert.rejects(
    db.batch([
      db.prepare(UPSERT).bind(3, "a", '{"n":1}'),
      db.prepare(UPSERT).bind(3, "b", '{"n":1}'),
      db.prepare(GUARD_VERSION).bind(3, "missing", 7),
    ]),
    (e) => /expectation_failed/.test(`${e.message} ${e.cause?.message ?? ""}`),
  );
  assert.equal(await doc("a"), null);
  assert.equal(await doc("b"), null);
  const guards = await db.prepare("SELECT count(*) AS n FROM guard").first();
  assert.equal(guards.n, 0);
});

test("holding guards insert nothing and the batch commits", async () => {
  await db.batch([db.prepare(GUARD_ABSENT).bind(3, "c"), db.prepare(UPSERT).bind(3, "c", '{"n":1}')]);
  await db.batch([db.prepare(GUARD_VERSION).bind(3, "c", 1), db.prepare(UPSERT).bind(3, "c", '{"n":2}')]);
  assert.deepEqual(await doc("c"), { version: 2, value: '{"n":2}' });
  const guards = await db.prepare("SELECT count(*) AS n FROM guard").first();
  assert.equal(guards.n, 0);
});

test("a stale version loses: the second of two writers from the same read is refused", async () => {
  await db.batch([db.prepare(GUARD_ABSENT).bind(3, "d"), db.prepare(UPSERT).bind(3, "d", '{"n":0}')]);
  const read = await doc("d");
  const write = (n) =>
    db.batch([db.prepare(GUARD_VERSION).bind(3, "d", read.version), db.prepare(UPSERT).bind(3, "d", `{"n":${n}}`)]);
  const results = await Promise.allSettled([write(1), write(2)]);
  assert.deepEqual(results.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
  const after = await doc("d");
  assert.equal(after.version, 2);
});

test("a guard sees the writes of earlier statements of the same batch", async () => {
  await db.batch([
    db.prepare(GUARD_ABSENT).bind(3, "e"),
    db.prepare(UPSERT).bind(3, "e", '{"n":1}'),
    db.prepare(GUARD_VERSION).bind(3, "e", 1),
    db.prepare(UPSERT).bind(3, "e", '{"n":2}'),
  ]);
  assert.deepEqual(await doc("e"), { version: 2, value: '{"n":2}' });
});

test("the queue acknowledgement refuses jobs another applier already took", async () => {
  const ack = (through, count) => [
    db
      .prepare(
        "INSERT INTO guard (ok) SELECT 0 WHERE (SELECT applied FROM queue_cursor WHERE id = 1) >= ?1 " +
          "OR (SELECT count(*) FROM queue WHERE seq > (SELECT applied FROM queue_cursor WHERE id = 1) AND seq <= ?1) <> ?2",
      )
      .bind(through, count),
    db.prepare("UPDATE queue_cursor SET applied = ?1 WHERE id = 1").bind(through),
    db.prepare("DELETE FROM queue WHERE seq <= ?1").bind(through),
  ];
  const seqs = [];
  for (const job of ["j1", "j2", "j3"]) {
    seqs.push((await db.prepare("INSERT INTO queue (job) VALUES (?1) RETURNING seq AS n").bind(job).first()).n);
  }
  // Applier A read all three, applier B only the first two; B commits first.
  await db.batch(ack(seqs[1], 2));
  await assert.rejects(db.batch(ack(seqs[2], 3)), /expectation_failed/);
  await assert.rejects(db.batch(ack(seqs[1], 2)), /expectation_failed/);
  await db.batch(ack(seqs[2], 1));
  const left = await db.prepare("SELECT count(*) AS n FROM queue").first();
  assert.equal(left.n, 0);
});
