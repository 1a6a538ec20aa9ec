"""Runs the scim2-tester SCIM 2.0 compliance checks against one server's Users.

    SCIM_URL=http://127.0.0.1:PORT/scim/v2 SCIM_TOKEN=... SCIM_ORIGIN=... python compliance.py

Exits 0 when every check that applies passes, 1 on any failure, 2 when nothing ran.
Two remove checks are expected to be refused (see REFUSALS): they are reported
with the reason and do not fail the run.
A check applies unless the server's ServiceProviderConfig says it does not offer
the feature it tests (PATCH): those come back SKIPPED and are listed as such. Any
other SKIPPED result is a failure.
"""

import os
import sys

from httpx2 import Client
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_models import ResourceType, Schema, ScimProvider, ServiceProviderConfig
from scim2_tester import Status, check_server

USER_URN = "urn:ietf:params:scim:schemas:core:2.0:User"
ENTERPRISE_URN = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
PASS = {Status.SUCCESS, Status.COMPLIANT, Status.ACCEPTABLE}

# Checks whose failure is this server's documented refusal, not a defect: the
# check's title, the attribute it names, the server's own words in its reason,
# and why. Anything else that fails is a failure.
REFUSALS = [
    (
        "check_remove_attribute",
        "'active'",
        "'active' cannot be removed",
        "a user is always active or not: a remove is refused (400), not read as true (that would reactivate it)",
    ),
    (
        "check_remove_attribute",
        f"'{ENTERPRISE_URN}'",
        "'department' is required; it cannot be removed",
        "the extension holds the user's department, which every user has: its remove is refused (400)",
    ),
]


def refusal(result):
    """The reason a failed check is an expected refusal, or None."""
    reason = result.reason or ""
    for title, attribute, words, why in REFUSALS:
        if result.title == title and attribute in reason and words in reason:
            return why
    return None


def with_email_user_names(client):
    """The tester makes up userNames as random UUIDs; Engage's are email addresses.
    Give the tester addresses to pick from, on the client side only, so that the
    server's published schema stays as it is.

    The department is one value in two places (the core attribute and the
    enterprise extension's), and a body giving two different ones is refused; the
    tester picks each at random. Give it one department to pick in both, so that a
    body it makes is one a provider would send."""
    schemas = client.query(Schema).resources or []
    types = client.query(ResourceType).resources or []
    config = client.query(ServiceProviderConfig)
    for schema in schemas:
        for attr in schema.attributes or []:
            if schema.id == USER_URN and attr.name == "userName":
                attr.canonical_values = [f"scim-tester-{i:02d}@example.com" for i in range(1, 41)]
            if schema.id in (USER_URN, ENTERPRISE_URN) and attr.name == "department":
                attr.canonical_values = ["engineering"]
    client.provider = ScimProvider.from_discovery(schemas, types, config, client.provider.policy)
    return config


def main() -> int:
    url, token, origin = os.environ["SCIM_URL"], os.environ["SCIM_TOKEN"], os.environ["SCIM_ORIGIN"]
    http = Client(base_url=url, headers={"Authorization": f"Bearer {token}", "X-Request-Origin": origin}, timeout=30)
    client = SyncSCIMClient(http)
    config = with_email_user_names(client)
    patch_offered = bool(config.patch and config.patch.supported)
    results = check_server(client, raise_exceptions=False, resource_types=["User"])
    failures = 0
    for r in results:
        is_patch = any(t.startswith("patch") for t in (r.tags or []))
        not_offered = r.status == Status.SKIPPED and is_patch and not patch_offered
        refused = None if r.status in PASS else refusal(r)
        ok = r.status in PASS or not_offered or refused is not None
        failures += not ok
        label = "SKIPPED (PATCH not offered)" if not_offered else r.status.name
        if refused:
            label = f"REFUSED by design ({refused})"
        print(f"{'ok ' if ok else 'BAD'} {label:9} {r.title}: {r.reason or ''}")
        if not ok and r.data is not None:
            print(f"      data: {r.data!r}"[:2000])
    print(f"{len(results)} checks, {failures} failed")
    if not results:
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
