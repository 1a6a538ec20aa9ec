// The inspector in a real browser (Debian's chromium, playwright-core), against
// `engage serve --ephemeral` with a known key: sign in with the admin token, find
// the user the test tracked, see its attribute, see the request in the journal,
// see a fault and a snapshot, restore the snapshot from the page,
// and write a screenshot (e2e/screenshot-inspector.png). Needs ENGAGE_BIN.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startEngage, stopEngage } from "./engage.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const ADMIN = "inspector-e2e-admin-token-0123456789abcdef";
const KEY = "inspector-e2e-key-0123456789abcdef0123";

let tmp;
let browser;

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "engage-inspector-e2e-"));
  browser = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1440, height: 1100 },
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  await rm(tmp, { recursive: true, force: true });
});

test("the inspector: sign in, find the tracked user and its attribute, see the request in the journal", { skip: !process.env.ENGAGE_BIN && "ENGAGE_BIN is not set" }, async () => {
  const args = ["--ephemeral", "--admin-token", ADMIN, "--api-key", KEY, "--journal-bodies"];
  const { child, base } = await startEngage(process.env.ENGAGE_BIN, args);
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    const tracked = await fetch(`${base}/users/track`, {
      method: "POST",
      headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify({ attributes: [{ external_id: "inspected-1", email: "inspected@example.com", favorite_color: "teal" }] }),
    });
    assert.equal(tracked.status, 201);

    // Without a session: the login form; a wrong token is refused.
    const login = await page.goto(`${base}/_engage/inspector`);
    assert.equal(login.headers()["x-frame-options"], "DENY");
    await page.fill('input[name="token"]', "not-the-token");
    await page.click("button");
    await page.waitForSelector("p.error");
    assert.match(await page.textContent("p.error"), /not this server's admin token/);

    await page.fill('input[name="token"]', ADMIN);
    await page.click("button");
    await page.waitForSelector("#query");
    const cookies = await browser.cookies(`${base}/_engage/inspector`);
    const session = cookies.find((c) => c.name === "engage_inspector");
    assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));

    // The workspace of the key, then the user by email.
    await page.waitForFunction(() => [...document.querySelectorAll("#workspace option")].some((o) => o.value === "default"));
    await page.fill("#query", "inspected@example.com");
    await page.click("#find button");
    await page.waitForFunction(() => document.querySelector("#users")?.textContent.includes("favorite_color"));
    const user = await page.textContent("#users");
    assert.match(user, /inspected-1/);
    assert.match(user, /teal/);

    // The track request is in the journal, with its body, and no key anywhere.
    await page.click("#refresh");
    await page.waitForFunction(() => document.querySelector("#journal")?.textContent.includes("/users/track"));
    const journal = await page.textContent("#journal");
    assert.match(journal, /POST\/users\/track201/);
    assert.match(journal, /favorite_color/);
    assert.ok(!journal.includes(KEY) && !journal.includes(ADMIN));

    // Faults and snapshots: what a test made shows, and a snapshot restores from the page.
    const admin = (method, route, body) => fetch(`${base}${route}`, {
      method,
      headers: { Authorization: `Bearer ${ADMIN}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    assert.equal((await admin("POST", "/_engage/faults", { path: "/users/export/ids", status: 503, times: 3 })).status, 201);
    assert.equal((await admin("POST", "/_engage/snapshots/before?workspace=default")).status, 201);
    const later = await fetch(`${base}/users/track/sync`, {
      method: "POST",
      headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify({ attributes: [{ external_id: "after-snapshot" }] }),
    });
    assert.equal(later.status, 201);
    await page.click("#refresh");
    await page.waitForFunction(() => document.querySelector("#faults")?.textContent.includes("/users/export/ids"));
    assert.match(await page.textContent("#faults"), /503/);
    await page.waitForFunction(() => document.querySelector("#snapshots")?.textContent.includes("before"));
    const restored = new Promise((resolve) => page.once("dialog", async (d) => { resolve(d.message()); await d.accept(); }));
    await page.click("#snapshots button");
    assert.match(await restored, /^Restored: \d+ written, [1-9]\d* removed\.$/);
    await admin("DELETE", "/_engage/faults");
    const exported = await fetch(`${base}/users/export/ids`, {
      method: "POST",
      headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify({ external_ids: ["after-snapshot", "inspected-1"] }),
    });
    const users = (await exported.json()).users.map((u) => u.external_id);
    assert.deepEqual(users, ["inspected-1"], "the user made after the snapshot is gone");

    await page.screenshot({ path: path.join(here, "screenshot-inspector.png"), fullPage: true });

    // Signing out ends the session: the form again.
    await page.click("#logout");
    await page.waitForSelector('input[name="token"]');
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
    await stopEngage(child);
  }
});
