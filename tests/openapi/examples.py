"""The examples of the server's /openapi.json hold: every example (request bodies,
answers, errors) is valid against its own schema, and every request body's example,
sent as it is to the server, gets the operation's documented success status with an
answer valid against that status's schema.

An example names resources by example ids (a subscription group, a preference
center, a SCIM user, an integration): this script makes each first and puts the id
the server gave in the example's place, in the body and the path.

Usage: ENGAGE_URL=... ENGAGE_KEY=... ENGAGE_ADMIN=... ENGAGE_SCIM=... ENGAGE_ORIGIN=... python examples.py
(the server must run with --test-clock, for `POST /_engage/clock`)
"""
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import jsonschema_rs

URL = os.environ["ENGAGE_URL"].rstrip("/")
CREDENTIALS = {
    "apiKey": {"Authorization": f"Bearer {os.environ['ENGAGE_KEY']}"},
    "adminToken": {"Authorization": f"Bearer {os.environ['ENGAGE_ADMIN']}"},
    "scimToken": {"Authorization": f"Bearer {os.environ['ENGAGE_SCIM']}"},
    "scimOrigin": {"X-Request-Origin": os.environ["ENGAGE_ORIGIN"]},
}
# The example ids of core/src (subscriptions/schema.rs EXAMPLE_GROUP).
EXAMPLE_GROUP = "6c2bdb0e-3e57-4a8b-9d0a-0c4d1f5e8a21"

# The order the bodies are sent in: what an example names exists by then. Every
# operation with a request body must be here (a new one fails until it is placed).
ORDER = [
    ("post", "/_engage/keys"),
    ("post", "/_engage/groups"),
    ("post", "/_engage/scim-tokens"),
    ("post", "/_engage/seed"),
    ("post", "/_engage/workspaces"),
    ("post", "/_engage/requests/find"),
    ("post", "/_engage/requests/count"),
    ("post", "/_engage/faults"),
    ("post", "/_engage/clock"),
    ("post", "/_engage/cdi/integrations"),
    ("patch", "/_engage/cdi/integrations/{id}"),
    ("post", "/_engage/cdi/integrations/{id}/rewind"),
    ("post", "/users/track"),
    ("post", "/users/track/sync"),
    ("post", "/users/alias/new"),
    ("post", "/users/alias/update"),
    ("post", "/users/identify"),
    ("post", "/users/merge"),
    ("post", "/users/delete"),
    ("post", "/subscription/status/set"),
    ("post", "/v2/subscription/status/set"),
    ("post", "/email/status"),
    ("post", "/email/blocklist"),
    ("post", "/email/blacklist"),
    ("post", "/email/bounce/remove"),
    ("post", "/email/spam/remove"),
    ("post", "/sms/invalid_phone_numbers/remove"),
    ("post", "/users/export/ids"),
    ("post", "/preference_center/v1"),
    ("put", "/preference_center/v1/{preferenceCenterExternalID}"),
    ("post", "/preferences/{token}"),
    ("post", "/scim/v2/Users"),
    ("put", "/scim/v2/Users/{id}"),
    ("patch", "/scim/v2/Users/{id}"),
    ("post", "/scim/v2/Users/.search"),
    ("post", "/scim/v2/.search"),
    # Last: the rename leaves the examples' user-123 a deprecated id, then removes it.
    ("post", "/users/external_ids/rename"),
    ("post", "/users/external_ids/remove"),
]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def request(method, path, body=None, media="application/json", headers=None):
    """(status, content type, body bytes) of one request."""
    data = None
    h = dict(headers or {})
    if body is not None:
        if media == "application/x-www-form-urlencoded":
            data = urllib.parse.urlencode(body).encode()
        else:
            data = json.dumps(body).encode()
        h["Content-Type"] = media
    req = urllib.request.Request(URL + path, data=data, method=method.upper(), headers=h)
    try:
        with OPENER.open(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def validator(doc, schema):
    # The schema at the root of a copy of the components, so `#/components/...` resolves.
    root = dict(schema) if isinstance(schema, dict) else {"allOf": [schema]}
    root["components"] = doc["components"]
    return jsonschema_rs.validator_for(root, validate_formats=True)


def problems_of(doc, schema, instance):
    return [str(e).split("\n")[0] for e in validator(doc, schema).iter_errors(instance)]


def resolve(doc, v):
    """A `$ref` to components followed (responses are often shared)."""
    while isinstance(v, dict) and "$ref" in v:
        node = doc
        for part in v["$ref"].lstrip("#/").split("/"):
            node = node[part]
        v = node
    return v


def operations(doc):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and "responses" in op:
                yield method, path, op


def check_static(doc):
    """Every example against its schema."""
    failures, count = [], 0
    for method, path, op in operations(doc):
        name = f"{method.upper()} {path}"
        for media, content in op.get("requestBody", {}).get("content", {}).items():
            if "example" in content:
                count += 1
                for p in problems_of(doc, content["schema"], content["example"]):
                    failures.append(f"{name} request {media}: {p}")
        for status, answer in op["responses"].items():
            answer = resolve(doc, answer)
            for media, content in answer.get("content", {}).items():
                for ex_name, ex in content.get("examples", {}).items():
                    count += 1
                    for p in problems_of(doc, content["schema"], resolve(doc, ex)["value"]):
                        failures.append(f"{name} {status} {media} example {ex_name!r}: {p}")
    return failures, count


def substituted(value, ids):
    text = json.dumps(value)
    for example, real in ids.items():
        text = text.replace(example, real)
    return json.loads(text)


def main():
    status, _, raw = request("get", "/openapi.json")
    assert status == 200, status
    doc = json.loads(raw)

    failures, count = check_static(doc)
    print(f"{count} examples checked against their schemas: {len(failures)} invalid")

    with_body = {(m, p): op for m, p, op in operations(doc) if "requestBody" in op}
    unplaced = sorted(set(with_body) - set(ORDER))
    failures += [f"{m.upper()} {p}: a request body example this script does not send (add it to ORDER)" for m, p in unplaced]

    # The resources the examples name, made first.
    admin = CREDENTIALS["adminToken"]
    s, _, raw = request("post", "/_engage/groups", {"name": "Weekly newsletter", "channel": "email"}, headers=admin)
    assert s == 201, (s, raw)
    ids = {EXAMPLE_GROUP: json.loads(raw)["id"]}
    path_ids = {}

    sent = 0
    for method, path in ORDER:
        op = with_body.get((method, path))
        if op is None:
            failures.append(f"{method.upper()} {path}: in ORDER but has no request body")
            continue
        media, content = next(iter(op["requestBody"]["content"].items()))
        body = substituted(content["example"], ids)
        real_path = path
        for name, value in path_ids.get(path, {}).items():
            real_path = real_path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
        headers = {}
        for requirement in op.get("security", []):
            for scheme in requirement:
                headers.update(CREDENTIALS[scheme])
        expected = min(int(s) for s in op["responses"] if s[0] in "23")
        status, ctype, raw = request(method, real_path, body, media, headers)
        for _ in range(3):
            if (method, path, status) != ("post", "/_engage/cdi/integrations/{id}/rewind", 409):
                break
            # The integration's hourly schedule is due at once: the runner may be
            # running its first job (it fails: the example's file does not exist),
            # and rewinding answers 409 while a job runs, as documented. Once that
            # job has ended, the next is an hour away.
            wait_for_no_running_job(real_path.rsplit("/", 1)[0], headers)
            status, ctype, raw = request(method, real_path, body, media, headers)
        sent += 1
        name = f"{method.upper()} {path}"
        if status != expected:
            failures.append(f"{name}: its example answered {status}, not {expected}: {raw[:300]!r}")
            continue
        answer = resolve(doc, op["responses"][str(status)])
        for answer_media, answer_content in answer.get("content", {}).items():
            if not ctype.startswith(answer_media.split(";")[0]):
                continue
            instance = json.loads(raw) if "json" in answer_media else raw.decode()
            for p in problems_of(doc, answer_content["schema"], instance):
                failures.append(f"{name}: its answer does not match its schema: {p}")
        learn(method, path, json.loads(raw) if "json" in ctype else None, path_ids, headers)
        print(f"ok  {name} -> {status}")

    print(f"{sent} request body examples sent")
    if failures:
        sys.exit("\n".join(failures))


def wait_for_no_running_job(integration, headers):
    """Waits until no job of the integration at this path runs (at most a minute)."""
    deadline = time.monotonic() + 60
    while True:
        status, _, raw = request("get", integration + "/jobs", headers=headers)
        assert status == 200, (status, raw)
        if not any(job.get("job_status") == "running" for job in json.loads(raw).get("jobs", [])):
            return
        assert time.monotonic() < deadline, f"a job of {integration} still runs after 60 s: {raw[:300]!r}"
        time.sleep(0.2)


def learn(method, path, answer, path_ids, headers):
    """The ids later examples' paths need, from the answers that made them."""
    if (method, path) == ("post", "/_engage/cdi/integrations"):
        for p in ("/_engage/cdi/integrations/{id}", "/_engage/cdi/integrations/{id}/rewind"):
            path_ids[p] = {"id": answer["integration_id"]}
    elif (method, path) == ("post", "/scim/v2/Users"):
        for p in ("/scim/v2/Users/{id}",):
            path_ids[p] = {"id": answer["id"]}
    elif (method, path) == ("post", "/preference_center/v1"):
        center = answer["preference_center_api_id"]
        path_ids["/preference_center/v1/{preferenceCenterExternalID}"] = {"preferenceCenterExternalID": center}
        status, _, raw = request("get", f"/preference_center/v1/{center}/url/user-123", headers=headers)
        assert status == 200, (status, raw)
        token = json.loads(raw)["preference_center_url"].rsplit("/", 1)[1]
        path_ids["/preferences/{token}"] = {"token": token}


if __name__ == "__main__":
    main()
