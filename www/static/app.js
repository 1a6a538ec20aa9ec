// The playground page. It only renders: requests are answered by the Engage core
// compiled to wasm (./pkg), which also provides the examples and the curl commands.
import init, { Playground, curl } from "./pkg/engage_www.js";
import { renderReference, skeleton } from "./reference.js";

const STATE = "engage-playground:state";
const HISTORY = "engage-playground:history";
const BASE_URL = "engage-playground:base-url";
const MAX_HISTORY = 50;

const $ = (id) => document.getElementById(id);
const started = performance.now();
let pg;
let examples = [];
let history = [];
let reference = null;

function load(name, fallback) {
  try {
    const v = localStorage.getItem(name);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}

function notice(text) {
  $("notice").textContent = text || "";
  $("notice").hidden = !text;
}

function persist() {
  try {
    localStorage.setItem(STATE, pg.save());
    localStorage.setItem(HISTORY, JSON.stringify(history));
  } catch (e) {
    notice(`Could not save to the browser's storage: ${e.message || e}`);
  }
}

function defaultBaseUrl() {
  // Served by `engage serve` at /playground/: the API is on the same origin.
  if (location.protocol.startsWith("http") && location.pathname.startsWith("/playground")) return location.origin;
  return "http://127.0.0.1:8080";
}

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function highlight(json) {
  // Tokenise the raw text first, then escape each piece (escaping first would hide the quotes).
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let out = "";
  let last = 0;
  for (const m of json.matchAll(token)) {
    out += escapeHtml(json.slice(last, m.index));
    const [all, str, colon, lit] = m;
    if (str) out += colon ? `<span class="k">${escapeHtml(str)}</span>${colon}` : `<span class="s">${escapeHtml(str)}</span>`;
    else if (lit) out += `<span class="b">${lit}</span>`;
    else out += `<span class="n">${all}</span>`;
    last = m.index + all.length;
  }
  return out + escapeHtml(json.slice(last));
}

function editorRequest() {
  return {
    method: $("method").value,
    path: $("path").value,
    query: $("query").value,
    headers: $("headers").value,
    body: $("body").value,
  };
}

function fillEditor(r) {
  $("method").value = r.method;
  $("path").value = r.path;
  $("query").value = r.query;
  $("headers").value = r.headers;
  $("body").value = r.body;
  $("curl").hidden = true;
}

function renderSession() {
  $("workspace").textContent = pg.workspace;
  $("api-key").textContent = pg.key;
  examples = pg.examples();
  const list = $("routes");
  list.replaceChildren(
    ...examples.map((ex) => {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.route = `${ex.method} ${ex.pattern}`;
      b.title = `needs ${ex.permission}`;
      b.innerHTML = `<span class="method ${ex.method}">${ex.method}</span>${escapeHtml(ex.pattern.replaceAll("{}", "{id}"))}`;
      b.addEventListener("click", () => {
        list.querySelectorAll("button.active").forEach((x) => x.classList.remove("active"));
        b.classList.add("active");
        fillEditor(ex);
      });
      li.append(b);
      return li;
    }),
  );
}

// An operation of the API reference, in the editor: its ready example when the
// picker has one, else its method and path (parameters to fill in), the credentials
// it needs and a skeleton of its body.
function loadOperation({ method, path, op }) {
  const pattern = op["x-engage-pattern"];
  const ex = examples.find((e) => e.method === method && e.pattern === pattern);
  if (ex) {
    fillEditor(ex);
  } else {
    const security = (op.security || [])[0] || {};
    const headers = [];
    if (security.apiKey) headers.push(`Authorization: Bearer ${pg.key}`);
    if (security.adminToken) headers.push("Authorization: Bearer <ADMIN_TOKEN>");
    const [media, content] = Object.entries((op.requestBody || {}).content || {})[0] || [];
    if (media) headers.push(`Content-Type: ${media}`);
    const body = media && media.endsWith("json") ? JSON.stringify(skeleton(reference, content.schema), null, 2) : "";
    fillEditor({ method, path, query: "", headers: headers.join("\n"), body });
  }
  const list = $("routes");
  list.querySelectorAll("button.active").forEach((x) => x.classList.remove("active"));
  list.querySelector(`[data-route="${method} ${pattern}"]`)?.classList.add("active");
  notice(path.includes("{") && !ex ? `Fill in the path parameters of ${path} before sending.` : "");
  $("request").scrollIntoView({ block: "nearest" });
}

// The reference panel, from the in-page engine's own GET /openapi.json.
function renderReferencePanel() {
  const res = pg.send("GET", "/openapi.json", "", "", "");
  if (res.status !== 200) {
    $("reference-count").textContent = `unavailable (status ${res.status})`;
    return;
  }
  reference = JSON.parse(res.body);
  const n = renderReference($("reference-list"), reference, $("reference-filter"), loadOperation);
  $("reference-count").textContent = `${n} operations · OpenAPI ${reference.openapi} · Engage ${reference.info.version}`;
  const file = new Blob([JSON.stringify(reference, null, 2)], { type: "application/json" });
  $("reference-download").href = URL.createObjectURL(file);
  $("reference").dataset.loaded = "true";
}

function renderHistory() {
  const list = $("history");
  list.replaceChildren(
    ...history.map((h) => {
      const li = document.createElement("li");
      const code = document.createElement("span");
      code.className = "code";
      code.textContent = h.status;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "entry";
      b.title = new Date(h.at).toLocaleString();
      b.innerHTML = `<span class="method ${h.method}">${h.method}</span>${escapeHtml(h.path)}`;
      b.addEventListener("click", () => fillEditor(h));
      const c = document.createElement("button");
      c.type = "button";
      c.className = "curl-btn";
      c.textContent = "curl";
      c.title = "Copy as curl";
      c.addEventListener("click", () => copyCurl(h));
      li.append(code, b, c);
      return li;
    }),
  );
}

function renderResponse(res, ms) {
  const status = $("status");
  status.textContent = res.status;
  status.className = `status s${String(res.status)[0]}`;
  $("elapsed").textContent = `${ms.toFixed(1)} ms in page`;
  $("response-headers").replaceChildren(
    ...res.headers.map(([k, v]) => {
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>${escapeHtml(k)}</td><td>${escapeHtml(v)}</td>`;
      return tr;
    }),
  );
  let text = res.body;
  try {
    text = JSON.stringify(JSON.parse(res.body), null, 2);
  } catch {
    // Not JSON: shown as is.
  }
  $("response-body").innerHTML = text ? highlight(text) : '<span class="hint">(empty body)</span>';
  // A user's preference-center link: offer to open the page here.
  let link = null;
  try {
    link = JSON.parse(res.body).preference_center_url || null;
  } catch {
    // Not JSON.
  }
  pageLink = link;
  $("page-actions").hidden = !link;
}

let pageLink = null;

// Shows a page the in-page core rendered, and sends its form back to the core as a
// browser would (urlencoded), following its redirect (303) to the confirmation page.
function showPage(path, res) {
  $("page-view").hidden = false;
  $("page-status").textContent = `${res.status}`;
  const frame = $("page-frame");
  frame.onload = () => {
    const doc = frame.contentDocument;
    if (!doc) return;
    for (const form of doc.querySelectorAll("form")) {
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        const body = new URLSearchParams(new FormData(form)).toString();
        let answer = pg.send("POST", path, "", "Content-Type: application/x-www-form-urlencoded", body);
        persist();
        const location = answer.status === 303 && (answer.headers || []).find(([k]) => k.toLowerCase() === "location");
        if (location) {
          const next = new URL(location[1], pageLink || "http://localhost/");
          answer = pg.send("GET", next.pathname, next.search.replace(/^\?/, ""), "", "");
        }
        showPage(path, answer);
      });
    }
  };
  frame.srcdoc = res.body;
}

function openPage() {
  if (!pageLink) return;
  const path = new URL(pageLink).pathname;
  showPage(path, pg.send("GET", path, "", "", ""));
}

function send(event) {
  event.preventDefault();
  const r = editorRequest();
  const t0 = performance.now();
  let res;
  try {
    res = pg.send(r.method, r.path, r.query, r.headers, r.body);
  } catch (e) {
    notice(`Request not sent: ${e.message || e}`);
    return;
  }
  notice("");
  renderResponse(res, performance.now() - t0);
  history.unshift({ ...r, method: r.method.toUpperCase(), status: res.status, at: Date.now() });
  history.length = Math.min(history.length, MAX_HISTORY);
  persist();
  renderHistory();
}

async function copyCurl(r) {
  let cmd;
  try {
    cmd = curl($("base-url").value, r.method, r.path, r.query, r.headers, r.body);
  } catch (e) {
    notice(`Cannot build the curl command: ${e.message || e}`);
    return;
  }
  const pre = $("curl");
  pre.textContent = cmd;
  pre.hidden = false;
  try {
    await navigator.clipboard.writeText(cmd);
    notice("");
  } catch {
    // Clipboard access needs a secure context and permission; the command is shown anyway.
  }
}

function reset() {
  if (!confirm("Delete every user, key and request of this playground and start over?")) return;
  pg.reset();
  history = [];
  persist();
  renderSession();
  renderHistory();
  fillEditor(examples[0]);
  $("status").textContent = "";
  $("status").className = "status";
  $("elapsed").textContent = "";
  $("response-headers").replaceChildren();
  $("response-body").innerHTML = '<span class="hint">Reset: a new workspace key, no data.</span>';
}

async function main() {
  await init();
  pg = new Playground(localStorage.getItem(STATE));
  if (pg.restoreError) notice(`The saved playground could not be restored (${pg.restoreError}); started a new one.`);
  history = pg.restoreError ? [] : load(HISTORY, []);
  $("base-url").value = localStorage.getItem(BASE_URL) || defaultBaseUrl();
  $("base-url").addEventListener("change", () => localStorage.setItem(BASE_URL, $("base-url").value));
  persist();
  renderSession();
  renderHistory();
  fillEditor(examples[0]);
  $("request").addEventListener("submit", send);
  $("copy-curl").addEventListener("click", () => copyCurl(editorRequest()));
  $("reset").addEventListener("click", reset);
  $("open-page").addEventListener("click", openPage);
  $("clear-history").addEventListener("click", () => {
    history = [];
    persist();
    renderHistory();
  });
  $("send").disabled = false;
  $("reset").disabled = false;
  // performance.now() counts from the start of navigation.
  window.engagePlaygroundReady = { sinceNavigationMs: performance.now(), sinceScriptMs: performance.now() - started };
  document.body.dataset.ready = "true";
  // After the page is interactive: the document is built by the core on demand.
  setTimeout(() => {
    try {
      renderReferencePanel();
    } catch (e) {
      $("reference-count").textContent = `unavailable: ${e.message || e}`;
    }
  }, 0);
}

main().catch((e) => {
  notice(`The playground failed to start: ${e.message || e}`);
  $("api-key").textContent = "unavailable";
});
