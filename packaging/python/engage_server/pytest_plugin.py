"""pytest fixtures for testing an application against Engage (loaded by pytest
itself once `engage-server` is installed: entry point group `pytest11`).

- `engage_server` (session): one `engage serve --ephemeral` for the whole run,
  with a generated admin token, the test clock and faults on; stopped at the end.
- `engage` (function): a fresh workspace on it for each test (`.url`, `.api_key`,
  `.workspace`, and the test kit's routes: `.requests()`, `.count()`, `.fault()`,
  `.advance_clock()`, `.set_clock()`, `.snapshot()`, `.restore()`, `.state()`,
  `.seed()`, `.admin()`), removed after the test with everything in it.

    def test_signup_is_tracked(engage):
        client = BrazeClient(api_key=engage.api_key, api_url=engage.url)
        my_app.sign_up("ada", client)
        assert engage.count(method="POST", path="/users/track") == 1

Options: `--engage-binary PATH` runs another `engage` than the bundled one;
`--engage-arg=ARG` (repeatable) adds an `engage serve` argument (`--engage-arg=--strict`).
"""

import re
import secrets

import pytest

from .kit import Server


def pytest_addoption(parser):
    group = parser.getgroup("engage", "Engage test server (engage-server)")
    group.addoption("--engage-binary", default=None, metavar="PATH",
                    help="the engage binary to run (default: the one in the engage-server package)")
    group.addoption("--engage-arg", action="append", default=[], metavar="ARG",
                    help="one more `engage serve` argument, e.g. --engage-arg=--strict (repeatable)")


@pytest.fixture(scope="session")
def engage_server(pytestconfig):
    """The session's Engage server: `.url`, `.admin_token`, `.admin()`, `.new_workspace()`."""
    server = Server(binary=pytestconfig.getoption("engage_binary"),
                    args=pytestconfig.getoption("engage_arg"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _workspace_name(test_name):
    """The test's name, as far as a workspace name allows, and a random suffix:
    readable in the inspector, never shared by two tests."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", test_name).strip("-")[:48] or "test"
    return f"{stem}-{secrets.token_hex(4)}"


@pytest.fixture
def engage(engage_server, request):
    """A fresh workspace for this test, with an all-permissions API key; removed after."""
    workspace = engage_server.new_workspace(_workspace_name(request.node.name))
    try:
        yield workspace
    finally:
        workspace.remove()
