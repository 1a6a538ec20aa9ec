// npm braze-api pointed at Engage, sending what its users send: ids as numbers,
// times from Date#toISOString and as Ruby-style text, a rename and its removal.
// Usage: ENGAGE_URL=... ENGAGE_KEY=... node braze-api.mjs
import assert from "node:assert/strict";
import { Braze } from "braze-api";

const braze = new Braze(process.env.ENGAGE_URL, process.env.ENGAGE_KEY);
const now = new Date().toISOString();

const tracked = await braze.users.track({
  attributes: [{ external_id: 2001, first_name: "Grace" }],
  events: [{ external_id: 2001, name: "signed_up", time: now }],
  purchases: [{ external_id: 2001, product_id: 3, currency: "USD", price: 5, time: "2019-02-15 00:00:00 -0500" }],
});
assert.equal(tracked.message, "success", JSON.stringify(tracked));
let exported = await braze.users.export.ids({ external_ids: [2001] });
assert.equal(exported.users[0].external_id, "2001", JSON.stringify(exported));
assert.equal(exported.users[0].first_name, "Grace");

const renamed = await braze.users.external_ids.rename({
  external_id_renames: [{ current_external_id: 2001, new_external_id: "grace-2001" }],
});
assert.deepEqual(renamed.rename_errors, [], JSON.stringify(renamed));
exported = await braze.users.export.ids({ external_ids: ["2001"] });
assert.equal(exported.users[0].external_id, "grace-2001", "the old id still names the user");
const removed = await braze.users.external_ids.remove({ external_ids: ["2001"] });
assert.deepEqual(removed.removed_ids, ["2001"], JSON.stringify(removed));

await assert.rejects(
  new Braze(process.env.ENGAGE_URL, "non-existent").users.track({ attributes: [{ external_id: "x" }] }),
  (e) => e.status === 401 && e.message === "Invalid API key: non-existent",
);
console.log("ok  braze-api: numeric ids, its time forms, external id migration");
