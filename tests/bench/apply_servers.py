#!/usr/bin/env python3
"""How fast a backlog is applied by 1, 2, ... servers on PostgreSQL (or one on SQLite),
through a link that delays every byte (`delay-proxy`, as a network between machines
would), and how fast a read of a user with nothing queued answers meanwhile: the
yardstick of the partitioned queue, whose appliers should add up.

For each number of servers: a fresh database (reached through the proxy unless
`--delay-ms 0`); that many `engage serve` on it; `track_load` offers full track
batches (225 operations on random users) to the first one for a while, so that a
backlog builds; then, while every server applies, whether it is drained is read each
second (it is counted when the load stops and at the end), and a reader asks each server in turn, every 50 ms, for a user that nothing names.

    source tests/postgres.sh && start_postgres
    cargo build --release -p engage -p engage-tests --bin delay-proxy
    python3 tests/bench/apply_servers.py [--servers 1,2,4] [--store postgres|sqlite]
        [--delay-ms 1] [--profiles 1000000] [--rate 400] [--seconds 20] [--drain 60]
        [--engage PATH]

Prints one Markdown row per run: requests acknowledged per second, the backlog when
the load stopped, requests applied per second while it drained (a request is queued
as one job per partition it names: the jobs are counted and divided back), and the
p99 of the reads on each server (and, on standard error, each server's peak RSS).
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
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


def psql_bin():
    for d in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
        path = os.path.join("/usr/lib/postgresql", d, "bin", "psql")
        if os.path.exists(path):
            return path
    sys.exit("psql not found")


def psql(url, sql):
    out = subprocess.run([psql_bin(), url, "-qAt", "-c", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


class Queue:
    """The backlog's jobs now, and how many were ever queued."""

    def __init__(self, store, url, port):
        self.store, self.url, self.port = store, url, port

    def now(self):
        if self.store == "postgres":
            left, tail = psql(self.url, "SELECT (SELECT count(*) FROM queue), (SELECT tail FROM queue_tail)").split("|")
            return int(left), int(tail)
        return self.served()

    def empty(self):
        """Whether the backlog is drained: on PostgreSQL without counting it, which
        would take a share of the database from the appliers every second."""
        if self.store == "postgres":
            return psql(self.url, "SELECT NOT EXISTS (SELECT 1 FROM queue)") == "t"
        return self.served()[0] == 0

    def served(self):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/_engage/queue",
                                     headers={"Authorization": f"Bearer {ADMIN}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            q = json.load(r)
        return q["pending"], q["tail"]


def reader(ports, key, stop, out):
    """Asks each server in turn for a user nothing names; latency per server (ms)."""
    n = 0
    while not stop.is_set():
        port = ports[n % len(ports)]
        body = json.dumps({"external_ids": [f"quiet-{n}"], "fields_to_export": ["external_id"]}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/users/export/ids", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        t = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
            out.setdefault(port, []).append((time.monotonic() - t) * 1000)
        except Exception as e:  # a failed read counts as one that took forever
            out.setdefault(port, []).append(float("inf"))
            print(f"  read failed on {port}: {e}", file=sys.stderr)
        n += 1
        time.sleep(0.05)


def p99(samples):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))] if s else float("nan")


def run(n, args, base, proxy_port, logs):
    name = f"apply_{args.store}_{n}_{os.getpid()}"
    env = dict(os.environ)
    if args.store == "postgres":
        parts = urllib.parse.urlsplit(base)
        psql(base, f"CREATE DATABASE {name}")
        netloc = f"{parts.username}@127.0.0.1:{proxy_port or parts.port}"
        db = urllib.parse.urlunsplit(parts._replace(netloc=netloc, path=f"/{name}"))
        direct = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
        env["ENGAGE_QUEUE_PARTITIONS"] = str(args.partitions)
    else:
        db = direct = os.path.join(logs, f"{name}.db")
    key = subprocess.run([ENGAGE, "keys", "create", "--db", db, "--workspace", "bench"], check=True,
                         capture_output=True, text=True, env=env).stdout.strip()
    ports = [free_port() for _ in range(n)]
    servers = []
    for i, port in enumerate(ports):
        log = open(os.path.join(logs, f"server-{name}-{i}.log"), "w")
        servers.append(subprocess.Popen([ENGAGE, "serve", "--db", db, "--listen", f"127.0.0.1:{port}",
                                         "--no-rate-limits", "--max-backlog-secs", "0", "--admin-token", ADMIN],
                                        stderr=log, stdout=log, env=env))
        wait_for(port, f"server {i}")
    queue = Queue(args.store, direct, ports[0])
    try:
        load_env = dict(os.environ, BENCH_TARGET=f"http://127.0.0.1:{ports[0]}", BENCH_KEY=key,
                        BENCH_PROFILES=str(args.profiles), BENCH_RATE=str(args.rate),
                        BENCH_SECONDS=str(args.seconds), BENCH_DRAIN_SECONDS="0")
        load = subprocess.run(["cargo", "bench", "-q", "-p", "engage", "--bench", "track_load"], cwd=ROOT,
                              env=load_env, capture_output=True, text=True)
        found = re.search(r"acknowledged: (\d+)/\d+ .*= (\d+) req/s", load.stdout)
        if not found:
            sys.exit(f"track_load said: {load.stdout[-500:]} {load.stderr[-500:]}")
        acked, ack_rate = int(found.group(1)), int(found.group(2))
        start, tail = queue.now()
        per_request = tail / acked if acked else 1.0
        stop, reads = threading.Event(), {}
        r = threading.Thread(target=reader, args=(ports, key, stop, reads))
        r.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.drain and not queue.empty():
            time.sleep(1)
        took = time.monotonic() - t0
        left, _ = queue.now()
        stop.set()
        r.join()
        applied = (start - left) / per_request / took if took > 0 else 0.0
        p99s = ", ".join(f"{p99(reads.get(p, [])):.0f}" for p in ports)
        every = sorted(x for p in ports for x in reads.get(p, []))
        if every:
            print(f"  reads: {len(every)}, p50 {every[len(every) // 2]:.0f} ms, max {every[-1]:.0f} ms; first on each "
                  f"server {', '.join(f'{reads[p][0]:.0f}' for p in ports if reads.get(p))} ms; slowest on each "
                  f"{'; '.join(', '.join(f'{x:.0f}' for x in sorted(reads.get(p, []))[-4:]) for p in ports)} ms",
                  file=sys.stderr)
        peaks = []
        for s in servers:
            with open(f"/proc/{s.pid}/status") as f:
                peaks += [int(line.split()[1]) // 1024 for line in f if line.startswith("VmHWM:")]
        print(f"  peak RSS per server: {', '.join(str(p) for p in peaks)} MiB", file=sys.stderr)
        link = f"{args.delay_ms} ms each way" if proxy_port else "direct"
        print(f"| {args.store} | {n} | {link} | {ack_rate} req/s ({acked}) | {start} jobs ({per_request:.1f}/request) "
              f"| {applied:.1f} req/s ({took:.0f} s, {left} jobs left) | {p99s} ms |", flush=True)
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait()
        if args.store == "postgres":
            psql(base, f"DROP DATABASE {name}")


def main():
    global ENGAGE
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default="1,2,4")
    p.add_argument("--store", default="postgres", choices=["postgres", "sqlite"])
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--delay-ms", default="1")
    p.add_argument("--profiles", type=int, default=1000000)
    p.add_argument("--rate", type=int, default=400)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--drain", type=int, default=60)
    p.add_argument("--engage", default=ENGAGE, help="another build of engage (to compare two)")
    args = p.parse_args()
    ENGAGE = args.engage
    base = os.environ.get("ENGAGE_TEST_POSTGRES_URL")
    if args.store == "postgres" and not base:
        sys.exit("start PostgreSQL first: source tests/postgres.sh && start_postgres")
    delayed = args.store == "postgres" and args.delay_ms != "0"
    for binary in (ENGAGE, PROXY) if delayed else (ENGAGE,):
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing: cargo build --release -p engage -p engage-tests --bin delay-proxy")
    logs = tempfile.mkdtemp(prefix="engage-apply-bench-")
    proxy, proxy_port = None, None
    if delayed:
        proxy_port = free_port()
        target = f"127.0.0.1:{urllib.parse.urlsplit(base).port}"
        proxy = subprocess.Popen([PROXY, f"127.0.0.1:{proxy_port}", target, args.delay_ms], stdout=subprocess.DEVNULL)
        wait_for(proxy_port, "the delay proxy")
    print("| store | servers | link | acknowledged | backlog when the load stopped | applied while it drained "
          "| read p99 per server |")
    print("|---|---|---|---|---|---|---|")
    try:
        for n in [int(x) for x in args.servers.split(",")]:
            run(n, args, base, proxy_port, logs)
    finally:
        if proxy:
            proxy.terminate()
    print(f"(server logs in {logs})")


if __name__ == "__main__":
    main()
