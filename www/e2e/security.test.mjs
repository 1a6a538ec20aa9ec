// A preference page must never act as the operator (docs/security.md), proved in a
// real browser (Debian's chromium, playwright-core) against `engage serve`: an
// operator is signed in to the inspector in this browser, and opens a center's
// page whose HTML a key holder wrote (a script that reads the journal and makes
// an all-permission key) and whose user data tries to leave its attribute. The
// script runs, in an opaque origin: it reads nothing and makes nothing; the
// injected handler never exists; the page's form still submits. Needs ENGAGE_BIN.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { startEngage, stopEngage } from "./engage.mjs";

const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const ADMIN = "security-e2e-admin-token-0123456789abcdef";
const KEY = "security-e2e-key-0123456789abcdef0123456";

let tmp;
let browser;

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "engage-security-e2e-"));
  browser = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  await rm(tmp, { recursive: true, force: true });
});

// What the key holder's script tries, writing what it got into the page.
const ATTACK = `<script>
(async () => {
  const out = [];
  try {
    const r = await fetch("/_engage/journal", { credentials: "include" });
    out.push("journal:" + r.status + ":" + (await r.text()).slice(0, 40));
  } catch (e) { out.push("journal:blocked"); }
  try {
    const r = await fetch("/_engage/keys", { method: "POST", credentials: "include",
      headers: { "X-Engage-Inspector": "1", "Content-Type": "application/json" },
      body: JSON.stringify({ workspace: "attacker", permissions: "all" }) });
    out.push("key:" + r.status);
  } catch (e) { out.push("key:blocked"); }
  try { out.push("cookie:" + document.cookie); } catch (e) { out.push("cookie:blocked"); }
  try { out.push("origin:" + self.origin); } catch (e) { out.push("origin:?"); }
  document.getElementById("result").textContent = out.join("|");
})();
</script>`;

test("a stored page's script cannot read the journal or make a key while an operator is signed in, and its form still submits", { skip: !process.env.ENGAGE_BIN && "ENGAGE_BIN is not set" }, async () => {
  const { child, base } = await startEngage(process.env.ENGAGE_BIN, ["--ephemeral", "--admin-token", ADMIN, "--api-key", KEY]);
  const api = async (method, route, body, token = KEY) => {
    const r = await fetch(`${base}${route}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json().catch(() => null) };
  };
  const page = await browser.newPage();
  try {
    // The victim's data tries to leave its attribute, and to be a javascript: link.
    const tracked = await api("POST", "/users/track", { attributes: [{
      external_id: "victim", email: "victim@example.com", email_subscribe: "opted_in",
      last_name: "x autofocus onfocus=document.title='pwned'", site: "javascript:document.title='pwned'" }] });
    assert.equal(tracked.status, 201);
    const html = `<html><body><p id="result">pending</p>${ATTACK}
<form method="post" action="{{preference_center_submit_url}}">
<input id="name" value={{\${last_name}}}>
<a id="site" href="{{custom_attribute.\${site}}}">site</a>
<input type="hidden" name="{% form_field_name :email_global_state %}" value="unsubscribed">
<label><input id="all" type="checkbox" name="{% form_field_name :email_global_state %}" value="opted_in" {% if subscribed_state.\${email_global} == "opted_in" %}checked{% endif %}> All email</label>
<button type="submit">Save</button></form></body></html>`;
    const created = await api("POST", "/preference_center/v1", { name: "hostile", preference_center_page_html: html, confirmation_page_html: "<p id=\"saved\">Saved: {{subscribed_state.${email_global}}}</p>" });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const link = await api("GET", `/preference_center/v1/${created.body.preference_center_api_id}/url/victim`);
    assert.equal(link.status, 200);

    // The operator signs in to the inspector in this browser.
    await page.goto(`${base}/_engage/inspector`);
    await page.fill('input[name="token"]', ADMIN);
    await page.click("button");
    await page.waitForSelector("#query");

    // ... and opens the center's page (as "open as" does).
    await page.goto(link.body.preference_center_url);
    await page.waitForFunction(() => document.getElementById("result")?.textContent !== "pending", null, { timeout: 10_000 });
    const result = await page.textContent("#result");
    assert.match(result, /journal:blocked/, result);
    assert.match(result, /key:blocked/, result);
    assert.match(result, /cookie:blocked|cookie:\|/, result);
    assert.match(result, /origin:null/, result);
    const keys = await api("GET", "/_engage/workspaces", undefined, ADMIN);
    assert.ok(!JSON.stringify(keys.body).includes("attacker"), JSON.stringify(keys.body));

    // User data stayed in its attribute, and its link leads nowhere.
    assert.equal(await page.$$eval("[onfocus], [autofocus]", (e) => e.length), 0);
    assert.equal(await page.inputValue("#name"), "x autofocus onfocus=document.title='pwned'");
    assert.equal(await page.getAttribute("#site", "href"), "#");
    await page.click("#site");
    assert.notEqual(await page.title(), "pwned");

    // The form still works: unticked and saved, the state is stored.
    await page.uncheck("#all");
    await Promise.all([page.waitForURL(/saved=1/), page.click("button[type=submit]")]);
    assert.match(await page.textContent("#saved"), /Saved: unsubscribed/);
    const state = await api("POST", "/users/export/ids", { external_ids: ["victim"] });
    assert.equal(state.body.users[0].email_subscribe, "unsubscribed", JSON.stringify(state.body));

    // The operator's session still works in the inspector.
    const journal = await page.goto(`${base}/_engage/journal`);
    assert.equal(journal.status(), 200);
  } finally {
    await page.close();
    await stopEngage(child);
  }
});
