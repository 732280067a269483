"""The audit list's GET filters: parsed here so every filter is a shareable URL parameter."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.utils import timezone

from mcp_app.audit.selectors import CallFilter
from mcp_app.models import CallLog, Endpoint
from mcp_app.models.call_log import STATUS_CHOICES

# The stats page's quick ranges (the ``range`` parameter), newest data last.
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7),
          "30d": timedelta(days=30)}  # fmt: skip
DEFAULT_RANGE = "24h"
MAX_RANGE = timedelta(days=400)
KNOWN_METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
    "resources/templates/list", "resources/subscribe", "resources/unsubscribe", "prompts/list",
    "prompts/get", "completion/complete", "logging/setLevel", "subscriptions/listen",
    "notifications/initialized", "notifications/cancelled",
]  # fmt: skip


class CallFilterForm(forms.Form):
    endpoint = forms.ModelChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="any endpoint",
    )
    tool = forms.CharField(required=False, max_length=512, label="Tool / target")
    method = forms.CharField(required=False, max_length=128)
    status = forms.ChoiceField(choices=[("", "any status"), *STATUS_CHOICES], required=False)
    era = forms.ChoiceField(choices=[("", "any era"), *CallLog.Era.choices], required=False)
    session = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    user = forms.CharField(required=False, max_length=150, label="User")
    client = forms.CharField(required=False, max_length=200, label="OAuth client id")
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
        choices=[("", "custom"), *((key, key) for key in RANGES)], required=False
    )

    def call_filter(self) -> CallFilter:
        """The filters as a selector argument; call after ``is_valid()`` (invalid ones drop)."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        return CallFilter(
            endpoint=data.get("endpoint"),
            tool=data.get("tool", ""),
            method=data.get("method", ""),
            status=data.get("status", ""),
            era=data.get("era", ""),
            session=data.get("session", ""),
            since=data.get("since"),
            until=data.get("until"),
            q=data.get("q", ""),
            user=data.get("user", ""),
            client=data.get("client", ""),
            request_id=data.get("request_id", ""),
            upstream=data.get("upstream", ""),
            policy=data.get("policy", ""),
            client_name=data.get("client_name", ""),
            client_version=data.get("client_version", ""),
        )

    def time_range(self) -> tuple[datetime, datetime]:
        """The stats range: a quick range, else since/until, else the last 24 hours."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
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
    client = forms.CharField(required=False, max_length=200, label="OAuth client id")
    client_name = forms.CharField(required=False, max_length=200, label="Client name")
    client_version = forms.CharField(required=False, max_length=100, label="Client version")

    def call_filter(self) -> CallFilter:
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        return CallFilter(**{name: data.get(name, "") for name in self.fields})
