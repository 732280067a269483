"""The audit UI with Django's test client: permissions, filters, keyset pages, detail, feed,
exports and statistics (with bounded query counts)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.audit import selectors
from mcp_app.models import CallLog, Endpoint, Tool
from tests.audit.factories import make_call, make_calls

pytestmark = pytest.mark.django_db


def user_with(*codenames: str, staff: bool = True) -> User:
    user = User.objects.create_user(f"user-{'-'.join(codenames) or 'none'}", password="pw")
    user.is_staff = staff
    user.save()
    user.user_permissions.add(
        # manage_every_team: an operator of every team (issue #27), as before teams
        *Permission.objects.filter(codename__in=[*codenames, "manage_every_team"])
    )
    return user


@pytest.fixture
def auditor_client() -> Client:
    client = Client()
    client.force_login(user_with("audit_calls"))
    return client


@pytest.fixture
def payload_client() -> Client:
    client = Client()
    client.force_login(user_with("audit_calls", "view_call_payloads"))
    return client


@pytest.fixture
def echo_endpoint(endpoint: Endpoint) -> Endpoint:
    tool = Tool(name="echo", description="Echo.", kind="python", config={"function": "echo"})
    tool.full_clean()
    tool.save()
    endpoint.tools.add(tool)
    return endpoint


URLS = ["audit_list", "audit_feed", "audit_stats", "audit_export_csv", "audit_export_jsonl"]


@pytest.mark.parametrize("name", URLS)
def test_anonymous_users_are_sent_to_log_in(client, name):
    response = client.get(reverse(f"mcp_app:{name}"))
    assert response.status_code == 302
    assert response["location"].startswith(reverse("admin:login"))


@pytest.mark.parametrize("name", URLS)
def test_staff_without_the_audit_permission_get_403(client, name):
    client.force_login(user_with())
    assert client.get(reverse(f"mcp_app:{name}")).status_code == 403


def test_detail_needs_the_audit_permission_too(client, endpoint):
    record = make_call(endpoint)
    url = reverse("mcp_app:audit_detail", args=[record.pk])
    assert client.get(url).status_code == 302
    client.force_login(user_with())
    assert client.get(url).status_code == 403


def test_auditor_sees_the_nav_link_and_the_newest_calls_first(auditor_client, endpoint):
    first = make_call(endpoint, target="first")
    second = make_call(endpoint, target="second")
    response = auditor_client.get(reverse("mcp_app:audit_list"))
    assert response.status_code == 200
    assert [row.pk for row in response.context["rows"]] == [second.pk, first.pk]
    assert b'href="/audit/"' in response.content  # the "Audit" entry of the site navigation


def test_users_without_the_permission_see_no_audit_link(client):
    client.force_login(user_with())
    page = client.get(reverse("mcp_app:endpoint_index"))
    assert b'href="/audit/"' not in page.content


def test_filters_are_get_parameters_and_combine(auditor_client, endpoint):
    other = Endpoint.objects.create(slug="other")
    wanted = make_call(endpoint, target="add", status=CallLog.Status.TOOL_ERROR)
    make_call(endpoint, target="add")
    make_call(other, target="add", status=CallLog.Status.TOOL_ERROR)
    make_call(endpoint, target="echo", status=CallLog.Status.TOOL_ERROR)
    response = auditor_client.get(
        reverse("mcp_app:audit_list"),
        {"endpoint": "test", "tool": "add", "status": "tool_error", "method": "tools/call"},
    )
    assert [row.pk for row in response.context["rows"]] == [wanted.pk]
    assert "endpoint=test" in response.context["query"]


def test_time_range_era_and_text_search(auditor_client, endpoint):
    now = timezone.now()
    old = make_call(endpoint, created_at=now - timedelta(days=2), target="old_tool")
    new = make_call(endpoint, era=CallLog.Era.LEGACY, session_id="sess-abc", target="lookup")
    list_url = reverse("mcp_app:audit_list")

    def ids(params):
        return [row.pk for row in auditor_client.get(list_url, params).context["rows"]]

    since = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert ids({"since": since}) == [new.pk]
    assert ids({"until": since}) == [old.pk]
    assert ids({"era": "legacy"}) == [new.pk]
    assert ids({"q": "old_"}) == [old.pk]
    assert ids({"q": "sess-abc"}) == [new.pk]
    assert ids({"q": str(old.pk)}) == [old.pk]
    assert ids({"session": "sess-abc"}) == [new.pk]


def test_pages_follow_the_id_keyset(auditor_client, endpoint):
    make_calls(endpoint, selectors.PAGE_SIZE + 5)
    url = reverse("mcp_app:audit_list")
    first = auditor_client.get(url, {"tool": "echo"})
    rows = first.context["rows"]
    assert len(rows) == (selectors.PAGE_SIZE + 5) // 2
    page1 = auditor_client.get(url)
    assert len(page1.context["rows"]) == selectors.PAGE_SIZE
    bound = page1.context["next_before"]
    assert bound == page1.context["rows"][-1].pk
    page2 = auditor_client.get(url, {"before": bound})
    assert len(page2.context["rows"]) == 5
    assert page2.context["next_before"] is None
    assert max(r.pk for r in page2.context["rows"]) < bound


def test_list_page_query_count_is_bounded(auditor_client, endpoint, django_assert_max_num_queries):
    make_calls(endpoint, 120)
    with django_assert_max_num_queries(8):
        response = auditor_client.get(reverse("mcp_app:audit_list"), {"endpoint": "test"})
    assert len(response.context["rows"]) == selectors.PAGE_SIZE


def test_feed_returns_only_newer_matching_calls(auditor_client, endpoint):
    seen = make_call(endpoint)
    newer = make_call(endpoint, target="add")
    make_call(endpoint, target="echo")
    response = auditor_client.get(reverse("mcp_app:audit_feed"), {"after": seen.pk, "tool": "add"})
    data = response.json()
    assert [row["id"] for row in data["rows"]] == [newer.pk]
    assert data["latest"] == newer.pk
    assert data["rows"][0]["url"] == reverse("mcp_app:audit_detail", args=[newer.pk])


def test_detail_shows_payloads_only_with_the_payload_permission(
    auditor_client, payload_client, echo_endpoint
):
    record = make_call(echo_endpoint, session_id="s-1", arguments={"message": "secret-ish"})
    url = reverse("mcp_app:audit_detail", args=[record.pk])
    hidden = auditor_client.get(url).content.decode()
    assert "secret-ish" not in hidden
    assert "Can see recorded arguments and results" in hidden
    shown = payload_client.get(url).content.decode()
    assert "&quot;message&quot;: &quot;secret-ish&quot;" in shown
    tool = Tool.objects.get(name="echo")
    assert reverse("admin:mcp_app_tool_change", args=[tool.pk]) in shown
    assert f"{reverse('mcp_app:audit_list')}?session=s-1" in shown


def test_exports_stream_the_filtered_calls(payload_client, auditor_client, endpoint):
    make_calls(endpoint, 7)
    make_call(endpoint, target="other", arguments={"x": 1})
    response = payload_client.get(reverse("mcp_app:audit_export_csv"), {"tool": "other"})
    assert response.streaming
    assert response["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["target"], r["arguments"]) for r in rows] == [("other", '{"x": 1}')]

    response = payload_client.get(reverse("mcp_app:audit_export_jsonl"), {"tool": "echo"})
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert len(lines) == 3 and {line["target"] for line in lines} == {"echo"}
    assert "arguments" in lines[0]

    # Without the payload permission, exports leave arguments and results out.
    response = auditor_client.get(reverse("mcp_app:audit_export_jsonl"), {"tool": "other"})
    line = json.loads(b"".join(response.streaming_content))
    assert "arguments" not in line and "result" not in line


def test_export_iterates_in_keyset_chunks(endpoint, django_assert_num_queries):
    make_calls(endpoint, 25)
    qs = selectors.call_log_search(filters=selectors.CallFilter())
    with django_assert_num_queries(3):  # 10 + 10 + 5 rows
        ids = [row.pk for row in selectors.call_log_iter(qs, chunk=10)]
    assert ids == sorted(ids, reverse=True) and len(ids) == 25


def test_stats_count_errors_and_latency_percentiles(
    auditor_client, endpoint, django_assert_max_num_queries
):
    make_calls(endpoint, 100)
    with django_assert_max_num_queries(10):
        response = auditor_client.get(reverse("mcp_app:audit_stats"), {"range": "24h"})
    stats = response.context["stats"]
    assert (stats.total, stats.errors) == (100, 20)
    per_tool = {row.name: row for row in stats.per_tool}
    # echo took 2, 4, ... 100 ms (i odd, duration i + 1); add took 1, 3, ... 99 ms.
    assert per_tool["echo"].calls == 50
    assert per_tool["echo"].p50 == pytest.approx(51.0)
    assert per_tool["add"].p99 == pytest.approx(selectors.percentile(range(1, 100, 2), 0.99))
    assert [row.name for row in stats.per_endpoint] == ["test"]
    html = response.content.decode()
    assert html.count("<svg") == 4
    assert 'aria-label="Calls over time"' in html


def test_python_percentiles_match_percentile_cont():
    assert selectors.percentile([], 0.5) is None
    assert selectors.percentile([10.0], 0.99) == 10.0
    assert selectors.percentile([1, 2, 3, 4], 0.5) == 2.5
    assert selectors.percentile(list(range(1, 101)), 0.95) == pytest.approx(95.05)


def test_the_detail_breadcrumbs_end_at_the_call(auditor_client, endpoint):
    record = make_call(endpoint)
    page = auditor_client.get(reverse("mcp_app:audit_detail", args=[record.pk])).content.decode()

    crumbs = re.search(r'<p class="crumbs">(.*?)</p>', page, re.S)
    assert crumbs is not None
    # Every level but the last links; the last names this page (no dangling "›").
    assert crumbs.group(1).strip() == (
        f'<a href="{reverse("mcp_app:audit_list")}">Call log</a> › '
        f'<span aria-current="page">Call #{record.pk}</span>'
    )


@pytest.mark.parametrize("name", ["audit_stats", "audit_list"])
def test_from_after_to_is_a_form_error_not_another_range(auditor_client, endpoint, name):
    """Issue #28: the statistics silently showed the 24 hours before To instead."""
    now = timezone.localtime()
    since, until = now - timedelta(hours=2), now - timedelta(hours=5)
    recent = make_call(endpoint, created_at=now - timedelta(hours=1))
    params = {"since": since.strftime("%Y-%m-%dT%H:%M"), "until": until.strftime("%Y-%m-%dT%H:%M")}

    response = auditor_client.get(reverse(f"mcp_app:{name}"), params)

    assert response.context["form"].errors == {"until": ["To must be later than From."]}
    assert "To must be later than From. Not applied." in response.content.decode()
    # To is left out, From still applies: from From to now.
    if name == "audit_stats":
        stats = response.context["stats"]
        assert stats.since == since.replace(second=0, microsecond=0)
        assert stats.total == 1
    else:
        assert [row.pk for row in response.context["rows"]] == [recent.pk]
