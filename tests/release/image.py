"""Tests Engage's container image without a container runtime (none runs on these
machines): its filesystem is taken out of the image archive `scripts/release.sh`
wrote, and its entrypoint run from there, as the image says: its command, its
environment, its working directory and its user, chrooted into that filesystem in a
network namespace of its own (so its fixed port 8080 is free).

  python3 tests/release/image.py ARCHIVE VERSION COMMIT

Run as root (chroot, setuid), inside `unshare -n` with loopback up (run.sh does).
Checks: the image's settings (non-root user, port 8080, the /data volume, the health
check through the binary), its files (the binary, /data and /tmp; nothing else: no
shell), the server starts, /healthz names the version and commit, / and /playground/
answer from the binary alone, and the image's health check exits 0.
"""

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

archive, version, commit = sys.argv[1:4]


def fail(message):
    print(f"image: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


work = tempfile.mkdtemp(prefix="engage-image-")
rootfs = os.path.join(work, "rootfs")
os.mkdir(rootfs)
with tarfile.open(archive) as image:
    manifest = json.load(image.extractfile("manifest.json"))
    check(len(manifest) == 1, f"one image in the archive, found {len(manifest)}")
    config = json.load(image.extractfile(manifest[0]["Config"]))
    for layer in manifest[0]["Layers"]:
        with tarfile.open(fileobj=image.extractfile(layer)) as files:
            files.extractall(rootfs, numeric_owner=True, filter="fully_trusted")
c = config["config"]
print("image config:", json.dumps({k: c.get(k) for k in ["User", "Entrypoint", "Cmd", "Env", "WorkingDir", "ExposedPorts", "Volumes", "Healthcheck"]}, indent=1))

# Its settings.
check(c.get("User") not in (None, "", "0", "root", "0:0"), f"runs as a non-root user, not {c.get('User')!r}")
uid, _, gid = c["User"].partition(":")
uid, gid = int(uid), int(gid or uid)
check("8080/tcp" in (c.get("ExposedPorts") or {}), "exposes 8080")
check("/data" in (c.get("Volumes") or {}), "/data is a volume")
check((c.get("Healthcheck") or {}).get("Test") == ["CMD", "/engage", "health"], "the health check is `engage health`")
env = dict(e.split("=", 1) for e in c.get("Env") or [])
check(env.get("ENGAGE_DB", "").startswith("/data/"), f"the database is in the volume: {env.get('ENGAGE_DB')}")
labels = c.get("Labels") or {}
check(labels.get("org.opencontainers.image.version") == version, f"version label {labels}")

# Its files: the binary and two empty directories the user owns.
found = sorted(os.path.relpath(os.path.join(d, n), rootfs) for d, ds, fs in os.walk(rootfs) for n in ds + fs)
check(found == ["data", "engage", "tmp"], f"the image holds /engage, /data and /tmp only: {found}")
for d in ["data", "tmp"]:
    st = os.stat(os.path.join(rootfs, d))
    check((st.st_uid, st.st_gid) == (uid, gid), f"/{d} belongs to the image's user")
size = os.path.getsize(os.path.join(rootfs, "engage"))
print(f"image: /engage is {size / 1e6:.1f} MB")


def start(argv):
    """Runs argv inside the image's filesystem, as the image's user, in its working directory."""

    def enter():
        os.chroot(rootfs)
        os.chdir(c.get("WorkingDir") or "/")
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return subprocess.Popen(argv, env=env, preexec_fn=enter, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def get(path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:8080{path}", timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


server = start((c.get("Entrypoint") or []) + (c.get("Cmd") or []))
try:
    deadline = time.time() + 30
    while True:
        try:
            status, _, body = get("/healthz")
            break
        except OSError:
            if server.poll() is not None:
                fail(f"the server exited: {server.stdout.read()}")
            check(time.time() < deadline, "the server did not answer within 30 s")
            time.sleep(0.2)
    health = json.loads(body)
    check(status == 200 and health == {"status": "ok", "version": version, "commit": commit}, f"/healthz: {status} {health}")
    status, kind, page = get("/")
    check(status == 200 and b"/playground/" in page and version.encode() in page, f"/: {status} {page[:300]!r}")
    status, kind, page = get("/playground/")
    check(status == 200 and kind.startswith("text/html"), f"/playground/: {status} {kind}")
    status, kind, wasm = get("/playground/pkg/engage_www_bg.wasm")
    check(status == 200 and kind == "application/wasm" and wasm[:4] == b"\0asm", f"the playground's wasm: {status} {kind}")
    print(f"image: the server answers /healthz ({health}), / and /playground/ (wasm {len(wasm)} bytes)")

    probe = start(c["Healthcheck"]["Test"][1:])
    out, _ = probe.communicate(timeout=30)
    check(probe.returncode == 0, f"the health check exited {probe.returncode}: {out}")
    print(f"image: the health check exits 0: {out.strip()}")
finally:
    server.terminate()
    try:
        out, _ = server.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        out, _ = server.communicate()
    print("  | " + "\n  | ".join(out.strip().splitlines()))

check(server.returncode == 0, f"the server stopped on SIGTERM with {server.returncode}")
stopped = start(c["Healthcheck"]["Test"][1:])
out, _ = stopped.communicate(timeout=30)
check(stopped.returncode != 0, "with no server, the health check fails")
print(f"image: with the server stopped the health check exits {stopped.returncode}: {out.strip()}")
print("image: ok")
