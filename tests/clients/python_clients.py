"""Two public Python clients of the hosted platform, pointed at Engage, sending what
their users send: ids as numbers (edx-braze-client passes the learner's integer id)
and times in Python's isoformat. Each call is checked by what Engage then holds.

Usage: ENGAGE_URL=... ENGAGE_KEY=... CLIENT=braze-client|edx python python_clients.py
"""
import datetime
import json
import os
import sys
import urllib.request

URL = os.environ["ENGAGE_URL"]
KEY = os.environ["ENGAGE_KEY"]


def export(ids):
    req = urllib.request.Request(
        URL + "/users/export/ids",
        data=json.dumps({"external_ids": ids}).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 201, resp.status
        return json.load(resp)["users"]


def braze_client():
    from braze.client import BrazeClient

    client = BrazeClient(api_key=KEY, api_url=URL)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    r = client.user_track(
        attributes=[{"external_id": 1001, "first_name": "Ada"}],
        events=[{"external_id": 1001, "name": "signed_up", "time": now}],
        purchases=[{"external_id": 1001, "product_id": 7, "currency": "USD", "price": 9.5, "time": now}],
    )
    assert r["success"], r
    users = client.user_export(external_ids=[1001])["users"]
    assert users[0]["external_id"] == "1001" and users[0]["first_name"] == "Ada", users
    assert users[0]["purchases"][0]["name"] == "7", users
    r = client.user_delete(external_ids=[1001])
    assert r["success"] and r["deleted"] == 1, r
    assert export(["1001"]) == [], "deleted"


def edx():
    from braze.client import BrazeClient

    client = BrazeClient(api_key=KEY, api_url=URL, app_id="")
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    client.track_user(
        attributes=[{"external_id": 42, "email": "learner@example.com"}],
        events=[{"external_id": 42, "name": "edx.course.enrolled", "time": now}],
    )
    assert client.get_braze_external_id("learner@example.com") == "42"
    client.create_braze_alias(["prospect@example.com"], "Enterprise")
    client.identify_users([{"external_id": 43, "user_alias": {"alias_label": "Enterprise", "alias_name": "prospect@example.com"}}])
    users = export(["43"])
    assert users and users[0]["email"] == "prospect@example.com", users
    client.unsubscribe_user_email("learner@example.com")
    assert export(["42"])[0]["email_subscribe"] == "unsubscribed"


{"braze-client": braze_client, "edx": edx}[os.environ["CLIENT"]]()
print(f"ok  {os.environ['CLIENT']}: numeric ids and isoformat times read as the platform reads them")
