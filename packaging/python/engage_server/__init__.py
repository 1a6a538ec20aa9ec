"""Engage, a local stand-in for a customer-engagement platform's REST API, as a
Python package: the static `engage` binary (run it as `engage` once installed),
a pytest plugin (the fixtures `engage_server` and `engage`, see
`engage_server.pytest_plugin`), and `Server` / `Workspace` for other test runners.

    from engage_server import Server

    with Server() as server:
        workspace = server.new_workspace()
        ...  # point a client at workspace.url with workspace.api_key
"""

import os
import stat
import sys

__all__ = ["EngageError", "Server", "Workspace", "binary_path", "main"]


def binary_path():
    """The path of the `engage` binary inside this package, made executable if the
    installer dropped the bit."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "engage")
    if not os.access(path, os.X_OK):
        try:
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            pass  # a read-only install: exec then says why
    return path


def main():
    """The `engage` command: this process becomes the bundled binary, with the same
    arguments, so signals and the exit code are the binary's own."""
    path = binary_path()
    os.execv(path, [path, *sys.argv[1:]])


# Below the functions above: `kit` imports `binary_path` from here.
from .kit import EngageError, Server, Workspace  # noqa: E402
