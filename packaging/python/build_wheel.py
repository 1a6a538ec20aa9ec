"""Builds the `engage-server` wheel with the standard library alone (no build
backend to fetch): the package next to this file, the `engage` binary given, and
the metadata pip reads (METADATA, WHEEL, entry_points.txt, RECORD).

    python3 build_wheel.py --binary PATH --version 0.1.0 --out DIR [--mtime EPOCH]

Prints the wheel's path. Entries are sorted and dated `--mtime` (default
SOURCE_DATE_EPOCH, else 1980-01-01), so the same inputs give the same bytes.
"""

import argparse
import base64
import hashlib
import os
import sys
import time
import zipfile

NAME = "engage-server"
DIST = "engage_server"
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engage_server")
# A static x86_64 Linux executable runs on any glibc (and on musl); manylinux2014
# is the oldest tag pip on a glibc system still takes without asking.
TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64"

METADATA = """\
Metadata-Version: 2.1
Name: {name}
Version: {version}
Summary: Engage, a local stand-in for a customer-engagement platform's REST API: the engage binary and pytest fixtures
License: Apache-2.0
Requires-Python: >=3.8
Classifier: Framework :: Pytest
Classifier: License :: OSI Approved :: Apache Software License
Classifier: Operating System :: POSIX :: Linux
Classifier: Programming Language :: Python :: 3
Classifier: Topic :: Software Development :: Testing
Description-Content-Type: text/markdown

# engage-server

`pip install engage_server-{version}-*.whl` puts `engage` on PATH (`engage serve
--ephemeral`) and gives pytest two fixtures: `engage_server` (one throwaway server
for the session) and `engage` (a fresh workspace per test, with its API key and the
test kit's calls: `requests`, `count`, `fault`, `advance_clock`, `snapshot`,
`restore`, `state`, `seed`).

```python
def test_signup_is_tracked(engage):
    client = BrazeClient(api_key=engage.api_key, api_url=engage.url)
    my_app.sign_up("ada", client)
    assert engage.count(method="POST", path="/users/track") == 1
```
"""

WHEEL = """\
Wheel-Version: 1.0
Generator: engage build_wheel.py
Root-Is-Purelib: false
Tag: {tag}
"""

ENTRY_POINTS = """\
[console_scripts]
engage = engage_server:main

[pytest11]
engage = engage_server.pytest_plugin
"""


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the static engage executable")
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, help="directory to write the wheel into")
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--mtime", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")))
    args = parser.parse_args()

    date = time.gmtime(max(args.mtime, 315532800))[:6]  # zip dates start in 1980
    info = f"{DIST}-{args.version}.dist-info"
    files = []  # (archive name, bytes, mode)
    for name in sorted(os.listdir(PACKAGE_DIR)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE_DIR, name), "rb") as f:
                files.append((f"{DIST}/{name}", f.read(), 0o644))
    with open(args.binary, "rb") as f:
        files.append((f"{DIST}/bin/engage", f.read(), 0o755))
    files.append((f"{info}/METADATA", METADATA.format(name=NAME, version=args.version).encode(), 0o644))
    files.append((f"{info}/WHEEL", WHEEL.format(tag=args.tag).encode(), 0o644))
    files.append((f"{info}/entry_points.txt", ENTRY_POINTS.encode(), 0o644))
    files.append((f"{info}/top_level.txt", f"{DIST}\n".encode(), 0o644))

    record = [f"{name},{digest(data)},{len(data)}" for name, data, _ in files]
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{DIST}-{args.version}-{args.tag}.whl")
    tmp = path + ".part"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data, mode in files:
            entry = zipfile.ZipInfo(name, date_time=date)
            entry.external_attr = (0o100000 | mode) << 16  # a regular file and its mode
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    sys.exit(main())
