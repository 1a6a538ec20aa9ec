"""What a preference-center template costs to store and to show, by its size: the
benchmark of the template engine (lexing, parsing, the parsed-template cache and
rendering), against a server this script starts itself.

  python3 tests/bench/template_cost.py [path/to/engage [MAX_TAGS]]
      (default target/release/engage, every size)

For N = 1k to 64k copies of `{% if ${first_name} %}a{% endif %}` (and a 4 MiB
template of such tags), prints: the template's size, the time to create the center
(POST /preference_center/v1: parsed and checked once), the first view of its page
(parsed, then rendered) and the best of five later views (rendered from the kept
parse). Times are wall-clock seconds of one request on loopback.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ENGAGE = sys.argv[1] if len(sys.argv) > 1 else "target/release/engage"
KEY = "template-cost-benchmark-key-0123456789"
TAG = "{% if ${first_name} %}a{% endif %}"

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
base = f"http://127.0.0.1:{port}"
server = subprocess.Popen(
    [ENGAGE, "serve", "--ephemeral", "--api-key", KEY, "--no-rate-limits", "--max-body-bytes", str(16 << 20),
     "--listen", f"127.0.0.1:{port}"],
    stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        out = r.read()
    return time.perf_counter() - t0, out


try:
    for _ in range(200):
        try:
            call("GET", "/healthz")
            break
        except OSError:
            time.sleep(0.05)
    call("POST", "/users/track", {"attributes": [{"external_id": "bench", "first_name": "Ann"}]})
    sizes = [1000, 2000, 4000, 8000, 16000, 32000, 64000, (4 << 20) // len(TAG)]
    if len(sys.argv) > 2:
        sizes = [n for n in sizes if n <= int(sys.argv[2])]
    print(f"{'tags':>8} {'bytes':>9} {'create s':>9} {'1st view s':>11} {'view s':>8} {'page bytes':>11}")
    for i, n in enumerate(sizes):
        page = TAG * n
        took, out = call("POST", "/preference_center/v1", {
            "name": f"bench{i}", "preference_center_page_html": page, "confirmation_page_html": "ok"})
        center = json.loads(out)["preference_center_api_id"]
        _, out = call("GET", f"/preference_center/v1/{center}/url/bench")
        path = json.loads(out)["preference_center_url"][len(base):]
        first, html = call("GET", path)
        later = min(call("GET", path)[0] for _ in range(5))
        print(f"{n:>8} {len(page):>9} {took:>9.3f} {first:>11.3f} {later:>8.4f} {len(html):>11}")
finally:
    server.terminate()
    server.wait()
