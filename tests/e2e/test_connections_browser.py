"""The Connections page in a real browser: a user connects their own account at an upstream
and disconnects it again, with Debian's Chromium driven by Playwright.

One live Daphne process is the upstream (an OAuth endpoint of ours), its authorization
server and the relay, as in tests/e2e/test_upstream_user_oauth.py; here the browser does
what that module does over HTTP: sign in, Connect, Allow at the consent page, come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, expect

from mcp_app.models import Endpoint, Upstream, UpstreamConnection
from tests.support.browser import chromium, open_page, screenshot_dir
from tests.support.catalog import make_endpoint
from tests.support.live import asgi_server, flush_database, wait_until_idle
from tests.support.page_checks import overflow

pytestmark = pytest.mark.django_db
PASSWORD = "browser-connect-password"
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with asgi_server("daphne", {"CELERY_BROKER_URL": "memory://", "SERVE_STATIC": "1"}) as url:
        with django_db_blocker.unblock():
            make_endpoint("protected", auth_mode=Endpoint.AuthMode.OAUTH)
            upstream = Upstream(
                name="own",
                description="Our own protected endpoint, as an upstream.",
                url=f"{url}/mcp/protected",
                allow_networks="127.0.0.1/32",
                auth_mode=Upstream.AuthMode.USER_OAUTH,
            )
            upstream.full_clean()
            upstream.save()
            user = User.objects.create_user("dora", password=PASSWORD)
        yield {"url": url, "user": user.pk}
        wait_until_idle(url)
    flush_database(django_db_blocker)


def test_a_user_connects_and_disconnects_in_the_browser(site):
    with chromium() as browser:
        connect_and_disconnect(browser, site)
    # Playwright's loop is gone: the database can be read from this thread again.
    assert not UpstreamConnection.objects.filter(user_id=site["user"]).exists()
    assert User.objects.get(pk=site["user"]).oauth2_provider_accesstoken.count() == 0


def connect_and_disconnect(browser: Browser, site: dict[str, Any]) -> None:
    shots = screenshot_dir("connections")
    page = open_page(browser, None, PHONE, "light")
    page.goto(f"{site['url']}/connections/")
    # Signed out: the sign-in page first, then back to Connections.
    page.fill("#id_username", "dora")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{site['url']}/connections/")
    row = page.locator("tr", has_text="own")
    expect(row).to_contain_text("not connected")
    assert overflow(page) == []
    page.screenshot(path=shots / "not-connected.png", full_page=True)

    row.get_by_role("button", name="Connect").click()
    # The authorization server's consent page, for this host's registered client.
    expect(page.locator("#authorizationForm")).to_be_visible()
    page.screenshot(path=shots / "consent.png", full_page=True)
    page.get_by_role("button", name="Allow").click()

    expect(page).to_have_url(f"{site['url']}/connections/")
    expect(page.get_by_role("status")).to_have_text("Your account at own is connected.")
    expect(row).to_contain_text("connected")
    expect(row.get_by_role("button", name="Disconnect")).to_be_visible()
    assert overflow(page) == []
    page.screenshot(path=shots / "connected.png", full_page=True)

    row.get_by_role("button", name="Disconnect").click()
    expect(page.get_by_role("status")).to_contain_text("its tokens were revoked")
    expect(row).to_contain_text("not connected")
    page.context.close()
