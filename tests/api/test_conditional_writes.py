"""Conditional requests of the management API: ETags on every answer about one row,
``If-Match`` compared strongly and atomically with the write, ``If-None-Match`` on reads.

The concurrency tests run a live Daphne on the test database and send real concurrent
requests with an API token, so every writer has its own thread and database connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, Tool, Upstream
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.api.conftest import CATALOG_PERMISSIONS, make_user
from tests.support.live import asgi_server, flush_database

WRITERS = 10
TIMEOUT = 30.0


@pytest.fixture
def api(token_client: Callable[..., APIClient]) -> APIClient:
    return token_client(*CATALOG_PERMISSIONS)


@pytest.fixture
def tool(db: None) -> Tool:
    main = endpoint_create(slug="main", auth_mode=Endpoint.AuthMode.PUBLIC)
    return tool_create(
        name="echo", kind=Tool.Kind.PYTHON, config={"function": "echo"}, endpoints=[main]
    )


def _url(tool: Tool) -> str:
    return f"/api/v1/tools/{tool.pk}/"


def test_a_weak_etag_never_satisfies_if_match(api: APIClient, tool: Tool) -> None:
    """RFC 9110 section 13.1.1: If-Match uses the strong comparison."""
    etag = api.get(_url(tool))["ETag"]

    weak = api.patch(_url(tool), {"title": "Weak"}, format="json", HTTP_IF_MATCH=f"W/{etag}")

    assert weak.status_code == 412
    assert weak.json()["type"] == "precondition_failed"
    tool.refresh_from_db()
    assert tool.title != "Weak"
    listed = api.patch(_url(tool), {"title": "Listed"}, format="json", HTTP_IF_MATCH=f'"x", {etag}')
    assert listed.status_code == 200


def test_a_stale_etag_refuses_a_delete(api: APIClient, tool: Tool) -> None:
    etag = api.get(_url(tool))["ETag"]
    assert api.patch(_url(tool), {"title": "Changed"}, format="json").status_code == 200

    assert api.delete(_url(tool), HTTP_IF_MATCH=etag).status_code == 412
    assert Tool.objects.filter(pk=tool.pk).exists()


def test_create_answers_the_etag_a_get_answers(api: APIClient) -> None:
    created = api.post(
        "/api/v1/endpoints/", {"slug": "fresh", "auth_mode": "public"}, format="json"
    )

    assert created.status_code == 201, created.json()
    read = api.get(f"/api/v1/endpoints/{created.json()['id']}/")
    assert created["ETag"] == read["ETag"]
    assert created.json() == read.json()


def test_an_update_answers_the_etag_a_get_answers(api: APIClient, tool: Tool) -> None:
    endpoint_url = f"/api/v1/endpoints/{Endpoint.objects.get(slug='main').pk}/"

    patched = api.patch(endpoint_url, {"title": "Renamed"}, format="json")

    assert patched.status_code == 200
    assert patched["ETag"] == api.get(endpoint_url)["ETag"]


@pytest.mark.parametrize(
    "header", ["{etag}", "W/{etag}", '"other", {etag}', "*"], ids=["same", "weak", "list", "any"]
)
def test_if_none_match_answers_304_when_the_row_is_unchanged(
    api: APIClient, tool: Tool, header: str
) -> None:
    """RFC 9110 section 13.1.2: If-None-Match uses the weak comparison; ``*`` matches."""
    etag = api.get(_url(tool))["ETag"]

    response = api.get(_url(tool), HTTP_IF_NONE_MATCH=header.format(etag=etag))

    assert response.status_code == 304
    assert response["ETag"] == etag
    assert response.content == b""


def test_if_none_match_answers_the_row_once_it_changed(api: APIClient, tool: Tool) -> None:
    etag = api.get(_url(tool))["ETag"]
    assert api.patch(_url(tool), {"title": "Changed"}, format="json").status_code == 200

    response = api.get(_url(tool), HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 200
    assert response.json()["title"] == "Changed"
    assert response["ETag"] != etag


def test_if_none_match_star_refuses_a_write_to_an_existing_row(api: APIClient, tool: Tool) -> None:
    response = api.patch(_url(tool), {"title": "Nope"}, format="json", HTTP_IF_NONE_MATCH="*")

    assert response.status_code == 412
    tool.refresh_from_db()
    assert tool.title != "Nope"


@pytest.mark.parametrize("action", ["enable", "disable"])
def test_enable_and_disable_honour_if_match(api: APIClient, tool: Tool, action: str) -> None:
    stale = api.get(_url(tool))["ETag"]
    assert api.patch(_url(tool), {"title": "Changed"}, format="json").status_code == 200
    current = api.get(_url(tool))["ETag"]
    tool.refresh_from_db()
    before = tool.enabled

    refused = api.post(f"{_url(tool)}{action}/", HTTP_IF_MATCH=stale)

    assert refused.status_code == 412
    tool.refresh_from_db()
    assert tool.enabled == before
    applied = api.post(f"{_url(tool)}{action}/", HTTP_IF_MATCH=current)
    assert applied.status_code == 200
    assert applied.json()["enabled"] is (action == "enable")
    assert applied["ETag"] == api.get(_url(tool))["ETag"]


def test_reset_breaker_honours_if_match(api: APIClient) -> None:
    upstream = Upstream.objects.create(
        name="peer",
        url="https://peer.example.com/mcp",
        consecutive_failures=5,
        circuit_open_until=timezone.now() + timedelta(minutes=5),
    )
    url = f"/api/v1/upstreams/{upstream.pk}/"
    stale = api.get(url)["ETag"]
    assert api.patch(url, {"description": "Changed"}, format="json").status_code == 200

    refused = api.post(f"{url}reset-breaker/", HTTP_IF_MATCH=stale)

    assert refused.status_code == 412
    upstream.refresh_from_db()
    assert upstream.consecutive_failures == 5
    applied = api.post(f"{url}reset-breaker/", HTTP_IF_MATCH=api.get(url)["ETag"])
    assert applied.status_code == 200
    assert applied.json()["consecutive_failures"] == 0
    assert applied["ETag"] == api.get(url)["ETag"]


# -- real concurrency: a live server (last in the module: its rows are committed)


@dataclass(frozen=True)
class Live:
    base_url: str
    headers: dict[str, str]
    tool_id: int
    endpoint_id: int


@pytest.fixture(scope="module")
def live(django_db_setup: None, django_db_blocker: Any) -> Iterator[Live]:
    """A Daphne process, a token holding every catalog permission, and a published tool."""
    with django_db_blocker.unblock():
        user = make_user("conditional-robot", CATALOG_PERMISSIONS)
        _token, key = api_token_create(user=user, name="ci")
        endpoint = endpoint_create(slug="cond", auth_mode=Endpoint.AuthMode.PUBLIC)
        tool = tool_create(
            name="echo", kind=Tool.Kind.PYTHON, config={"function": "echo"}, endpoints=[endpoint]
        )
    with asgi_server("daphne") as base_url:
        yield Live(base_url, {"Authorization": f"Bearer {key}"}, tool.pk, endpoint.pk)
    flush_database(django_db_blocker)


def _race(send: Callable[[httpx.Client, int], httpx.Response]) -> list[httpx.Response]:
    """Send ``WRITERS`` requests at once, each from its own thread and connection."""
    barrier = threading.Barrier(WRITERS, timeout=TIMEOUT)

    def one(index: int) -> httpx.Response:
        with httpx.Client(timeout=TIMEOUT) as client:
            barrier.wait()
            return send(client, index)

    with ThreadPoolExecutor(WRITERS) as pool:
        return list(pool.map(one, range(WRITERS)))


def test_of_concurrent_patches_with_one_etag_exactly_one_wins(live: Live) -> None:
    url = f"{live.base_url}/api/v1/tools/{live.tool_id}/"
    etag = httpx.get(url, headers=live.headers).raise_for_status().headers["ETag"]

    responses = _race(
        lambda client, index: client.patch(
            url, json={"title": f"writer {index}"}, headers={**live.headers, "If-Match": etag}
        )
    )

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (WRITERS - 1), [r.text for r in responses]
    (winner,) = [response for response in responses if response.status_code == 200]
    for loser in responses:
        if loser.status_code == 412:
            assert loser.json()["type"] == "precondition_failed"
    after = httpx.get(url, headers=live.headers).raise_for_status()
    # The row is the winner's write, and the ETag a PATCH answers is the one GET answers.
    assert after.json()["title"] == winner.json()["title"]
    assert after.headers["ETag"] == winner.headers["ETag"]
    assert after.json() == winner.json()


def test_of_concurrent_disables_with_one_etag_exactly_one_wins(live: Live) -> None:
    url = f"{live.base_url}/api/v1/endpoints/{live.endpoint_id}/"
    etag = httpx.get(url, headers=live.headers).raise_for_status().headers["ETag"]

    responses = _race(
        lambda client, index: client.post(
            f"{url}disable/",
            headers={**live.headers, "If-Match": etag},
        )
    )

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (WRITERS - 1), [r.text for r in responses]
    (winner,) = [response for response in responses if response.status_code == 200]
    after = httpx.get(url, headers=live.headers).raise_for_status()
    assert after.headers["ETag"] == winner.headers["ETag"]
