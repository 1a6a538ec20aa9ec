"""The client under test, pointed at the workspace the `engage` fixture (from the
engage-server package) makes for each test."""

import pytest
from braze.client import BrazeClient


@pytest.fixture
def braze(engage):
    """PyPI braze-client on this test's workspace (a base URL without a trailing slash)."""
    client = BrazeClient(api_key=engage.api_key, api_url=engage.url)
    yield client
    client.session.close()  # its kept-alive connection, which the server would wait for when it stops
