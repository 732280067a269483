"""The audit list's GET filters: parsed here so every filter is a shareable URL parameter."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from mcp_app.audit.selectors import ANY_FAILURE, CallFilter
from mcp_app.models import CallLog, Endpoint
from mcp_app.models.call_log import STATUS_CHOICES
from mcp_app.services import teams

# Quick ranges (the ``range`` parameter): the last N before now, read when the page loads,
# so a saved link shows the latest hour, not the hour it was saved in.
RANGES = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(days=1),
          "7d": timedelta(days=7), "30d": timedelta(days=30)}  # fmt: skip
RANGE_LABELS = {"15m": "15 min", "1h": "1 h", "24h": "24 h", "7d": "7 d", "30d": "30 d"}
# The call list's quick-range links.
LIST_RANGES = ("15m", "1h", "24h", "7d")
DEFAULT_RANGE = "24h"
MAX_RANGE = timedelta(days=400)
KNOWN_METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
    "resources/templates/list", "resources/subscribe", "resources/unsubscribe", "prompts/list",
    "prompts/get", "completion/complete", "logging/setLevel", "subscriptions/listen",
    "notifications/initialized", "notifications/cancelled",
]  # fmt: skip


class CallFilterForm(forms.Form):
    """The call list's filters (also the stats page's, the exports' and the API's).

    A value that does not parse is reported on its field and left out; the other filters
    still apply (``call_filter``).
    """

    endpoint = forms.ModelChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="any endpoint",
    )
    tool = forms.CharField(required=False, max_length=512, label="Tool / target")
    method = forms.CharField(required=False, max_length=128)
    status = forms.ChoiceField(
        choices=[("", "any status"), (ANY_FAILURE, "any failure"), *STATUS_CHOICES],
        required=False,
    )
    era = forms.ChoiceField(choices=[("", "any era"), *CallLog.Era.choices], required=False)
    session = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    user = forms.CharField(required=False, max_length=150, label="User")
    client = forms.CharField(required=False, max_length=200, label="OAuth client")
    request_id = forms.CharField(required=False, max_length=64, label="Request id")
    upstream = forms.CharField(required=False, max_length=128, label="Upstream")
    policy = forms.CharField(
        required=False,
        max_length=100,
        label="Policy",
        help_text="Calls a policy of this name decided about; * for any policy.",
    )
    client_name = forms.CharField(required=False, max_length=200, label="Client name")
    client_version = forms.CharField(required=False, max_length=100, label="Client version")
    since = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    q = forms.CharField(
        required=False,
        max_length=200,
        label="Search",
        widget=forms.TextInput(
            attrs={"placeholder": "name, method, or a session, request or JSON-RPC id"}
        ),
    )
    range = forms.ChoiceField(
        choices=[("", "any time"), *((key, f"last {RANGE_LABELS[key]}") for key in RANGES)],
        required=False,
        label="Time",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the calls of the endpoints ``user``'s teams see (services.teams).
        self.endpoints = teams.seen_endpoints(user)
        self.teams = teams.seen_teams(user) or ()  # their tools' try-it runs
        field = self.fields["endpoint"]
        assert isinstance(field, forms.ModelChoiceField)  # declared above
        field.queryset = teams.visible(Endpoint.objects.order_by("slug"), user)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since is not None and until is not None and since >= until and not data.get("range"):
            # Otherwise the list shows nothing and the statistics another range, silently.
            self.add_error("until", "To must be later than From.")
        return data

    def full_clean(self) -> None:
        super().full_clean()
        for name in self.errors:
            if name in self.fields:
                self.fields[name].widget.attrs["aria-invalid"] = "true"

    def valid_data(self) -> dict[str, Any]:
        """The values that parsed: a field with an error is left out, the others stay."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {name: value for name, value in self.cleaned_data.items() if name not in self.errors}

    def call_filter(self) -> CallFilter:
        """The filters as a selector argument; a value that does not parse is left out.

        A quick range (``range``) sets the start to that long before now and takes the place
        of From and To.
        """
        data = self.valid_data()
        since, until = data.get("since"), data.get("until")
        if data.get("range"):
            since, until = timezone.now() - RANGES[data["range"]], None
        return CallFilter(
            endpoint=data.get("endpoint"),
            tool=data.get("tool", ""),
            method=data.get("method", ""),
            status=data.get("status", ""),
            era=data.get("era", ""),
            session=data.get("session", ""),
            since=since,
            until=until,
            q=data.get("q", ""),
            user=data.get("user", ""),
            client=data.get("client", ""),
            request_id=data.get("request_id", ""),
            upstream=data.get("upstream", ""),
            policy=data.get("policy", ""),
            client_name=data.get("client_name", ""),
            client_version=data.get("client_version", ""),
            endpoints=self.endpoints,
            teams=self.teams,
        )

    def time_range(self) -> tuple[datetime, datetime]:
        """The stats range: a quick range, else since/until, else the last 24 hours."""
        data = self.valid_data()
        now = timezone.now()
        if data.get("range"):
            return now - RANGES[data["range"]], now
        until = data.get("until") or now
        since = data.get("since") or until - RANGES[DEFAULT_RANGE]
        if since >= until:
            since = until - RANGES[DEFAULT_RANGE]
        # Day buckets past this would draw bars too thin to read (and fill a long axis).
        return max(since, until - MAX_RANGE), until


class OverviewFilterForm(forms.Form):
    """The overview's filters: who called (user, OAuth client) and with what (clientInfo)."""

    user = forms.CharField(required=False, max_length=150, label="User")
    client = forms.CharField(required=False, max_length=200, label="OAuth client")
    client_name = forms.CharField(required=False, max_length=200, label="Client name")
    client_version = forms.CharField(required=False, max_length=100, label="Client version")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.endpoints = teams.seen_endpoints(user)  # only the calls ``user``'s teams see
        self.teams = teams.seen_teams(user) or ()  # and their tools' try-it runs

    def call_filter(self) -> CallFilter:
        """The filters as a selector argument; a value that does not parse is left out."""
        if not self.is_bound:
            return CallFilter(endpoints=self.endpoints, teams=self.teams)
        self.is_valid()
        data = {k: v for k, v in self.cleaned_data.items() if k not in self.errors}
        return CallFilter(
            **{name: data.get(name, "") for name in self.fields},
            endpoints=self.endpoints,
            teams=self.teams,
        )
