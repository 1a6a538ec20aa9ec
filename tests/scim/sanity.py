"""Runs scim-sanity's live probe (RFC 7643 / 7644 conformance of /Users) against one
server and fails on any check that fails.

    SCIM_URL=http://127.0.0.1:PORT/scim/v2 SCIM_TOKEN=... SCIM_ORIGIN=... python sanity.py

scim-sanity sends only `Authorization`; Engage also needs `X-Request-Origin`, so
this adds it to every request the probe's HTTP client builds. The probe's users
carry no department: the token is made with a default one (what Okta's default
profile needs too). It runs in strict mode, testing the User resource only (Engage
has no groups; the Group, Agent and AgenticApplication phases do not apply).
Exits 0 when no check fails or errors, 1 otherwise, 2 when nothing ran.
"""

import json
import os
import subprocess
import sys
import tempfile

from scim_sanity import http_client

PROBE = """
import sys
from scim_sanity import http_client
from scim_sanity.cli import main

origin = {origin!r}
build = http_client.SCIMClient._build_headers


def with_origin(self, extra=None, method=""):
    headers = build(self, extra, method=method)
    headers["X-Request-Origin"] = origin
    return headers


http_client.SCIMClient._build_headers = with_origin
sys.exit(main())
"""


def main() -> int:
    url, token, origin = os.environ["SCIM_URL"], os.environ["SCIM_TOKEN"], os.environ["SCIM_ORIGIN"]
    if not hasattr(http_client.SCIMClient, "_build_headers"):
        print("scim-sanity changed: SCIMClient._build_headers is gone; X-Request-Origin cannot be added")
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROBE.format(origin=origin))
    args = [sys.executable, f.name, "probe", url, "--token", token, "--resource", "User", "--strict",
            "--i-accept-side-effects", "--json-output", "--timeout", "30"]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    os.unlink(f.name)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        print(out.stdout[-4000:], out.stderr[-4000:], sep="\n")
        return 2
    results = report.get("results", [])
    failures = 0
    for r in results:
        status = str(r.get("status", "")).lower()
        bad = status in ("fail", "error")
        failures += bad
        print(f"{'BAD' if bad else 'ok '} {status.upper():7} {r.get('phase', '')}: {r.get('name', '')} {r.get('message', '')}")
    print(f"{len(results)} checks, {failures} failed; summary: {json.dumps(report.get('summary'))}")
    if not results:
        return 2
    return 1 if failures or out.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
