// The API reference panel: the OpenAPI 3.1 document the in-page engine serves at
// GET /openapi.json (made by the core from its route table), listed by tag with each
// operation's method, path, credentials, rate limit and summary; the details show
// its description, parameters, body fields and answers, and "Load" puts it in the
// request editor.

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// The little Markdown the descriptions use: paragraphs, `code` and **bold**.
function prose(text) {
  return (text || "")
    .split(/\n\n+/)
    .map((p) => `<p>${escapeHtml(p).replace(/`([^`]+)`/g, "<code>$1</code>").replace(/\*\*([^*]+)\*\*/g, "<b>$1</b>")}</p>`)
    .join("");
}

function el(tag, attrs = {}, html = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  e.innerHTML = html;
  return e;
}

/** Follows a local `$ref` (`#/components/...`). */
function resolve(doc, v) {
  let seen = 0;
  while (v && v.$ref && seen++ < 10) {
    v = v.$ref
      .slice(2)
      .split("/")
      .reduce((o, k) => (o ? o[k.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined), doc);
  }
  return v || {};
}

/** Every operation: `{method, path, op}`, in the document's tag order. */
export function operations(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (METHODS.includes(method)) out.push({ method: method.toUpperCase(), path, op });
    }
  }
  const order = (doc.tags || []).map((t) => t.name);
  const rank = (o) => {
    const i = order.indexOf((o.op.tags || [])[0]);
    return i < 0 ? order.length : i;
  };
  return out.sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}

/** Who may call an operation: the permission, the SCIM token, the admin token or nobody. */
export function credential(op) {
  const req = (op.security || [])[0];
  if (!req) return "no credentials";
  if (req.apiKey) return req.apiKey.join(", ");
  if (req.scimToken) return "SCIM token";
  if (req.adminToken) return "admin token";
  return Object.keys(req).join(" + ");
}

function typeOf(doc, schema) {
  const s = resolve(doc, schema);
  if (schema && schema.$ref) return schema.$ref.split("/").pop();
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.oneOf || s.anyOf) return (s.oneOf || s.anyOf).map((x) => typeOf(doc, x)).join(" or ");
  if (s.type === "array") return `array of ${typeOf(doc, s.items)}`;
  return s.type || "any";
}

/** A JSON skeleton of a body schema: its required fields, each an empty value of its type. */
export function skeleton(doc, schema, depth = 0) {
  const s = resolve(doc, schema);
  if (depth > 4) return null;
  if (s.oneOf || s.anyOf) return skeleton(doc, (s.oneOf || s.anyOf)[0], depth + 1);
  if (s.enum) return s.enum[0];
  switch (s.type) {
    case "object": {
      const o = {};
      for (const k of s.required || []) o[k] = skeleton(doc, (s.properties || {})[k], depth + 1);
      return o;
    }
    case "array":
      return [];
    case "integer":
    case "number":
      return 0;
    case "boolean":
      return false;
    case "string":
      return "";
    default:
      return null;
  }
}

function details(doc, { op }) {
  const parts = [prose(op.description)];
  const params = (op.parameters || []).map((p) => resolve(doc, p));
  if (params.length) {
    parts.push(
      "<h4>Parameters</h4><table>" +
        params
          .map(
            (p) =>
              `<tr><td><code>${escapeHtml(p.name)}</code></td><td>${escapeHtml(p.in)}${p.required ? ", required" : ""}</td>` +
              `<td>${prose(p.description)}</td></tr>`,
          )
          .join("") +
        "</table>",
    );
  }
  const body = op.requestBody && Object.entries(op.requestBody.content || {})[0];
  if (body) {
    const [media, { schema }] = body;
    const s = resolve(doc, schema);
    const required = s.required || [];
    const fields = Object.entries(s.properties || {});
    parts.push(
      `<h4>Body <small>${escapeHtml(media)}</small></h4>` +
        prose(s.description) +
        (fields.length
          ? "<table>" +
            fields
              .map(
                ([k, v]) =>
                  `<tr><td><code>${escapeHtml(k)}</code></td><td>${escapeHtml(typeOf(doc, v))}${required.includes(k) ? ", required" : ""}</td>` +
                  `<td>${prose(resolve(doc, v).description || v.description)}</td></tr>`,
              )
              .join("") +
            "</table>"
          : ""),
    );
  }
  const answers = Object.entries(op.responses || {}).map(([status, r]) => [status, resolve(doc, r)]);
  parts.push(
    "<h4>Answers</h4><table>" +
      answers.map(([status, r]) => `<tr><td><code>${escapeHtml(status)}</code></td><td colspan="2">${prose(r.description)}</td></tr>`).join("") +
      "</table>",
  );
  return parts.join("");
}

function limitText(op) {
  const l = op["x-engage-rate-limit"];
  if (!l) return "";
  const window = { 60: "min", 3600: "h", 86400: "day" }[l.window_seconds] || `${l.window_seconds} s`;
  return `${l.limit.toLocaleString("en-US")}/${window}`;
}

/**
 * Renders the document into `root`: a filter box filters `li.operation`s; `onLoad(entry)`
 * is called with `{method, path, op}` when an operation's Load button is pressed.
 */
export function renderReference(root, doc, filter, onLoad) {
  const list = operations(doc);
  const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
  for (const entry of list) {
    const name = (entry.op.tags || ["Other"])[0];
    if (!byTag.has(name)) byTag.set(name, { tag: { name }, ops: [] });
    byTag.get(name).ops.push(entry);
  }
  const groups = [];
  for (const { tag, ops } of byTag.values()) {
    if (!ops.length) continue;
    const section = el("section", { class: "tag", dataset: { tag: tag.name } }, `<h3>${escapeHtml(tag.name)}</h3>${prose(tag.description)}`);
    const ul = el("ul", { class: "operations" });
    for (const entry of ops) {
      const { method, path, op } = entry;
      const li = el("li", { class: "operation", dataset: { operation: `${method} ${path}` } });
      const kind = op["x-engage-route"] || "";
      const line = el(
        "div",
        { class: "op-line" },
        `<span class="method ${method}">${method}</span><code class="op-path">${escapeHtml(path)}</code>` +
          `<span class="op-summary">${escapeHtml(op.summary || "")}</span>` +
          `<span class="chip ${kind}" title="credentials">${escapeHtml(credential(op))}</span>` +
          (limitText(op) ? `<span class="chip limit" title="rate limit">${escapeHtml(limitText(op))}</span>` : ""),
      );
      const load = el("button", { type: "button", class: "op-load", title: "Put this operation in the request editor" }, "Load");
      load.addEventListener("click", () => onLoad(entry));
      line.prepend(load);
      const more = el("details", { class: "op-more" }, "<summary>details</summary>");
      // Rendered when first opened: most operations are never expanded.
      more.addEventListener("toggle", () => {
        if (more.open && !more.querySelector(".op-details")) more.append(el("div", { class: "op-details" }, details(doc, entry)));
      });
      li.dataset.search = `${method} ${path} ${op.summary || ""} ${credential(op)} ${tag.name}`.toLowerCase();
      li.append(line, more);
      ul.append(li);
    }
    section.append(ul);
    groups.push(section);
  }
  root.replaceChildren(...groups);
  const apply = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const li of root.querySelectorAll("li.operation")) li.hidden = !words.every((w) => li.dataset.search.includes(w));
    for (const s of root.querySelectorAll("section.tag")) s.hidden = !s.querySelector("li.operation:not([hidden])");
  };
  filter.oninput = apply;
  apply();
  return list.length;
}
