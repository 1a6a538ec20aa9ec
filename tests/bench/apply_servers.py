#!/usr/bin/env python3
"""How fast a backlog on PostgreSQL is applied by 1, 2, ... servers, through a link that
delays every byte (`delay-proxy`, as a network between machines would): the yardstick of
the partitioned queue, whose appliers should add up where one queue's do not.

For each number of servers: a fresh database, reached through the proxy; that many
`engage serve` on it; `track_load` offers full track batches to the first one for a
while (a backlog builds, since acknowledging outruns applying); then the backlog's
`pending` (GET /_engage/queue) is read each second while every server applies.

    source tests/postgres.sh && start_postgres
    cargo build --release -p engage -p engage-tests --bin delay-proxy
    python3 tests/bench/apply_servers.py [--servers 1,2] [--delay-ms 1] [--profiles 10000]
                                        [--rate 200] [--seconds 20] [--drain 30]

Prints one Markdown row per number of servers: acknowledged batches, the backlog left
when the load stopped, and the jobs applied per second while it drained.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGAGE = os.path.join(ROOT, "target", "release", "engage")
PROXY = os.path.join(ROOT, "target", "release", "delay-proxy")
ADMIN = "apply-bench-admin-token-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, what, limit=60):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on {port}")


def pending(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/_engage/queue", headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["pending"]


def psql(url, sql):
    psql_bin = next(os.path.join(d, "psql") for d in sorted(os.listdir("/usr/lib/postgresql"), reverse=True)
                    for d in [os.path.join("/usr/lib/postgresql", d, "bin")] if os.path.exists(os.path.join(d, "psql")))
    subprocess.run([psql_bin, url, "-q", "-c", sql], check=True)


def run(n, args, base, proxy_port, logs):
    parts = urllib.parse.urlsplit(base)
    name = f"apply_{n}_{os.getpid()}"
    psql(base, f"CREATE DATABASE {name}")
    url = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy_port}", path=f"/{name}"))
    key = subprocess.run([ENGAGE, "keys", "create", "--db", url, "--workspace", "bench"], check=True,
                         capture_output=True, text=True).stdout.strip()
    ports = [free_port() for _ in range(n)]
    servers = []
    for i, port in enumerate(ports):
        log = open(os.path.join(logs, f"server-{n}-{i}.log"), "w")
        servers.append(subprocess.Popen([ENGAGE, "serve", "--db", url, "--listen", f"127.0.0.1:{port}",
                                         "--no-rate-limits", "--max-backlog-secs", "0", "--admin-token", ADMIN], stderr=log, stdout=log))
        wait_for(port, f"server {i}")
    try:
        env = dict(os.environ, BENCH_TARGET=f"http://127.0.0.1:{ports[0]}", BENCH_KEY=key,
                   BENCH_PROFILES=str(args.profiles), BENCH_RATE=str(args.rate), BENCH_SECONDS=str(args.seconds),
                   BENCH_DRAIN_SECONDS="0")
        load = subprocess.run(["cargo", "bench", "-q", "-p", "engage", "--bench", "track_load"], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        acked = next((l for l in load.stdout.splitlines() if "acknowledged" in l), load.stdout.strip()[-300:])
        start = pending(ports[0])
        t0 = time.monotonic()
        left = start
        while time.monotonic() - t0 < args.drain and left > 0:
            time.sleep(1)
            left = pending(ports[0])
        took = time.monotonic() - t0
        rate = (start - left) / took if took > 0 else 0.0
        print(f"| {n} | {args.delay_ms} ms each way | {acked.strip()} | {start} | {rate:.1f} jobs/s ({start - left} in {took:.1f} s) |",
              flush=True)
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait()
        psql(base, f"DROP DATABASE {name}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default="1,2")
    p.add_argument("--delay-ms", default="1")
    p.add_argument("--profiles", type=int, default=10000)
    p.add_argument("--rate", type=int, default=200)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--drain", type=int, default=30)
    args = p.parse_args()
    base = os.environ.get("ENGAGE_TEST_POSTGRES_URL") or sys.exit("start PostgreSQL first: source tests/postgres.sh && start_postgres")
    for binary in (ENGAGE, PROXY):
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing: cargo build --release -p engage -p engage-tests --bin delay-proxy")
    parts = urllib.parse.urlsplit(base)
    proxy_port = free_port()
    logs = tempfile.mkdtemp(prefix="engage-apply-bench-")
    proxy = subprocess.Popen([PROXY, f"127.0.0.1:{proxy_port}", f"127.0.0.1:{parts.port}", args.delay_ms],
                             stdout=subprocess.DEVNULL)
    wait_for(proxy_port, "the delay proxy")
    print("| servers | link | load (track_load) | backlog when the load stopped | applied while it drained |")
    print("|---|---|---|---|---|")
    try:
        for n in [int(x) for x in args.servers.split(",")]:
            run(n, args, base, proxy_port, logs)
    finally:
        proxy.terminate()
    print(f"(server logs in {logs})")


if __name__ == "__main__":
    main()
