"""The audit pages as an operator reads them: names instead of ids, try-it calls marked, times
with their zone."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_app.audit import charts
from mcp_app.audit.selectors import Bucket
from mcp_app.models import BackgroundCall, Endpoint, Session
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_call_detail_names_the_user_and_the_oauth_client(
    staff_client: Client, endpoint: Endpoint
) -> None:
    ada = User.objects.create_user("ada")
    app = get_application_model().objects.create(
        name="Claude Desktop", client_type="public", authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )  # fmt: skip
    record = make_call(endpoint, principal=ada, client_id=app.client_id)

    page = staff_client.get(reverse("mcp_app:audit_detail", args=[record.pk])).content.decode()

    assert "<dt>User</dt>" in page and ">ada <" in page
    assert "Claude Desktop" in page


def test_try_it_calls_are_marked_and_times_carry_their_zone(
    staff_client: Client, endpoint: Endpoint
) -> None:
    make_call(endpoint, http_method=ADMIN_TEST_HTTP_METHOD, target="tried")
    make_call(endpoint, target="called")

    page = staff_client.get(reverse("mcp_app:audit_list")).content.decode()
    feed = staff_client.get(reverse("mcp_app:audit_feed")).json()["rows"]

    assert page.count('class="tag try-it"') == 1
    assert 'tried <span class="tag try-it"' in page
    assert "Time <span" in page and "(UTC)" in page
    assert [(row["target"], row["try_it"]) for row in feed] == [
        ("called", False),
        ("tried", True),
    ]
    assert all(row["created_at"].endswith(" UTC") for row in feed)


def test_statistics_label_p99_use_a_log_scale_and_link_to_the_calls(
    staff_client: Client, endpoint: Endpoint
) -> None:
    make_call(endpoint, target="quick", duration_ms=1.0)
    make_call(endpoint, target="slow", duration_ms=1000.0)

    page = staff_client.get(reverse("mcp_app:audit_stats"), {"range": "1h"}).content.decode()

    tool_chart = page[page.index('aria-label="Latency per tool"') :].split("</svg>")[0]
    assert "p99 1 ms" in tool_chart and "p99 1,000 ms" in tool_chart
    assert "logarithmic scale" in tool_chart
    bar = r'<rect class="p50" x="\d+" y="[\d.]+" width="([\d.]+)" height="7"'
    widths = [float(width) for width in re.findall(bar, tool_chart)]
    # 1 ms against 1000 ms: a sliver of 0.1 % on a linear axis, a third on the log axis.
    assert min(widths) / max(widths) > 0.2
    list_url = reverse("mcp_app:audit_list")
    assert re.search(rf'<a href="{list_url}\?tool=slow&amp;method=tools%2Fcall&amp;since=', page)
    assert re.search(rf'<a href="{list_url}\?endpoint=test&amp;since=', page)
    bucket = re.search(rf'<a href="({list_url}\?since=[^"]+)"><title>', page)
    assert bucket is not None
    listed = staff_client.get(html.unescape(bucket.group(1))).context
    assert {row.target for row in listed["rows"]} == {"quick", "slow"}, (
        bucket.group(1),
        listed["form"].errors,
        timezone.now(),
    )
    assert 'data-refresh-seconds="60"' in page


def test_the_last_time_label_ends_inside_the_chart() -> None:
    start = timezone.now().replace(second=0, microsecond=0)
    buckets = [Bucket(start + timedelta(minutes=i), 1, 0) for i in range(60)]

    svg = charts.calls_chart(buckets, "minute")

    anchors = re.findall(r'<text class="axis" x="([\d.]+)" y="212" text-anchor="(\w+)"', svg)
    assert anchors[0] == (f"{charts.PLOT_LEFT:.1f}", "start")
    assert anchors[-1] == (f"{charts.WIDTH - charts.PLOT_RIGHT:.1f}", "end")


def test_the_overview_ranks_tools_counts_live_work_and_breaks_calls_down_by_caller(
    staff_client: Client, endpoint: Endpoint
) -> None:
    ada = User.objects.create_user("ada")
    app = get_application_model().objects.create(
        name="Inspector", client_type="public", authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )  # fmt: skip
    for _ in range(3):
        make_call(endpoint, target="busy", duration_ms=2.0, principal=ada, client_id=app.client_id)
    make_call(endpoint, target="flaky", duration_ms=5.0, status="tool_error")
    make_call(endpoint, target="slow", duration_ms=900.0)
    Session.objects.create(id="s1", endpoint=endpoint, protocol_version="2025-11-25")
    BackgroundCall.objects.create(
        endpoint=endpoint, tool_name="countdown", protocol_version="2025-11-25",
        soft_time_limit=5.0, hard_time_limit=20.0,
    )  # fmt: skip

    response = staff_client.get(reverse("mcp_app:audit_overview"))
    page = response.content.decode()
    overview = response.context["overview"]

    assert [row.name for row in overview.busiest][0] == "busy"
    assert [row.name for row in overview.failing] == ["flaky"]
    assert [row.name for row in overview.slowest][0] == "slow"
    assert overview.active_sessions == 1
    assert overview.background["queued"] == 1
    assert [(row.key, row.calls) for row in overview.users] == [("ada", 3)]
    assert ">Inspector</a>" in page
    user_link = re.search(r'<a href="([^"]+)">ada</a>', page)
    assert user_link is not None
    listed = staff_client.get(html.unescape(user_link.group(1))).context["rows"]
    assert {row.target for row in listed} == {"busy"}
    by_client = staff_client.get(reverse("mcp_app:audit_list"), {"client": app.client_id})
    assert len(by_client.context["rows"]) == 3
