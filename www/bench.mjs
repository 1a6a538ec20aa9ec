// Time per request of the playground's in-page engine, in Debian's chromium driven by
// playwright-core (performance issue 20). Needs the built page (www/build.sh); run by
// bench.sh. Knobs (environment): BENCH_SMALL (200), BENCH_FULL (50), BENCH_EXPORT (200),
// BENCH_WARMUP (20), CHROMIUM (/usr/bin/chromium).
//
// Two views of the same requests:
//  1. engine: `Playground.send`, the wasm entry point the page's Send calls, in a loop.
//     `/users/track` answers once the job is queued, so this is the acknowledgement only;
//     the job is applied by the `Playground.save` that follows (timed on its own), as in
//     the page.
//  2. page: the Send button's whole handler (send, render the response, save the session
//     to localStorage, redraw the history). Saving applies the queued track jobs first,
//     so this is what a person pressing Send waits for, minus layout and paint.
// Reports times only: it fails on a non-2xx answer or a page error, never on speed.
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { staticServer } from "./static-server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, "dist");
const count = (name, fallback) => {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, not ${process.env[name]}`);
  return n;
};
const N = { small: count("BENCH_SMALL", 200), full: count("BENCH_FULL", 50), export: count("BENCH_EXPORT", 200) };
const WARMUP = count("BENCH_WARMUP", 20);

// Same tiny static server as e2e/playground.test.mjs, plus the two headers that make the
// page cross-origin isolated: without them Chromium coarsens performance.now() to 100 µs,
// as long as a small request takes. The page loads nothing from another origin, so
// isolation changes nothing else for it.
const ISOLATED = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp" };

// `requests` and `runInPage` run in the page (page.evaluate serializes them), so they must
// not close over anything of this module.

// The requests. `user(i)` names a profile; the pool is bounded so that the session, which
// the page saves after every Send, stops growing instead of making later runs slower.
function requests() {
  const POOL = 1000;
  const TIME = "2026-11-01T10:00:00Z";
  const user = (i) => `user-${i % POOL}`;
  // (a) what the picker's example sends, one attribute object and one event.
  const small = () =>
    JSON.stringify({
      attributes: [{ external_id: "user-1", first_name: "Ada", email: "ada@example.com", favorite_color: "blue" }],
      events: [{ external_id: "user-1", name: "played_song", time: TIME, properties: { genre: "jazz" } }],
    });
  // (b) a full batch as host-native/benches/track_load.rs's body() builds it, each of the
  // 225 objects on a user of its own (consecutive slices of the pool, batch after batch).
  const full = (n) => {
    const base = n * 225;
    return JSON.stringify({
      attributes: Array.from({ length: 75 }, (_, i) => ({
        external_id: user(base + i), first_name: "Bench", visits: { inc: 1 }, tier: `t${i % 5}`,
      })),
      events: Array.from({ length: 75 }, (_, i) => ({
        external_id: user(base + 75 + i), name: "viewed_item", time: TIME, properties: { item: "sku-1", price: 9.99 },
      })),
      purchases: Array.from({ length: 75 }, (_, i) => ({
        external_id: user(base + 150 + i), product_id: "sku-1", currency: "USD", price: 9.99, quantity: 1, time: TIME,
      })),
    });
  };
  const ids = Array.from({ length: 50 }, (_, i) => `export-${i}`);
  // (c) the 50 users exported, tracked first with an attribute and an event each.
  const seedExport = JSON.stringify({
    attributes: ids.map((id, i) => ({ external_id: id, first_name: "Exported", email: `${id}@example.com`, tier: `t${i % 5}` })),
    events: ids.map((id) => ({ external_id: id, name: "played_song", time: TIME, properties: { genre: "jazz" } })),
  });
  const exportBody = JSON.stringify({ external_ids: ids });
  return [
    { label: "(a) POST /users/track, 1 attribute + 1 event", runs: "small", path: "/users/track", body: small },
    { label: "(b) POST /users/track, 75 attr + 75 events + 75 purchases", runs: "full", path: "/users/track", body: full },
    { label: "(c) POST /users/export/ids, 50 users", runs: "export", path: "/users/export/ids", body: () => exportBody,
      seed: { path: "/users/track", body: seedExport } },
  ];
}

async function runInPage({ source, N, WARMUP, mode }) {
  const requests = (0, eval)(`(${source})`);
  const headersFor = (key) => `Authorization: Bearer ${key}\nContent-Type: application/json`;
  const stats = (label, count, times) => {
    const sorted = [...times].sort((x, y) => x - y);
    // Nearest rank: p99 of 50 runs is the 50th (the slowest), of 200 the 198th.
    const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
    const mean = times.reduce((s, t) => s + t, 0) / times.length;
    return { label, count, mean, p50: pct(50), p99: pct(99), max: sorted[sorted.length - 1] };
  };
  const ok = (res, what) => {
    if (!(res.status >= 200 && res.status < 300)) throw new Error(`${what}: status ${res.status}: ${String(res.body).slice(0, 500)}`);
  };

  // 1. The wasm entry point. The module is already instantiated by the page (same URL,
  // same module instance); each request kind gets a fresh session so one's data and
  // rate-limit windows cannot skew another's. Each request is followed by `save`, as the
  // page's Send follows it by persist(): that applies the queued track job, so the queue
  // stays as short as in the page. `save` is timed apart (without the localStorage write).
  if (mode === "engine") {
    const { Playground } = await import(new URL("pkg/engage_www.js", location.href).href);
    const sends = [];
    const saves = [];
    for (const r of requests()) {
      const pg = new Playground(null);
      const headers = headersFor(pg.key);
      if (r.seed) ok(pg.send("POST", r.seed.path, "", headers, r.seed.body), `${r.label} (seed)`);
      const times = [];
      const saved = [];
      let sizes = "";
      for (let i = 0; i < WARMUP + N[r.runs]; i++) {
        // The body is built before the clock starts: the page's Send gets it as text too.
        const body = r.body(i);
        const t0 = performance.now();
        const res = pg.send("POST", r.path, "", headers, body);
        const t1 = performance.now();
        const snapshot = pg.save();
        const t2 = performance.now();
        ok(res, r.label);
        if (i >= WARMUP) {
          times.push(t1 - t0);
          saved.push(t2 - t1);
        }
        sizes = `request ${body.length} B, response ${res.body.length} B, saved session ${snapshot.length} chars`;
      }
      sends.push(stats(r.label, times.length, times), { note: sizes });
      saves.push(stats(r.label, saved.length, saved));
      pg.free();
    }
    return { sends, saves };
  }

  // 2. The Send button, on the page's own session: the request is put in the editor and
  // the form submitted; requestSubmit runs the handler synchronously, so the clock covers
  // all of it (layout and paint come later and are not counted).
  const $ = (id) => document.getElementById(id);
  let key;
  const submit = (p, body) => {
    $("method").value = "POST";
    $("path").value = p;
    $("query").value = "";
    $("headers").value = headersFor(key);
    $("body").value = body;
    const t0 = performance.now();
    $("request").requestSubmit();
    const t = performance.now() - t0;
    const status = Number($("status").textContent);
    const notice = $("notice").hidden ? "" : $("notice").textContent;
    // A failed save (e.g. localStorage full) shows a notice but still answers: fail on it,
    // since the time would then leave out the save.
    if (notice) throw new Error(`${p}: the page says: ${notice}`);
    ok({ status, body: $("response-body").textContent }, p);
    return t;
  };
  const out = [];
  window.confirm = () => true;
  for (const r of requests()) {
    // A fresh session per kind, as in the engine pass: otherwise the export would be
    // saved along with the 1,000 profiles of the full batches. Reset's handler asks first.
    $("reset").click();
    key = $("api-key").textContent.trim();
    if (r.seed) submit(r.seed.path, r.seed.body);
    const times = [];
    for (let i = 0; i < WARMUP + N[r.runs]; i++) {
      const t = submit(r.path, r.body(i));
      if (i >= WARMUP) times.push(t);
    }
    out.push(stats(r.label, times.length, times),
      { note: `session saved to localStorage: ${localStorage.getItem("engage-playground:state").length} chars` });
  }
  return out;
}

function table(title, rows) {
  const w = Math.max(...rows.filter((r) => r.label).map((r) => r.label.length), 7);
  const num = (x) => x.toFixed(3).padStart(9);
  console.log(`\n${title}`);
  console.log(`${"request".padEnd(w)}  count    mean ms    p50 ms    p99 ms    max ms`);
  for (const r of rows) {
    if (r.note) console.log(`  (${r.note})`);
    else console.log(`${r.label.padEnd(w)}  ${String(r.count).padStart(5)}  ${num(r.mean)} ${num(r.p50)} ${num(r.p99)} ${num(r.max)}`);
  }
}

const server = await staticServer(dist, ISOLATED);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
    "--no-first-run", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  // The reference panel is built right after the page is ready; let it finish first.
  await page.waitForSelector('#reference[data-loaded="true"]', { timeout: 30_000 });
  const ua = await page.evaluate(() => navigator.userAgent);
  console.log(`Chromium ${browser.version()} (${ua})`);
  // Other jobs on the machine show up in the tails (p99, max), far less in p50.
  console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} on ${os.cpus().length} CPUs`);
  console.log(`warm-up: ${WARMUP} requests of each kind, not counted; times from performance.now() in the page`);
  if (!(await page.evaluate(() => crossOriginIsolated))) throw new Error("the page is not cross-origin isolated: times would be in 100 µs steps");
  const source = requests.toString();
  const engine = await page.evaluate(runInPage, { source, N, WARMUP, mode: "engine" });
  table("engine: Playground.send (the wasm entry point of the page's Send; /users/track answers once the job is queued)",
    engine.sends);
  table("engine: Playground.save right after each request (the page's persist: applies the queued job, serializes the session)",
    engine.saves);
  table("page: the Send button's handler (send + render + apply queue + save to localStorage + history)",
    await page.evaluate(runInPage, { source, N, WARMUP, mode: "page" }));
  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
} finally {
  await browser.close();
  server.close();
}
