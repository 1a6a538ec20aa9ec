"""An application's calls through PyPI braze-client, checked against Engage.

Copy this folder, `pip install engage_server-*.whl -r requirements.txt` (and
`pip install --no-deps braze-client==2.3.3`), run `pytest`: the `engage` fixture
gives each test a fresh workspace on one throwaway server.
"""

import datetime

NEWSLETTER = {"id": "newsletter", "name": "Newsletter", "channel": "email"}


def created_at(user):
    return datetime.datetime.fromisoformat(user["created_at"].replace("Z", "+00:00"))


def test_a_tracked_user_is_exported(engage, braze):
    braze.user_track(
        attributes=[{"external_id": "ada", "first_name": "Ada", "visits": {"inc": 1}}],
        events=[{"external_id": "ada", "name": "signed_up", "time": "2026-01-02T10:00:00Z"}],
    )

    [user] = braze.user_export(external_ids=["ada"])["users"]
    assert user["first_name"] == "Ada"
    assert user["custom_attributes"] == {"visits": 1}
    assert [e["name"] for e in user["custom_events"]] == ["signed_up"]
    [track] = engage.requests(method="POST", path="/users/track")
    assert track["status"] == 201


def test_unsubscribing_from_email_leaves_the_group_state_but_not_its_effect(engage, braze):
    engage.seed({
        "groups": [NEWSLETTER],
        "users": [{"attributes": [{"external_id": "ada", "email": "ada@example.com"}]}],
        "subscriptions": [{"subscription_groups": [
            {"subscription_group_id": "newsletter", "subscription_state": "subscribed", "external_ids": ["ada"]},
        ]}],
    })

    braze.user_track(attributes=[{"external_id": "ada", "email_subscribe": "unsubscribed"}])

    [user] = braze.user_export(external_ids=["ada"])["users"]
    assert user["email_subscribe"] == "unsubscribed"
    [group] = user["subscription_groups"]
    assert (group["id"], group["status"], group["effective_status"]) == ("newsletter", "Subscribed", "Unsubscribed")


def test_a_rate_limited_track_is_retried_by_the_client(engage, braze):
    fault = engage.fault(method="POST", path="/users/track", status=429, times=1, retry_after_secs=1)

    answer = braze.user_track(attributes=[{"external_id": "ada", "first_name": "Ada"}])

    # braze-client retries a 429 by itself (tenacity, up to 3 attempts), so the call succeeded.
    assert answer["success"]
    assert engage.count(path="/users/track", status=429) == 1
    assert engage.count(path="/users/track", status=201) == 1
    newest, first = engage.requests(path="/users/track")
    assert (first["status"], first["fault"]) == (429, fault)
    assert newest["status"] == 201
    assert braze.user_export(external_ids=["ada"])["users"][0]["first_name"] == "Ada"


def test_a_snapshot_brings_back_a_deleted_user(engage, braze):
    braze.user_track(attributes=[{"external_id": "ada", "first_name": "Ada"}])
    engage.snapshot("with-ada")

    braze.user_delete(external_ids=["ada"])
    assert braze.user_export(external_ids=["ada"])["users"] == []

    engage.restore("with-ada")
    assert braze.user_export(external_ids=["ada"])["users"][0]["first_name"] == "Ada"


def test_profiles_are_stamped_with_the_workspace_clock(engage, braze):
    braze.user_track(attributes=[{"external_id": "ada"}])
    engage.advance_clock(3 * 24 * 3600)
    braze.user_track(attributes=[{"external_id": "grace"}])

    users = {u["external_id"]: u for u in braze.user_export(external_ids=["ada", "grace"])["users"]}
    assert created_at(users["grace"]) - created_at(users["ada"]) >= datetime.timedelta(days=3)
