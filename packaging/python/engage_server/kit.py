"""A throwaway Engage server (`engage serve --ephemeral`, the test clock and faults
on, on a free port of 127.0.0.1) and the test kit's routes (`/_engage/...`) as
methods, for one workspace per test. Standard library only.

Every admin call sends `Authorization: Bearer <admin token>` and answers the
response's JSON; a status of 400 or more raises `EngageError` with the status
and the body the server sent.
"""

import atexit
import datetime
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from . import binary_path

# The server is on 127.0.0.1: no proxy from the environment may stand in between.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# How many free ports are tried when another process takes the one picked first.
_PORT_ATTEMPTS = 5


class EngageError(Exception):
    """An admin call that failed: `status` (None when the server did not answer)
    and `body` as the server sent them."""

    def __init__(self, method, path, status, body):
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        what = f"answered {status}" if status is not None else "did not answer"
        super().__init__(f"engage: {method} {path} {what}: {body}")


def _text(value):
    """A datetime as the server reads times (RFC 3339, UTC); anything else as is."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    return value


def _call(base_url, token, method, path, body=None, timeout=30):
    __tracebackhide__ = True  # pytest shows the caller's line and the EngageError
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(base_url + path, data=data, headers=headers, method=method)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:
        raise EngageError(method, path, error.code, error.read().decode("utf-8", "replace")) from None
    except (urllib.error.URLError, OSError) as error:
        raise EngageError(method, path, None, str(getattr(error, "reason", error))) from None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `engage serve --ephemeral` process. `start()` returns once `/readyz`
    answers; `stop()` ends it (its database goes with it). Also a context manager.

    binary: another `engage` than the bundled one. args: more `engage serve`
    arguments (`["--strict"]`). The child gets none of this process's `ENGAGE_*`
    variables (so a `.env` meant for a real server does not reach it); RUST_LOG is
    `warn` unless set. Its output goes to `log_path`.
    """

    def __init__(self, binary=None, args=(), ready_timeout=30.0):
        self.binary = binary or binary_path()
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.url = None
        self.admin_token = None
        self.log_path = None
        self._process = None
        self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Starts the server; answers self."""
        if self._process is not None:
            return self
        self.admin_token = secrets.token_urlsafe(32)
        self._dir = tempfile.mkdtemp(prefix="engage-server-")
        self.log_path = os.path.join(self._dir, "engage.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGAGE_")}
        env["ENGAGE_ADMIN_TOKEN"] = self.admin_token
        env.setdefault("RUST_LOG", "warn")
        atexit.register(self.stop)
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port()
            try:
                with open(self.log_path, "wb") as log:
                    self._process = subprocess.Popen(
                        [self.binary, "serve", "--ephemeral", "--test-clock", "--faults",
                         "--listen", f"127.0.0.1:{port}", *self.args],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        env=env, cwd=self._dir,
                    )
            except OSError as error:
                self.stop()
                raise RuntimeError(f"engage serve could not run {self.binary}: {error}") from None
            self.url = f"http://127.0.0.1:{port}"
            if self._wait_ready():
                return self
            output = self._log_tail()
            self._process = None
            if "Address already in use" in output and attempt + 1 < _PORT_ATTEMPTS:
                continue
            self.stop()
            raise RuntimeError(f"engage serve did not start:\n{output}")
        raise AssertionError("unreachable")

    def _wait_ready(self):
        """True once /readyz answers 200; False when the process exits first."""
        deadline = time.monotonic() + self.ready_timeout
        while self._process.poll() is None:
            try:
                with _OPENER.open(self.url + "/readyz", timeout=1) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                output = self._log_tail()
                self.stop()
                raise RuntimeError(f"engage serve was not ready in {self.ready_timeout} s:\n{output}")
            time.sleep(0.05)
        return False

    def _log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def stop(self):
        """Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its files."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def admin(self, method, path, body=None):
        """Any operator route: `admin("GET", "/_engage/faults")`. Answers the JSON."""
        __tracebackhide__ = True
        if self.url is None:
            raise RuntimeError("engage: the server is not started")
        return _call(self.url, self.admin_token, method, path, body)

    def new_workspace(self, name=None, api_key=None):
        """A new workspace with an all-permissions key (`POST /_engage/workspaces`)."""
        body = {"name": name or f"test-{secrets.token_hex(6)}"}
        if api_key is not None:
            body["api_key"] = api_key
        made = self.admin("POST", "/_engage/workspaces", body)
        return Workspace(self, made["name"], made["api_key"])


class Workspace:
    """One workspace on a `Server`: `url` and `api_key` for the client under test,
    and the test kit's routes with this workspace filled in."""

    def __init__(self, server, workspace, api_key):
        self.server = server
        self.url = server.url
        self.api_key = api_key
        self.workspace = workspace
        self._snapshots = set()

    def __repr__(self):
        return f"<engage workspace {self.workspace!r} at {self.url}>"

    def _query(self, path):
        return f"{path}?workspace={urllib.parse.quote(self.workspace, safe='')}"

    def admin(self, method, path, body=None):
        """Any operator route, as `Server.admin`."""
        __tracebackhide__ = True
        return self.server.admin(method, path, body)

    def requests(self, **filter):
        """The journaled requests matching the filter (`method`, `path`, `status`,
        `body`, `since`), newest first: `POST /_engage/requests/find`."""
        body = {"workspace": self.workspace, **{k: _text(v) for k, v in filter.items()}}
        return self.admin("POST", "/_engage/requests/find", body)["requests"]

    def count(self, **filter):
        """How many journaled requests match: `POST /_engage/requests/count`."""
        body = {"workspace": self.workspace, **{k: _text(v) for k, v in filter.items()}}
        return self.admin("POST", "/_engage/requests/count", body)["count"]

    def fault(self, **spec):
        """Makes matching requests fail or wait (`method`, `path`, `status`, `times` or
        `probability`, `delay_ms`, `retry_after_secs`); answers the fault's id."""
        return self.admin("POST", "/_engage/faults", {"workspace": self.workspace, **spec})["id"]

    def advance_clock(self, secs):
        """Moves this workspace's clock forward; answers the new time."""
        return self.admin("POST", self._query("/_engage/clock"), {"advance_secs": secs})["now"]

    def set_clock(self, now):
        """Sets this workspace's clock (RFC 3339 text or a datetime); answers it."""
        return self.admin("POST", self._query("/_engage/clock"), {"now": _text(now)})["now"]

    def snapshot(self, name):
        """Saves this workspace's data under `name` (removed with the workspace)."""
        path = f"/_engage/snapshots/{urllib.parse.quote(name, safe='')}"
        answer = self.admin("POST", self._query(path), None)
        self._snapshots.add(name)
        return answer

    def restore(self, name):
        """Puts this workspace's data back as it was at `snapshot(name)`."""
        path = f"/_engage/snapshots/{urllib.parse.quote(name, safe='')}/restore"
        return self.admin("POST", self._query(path), None)

    def state(self):
        """This workspace's data as a fixtures object: `GET /_engage/state`."""
        return self.admin("GET", self._query("/_engage/state"))

    def seed(self, fixtures):
        """Loads fixtures (`POST /_engage/seed`). A workspace's entries (`groups`,
        `users`, `subscriptions`, ...) go into this workspace; a whole fixtures
        file (with `workspaces` or `scim_users`) is sent as it is."""
        if "workspaces" not in fixtures and "scim_users" not in fixtures:
            fixtures = {"workspaces": {self.workspace: fixtures}}
        return self.admin("POST", "/_engage/seed", fixtures)

    def remove(self):
        """Removes the workspace's snapshots, faults and data, keys included."""
        for name in sorted(self._snapshots):
            path = f"/_engage/snapshots/{urllib.parse.quote(name, safe='')}"
            try:
                self.admin("DELETE", self._query(path))
            except EngageError as error:
                if error.status != 404:
                    raise
        self._snapshots.clear()
        self.admin("DELETE", self._query("/_engage/faults"))
        self.admin("POST", self._query("/_engage/reset") + "&keep=none")
