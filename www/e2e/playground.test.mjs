// End-to-end test of the playground in a real browser: Debian's chromium driven by
// playwright-core. Needs the built page (www/build.sh). Run with `node --test e2e/`.
//
// 1. The page served as static files (a tiny server here): load, track, export,
//    reload, reset, screenshots, and the time to interactive.
// 2. With ENGAGE_BIN set: the page served by `engage serve` at /playground/, and the
//    "Copy as curl" commands run against that real server.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { staticServer } from "../static-server.mjs";
import { startEngage as startServer } from "./engage.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, "../dist");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";

let tmp;
let context;


before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "engage-playground-e2e-"));
  context = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1440, height: 1000 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await context?.close();
  await rm(tmp, { recursive: true, force: true });
});

async function open(page, url) {
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  return Date.now() - t0;
}

async function pick(page, route) {
  await page.click(`[data-route="${route}"]`);
}

async function sendStatus(page) {
  const before = await page.locator("#history li").count();
  await page.click("#send");
  await page.waitForFunction((n) => document.querySelectorAll("#history li").length > n, before);
  return Number(await page.textContent("#status"));
}

async function send(page) {
  const status = await sendStatus(page);
  return { status, body: JSON.parse(await page.textContent("#response-body")) };
}

/** Runs `steps(page)` on a fresh page of the static playground; fails on any page error. */
async function inStaticPlayground(steps) {
  const server = await staticServer(dist);
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    await open(page, `http://127.0.0.1:${server.address().port}/`);
    await steps(page);
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
    server.close();
  }
}

async function exportUser(page) {
  await pick(page, "POST /users/export/ids");
  const res = await send(page);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

test("track, export, reload and reset in the static playground", async () => {
  const server = await staticServer(dist);
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    const url = `http://127.0.0.1:${server.address().port}/`;
    const tti = await open(page, url);
    const ready = await page.evaluate(() => window.engagePlaygroundReady);
    console.log(
      `time to interactive: ${ready.sinceNavigationMs.toFixed(0)} ms from navigation start to the key shown ` +
        `(${ready.sinceScriptMs.toFixed(0)} ms of it after the script started; ${tti} ms as seen by the test driver)`,
    );

    const key = (await page.textContent("#api-key")).trim();
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(await page.textContent("#workspace"), "playground");
    // The picker lists every public endpoint, each with a ready request.
    assert.ok((await page.locator("#routes button").count()) >= 20);

    await pick(page, "POST /users/track");
    assert.match(await page.inputValue("#headers"), new RegExp(`Authorization: Bearer ${key}`));
    const tracked = await send(page);
    assert.equal(tracked.status, 201);
    assert.equal(tracked.body.message, "success");

    const exported = await exportUser(page);
    assert.equal(exported.users[0].external_id, "user-1");
    assert.equal(exported.users[0].custom_attributes.favorite_color, "blue");

    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal((await page.textContent("#api-key")).trim(), key, "the key survives a reload");
    assert.equal(await page.locator("#history li").count(), 2, "the history survives a reload");
    const reloaded = await exportUser(page);
    assert.equal(reloaded.users[0].custom_attributes.favorite_color, "blue", "the data survives a reload");

    await page.click("#copy-curl");
    const curl = await page.textContent("#curl");
    assert.ok(curl.startsWith("curl -sS -i -X POST 'http://127.0.0.1:8080/users/export/ids'"), curl);
    await page.screenshot({ path: path.join(here, "screenshot.png"), fullPage: true });

    page.once("dialog", (d) => d.accept());
    await page.click("#reset");
    await page.waitForFunction((k) => document.getElementById("api-key").textContent.trim() !== k, key);
    assert.equal(await page.locator("#history li").count(), 0);
    const afterReset = await exportUser(page);
    assert.deepEqual(afterReset.users, [], JSON.stringify(afterReset));
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert.deepEqual((await exportUser(page)).users, [], "the reset survives a reload");
    await page.screenshot({ path: path.join(here, "screenshot-reset.png"), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
    server.close();
  }
});

const run = promisify(execFile);

async function startEngage(bin, db) {
  return startServer(bin, ["--db", db, "--playground-dir", dist]);
}

test("engage serve hosts the playground, and its curl commands work against the server", { skip: !process.env.ENGAGE_BIN && "ENGAGE_BIN is not set" }, async () => {
  const db = path.join(tmp, "engage.db");
  const serverKey = (await run(process.env.ENGAGE_BIN, ["keys", "create", "--db", db])).stdout.trim();
  const { child, base } = await startEngage(process.env.ENGAGE_BIN, db);
  const page = await context.newPage();
  try {
    const redirect = await fetch(`${base}/playground`, { redirect: "manual" });
    assert.equal(redirect.status, 301);
    assert.equal(redirect.headers.get("location"), "/playground/");
    const wasm = await fetch(`${base}/playground/pkg/engage_www_bg.wasm`);
    assert.equal(wasm.status, 200);
    assert.equal(wasm.headers.get("content-type"), "application/wasm");
    assert.equal((await fetch(`${base}/playground/..%2f..%2fCargo.toml`)).status, 404);

    await open(page, `${base}/playground/`);
    assert.equal(await page.inputValue("#base-url"), base, "the curl base URL defaults to the serving origin");

    // The playground's requests, with the server's key, sent by curl to the server.
    const curlFor = async (route) => {
      await pick(page, route);
      const headers = (await page.inputValue("#headers")).replace(/Bearer \S+/, `Bearer ${serverKey}`);
      await page.fill("#headers", headers);
      await page.click("#copy-curl");
      const script = path.join(tmp, "request.sh");
      await writeFile(script, await page.textContent("#curl"));
      const { stdout } = await run("sh", [script]);
      const [head, ...rest] = stdout.split(/\r?\n\r?\n/);
      return { status: Number(head.split(" ")[1]), body: JSON.parse(rest.join("\n\n")) };
    };
    const tracked = await curlFor("POST /users/track");
    assert.equal(tracked.status, 201, JSON.stringify(tracked.body));
    const exported = await curlFor("POST /users/export/ids");
    assert.equal(exported.status, 201);
    assert.equal(exported.body.users[0].custom_attributes.favorite_color, "blue");
  } finally {
    await page.close();
    child.stdin.end();
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
  }
});

test("SCIM provisioning in the playground: create, find, replace and delete a dashboard user with the session's SCIM token", () =>
  inStaticPlayground(async (page) => {
    await pick(page, "POST /scim/v2/Users");
    assert.match(await page.inputValue("#headers"), /Authorization: Bearer scim_[0-9a-f]{32}/);
    assert.match(await page.inputValue("#headers"), /X-Request-Origin: /);
    const created = await send(page);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.userName, "ada@example.com");
    const id = created.body.id;

    await pick(page, "GET /scim/v2/Users");
    const found = await send(page);
    assert.equal(found.body.totalResults, 1, JSON.stringify(found.body));
    assert.equal(found.body.Resources[0].id, id);

    await pick(page, "PUT /scim/v2/Users/{}");
    await page.fill("#path", `/scim/v2/Users/${id}`);
    const replaced = await send(page);
    assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
    assert.equal(replaced.body.name.familyName, "Byron");
    assert.equal(replaced.body.permissions.appGroup[0].team[0].teamName, "Growth");

    await pick(page, "DELETE /scim/v2/Users/{}");
    await page.fill("#path", `/scim/v2/Users/${id}`);
    assert.equal(await sendStatus(page), 204);
    await pick(page, "GET /scim/v2/Users/{}");
    await page.fill("#path", `/scim/v2/Users/${id}`);
    const gone = await send(page);
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body.schemas, ["urn:ietf:params:scim:api:messages:2.0:Error"]);
  }));

test("a preference page opens inside the playground and its form is sent to the in-page core", () =>
  inStaticPlayground(async (page) => {
    await pick(page, "POST /users/track");
    assert.equal((await send(page)).status, 201);
    await pick(page, "POST /preference_center/v1");
    const created = await send(page);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await pick(page, "GET /preference_center/v1/{}/url/{}");
    await page.fill("#path", `/preference_center/v1/${created.body.preference_center_api_id}/url/user-1`);
    const url = await send(page);
    assert.equal(url.status, 200, JSON.stringify(url.body));
    await page.click("#open-page");
    const frame = page.frameLocator("#page-frame");
    await frame.locator("text=Hello Ada").waitFor();
    const group = frame.locator('input[name^="subscription_group_"]');
    await group.check();
    await frame.locator("button[type=submit]").click();
    await frame.locator("text=Saved. Email: opted_in.").waitFor();
    assert.equal(await page.textContent("#page-status"), "200");

    await pick(page, "GET /subscription/user/status");
    const status = await send(page);
    assert.equal(status.body.users[0].subscription_groups[0].status, "Subscribed", JSON.stringify(status.body));
  }));

test("a preference page's script and its user data run nothing in the playground (same origin as the server)", () =>
  inStaticPlayground(async (page) => {
    await pick(page, "POST /users/track");
    await page.fill("#body", JSON.stringify({ attributes: [{ external_id: "victim", email: "v@example.com",
      last_name: "x autofocus onfocus=parent.document.title='pwned'", site: "javascript:parent.document.title='pwned'" }] }));
    assert.equal((await send(page)).status, 201);
    await pick(page, "POST /preference_center/v1");
    const html = `<html><body><script>parent.document.title = "pwned"; localStorage.setItem("pwned", "1");</script>
<p id="hello">Hello</p><input id="name" value={{\${last_name}}}><a id="site" href="{{custom_attribute.\${site}}}">site</a></body></html>`;
    await page.fill("#body", JSON.stringify({ name: "hostile", preference_center_page_html: html, confirmation_page_html: "<p>ok</p>" }));
    const created = await send(page);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await pick(page, "GET /preference_center/v1/{}/url/{}");
    await page.fill("#path", `/preference_center/v1/${created.body.preference_center_api_id}/url/victim`);
    assert.equal((await send(page)).status, 200);
    const title = await page.title();
    await page.click("#open-page");
    const frame = page.frameLocator("#page-frame");
    await frame.locator("#hello").waitFor();
    assert.equal(await frame.locator("#site").getAttribute("href"), "#");
    assert.equal(await frame.locator("#name").inputValue(), "x autofocus onfocus=parent.document.title='pwned'");
    await frame.locator("#name").focus();
    await frame.locator("#site").click();
    await page.waitForTimeout(300);
    assert.equal(await page.title(), title, "no script of the page ran");
    assert.equal(await page.evaluate(() => localStorage.getItem("pwned")), null);
  }));

test("a person manages their subscriptions on the page engage serve hosts", { skip: !process.env.ENGAGE_BIN && "ENGAGE_BIN is not set" }, async () => {
  const bin = process.env.ENGAGE_BIN;
  const db = path.join(tmp, "preferences.db");
  const key = (await run(bin, ["keys", "create", "--db", db])).stdout.trim();
  const news = (await run(bin, ["groups", "create", "--db", db, "--name", "News", "--channel", "email"])).stdout.trim();
  const offers = (await run(bin, ["groups", "create", "--db", db, "--name", "Offers", "--channel", "email"])).stdout.trim();
  const { child, base } = await startEngage(bin, db);
  const api = async (method, p, body) => {
    const r = await fetch(`${base}${p}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: body && JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };
  const box = (g, label) =>
    `<label><input type="checkbox" name="{% form_field_name :subscription_group ${g} %}" value="subscribed"` +
    ` {% if subscribed_state.\${${g}} == "subscribed" %}checked{% endif %}> ${label}</label>`;
  const option = (v) => `<option value="${v}" {% if subscribed_state.\${email_global} == "${v}" %}selected{% endif %}>${v}</option>`;
  const page = await context.newPage();
  try {
    assert.equal((await api("POST", "/users/track", { attributes: [{ external_id: "ana", email: "ana@x.test", first_name: "Ana",
      email_subscribe: "subscribed", subscription_groups: [
        { subscription_group_id: news, subscription_state: "subscribed" },
        { subscription_group_id: offers, subscription_state: "subscribed" }] }] })).status, 201);
    const created = await api("POST", "/preference_center/v1", {
      name: "e2e",
      preference_center_title: "Your email",
      preference_center_page_html: `<html><body><h1>Hi {{\${first_name}}}</h1><form method="post" action="{{preference_center_submit_url}}">
        <select name="{% form_field_name :email_global_state %}">${["subscribed", "opted_in", "unsubscribed"].map(option).join("")}</select>
        ${box(news, "News")} ${box(offers, "Offers")}<button type="submit">Save</button></form></body></html>`,
      confirmation_page_html: "<html><body><p id=done>Saved for {{${email_address}}}</p></body></html>",
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const url = await api("GET", `/preference_center/v1/${created.body.preference_center_api_id}/url/ana`);
    assert.equal(url.status, 200, JSON.stringify(url.body));
    assert.ok(url.body.preference_center_url.startsWith(`${base}/preferences/`), url.body.preference_center_url);

    await page.goto(url.body.preference_center_url);
    assert.equal(await page.title(), "Your email");
    await page.locator("text=Hi Ana").waitFor();
    assert.ok(await page.isChecked(`input[name="subscription_group_${news}"]`));
    await page.uncheck(`input[name="subscription_group_${news}"]`);
    await page.selectOption('select[name="email_global_state"]', "opted_in");
    const posts = [];
    page.on("request", (r) => r.method() === "POST" && posts.push(r.url()));
    await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
    assert.equal(await page.textContent("#done"), "Saved for ana@x.test");
    // Post/redirect/get: the confirmation has an address of its own; a reload shows
    // it again and sends nothing.
    assert.ok(page.url().endsWith("?saved=1"), page.url());
    await page.reload();
    assert.equal(await page.textContent("#done"), "Saved for ana@x.test");
    assert.equal(posts.length, 1, `one form sent: ${posts}`);
    await page.screenshot({ path: path.join(here, "screenshot-preference-confirmation.png"), fullPage: true });

    const status = await api("GET", "/subscription/user/status?external_id=ana");
    const groups = Object.fromEntries(status.body.users[0].subscription_groups.map((g) => [g.name, g.status]));
    assert.deepEqual(groups, { News: "Unsubscribed", Offers: "Subscribed" });
    const exported = await api("POST", "/users/export/ids", { external_ids: ["ana"] });
    assert.equal(exported.body.users[0].email_subscribe, "opted_in", JSON.stringify(exported.body));

    // A page left open while the marketer takes Offers out of it: its form still
    // saves what the page shows now (News), and the stale Offers box changes nothing.
    await page.goto(url.body.preference_center_url);
    await page.locator("text=Hi Ana").waitFor();
    const updated = await api("PUT", `/preference_center/v1/${created.body.preference_center_api_id}`, {
      preference_center_page_html: `<html><body><h1>Hi {{\${first_name}}}</h1><form method="post" action="{{preference_center_submit_url}}">
        ${box(news, "News")}<button type="submit">Save</button></form></body></html>`,
      confirmation_page_html: "<html><body><p id=done>Saved again</p></body></html>",
    });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    await page.check(`input[name="subscription_group_${news}"]`);
    await page.uncheck(`input[name="subscription_group_${offers}"]`);
    await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
    assert.equal(await page.textContent("#done"), "Saved again");
    const after = await api("GET", "/subscription/user/status?external_id=ana");
    const now = Object.fromEntries(after.body.users[0].subscription_groups.map((g) => [g.name, g.status]));
    assert.deepEqual(now, { News: "Subscribed", Offers: "Subscribed" });

    // System pages on a phone, in the reader's language: readable without zooming.
    await page.setViewportSize({ width: 375, height: 667 });
    await page.setExtraHTTPHeaders({ "Accept-Language": "de-DE,de;q=0.9" });
    const refused = await page.goto(`${base}/preferences/not-a-token`);
    assert.equal(refused.status(), 403);
    const look = await page.evaluate(() => ({
      lang: document.documentElement.lang,
      h1: document.querySelector("h1").textContent,
      viewport: document.querySelector('meta[name="viewport"]')?.content,
      font: parseFloat(getComputedStyle(document.body).fontSize),
      overflow: document.documentElement.scrollWidth > window.innerWidth,
    }));
    assert.deepEqual(look, { lang: "de", h1: "Dieser Link ist ungültig", viewport: "width=device-width, initial-scale=1",
      font: 17, overflow: false });
    await page.screenshot({ path: path.join(here, "screenshot-preference-invalid-phone.png") });
  } finally {
    await page.close();
    child.stdin.end();
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
  }
});

test("the API reference lists every operation of the in-page engine's /openapi.json, and loads one into the editor", () =>
  inStaticPlayground(async (page) => {
    await page.waitForSelector('#reference[data-loaded="true"]', { timeout: 30_000 });
    assert.match(await page.textContent("#reference-count"), /^\d+ operations · OpenAPI 3\.1\.0/);
    const operations = await page.locator("#reference li.operation").count();
    assert.ok(operations >= 55, `${operations} operations`);
    // Every route of the picker is in the reference.
    const routes = await page.$$eval("#routes button", (bs) => bs.map((b) => b.dataset.route));
    const patterns = await page.$$eval("#reference li.operation", (lis) => lis.map((li) => li.dataset.operation));
    assert.equal(patterns.length, operations);
    assert.ok(routes.length >= 20 && routes.length <= operations, `${routes.length} routes`);

    const track = page.locator('#reference [data-operation="POST /users/track"]');
    assert.match(await track.textContent(), /Record events, purchases and attributes/);
    assert.match(await track.locator(".chip").first().textContent(), /^users\.track$/);
    const keys = page.locator('#reference [data-operation="POST /_engage/keys"]');
    assert.match(await keys.textContent(), /admin token/);
    assert.equal(await page.locator('#reference section.tag[data-tag="Engage operator"] li.operation').count() >= 10, true);
    assert.equal(await page.locator('#reference section.tag[data-tag="Engage service"] [data-operation="GET /openapi.json"]').count(), 1);

    // The details: the description, the permission and the body's fields.
    await track.locator("summary").click();
    const details = await track.locator(".op-details").textContent();
    assert.match(details, /users\.track/);
    assert.match(details, /attributes/);
    assert.match(details, /429/);

    // The filter.
    await page.fill("#reference-filter", "cdi.integration");
    assert.equal(await page.locator("#reference li.operation:not([hidden])").count(), 2);
    await page.fill("#reference-filter", "");

    // Load: the picker's example when there is one, ready to send.
    await track.locator("button.op-load").click();
    assert.equal(await page.inputValue("#method"), "POST");
    assert.equal(await page.inputValue("#path"), "/users/track");
    assert.match(await page.inputValue("#headers"), /Authorization: Bearer [0-9a-f-]{36}/);
    assert.equal((await send(page)).status, 201);
    // Otherwise the method, the path to fill in and a skeleton of the body.
    await page.locator('#reference [data-operation="DELETE /_engage/keys/{id}"] button.op-load').click();
    assert.equal(await page.inputValue("#method"), "DELETE");
    assert.equal(await page.inputValue("#path"), "/_engage/keys/{id}");
    assert.match(await page.inputValue("#headers"), /Bearer <ADMIN_TOKEN>/);
    await page.locator('#reference [data-operation="GET /healthz"] button.op-load').click();
    const health = await send(page);
    // The playground's engine names its version (no commit: it is not a host's build).
    assert.deepEqual([health.status, health.body.status, typeof health.body.version], [200, "ok", "string"]);
    assert.equal(health.body.commit, undefined);
    await page.screenshot({ path: path.join(os.tmpdir(), "engage-playground-reference.png"), fullPage: true });
  }));
