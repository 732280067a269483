"""The call list as an operator's first screen, with Django's test client and PostgreSQL:
who called (client program, user, OAuth client), what, how it ended and why, in columns;
quick ranges, "any failure", the time zone, invalid filters reported without dropping the
others, names next to ids in exports and the API, and a filter that is a URL."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_app.models import CallLog, Endpoint
from tests.audit.factories import make_call
from tests.support.oauth import make_client

pytestmark = pytest.mark.django_db
LIST = reverse("mcp_app:audit_list")


@pytest.fixture
def operator(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def calls(endpoint: Endpoint) -> dict[str, CallLog]:
    """A tool error by ada through an OAuth client, an ok call, a rejection, one by curl."""
    ada = User.objects.create_user("ada")
    app = make_client("Claude Desktop")
    return {
        "failed": make_call(
            endpoint, target="search", status=CallLog.Status.TOOL_ERROR, principal=ada,
            client_id=app.client_id, client_name="claude-ai", client_version="0.4.2",
            client_info={"name": "claude-ai", "version": "0.4.2", "title": "Claude"},
            error_message="Upstream said: index 'docs' is read-only\nretry later " + "x" * 200,
            duration_ms=812.0,
        ),
        "ok": make_call(endpoint, target="search", client_name="claude-ai", client_version="0.4.2",
                        client_info={"name": "claude-ai", "version": "0.4.2"}),
        "rejected": make_call(endpoint, target="", rpc_method="tools/list",
                              status=CallLog.Status.REJECTED, http_status=400),
        "curl": make_call(endpoint, target="echo", client_name="curl", client_version="8.5.0",
                          created_at=timezone.now() - timedelta(hours=2)),
    }  # fmt: skip


def ids(response) -> list[int]:
    return [row.pk for row in response.context["rows"]]


def test_each_row_shows_client_user_tool_status_duration_and_error(
    operator, calls, django_assert_max_num_queries
):
    with django_assert_max_num_queries(9):
        response = operator.get(LIST)
    page = response.content.decode()
    headers = re.findall(r"<th[^>]*>([^<]+)", page.split('id="calls"', 1)[1].split("</thead>")[0])
    assert [h.strip() for h in headers] == [
        "#", "Time", "Client", "User", "Endpoint", "Method", "Tool / target", "Status", "ms",
        "Error",
    ]  # fmt: skip
    row = page.split(f">{calls['failed'].pk}</a>", 1)[1].split("</tr>", 1)[0]
    assert '<a href="?client_name=claude-ai">claude-ai</a> <span class="muted">0.4.2</span>' in row
    assert "ada" in row and "via Claude Desktop" in row
    assert "search" in row and "tool error" in row and "812.0" in row
    excerpt = re.search(r'<td class="error"[^>]*>([^<]*)</td>', row)
    assert excerpt is not None
    assert excerpt.group(1).startswith("Upstream said: index &#x27;docs&#x27; is read-only")
    assert len(excerpt.group(1)) < 140 and excerpt.group(1).endswith("…")
    curl = page.split(f">{calls['curl'].pk}</a>", 1)[1].split("</tr>", 1)[0]
    assert "(user agent)" in curl


def test_any_failure_lists_every_failed_status(operator, calls):
    response = operator.get(LIST, {"status": "failed"})
    assert ids(response) == [calls["rejected"].pk, calls["failed"].pk]


def test_a_quick_range_keeps_the_other_filters_and_stays_relative(operator, calls):
    response = operator.get(LIST, {"tool": "search", "since": "2020-01-01T00:00"})
    links = dict((key, link) for key, _, link in response.context["quick_ranges"])
    assert list(links) == ["15m", "1h", "24h", "7d"]
    assert links["1h"] == "?tool=search&range=1h"  # From/To give way to the range
    assert ids(operator.get(LIST + links["1h"])) == [calls["ok"].pk, calls["failed"].pk]
    assert ids(operator.get(LIST, {"range": "1h"})) == [
        calls["rejected"].pk, calls["ok"].pk, calls["failed"].pk,
    ]  # fmt: skip
    assert calls["curl"].pk in ids(operator.get(LIST, {"range": "24h"}))


def test_from_and_to_name_their_time_zone(operator, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    page = operator.get(LIST).content.decode()
    assert re.search(r'From <span class="tz">\(Europe/Berlin\)</span>', page)
    assert re.search(r'To <span class="tz">\(Europe/Berlin\)</span>', page)


def test_an_invalid_filter_is_reported_at_its_field_and_the_others_still_apply(operator, calls):
    response = operator.get(LIST, {"tool": "search", "since": "yesterday", "status": "broken"})
    assert ids(response) == [calls["ok"].pk, calls["failed"].pk]
    page = response.content.decode()
    since = page.split('name="since"', 1)[1].split("</label>", 1)[0]
    assert 'class="field-error"' in since and "Enter a valid date/time." in since
    assert re.search(r'<select name="status"[^>]*aria-invalid="true"', page)
    assert not re.search(r'name="tool"[^>]*aria-invalid', page)
    assert 'value="search"' in page  # the valid filter is shown, and applied
    assert "were not applied; the others were" in page


def test_a_filter_is_a_url_that_reopens_the_same_list(operator, calls):
    params = {"client_name": "claude-ai", "status": "failed", "range": "7d"}
    first = operator.get(LIST, params)
    query = first.context["query"]
    again = operator.get(f"{LIST}?{query}")
    assert ids(again) == ids(first) == [calls["failed"].pk]
    # The page links its exports and the live tail with the same filter.
    page = again.content.decode()
    assert f'href="/audit/export.csv?{query.replace("&", "&amp;")}"' in page
    assert f'href="/audit/stats/?{query.replace("&", "&amp;")}"' in page


def test_the_client_filters_match_names_in_every_era(operator, calls):
    assert ids(operator.get(LIST, {"client_name": "claude-ai"})) == [
        calls["ok"].pk, calls["failed"].pk,
    ]  # fmt: skip
    assert ids(operator.get(LIST, {"client_name": "curl", "client_version": "8.5.0"})) == [
        calls["curl"].pk
    ]
    # The OAuth client by its registered name (any case) as well as by its id.
    app_id = calls["failed"].client_id
    assert ids(operator.get(LIST, {"client": "claude desktop"})) == [calls["failed"].pk]
    assert ids(operator.get(LIST, {"client": app_id})) == [calls["failed"].pk]
    page = operator.get(LIST).content.decode()
    assert "legacy sessions only" not in page


def test_the_detail_shows_the_declared_client(operator, calls):
    page = operator.get(reverse("mcp_app:audit_detail", args=[calls["failed"].pk])).content
    detail = page.decode().split('id="client-program"', 1)[1].split("</dd>", 1)[0]
    assert '<a href="/audit/?client_name=claude-ai">claude-ai</a> 0.4.2' in detail
    assert "declared clientInfo" in detail and "&quot;title&quot;: &quot;Claude&quot;" in detail
    curl = operator.get(reverse("mcp_app:audit_detail", args=[calls["curl"].pk])).content
    assert "from the user agent" in curl.decode()


def test_the_feed_carries_the_new_columns(operator, calls):
    data = operator.get(reverse("mcp_app:audit_feed"), {"after": calls["failed"].pk - 1}).json()
    failed = next(row for row in data["rows"] if row["id"] == calls["failed"].pk)
    assert (failed["client_name"], failed["user"], failed["oauth_client_name"]) == (
        "claude-ai", "ada", "Claude Desktop",
    )  # fmt: skip
    assert failed["error"].startswith("Upstream said: index 'docs' is read-only retry later")
    assert failed["client_url"] == "/audit/?client_name=claude-ai"


def test_exports_name_the_user_and_oauth_client_next_to_their_ids(operator, calls):
    response = operator.get(reverse("mcp_app:audit_export_csv"), {"status": "tool_error"})
    [row] = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    failed = calls["failed"]
    assert (row["principal_id"], row["user"]) == (str(failed.principal_id), "ada")
    assert (row["client_id"], row["oauth_client_name"]) == (failed.client_id, "Claude Desktop")
    assert (row["client_name"], row["client_version"]) == ("claude-ai", "0.4.2")
    assert json.loads(row["client_info"])["title"] == "Claude"
    response = operator.get(reverse("mcp_app:audit_export_jsonl"), {"client_name": "curl"})
    [line] = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert (line["client_name"], line["client_info"], line["user"]) == ("curl", None, "")


def test_the_api_gives_the_client_and_the_oauth_clients_name(
    admin_user, calls, django_assert_max_num_queries
):
    api = APIClient()
    api.force_authenticate(user=admin_user)
    with django_assert_max_num_queries(6):
        found = api.get("/api/v1/call-log/", {"client_name": "claude-ai"}).json()["results"]
    assert [item["id"] for item in found] == [calls["ok"].pk, calls["failed"].pk]
    failed = found[1]
    assert (failed["client_name"], failed["client_version"]) == ("claude-ai", "0.4.2")
    assert failed["client_info"]["title"] == "Claude"
    assert (failed["principal"], failed["oauth_client_name"]) == ("ada", "Claude Desktop")
    one = api.get(f"/api/v1/call-log/{calls['failed'].pk}/").json()
    assert one["oauth_client_name"] == "Claude Desktop"
    failures = api.get("/api/v1/call-log/", {"status": "failed"}).json()["results"]
    assert {item["status"] for item in failures} == {"tool_error", "rejected"}


def test_statistics_count_calls_per_client_program(operator, calls):
    response = operator.get(reverse("mcp_app:audit_stats"), {"range": "24h"})
    per_client = {row.name: row.calls for row in response.context["stats"].per_client}
    assert per_client == {"claude-ai": 2, "curl": 1}
    assert 'id="per-client"' in response.content.decode()
