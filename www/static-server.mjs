// A tiny static file server for the built page (www/dist) on 127.0.0.1, shared by the
// end-to-end test and the benchmark: index.html for directories, 404 outside the root.
import http from "node:http";
import { readFile } from "node:fs/promises";
import path from "node:path";

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".wasm": "application/wasm" };

/** Serves `root` on a free port; `headers` go on every file answered. Resolves to the server. */
export function staticServer(root, headers = {}) {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const rel = path.normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, "");
    const file = path.join(root, rel.endsWith("/") ? `${rel}index.html` : rel);
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { ...headers, "content-type": TYPES[path.extname(file)] || "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
