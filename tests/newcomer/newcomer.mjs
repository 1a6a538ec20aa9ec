// The newcomer test's runner (started by tests/newcomer/run.sh, which clones the
// repository and reads the README's run command):
//   node newcomer.mjs DIR COMMAND TIMEOUT_SECS [now]
// Runs COMMAND with bash in DIR (its own process group; its output is shown with
// "  | " in front), waits for the server's "listening on http://..." line, then in
// Debian's chromium (playwright-core from www/node_modules): `/` is the landing page
// (while it says the playground is being built, the API must answer and the page is
// reloaded until it links the playground; `now`: it must link it at once), its
// playground link leads to /playground/, which loads the wasm engine and answers a
// request in the page; no API request goes to the server. Then SIGTERM to the group,
// and the server must stop. Exits non-zero on any failure.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { chromium } = createRequire(path.join(root, "www/package.json"))("playwright-core");
const [clone, command, timeoutArg, expectArg] = process.argv.slice(2);
// "now": the playground must be served from the start (a release binary has it inside).
const expectPlayground = expectArg || "eventually";
const timeoutSecs = Number(timeoutArg || 2400);
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

/** Runs the command; `base` resolves to the URL the server logs once it listens. */
function run() {
  const child = spawn("bash", ["-c", command], { cwd: clone, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const base = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen within ${timeoutSecs} s`)), timeoutSecs * 1000);
    for (const stream of [child.stdout, child.stderr]) {
      readline.createInterface({ input: stream }).on("line", (line) => {
        console.log(`  | ${line}`);
        const m = line.replace(/\x1b\[[0-9;]*m/g, "").match(/listening on (http:\/\/[0-9.]+:\d+)/);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    }
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the command exited (${signal ?? `code ${code}`}) before the server listened`));
    });
  });
  base.catch(() => {});
  return { child, base, exited };
}

/** SIGTERM to the command's process group; SIGKILL if it is still there after 20 s. */
async function stop(child, exited) {
  if (child.exitCode !== null || child.signalCode !== null) return { ...(await exited), forced: false };
  process.kill(-child.pid, "SIGTERM");
  const late = await Promise.race([exited.then(() => false), new Promise((r) => setTimeout(() => r(true), 20_000))]);
  if (late) process.kill(-child.pid, "SIGKILL");
  return { ...(await exited), forced: late };
}

async function inBrowser(base) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    const toServer = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("request", (r) => toServer.push(new URL(r.url()).pathname));

    // The landing page.
    const landing = await page.goto(`${base}/`);
    assert.equal(landing.status(), 200, "GET /");
    assert.match(landing.headers()["content-type"], /^text\/html/);
    assert.equal(await page.title(), "Engage");
    assert.equal((await page.textContent("h1")).trim(), "Engage");
    const health = await (await fetch(`${base}/healthz`)).json();
    assert.equal(health.status, "ok", JSON.stringify(health));
    assert.match((await page.textContent("footer")).trim(), new RegExp(`^Engage ${health.version.replaceAll(".", "\\.")}`));
    if (await page.locator("#playground-building").count()) {
      // API first: the server answers while the playground is built beside it.
      assert.notEqual(expectPlayground, "now", "the playground must be there at once");
      const api = await fetch(`${base}/users/export/ids`, { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } });
      assert.equal(api.status, 401, "the API answers (no key: 401) while the playground is being built");
      // 503 "being built" (200 if the build finished since the page was loaded).
      const waiting = (await fetch(`${base}/playground/`)).status;
      assert.ok([503, 200].includes(waiting), `/playground/ while being built: ${waiting}`);
      console.log(`the API answers while the playground is being built (${elapsed()} after the command started)`);
      const deadline = Date.now() + timeoutSecs * 1000;
      while ((await page.locator('a[href="/playground/"]').count()) === 0) {
        assert.equal(await page.getByText("its build failed").count(), 0, "the playground's build failed");
        assert.ok(Date.now() < deadline, `the playground was not built within ${timeoutSecs} s`);
        await new Promise((r) => setTimeout(r, 5000));
        await page.reload();
      }
      console.log(`the playground is built, ${elapsed()} after the command started`);
    }
    const link = page.locator('a[href="/playground/"]');
    assert.equal(await link.count(), 1, "the landing page links to /playground/");
    for (const href of ["/openapi.json", "/healthz"]) {
      assert.equal(await page.locator(`a[href="${href}"]`).count(), 1, `the landing page links to ${href}`);
      assert.equal((await fetch(`${base}${href}`)).status, 200, `GET ${href}`);
    }
    console.log(`landing page at ${base}/ (Engage ${health.version}, commit ${health.commit ?? "unknown"}) with its links: ok`);

    // Its link to the playground, which must come up and answer in the page.
    const t0 = Date.now();
    await Promise.all([page.waitForURL(`${base}/playground/`), link.click()]);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    console.log(`playground ready ${Date.now() - t0} ms after the click`);
    const key = (await page.textContent("#api-key")).trim();
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "the page made an API key");

    const send = async (route) => {
      await page.click(`[data-route="${route}"]`);
      const before = await page.locator("#history li").count();
      await page.click("#send");
      await page.waitForFunction((n) => document.querySelectorAll("#history li").length > n, before);
      return { status: Number(await page.textContent("#status")), body: JSON.parse(await page.textContent("#response-body")) };
    };
    const tracked = await send("POST /users/track");
    assert.equal(tracked.status, 201, JSON.stringify(tracked.body));
    assert.equal(tracked.body.message, "success");
    const exported = await send("POST /users/export/ids");
    assert.equal(exported.status, 201, JSON.stringify(exported.body));
    assert.equal(exported.body.users[0].external_id, "user-1", JSON.stringify(exported.body));
    console.log(`in-page requests through the wasm engine: POST /users/track ${tracked.status}, POST /users/export/ids ${exported.status}`);

    const api = toServer.filter((p) => p.startsWith("/users/"));
    assert.deepEqual(api, [], "the playground's requests are answered in the page, not by the server");
    assert.ok(toServer.includes("/playground/pkg/engage_www_bg.wasm"), `the wasm engine was loaded: ${toServer}`);
    assert.deepEqual(errors, [], "page errors");
  } finally {
    await browser.close();
  }
}

const { child, base, exited } = run();
let failure;
try {
  const url = await base;
  console.log(`server listening at ${url}, ${elapsed()} after the command started (builds included)`);
  await inBrowser(url);
} catch (e) {
  failure = e;
}
const end = await stop(child, exited);
console.log(`server stopped (${end.signal ?? `exit code ${end.code}`}${end.forced ? ", after SIGKILL" : ""})`);
if (!failure && end.forced) failure = new Error("the server did not stop within 20 s of SIGTERM");
if (failure) {
  console.error(`newcomer test FAILED after ${elapsed()}:`, failure);
  process.exit(1);
}
console.log(`newcomer test passed in ${elapsed()}`);
