"""Runs the scim2-tester SCIM 2.0 compliance checks against one server's Users.

    SCIM_URL=http://127.0.0.1:PORT/scim/v2 SCIM_TOKEN=... SCIM_ORIGIN=... python compliance.py

Exits 0 when every check that applies passes, 1 on any failure, 2 when nothing ran.
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
PASS = {Status.SUCCESS, Status.COMPLIANT, Status.ACCEPTABLE}


def with_email_user_names(client):
    """The tester makes up userNames as random UUIDs; Engage's are email addresses.
    Give the tester addresses to pick from, on the client side only, so that the
    server's published schema stays as it is."""
    schemas = client.query(Schema).resources or []
    types = client.query(ResourceType).resources or []
    config = client.query(ServiceProviderConfig)
    for schema in schemas:
        if schema.id == USER_URN:
            for attr in schema.attributes or []:
                if attr.name == "userName":
                    attr.canonical_values = [f"scim-tester-{i:02d}@example.com" for i in range(1, 41)]
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
        ok = r.status in PASS or not_offered
        failures += not ok
        label = "SKIPPED (PATCH not offered)" if not_offered else r.status.name
        print(f"{'ok ' if ok else 'BAD'} {label:9} {r.title}: {r.reason or ''}")
        if not ok and r.data is not None:
            print(f"      data: {r.data!r}"[:2000])
    print(f"{len(results)} checks, {failures} failed")
    if not results:
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
