"""A Python client generated from the server's /openapi.json (openapi-python-client)
makes one successful call to each family, and reads each answer as the typed model
the description promises (a response that does not match its schema fails here).

Usage: ENGAGE_URL=... ENGAGE_KEY=... ENGAGE_ADMIN=... ENGAGE_SCIM=... ENGAGE_ORIGIN=...
       CLIENT_DIR=<dir holding the generated engage_client package> python client.py
"""
import os
import sys

sys.path.insert(0, os.environ["CLIENT_DIR"])

from engage_client import AuthenticatedClient, Client  # noqa: E402
from engage_client.api.engage_operator import get_engage_keys  # noqa: E402
from engage_client.api.engage_service import get_healthz  # noqa: E402
from engage_client.api.export import post_users_export_ids  # noqa: E402
from engage_client.api.identity import post_users_alias_new  # noqa: E402
from engage_client.api.preference_centers import get_preference_center_v1_list  # noqa: E402
from engage_client.api.scim import get_scim_v_2_users, post_scim_v_2_users  # noqa: E402
from engage_client.api.subscriptions import get_subscription_user_status, post_email_status  # noqa: E402
from engage_client.api.track import post_users_track, post_users_track_sync  # noqa: E402
from engage_client.api.warehouse_sync_cdi import get_cdi_integrations  # noqa: E402
from engage_client import models  # noqa: E402

URL = os.environ["ENGAGE_URL"]
api = AuthenticatedClient(base_url=URL, token=os.environ["ENGAGE_KEY"], raise_on_unexpected_status=True)
admin = AuthenticatedClient(base_url=URL, token=os.environ["ENGAGE_ADMIN"], raise_on_unexpected_status=True)
scim = AuthenticatedClient(
    base_url=URL,
    token=os.environ["ENGAGE_SCIM"],
    headers={"X-Request-Origin": os.environ["ENGAGE_ORIGIN"]},
    raise_on_unexpected_status=True,
)
public = Client(base_url=URL, raise_on_unexpected_status=True)


def body(module, data):
    """The request body model of an operation (the first of its union that reads `data`)."""
    name = module.__name__.rsplit(".", 1)[1]
    prefix = "".join(part.capitalize() for part in name.split("_")) + "Body"
    for attr in sorted(dir(models)):
        if attr.startswith(prefix):
            try:
                return getattr(models, attr).from_dict(data)
            except Exception:  # noqa: BLE001 - another member of the union
                continue
    sys.exit(f"{name}: no body model reads {data}")


def call(family, module, status, client, **kwargs):
    r = module.sync_detailed(client=client, **kwargs)
    if r.status_code != status:
        sys.exit(f"{family}: {module.__name__} answered {r.status_code}, not {status}: {r.content[:300]!r}")
    if r.parsed is None or type(r.parsed).__name__ in ("Error", "ScimError", "TrackError"):
        sys.exit(f"{family}: {module.__name__}: the answer did not read as its success model: {r.content[:300]!r}")
    print(f"ok  {family}: {module.__name__.rsplit('.', 1)[1]} -> {r.status_code} {type(r.parsed).__name__}")
    return r.parsed


call("track", post_users_track, 201, api,
     body=body(post_users_track, {"attributes": [{"external_id": "py-1", "first_name": "Py", "email": "py@x.test"}]}))
call("track", post_users_track_sync, 201, api,
     body=body(post_users_track_sync, {"events": [{"external_id": "py-1", "name": "signed_up", "time": "2026-11-26T10:00:00Z"}]}))
exported = call("export", post_users_export_ids, 201, api, body=body(post_users_export_ids, {"external_ids": ["py-1"]}))
assert exported.users and exported.users[0].external_id == "py-1", exported
call("identity", post_users_alias_new, 201, api,
     body=body(post_users_alias_new, {"user_aliases": [{"alias_name": "py-crm-1", "alias_label": "crm", "external_id": "py-1"}]}))
call("subscriptions", post_email_status, 201, api,
     body=body(post_email_status, {"email": "py@x.test", "subscription_state": "opted_in"}))
call("subscriptions", get_subscription_user_status, 200, api, external_id=["py-1"])
call("preference centers", get_preference_center_v1_list, 200, api)
call("warehouse sync", get_cdi_integrations, 200, api)
call("SCIM", post_scim_v_2_users, 201, scim, body=models.ScimUserWrite.from_dict({
    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
    "userName": "py.admin@x.test", "name": {"givenName": "Py", "familyName": "Admin"}, "department": "engineering"}))
# A projection: only userName (and id, schemas) comes back, and still reads as a user.
users = call("SCIM", get_scim_v_2_users, 200, scim, attributes="userName")
assert users.resources and users.resources[0].user_name == "py.admin@x.test", users
call("operator", get_engage_keys, 200, admin)
call("service", get_healthz, 200, public)
print("the generated client made a successful call to every family")
