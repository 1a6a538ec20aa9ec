#!/usr/bin/env python3
"""How long a read of a user whose writes are still queued takes on PostgreSQL, through
a link that delays every byte (`delay-proxy`, 1 ms each way), during a backlog: the
read applies just that user's queued jobs first, and every round trip it makes counts.

A fresh database; one `engage serve` on it through the proxy; `track_load` offers full
track batches (225 operations on random users of 1M) at 300/s for 10 s, so that a
backlog builds; then for 20 s, over and over: `--writes` small `/users/track` requests
for a new user (each one job), then `/users/export/ids` of that user, which must see
every write (checked).

    source tests/postgres.sh && start_postgres
    cargo build --release -p engage -p engage-tests --bin delay-proxy --bin engage
    python3 tests/bench/read_after_write.py [--engage PATH] [--writes 5]

Prints the reads' p50, p99 and max. `--engage` runs another build (to compare two).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROXY = os.path.join(ROOT, "target", "release", "delay-proxy")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def psql(url, sql):
    subprocess.run(["psql", url, "-qc", sql], check=True, capture_output=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engage", default=os.path.join(ROOT, "target", "release", "engage"))
    p.add_argument("--writes", type=int, default=5)
    p.add_argument("--seconds", type=int, default=20)
    args = p.parse_args()
    base = os.environ.get("ENGAGE_TEST_POSTGRES_URL")
    if not base:
        sys.exit("start PostgreSQL first: source tests/postgres.sh && start_postgres")
    for binary in (args.engage, PROXY):
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing: cargo build --release -p engage -p engage-tests --bin delay-proxy")
    name = f"read_after_write_{os.getpid()}"
    psql(base, f"CREATE DATABASE {name}")
    parts = urllib.parse.urlsplit(base)
    proxy_port = free_port()
    proxy = subprocess.Popen([PROXY, f"127.0.0.1:{proxy_port}", f"127.0.0.1:{parts.port}", "1"],
                             stdout=subprocess.DEVNULL)
    server = None
    try:
        wait_for(proxy_port)
        db = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy_port}", path=f"/{name}"))
        key = subprocess.run([args.engage, "keys", "create", "--db", db, "--workspace", "bench"], check=True,
                             capture_output=True, text=True).stdout.strip()
        port = free_port()
        server = subprocess.Popen([args.engage, "serve", "--db", db, "--listen", f"127.0.0.1:{port}",
                                   "--no-rate-limits", "--max-backlog-secs", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(port)

        def call(path, body):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {key}",
                                                  "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        load = dict(os.environ, BENCH_TARGET=f"http://127.0.0.1:{port}", BENCH_KEY=key, BENCH_PROFILES="1000000",
                    BENCH_RATE="300", BENCH_SECONDS="10", BENCH_DRAIN_SECONDS="0")
        subprocess.run(["cargo", "bench", "-q", "-p", "engage", "--bench", "track_load"], cwd=ROOT, env=load,
                       capture_output=True, check=True)
        took, start, n = [], time.monotonic(), 0
        while time.monotonic() - start < args.seconds:
            user = f"reader-{n}"
            n += 1
            for _ in range(args.writes):
                call("/users/track", {"attributes": [{"external_id": user, "n": {"inc": 1}}]})
            t0 = time.monotonic()
            got = call("/users/export/ids", {"external_ids": [user]})
            took.append((time.monotonic() - t0) * 1000)
            seen = got["users"][0]["custom_attributes"]["n"]
            if seen != args.writes:
                sys.exit(f"the read saw {seen} of {args.writes} writes")
        took.sort()
        print(f"{len(took)} reads, each after {args.writes} writes of its user: p50 {took[len(took) // 2]:.1f} ms, "
              f"p99 {took[min(len(took) - 1, int(len(took) * 0.99))]:.1f} ms, max {took[-1]:.1f} ms")
    finally:
        if server:
            server.terminate()
            server.wait()
        proxy.terminate()
        proxy.wait()
        psql(base, f"DROP DATABASE {name}")


if __name__ == "__main__":
    main()
