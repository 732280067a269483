"""Each tool's and endpoint's last 24 hours on its admin pages, linked to the calls."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from mcp_app.models import CallLog, Endpoint
from mcp_app.services.catalog_writes import tool_create
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(endpoint: Endpoint) -> dict[str, CallLog]:
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])
    tool_create(name="add", kind="python", config={"function": "add"}, endpoints=[endpoint])
    make_call(endpoint, target="echo", duration_ms=10.0,
              created_at=timezone.now() - timedelta(days=2))  # fmt: skip
    make_call(endpoint, target="echo", duration_ms=20.0)
    error = make_call(endpoint, target="echo", duration_ms=40.0, status=CallLog.Status.TOOL_ERROR)
    last = make_call(endpoint, target="echo", duration_ms=30.0)
    make_call(endpoint, target="echo", rpc_method="prompts/get")
    return {"error": error, "last": last}


def test_the_tool_list_shows_each_tools_last_day_with_a_link_to_its_calls(
    admin_client: Client,
    calls: dict[str, CallLog],
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    with django_assert_max_num_queries(12):
        page = admin_client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()

    rows = {
        name: row for row in re.findall(r"<tr>.*?</tr>", page, re.S)
        if (name := next(iter(re.findall(r'field-name"><a[^>]*>(\w+)<', row)), None))
    }  # fmt: skip
    echo, add = rows["echo"], rows["add"]
    assert re.search(r'field-calls_24h"><a href="/audit/\?tool=echo&amp;method=tools%2Fcall&amp;'
                     r'endpoint=test&amp;since=[^"]+">3</a>', echo)  # fmt: skip
    assert 'field-errors_24h">1 (33.3%)<' in echo
    assert 'field-p95_24h">39 ms<' in echo
    assert 'field-calls_24h"><a href="/audit/?tool=add' in add and ">0</a>" in add


def test_a_tools_page_gives_its_figures_and_links_its_last_call_and_error(
    admin_client: Client, calls: dict[str, CallLog]
) -> None:
    tool = calls["last"].target
    pk = admin_client.get(reverse("admin:mcp_app_tool_changelist")).context["cl"].result_list
    echo = next(item for item in pk if item.name == tool)

    page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[echo.pk])).content.decode()

    assert "<th>Calls</th><td><a href=" in page and ">3</a>" in page
    assert f'href="{reverse("mcp_app:audit_detail", args=[calls["last"].pk])}"' in page
    assert f'href="{reverse("mcp_app:audit_detail", args=[calls["error"].pk])}"' in page
    assert "<th>p50</th><td>30.0 ms</td>" in page


def test_the_endpoint_list_counts_every_request_of_the_last_day(
    admin_client: Client, calls: dict[str, CallLog]
) -> None:
    page = admin_client.get(reverse("admin:mcp_app_endpoint_changelist")).content.decode()

    assert re.search(r'field-calls_24h"><a href="/audit/\?endpoint=test&amp;since=[^"]+">4</a>',
                     page)  # fmt: skip
    assert 'field-errors_24h">1 (25.0%)<' in page


def test_same_named_tools_on_different_endpoints_each_count_their_own_calls(
    admin_client: Client, endpoint: Endpoint
) -> None:
    other = Endpoint.objects.create(slug="other", title="Other")
    third = Endpoint.objects.create(slug="third", title="Third")
    mine = tool_create(name="echo", kind="python", config={"function": "echo"},
                       endpoints=[endpoint])  # fmt: skip
    theirs = tool_create(name="echo", kind="python", config={"function": "echo"},
                         endpoints=[other, third])  # fmt: skip
    make_call(endpoint, target="echo", duration_ms=10.0)
    for _ in range(3):
        make_call(other, target="echo", duration_ms=50.0, status=CallLog.Status.TOOL_ERROR)
    make_call(third, target="echo", duration_ms=70.0)
    make_call(None, target="echo")  # an unknown endpoint's call belongs to neither tool

    page = admin_client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()

    cells = re.findall(r'field-calls_24h"><a href="([^"]+)">(\d+)</a>', page)
    errors = re.findall(r'field-errors_24h">([^<]+)<', page)
    by_url = {
        url.split("&amp;since=")[0]: (int(n), e) for (url, n), e in zip(cells, errors, strict=True)
    }
    assert by_url == {
        "/audit/?tool=echo&amp;method=tools%2Fcall&amp;endpoint=test": (1, "0 (0.0%)"),
        "/audit/?tool=echo&amp;method=tools%2Fcall": (4, "3 (75.0%)"),
    }

    mine_page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[mine.pk]))
    assert "<th>p50</th><td>10.0 ms</td>" in mine_page.content.decode()
    theirs_page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[theirs.pk]))
    rows = re.findall(r'<tr><th scope="row">(\w+)</th><td><a href="[^"]*endpoint=\1[^"]*">(\d+)'
                      r"</a></td><td>([^<]+)</td>", theirs_page.content.decode())  # fmt: skip
    assert rows == [("other", "3", "3 (100.0%)"), ("third", "1", "0 (0.0%)")]


def test_a_tool_without_calls_or_endpoints_shows_empty_figures(
    admin_client: Client, endpoint: Endpoint
) -> None:
    lonely = tool_create(name="lonely", kind="python", config={"function": "echo"})
    published = tool_create(
        name="quiet", kind="python", config={"function": "echo"}, endpoints=[endpoint]
    )

    for tool in (lonely, published):
        page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk]))
        assert page.status_code == 200
        assert "<th>Calls</th><td><a href=" in page.content.decode()
    listing = admin_client.get(reverse("admin:mcp_app_tool_changelist"))
    assert listing.status_code == 200
