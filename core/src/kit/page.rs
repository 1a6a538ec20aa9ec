//! The inspector: one page (`/_engage/inspector`) where a person sees what their
//! application did to Engage: workspaces, a user found by any identifier with its
//! attributes, events, purchases, subscription states and aliases, the recent
//! requests, the queue, preference centers (opened as a user) and warehouse syncs.
//! Without a session it is a login form for the admin token. Its script only
//! calls the test kit's and operator's routes, with the session cookie, and puts
//! data on the page as text (never as markup). It may not be framed, and runs
//! only its own inline script (by hash).

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::session::{self, CSRF_HEADER};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{percent_decode, Request, Response};
use crate::store::Store;
use crate::time::Timestamp;

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f8}\
header{background:#1d1d1f;color:#fff;padding:.6rem 1rem;display:flex;gap:1rem;align-items:center}\
header h1{font-size:1.1rem;margin:0;flex:1}main{padding:1rem;display:grid;gap:1rem;\
grid-template-columns:repeat(auto-fit,minmax(22rem,1fr))}section{background:#fff;border-radius:8px;padding:.8rem 1rem;\
box-shadow:0 1px 2px #0002}h2{font-size:1rem;margin:.2rem 0 .6rem}table{border-collapse:collapse;width:100%;font-size:.85rem}\
td,th{border-bottom:1px solid #eee;padding:.25rem .4rem;text-align:left;vertical-align:top;word-break:break-word}\
input,select,button{font:inherit;padding:.3rem .5rem}pre{white-space:pre-wrap;font-size:.8rem;margin:0}\
.wide{grid-column:1/-1}.muted{color:#777}form.login{max-width:24rem;margin:4rem auto;background:#fff;padding:1.5rem;\
border-radius:8px;box-shadow:0 1px 3px #0003;display:grid;gap:.6rem}.error{color:#b00020}";

const SCRIPT: &str = r#"
const $ = (id) => document.getElementById(id);
const el = (tag, text, attrs) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; Object.assign(e, attrs || {}); return e; };
async function get(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) { location.reload(); throw new Error("signed out"); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.message || r.status);
  return body;
}
function table(rows, columns) {
  const t = el("table"); const head = el("tr");
  columns.forEach((c) => head.append(el("th", c)));
  t.append(head);
  rows.forEach((row) => { const tr = el("tr"); columns.forEach((c) => { const v = row[c]; tr.append(el("td", v === undefined || v === null ? "" : (typeof v === "object" ? JSON.stringify(v) : String(v)))); }); t.append(tr); });
  if (!rows.length) { const tr = el("tr"); tr.append(el("td", "nothing yet", { className: "muted", colSpan: columns.length })); t.append(tr); }
  return t;
}
function show(id, node) { const box = $(id); box.replaceChildren(node); }
function fail(id, e) { show(id, el("p", String(e.message || e), { className: "error" })); }
let workspace = "";
async function loadWorkspaces() {
  try {
    const { workspaces } = await get("/_engage/workspaces");
    const pick = $("workspace"); pick.replaceChildren();
    workspaces.forEach((w) => pick.append(el("option", w.name, { value: w.name })));
    workspace = pick.value;
    show("workspaces", table(workspaces, ["name", "keys", "created_at"]));
    loadCenters();
  } catch (e) { fail("workspaces", e); }
}
function profile(u) {
  const box = el("div");
  const rows = Object.entries(u).filter(([k]) => !["custom_attributes", "custom_events", "purchases", "subscription_groups", "user_aliases"].includes(k)).map(([k, v]) => ({ field: k, value: v }));
  box.append(el("h3", u.external_id || u.service_id), table(rows, ["field", "value"]));
  const custom = Object.entries(u.custom_attributes || {}).map(([k, v]) => ({ attribute: k, value: v }));
  box.append(el("h4", "Custom attributes"), table(custom, ["attribute", "value"]));
  box.append(el("h4", "Events"), table(u.custom_events || [], ["name", "count", "first", "last"]));
  box.append(el("h4", "Purchases"), table(u.purchases || [], ["name", "count", "first", "last"]));
  box.append(el("h4", "Subscription groups"), table(u.subscription_groups || [], ["id", "name", "channel", "status"]));
  box.append(el("h4", "Aliases"), table(u.user_aliases || [], ["alias_name", "alias_label"]));
  return box;
}
async function findUser(event) {
  event.preventDefault();
  const q = $("query").value.trim();
  if (!q) return;
  try {
    const { users } = await get(`/_engage/workspaces/${encodeURIComponent(workspace)}/users?q=${encodeURIComponent(q)}`);
    const box = el("div");
    if (!users.length) box.append(el("p", `No user in ${workspace} is ${q}.`, { className: "muted" }));
    users.forEach((u) => box.append(profile(u)));
    show("users", box);
  } catch (e) { fail("users", e); }
}
async function loadJournal() {
  try {
    const { requests } = await get("/_engage/journal");
    show("journal", table(requests, ["at", "method", "route", "status", "micros", "request_id", "request_body", "response_body"]));
  } catch (e) { fail("journal", e); }
}
async function loadQueue() {
  try { const q = await get("/_engage/queue"); show("queue", table(Object.entries(q).map(([k, v]) => ({ measure: k, value: v })), ["measure", "value"])); } catch (e) { fail("queue", e); }
}
async function loadCenters() {
  if (!workspace) return;
  try {
    const { preference_centers } = await get(`/_engage/workspaces/${encodeURIComponent(workspace)}/preference-centers`);
    const box = el("div"); box.append(table(preference_centers, ["name", "preference_center_api_id", "updated_at"]));
    preference_centers.forEach((c) => {
      const form = el("form"); const who = el("input", undefined, { placeholder: "external id", required: true });
      form.append(el("span", `${c.name}: open as `), who, el("button", "Open"));
      form.onsubmit = async (event) => {
        event.preventDefault();
        try { const { url } = await get(`/_engage/workspaces/${encodeURIComponent(workspace)}/preference-centers/${encodeURIComponent(c.preference_center_api_id)}/url/${encodeURIComponent(who.value)}`); window.open(url, "_blank", "noopener"); }
        catch (e) { alert(e.message); }
      };
      box.append(form);
    });
    show("centers", box);
  } catch (e) { fail("centers", e); }
}
async function loadSyncs() {
  try {
    const { integrations } = await get("/_engage/cdi/integrations");
    const box = el("div"); box.append(table(integrations, ["name", "workspace", "kind", "jobs", "last_job", "synced_up_to", "paused"]));
    for (const i of integrations) {
      const jobs = await get(`/_engage/cdi/integrations/${encodeURIComponent(i.integration_id)}/jobs`);
      box.append(el("h4", `${i.name}: jobs`), table(jobs.jobs || [], ["job", "job_status", "rows_synced", "rows_failed_with_errors", "failure"]));
    }
    show("syncs", box);
  } catch (e) { fail("syncs", e); }
}
async function loadFaults() {
  try {
    const r = await fetch("/_engage/faults", { credentials: "same-origin" });
    if (r.status === 404) { show("faults", el("p", "Faults are off: start the server with --faults (or --ephemeral).", { className: "muted" })); return; }
    if (!r.ok) throw new Error(r.status);
    const { faults } = await r.json();
    show("faults", table(faults, ["id", "method", "path", "workspace", "status", "times", "probability", "delay_ms", "retry_after_secs"]));
  } catch (e) { fail("faults", e); }
}
async function loadSnapshots() {
  try {
    const { snapshots } = await get("/_engage/snapshots");
    const box = el("div"); box.append(table(snapshots, ["name", "workspace", "documents", "bytes", "taken_at"]));
    snapshots.forEach((s) => {
      const scope = s.workspace ? `?workspace=${encodeURIComponent(s.workspace)}` : "";
      const button = el("button", `Restore ${s.name}${s.workspace ? " of " + s.workspace : ""}`, { type: "button" });
      button.onclick = async () => {
        const r = await fetch(`/_engage/snapshots/${encodeURIComponent(s.name)}/restore${scope}`, { method: "POST", headers: { "CSRF_HEADER": "1" } });
        const body = await r.json();
        alert(r.ok ? `Restored: ${body.written} written, ${body.removed} removed.` : (body.message || r.status));
        refresh();
      };
      box.append(button);
    });
    show("snapshots", box);
  } catch (e) { fail("snapshots", e); }
}
function refresh() { loadWorkspaces(); loadJournal(); loadQueue(); loadSyncs(); loadFaults(); loadSnapshots(); }
$("workspace").onchange = () => { workspace = $("workspace").value; loadCenters(); };
$("find").onsubmit = findUser;
$("refresh").onclick = refresh;
$("logout").onclick = async () => { await fetch("/_engage/inspector/logout", { method: "POST", headers: { "CSRF_HEADER": "1" } }); location.reload(); };
refresh();
"#;

const APP: &str = r#"<header><h1>Engage inspector</h1><label>Workspace <select id="workspace"></select></label>
<button id="refresh" type="button">Refresh</button><button id="logout" type="button">Sign out</button></header>
<main>
<section><h2>Workspaces</h2><div id="workspaces"></div></section>
<section><h2>Find a user</h2><form id="find"><input id="query" placeholder="external id, email, phone, braze id or label:alias" size="36">
<button>Find</button></form><div id="users"></div></section>
<section class="wide"><h2>Recent requests</h2><div id="journal"></div></section>
<section><h2>Queue</h2><div id="queue"></div></section>
<section><h2>Preference centers</h2><div id="centers"></div></section>
<section class="wide"><h2>Warehouse syncs</h2><div id="syncs"></div></section>
<section class="wide"><h2>Faults</h2><div id="faults"></div></section>
<section><h2>Snapshots</h2><div id="snapshots"></div></section>
</main>"#;

fn script() -> String {
    SCRIPT.replace("CSRF_HEADER", CSRF_HEADER)
}

fn document(body: &str, script: Option<&str>) -> String {
    let script = script.map(|s| format!("<script>{s}</script>")).unwrap_or_default();
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Engage inspector</title>\
         <style>{STYLE}</style></head><body>{body}{script}</body></html>"
    )
}

/// An inspector page with its security headers: no framing, no caching, and only
/// this page's own inline script and style (by hash) may run.
fn page(status: u16, body: &str, script: Option<&str>) -> Response {
    let hash = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()));
    let script_src = script.map(|s| format!(" 'sha256-{}'", hash(s))).unwrap_or_default();
    let policy = format!(
        "default-src 'none'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; \
         style-src 'sha256-{}'; script-src{}",
        hash(STYLE),
        if script_src.is_empty() { " 'none'".to_string() } else { script_src }
    );
    Response::html(status, &document(body, script))
        .with_header("Content-Security-Policy", policy)
        .with_header("X-Frame-Options", "DENY")
        .with_header("Cache-Control", "no-store")
        .with_header("Referrer-Policy", "no-referrer")
        .with_header("X-Content-Type-Options", "nosniff")
}

fn login(status: u16, message: Option<&str>) -> Response {
    let message = message.map(|m| format!("<p class=\"error\">{m}</p>")).unwrap_or_default();
    let form = format!(
        "<form class=\"login\" method=\"post\" action=\"/_engage/inspector/login\"><h1>Engage inspector</h1>{message}\
         <label>Admin token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label>\
         <button>Sign in</button><p class=\"muted\">The token the server was started with (<code>--admin-token</code>).</p></form>"
    );
    page(status, &form, None)
}

/// GET /_engage/inspector: the inspector, or its login form without a session.
pub async fn show<S: Store>(store: &S, req: &Request, wall: Timestamp) -> Result<Response, ApiError> {
    if session::holds(store, req, wall).await? {
        let script = script();
        Ok(page(200, APP, Some(&script)))
    } else {
        Ok(login(200, None))
    }
}

/// The value of `name` in a form body (`application/x-www-form-urlencoded`).
fn form_value(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(&v.replace('+', " ")))
}

/// POST /_engage/inspector/login: the admin token for a session (303 to the
/// inspector), or the form again with a 401; 429 while the client has failed too
/// often ([`session::Guard`]).
pub async fn sign_in<S: Store>(
    store: &S,
    guard: &session::Guard,
    req: &Request,
    admin_hash: &str,
    ctx: Ctx,
    secure: bool,
) -> Result<Response, ApiError> {
    if let Err(limited) = guard.check(req, ctx.wall) {
        let mut resp = login(429, Some("Too many wrong tokens from this address: wait a minute, then try again."));
        for (name, value) in limited.into_response().headers {
            if name.ends_with("Retry-After") {
                resp = resp.with_header(&name, value);
            }
        }
        return Ok(resp);
    }
    match form_value(&req.body, "token") {
        Some(token) if session::is_admin_token(token.trim(), admin_hash) => {
            let value = session::open(store, ctx).await?;
            Ok(Response::empty(303)
                .with_header("Location", "/_engage/inspector")
                .with_header("Set-Cookie", session::set_cookie(Some(&value), secure))
                .with_header("Cache-Control", "no-store"))
        }
        _ => {
            guard.failed(req, ctx.wall);
            Ok(login(401, Some("That is not this server's admin token.")))
        }
    }
}

/// POST /_engage/inspector/logout: the session ended on the server and its cookie
/// cleared (asked with the inspector's header, or credentials, so that another
/// site cannot sign a person out).
pub async fn sign_out<S: Store>(store: &S, req: &Request, secure: bool) -> Result<Response, ApiError> {
    // A header a cross-site form cannot send: the inspector's, or credentials.
    if req.header_value(CSRF_HEADER).is_none() && req.header_value("authorization").is_none() {
        return Err(ApiError::bad(format!("signing out needs the {CSRF_HEADER} header")));
    }
    session::close(store, req).await?;
    Ok(Response::empty(303)
        .with_header("Location", "/_engage/inspector")
        .with_header("Set-Cookie", session::set_cookie(None, secure))
        .with_header("Cache-Control", "no-store"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::key_hash;
    use crate::http::Method;

    #[test]
    fn a_login_form_then_a_session_then_the_page() {
        pollster::block_on(async {
            let store = crate::store::memory::MemoryStore::new();
            let guard = session::Guard::default();
            let token = "the-admin-token-of-32-characters";
            let hash = key_hash(token);
            let ctx = Ctx::new(Timestamp(0), [1; 16]);
            let anonymous = Request::new(Method::Get, "/_engage/inspector");
            let form = show(&store, &anonymous, Timestamp(0)).await.unwrap();
            assert!(String::from_utf8_lossy(&form.body).contains("name=\"token\""));
            assert_eq!(form.header_value("X-Frame-Options"), Some("DENY"));
            let wrong = Request::new(Method::Post, "/_engage/inspector/login").body("token=nope");
            assert_eq!(sign_in(&store, &guard, &wrong, &hash, ctx, false).await.unwrap().status, 401);
            let right = Request::new(Method::Post, "/_engage/inspector/login").body(format!("token={token}"));
            let signed = sign_in(&store, &guard, &right, &hash, ctx, true).await.unwrap();
            assert_eq!(signed.status, 303);
            let cookie = signed.header_value("Set-Cookie").unwrap().split(';').next().unwrap().to_string();
            assert!(signed.header_value("Set-Cookie").unwrap().contains("HttpOnly; SameSite=Strict"));
            assert!(signed.header_value("Set-Cookie").unwrap().ends_with("; Secure"));
            let with_cookie = Request::new(Method::Get, "/_engage/inspector").header("Cookie", &cookie);
            let page = show(&store, &with_cookie, Timestamp(1)).await.unwrap();
            let html = String::from_utf8_lossy(&page.body).to_string();
            assert!(html.contains("Recent requests") && html.contains(CSRF_HEADER));
            let policy = page.header_value("Content-Security-Policy").unwrap();
            assert!(policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'sha256-"));
        });
    }
}
