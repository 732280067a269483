"""The replay page: run a draft's tool against recorded calls and see live and draft side by
side (``/audit/replay/<draft id>/``).

Thin (style.md §3): parse the form, call ``services.replay``, render. Seeing the page needs
"Can view draft"; running a replay also "Can change tool" (a replay runs tools, as try-it
does); arguments, results, errors and diffs need ``mcp_app.view_call_payloads``, without
which each call shows its outcomes and durations only. Another team's draft is a 404. A tool
that may have side effects elsewhere shows a confirmation step naming the tool and the number
of calls before anything runs; its form fixes the range's end, so the calls confirmed are the
calls run.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone

from mcp_app.audit.forms import RANGE_LABELS, RANGES
from mcp_app.models import Draft, ReplayRun
from mcp_app.models.call_log import STATUS_CHOICES
from mcp_app.services.drafts import drafts_visible
from mcp_app.services.replay import (
    ANY_FAILURE,
    CALL_SECONDS,
    DEFAULT_SAMPLE,
    MAX_SAMPLE,
    RUN_SECONDS,
    ReplayConfirmationRequired,
    ReplayError,
    replay_filter,
    replay_results,
    replay_run,
    replay_summary,
    replay_tools,
)

VIEW = "mcp_app.view_draft"
RUN = "mcp_app.change_tool"
PAYLOADS = "mcp_app.view_call_payloads"
# Runs listed beside the form, newest first.
RECENT_RUNS = 10


class ReplayForm(forms.Form):
    tool = forms.ChoiceField()
    endpoint = forms.CharField(required=False, max_length=100, help_text="An endpoint's slug.")
    client_name = forms.CharField(required=False, max_length=200, label="Client name")
    status = forms.ChoiceField(
        required=False,
        choices=[("", "any status"), (ANY_FAILURE, "any failure"), *STATUS_CHOICES],
    )
    range = forms.ChoiceField(
        required=False,
        initial="24h",
        choices=[*RANGE_LABELS.items(), ("", "any time")],
        label="Last",
    )
    sample = forms.IntegerField(min_value=1, max_value=MAX_SAMPLE, initial=DEFAULT_SAMPLE)
    # Set by the confirmation step: "<tool>:<count>", and the range's end it counted to.
    confirm = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)
    until = forms.DateTimeField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, tools: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tools = tools
        field = cast(forms.ChoiceField, self.fields["tool"])
        field.choices = [(name, name) for name in tools]

    def filter_data(self) -> dict[str, Any]:
        data = self.cleaned_data
        until = data.get("until") or None
        since = (until or timezone.now()) - RANGES[data["range"]] if data.get("range") else None
        return {
            "endpoint": data.get("endpoint", ""),
            "client_name": data.get("client_name", ""),
            "status": data.get("status", ""),
            "since": since,
            "until": until,
            "sample": data["sample"],
        }


@login_required(login_url=reverse_lazy("admin:login"))
def replay_page(request: HttpRequest, draft_id: int) -> HttpResponse:
    if not request.user.has_perm(VIEW):
        raise PermissionDenied(f"Replays need the permission “Can view draft” ({VIEW}).")
    draft = get_object_or_404(drafts_visible(request.user), pk=draft_id)  # another team's: 404
    may_run = request.user.has_perm(RUN)
    payloads = request.user.has_perm(PAYLOADS)
    tools = replay_tools(draft)
    confirmation: ReplayConfirmationRequired | None = None
    problems: dict[str, str] = {}
    if request.method == "POST":
        if not may_run:
            raise PermissionDenied(f"Running a replay needs “Can change tool” ({RUN}).")
        form = ReplayForm(request.POST, tools=tools)
        if form.is_valid():
            try:
                run = replay_run(
                    draft,
                    tool=form.cleaned_data["tool"],
                    filters=replay_filter(form.filter_data()),
                    user=request.user,
                    confirm=form.cleaned_data["confirm"],
                )
            except ReplayConfirmationRequired as exc:
                confirmation = exc
                form = _confirming(request, form, exc)
            except ReplayError as exc:
                problems = exc.errors
            else:
                url = reverse("mcp_app:replay", args=[draft.pk])
                return HttpResponseRedirect(f"{url}?run={run.pk}#results")
    else:
        form = ReplayForm(tools=tools)
    runs = list(ReplayRun.objects.filter(draft=draft).select_related("created_by")[:RECENT_RUNS])
    shown = _shown_run(request, draft)
    context = {
        "nav": "audit",
        "draft": draft,
        "form": form,
        "may_run": may_run,
        "tools": tools,
        "payloads": payloads,
        "confirmation": confirmation,
        "problems": problems,
        "runs": runs,
        "run": shown,
        "summary": replay_summary(shown) if shown else "",
        "results": _display(replay_results(shown, payloads=payloads)) if shown else [],
        "max_sample": MAX_SAMPLE,
        "call_seconds": f"{CALL_SECONDS:g}",
        "run_seconds": f"{RUN_SECONDS:g}",
    }
    return render(request, "audit/replay.html", context)


def _display(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call with its payloads as indented JSON, for the page's blocks."""
    shown = []
    for item in results:
        item = {**item, "arguments_json": _pretty(item.get("arguments"))}
        for side in ("live", "draft"):
            item[side] = {**item[side], "result_json": _pretty(item[side].get("result"))}
        shown.append(item)
    return shown


def _pretty(value: Any) -> str:
    return "" if value is None else json.dumps(value, indent=2, ensure_ascii=False)


def _confirming(
    request: HttpRequest, form: ReplayForm, exc: ReplayConfirmationRequired
) -> ReplayForm:
    """The form again, carrying the confirmation and the range's end the count was made to."""
    data = request.POST.copy()
    data["confirm"] = exc.expected
    data["until"] = (form.cleaned_data.get("until") or timezone.now()).isoformat()
    confirming = ReplayForm(data, tools=form.tools)
    confirming.is_valid()
    return confirming


def _shown_run(request: HttpRequest, draft: Draft) -> Any:
    value = request.GET.get("run", "")
    if not value.isdigit() or len(value) > 18:
        return None
    return (
        ReplayRun.objects.filter(draft=draft)
        .select_related("created_by")
        .filter(pk=int(value))
        .first()
    )
