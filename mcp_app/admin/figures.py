"""How each tool and endpoint did over the last 24 hours, on its admin pages.

The figures come from the call log (``audit.selectors.tool_figures`` / ``endpoint_figures``):
one grouped query per changelist page (``FiguresChangeList`` attaches them to the page's rows)
and one per change page (two for a tool on several endpoints: its total, then per endpoint).
A tool's figures count its calls on its own endpoints only, never those of a same-named tool
elsewhere. Each figure links to the matching filtered call list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.views.main import ChangeList
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from mcp_app.audit.selectors import FIGURES_WINDOW, Figures

NO_FIGURES = Figures()


def window_start() -> datetime:
    return timezone.now() - FIGURES_WINDOW


def calls_url(**filters: str) -> str:
    """The call list filtered to ``filters`` over the figures' window."""
    since = timezone.localtime(window_start()).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{reverse('mcp_app:audit_list')}?{urlencode({**filters, 'since': since})}"


def figures_of(obj: Any) -> Figures:
    return getattr(obj, "_figures", NO_FIGURES)


class FiguresChangeList(ChangeList):
    """A changelist that reads the figures of the rows on its page in one query."""

    figures_for: Callable[[list[Any]], Mapping[Any, Figures]]
    figures_key: Callable[[Any], Any]

    def get_results(self, request: Any) -> None:
        super().get_results(request)
        rows = list(self.result_list)
        found = type(self).figures_for(rows)
        for row in rows:
            row._figures = found.get(type(self).figures_key(row), NO_FIGURES)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} ms"


def _when(moment: datetime | None) -> str:
    return "—" if moment is None else timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")


def calls_cell(figures: Figures, url: str) -> SafeString:
    return format_html('<a href="{}">{}</a>', url, figures.calls)


def error_cell(figures: Figures) -> str:
    if not figures.calls:
        return "—"
    return f"{figures.errors} ({figures.error_rate:.1%})"


def figures_panel(figures: Figures, url: str) -> SafeString:
    """The change page's summary: every figure, linked to the calls behind it."""
    detail = "mcp_app:audit_detail"
    last_call = (
        format_html('<a href="{}">{}</a>', reverse(detail, args=[figures.last_call_id]),
                    _when(figures.last_call))
        if figures.last_call_id else "—"
    )  # fmt: skip
    last_error = (
        format_html('<a href="{}">{}</a>', reverse(detail, args=[figures.last_error_id]),
                    _when(figures.last_error))
        if figures.last_error_id else "—"
    )  # fmt: skip
    return format_html(
        '<table class="mcp-figures"><tr><th>Calls</th><td><a href="{}">{}</a></td>'
        "<th>Errors</th><td>{}</td><th>p50</th><td>{}</td><th>p95</th><td>{}</td></tr>"
        "<tr><th>Last call</th><td colspan=\"3\">{}</td><th>Last error</th>"
        '<td colspan="3">{}</td></tr></table>',
        url, figures.calls, error_cell(figures), _ms(figures.p50), _ms(figures.p95),
        last_call, last_error,
    )  # fmt: skip


def per_endpoint_panel(total: SafeString, rows: list[tuple[str, Figures, str]]) -> SafeString:
    """A tool's panel followed by one row per endpoint: ``(slug, figures, calls url)``."""
    body = format_html_join(
        "",
        '<tr><th scope="row">{}</th><td><a href="{}">{}</a></td><td>{}</td><td>{}</td>'
        "<td>{}</td></tr>",
        (
            (slug, url, figures.calls, error_cell(figures), _ms(figures.p50), _ms(figures.p95))
            for slug, figures, url in rows
        ),
    )
    return format_html(
        '{}<table class="mcp-figures mcp-figures-endpoints"><thead><tr><th scope="col">Endpoint'
        '</th><th scope="col">Calls</th><th scope="col">Errors</th><th scope="col">p50</th>'
        '<th scope="col">p95</th></tr></thead><tbody>{}</tbody></table>',
        total,
        body,
    )
