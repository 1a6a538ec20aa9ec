// A burst of concurrent /users/track requests is applied by the isolate's background
// drainer once the burst is over, with no read to prompt it: the drainer waits while
// requests keep the isolate busy (src/host.rs, DEFER_LIMIT_MS), and must not wait
// for good. Run by test.sh against the running Worker, before the black-box suite
// (so nothing else is queued):
//   node tests/background_drain.mjs BASE ADMIN_TOKEN
import assert from "node:assert/strict";

const [base, token] = process.argv.slice(2);
const call = async (method, path, auth, body) => {
  const r = await fetch(base + path, {
    method,
    headers: { Authorization: "Bearer " + auth, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json().catch(() => null) };
};

const workspace = `drain-${Date.now()}`;
const created = await call("POST", "/_engage/keys", token, { workspace });
assert.equal(created.status, 201, JSON.stringify(created.body));
const key = created.body.key;

// 48 requests at once, each adding 1 to `n` of the same 5 users.
const users = [0, 1, 2, 3, 4].map((i) => `u-${i}`);
const REQUESTS = 48;
const acks = await Promise.all(
  Array.from({ length: REQUESTS }, () =>
    call("POST", "/users/track", key, { attributes: users.map((external_id) => ({ external_id, n: { inc: 1 } })) }),
  ),
);
for (const ack of acks) assert.equal(ack.status, 201, JSON.stringify(ack.body));

// The operator's view of the queue does not apply it: only the drainer can empty it.
const started = Date.now();
let pending;
for (;;) {
  const state = await call("GET", "/_engage/queue", token);
  assert.equal(state.status, 200, JSON.stringify(state.body));
  pending = state.body.pending;
  if (pending === 0 || Date.now() - started > 30_000) break;
  await new Promise((r) => setTimeout(r, 100));
}
assert.equal(pending, 0, "the burst's jobs were still pending 30 s after it ended");

const exported = await call("POST", "/users/export/ids", key, { external_ids: users, fields_to_export: ["custom_attributes"] });
assert.equal(exported.status, 201, JSON.stringify(exported.body));
for (const user of exported.body.users) assert.equal(user.custom_attributes.n, REQUESTS, JSON.stringify(user));
console.log(`background drain: ${REQUESTS} concurrent jobs applied ${Date.now() - started} ms after the burst`);
