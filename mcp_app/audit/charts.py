"""Inline SVG charts for the audit stats page, drawn on the server (no script, no CDN).

Each function takes selector results and returns markup safe to insert into a template;
every label goes through ``format_html``, so names from the database are escaped. Bars and
names link to the matching filtered call list when given a ``link`` function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from mcp_app.audit.selectors import Bucket, LatencyRow

WIDTH = 900
PLOT_LEFT = 56
PLOT_RIGHT = 12
PLOT_TOP = 12
PLOT_BOTTOM = 28
LABELS = {"minute": "%H:%M", "hour": "%d %b %H:00", "day": "%d %b"}
SERIES = (("p50", "#0b5cad"), ("p95", "#bf8700"), ("p99", "#cf222e"))
STEPS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}

# A link to the call list for a time bucket (start, end), or for a tool or endpoint name.
BucketLink = Callable[[datetime, datetime], str]
NameLink = Callable[[str], str]


def _html(template: str, *args: object) -> SafeString:
    """``format_html`` that also takes numeric format specs (``{:.1f}``).

    Strings are escaped (names come from the database); numbers need no escaping, and
    ``format_html`` would turn them into strings before their spec applies.
    """
    safe = (arg if isinstance(arg, int | float | SafeString) else escape(str(arg)) for arg in args)
    return mark_safe(template.format(*safe))  # noqa: S308  (every argument escaped above)


def _join(template: str, rows: Iterable[Sequence[object]]) -> SafeString:
    return mark_safe("".join(_html(template, *row) for row in rows))  # noqa: S308


def _svg(height: int, label: str, body: SafeString) -> SafeString:
    return _html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">{}</svg>',
        WIDTH,
        height,
        label,
        body,
    )


def _time_labels(buckets: Sequence[Bucket], kind: str, x_of: Sequence[float], y: int) -> str:
    if not buckets:
        return ""
    picks = sorted({0, len(buckets) // 4, len(buckets) // 2, 3 * len(buckets) // 4,
                    len(buckets) - 1})  # fmt: skip
    last = len(buckets) - 1

    def anchor(index: int) -> str:
        # The outermost labels grow inwards, so neither is cut at the chart's edge.
        return "start" if index == 0 and last else "end" if index == last and last else "middle"

    def x(index: int) -> float:
        edges = {"start": PLOT_LEFT, "end": WIDTH - PLOT_RIGHT}
        return edges.get(anchor(index), x_of[index])

    return _join(
        '<text class="axis" x="{:.1f}" y="{}" text-anchor="{}">{}</text>',
        ((x(i), y, anchor(i), _local(buckets[i].start).strftime(LABELS[kind])) for i in picks),
    )


def _local(moment: datetime) -> datetime:
    return timezone.localtime(moment)


def calls_chart(
    buckets: Sequence[Bucket], kind: str, link: BucketLink | None = None, height: int = 220
) -> SafeString:
    """Stacked bars per time bucket: successful calls, and errors on top in red.

    With ``link``, each bar opens the calls of its bucket.
    """
    plot_w = WIDTH - PLOT_LEFT - PLOT_RIGHT
    plot_h = height - PLOT_TOP - PLOT_BOTTOM
    top = max((bucket.total for bucket in buckets), default=0) or 1
    slot = plot_w / max(len(buckets), 1)
    bar = max(slot * 0.8, 1.0)
    bottom = PLOT_TOP + plot_h
    parts = []
    centers = []
    for index, bucket in enumerate(buckets):
        x = PLOT_LEFT + index * slot + (slot - bar) / 2
        centers.append(x + bar / 2)
        ok_h = (bucket.total - bucket.errors) / top * plot_h
        err_h = bucket.errors / top * plot_h
        title = (
            f"{_local(bucket.start):%Y-%m-%d %H:%M}: {bucket.total} calls, {bucket.errors} errors"
        )
        bars = _html(
            '<title>{}</title><rect class="ok" x="{:.1f}" y="{:.1f}" width="{:.1f}" '
            'height="{:.1f}"/><rect class="err" x="{:.1f}" y="{:.1f}" width="{:.1f}" '
            'height="{:.1f}"/>',
            title, x, bottom - ok_h, bar, ok_h, x, bottom - ok_h - err_h, bar, err_h,
        )  # fmt: skip
        if link is not None and bucket.total:
            href = link(bucket.start, bucket.start + STEPS[kind])
            parts.append(_html('<a href="{}">{}</a>', href, bars))
        else:
            parts.append(_html("<g>{}</g>", bars))
    axes = _html(
        '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="axis" x="{}" y="{}" text-anchor="end">{}</text>'
        '<text class="axis" x="{}" y="{}" text-anchor="end">0</text>',
        PLOT_LEFT, bottom, WIDTH - PLOT_RIGHT, bottom, PLOT_LEFT - 6, PLOT_TOP + 10, top,
        PLOT_LEFT - 6, bottom,
    )  # fmt: skip
    labels = mark_safe(_time_labels(buckets, kind, centers, height - 8))  # noqa: S308  (format_html_join output)
    return _svg(height, "Calls over time", mark_safe("".join([axes, *parts, labels])))  # noqa: S308


def error_rate_chart(buckets: Sequence[Bucket], kind: str, height: int = 160) -> SafeString:
    """A line of the error rate (errors / calls) per bucket, 0-100 %; empty buckets are gaps."""
    plot_w = WIDTH - PLOT_LEFT - PLOT_RIGHT
    plot_h = height - PLOT_TOP - PLOT_BOTTOM
    bottom = PLOT_TOP + plot_h
    slot = plot_w / max(len(buckets), 1)
    centers = [PLOT_LEFT + (index + 0.5) * slot for index in range(len(buckets))]
    segments: list[list[str]] = [[]]
    dots = []
    for x, bucket in zip(centers, buckets, strict=True):
        if not bucket.total:
            segments.append([])
            continue
        y = bottom - bucket.error_rate * plot_h
        segments[-1].append(f"{x:.1f},{y:.1f}")
        dots.append(
            _html(
                '<circle class="rate" cx="{:.1f}" cy="{:.1f}" r="2.5"><title>{}: {:.1%}</title>'
                "</circle>",
                x,
                y,
                f"{_local(bucket.start):%Y-%m-%d %H:%M}",
                bucket.error_rate,
            )  # fmt: skip
        )
    lines = _join('<polyline class="rate" points="{}"/>', ((" ".join(s),) for s in segments if s))
    axes = _html(
        '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<line class="grid faint" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="axis" x="{}" y="{}" text-anchor="end">100%</text>'
        '<text class="axis" x="{}" y="{}" text-anchor="end">0%</text>',
        PLOT_LEFT, bottom, WIDTH - PLOT_RIGHT, bottom, PLOT_LEFT, PLOT_TOP, WIDTH - PLOT_RIGHT,
        PLOT_TOP, PLOT_LEFT - 6, PLOT_TOP + 10, PLOT_LEFT - 6, bottom,
    )  # fmt: skip
    labels = _time_labels(buckets, kind, centers, height - 8)
    body = "".join([axes, lines, *dots, labels])
    return _svg(height, "Error rate over time", mark_safe(body))  # noqa: S308


def _log_scale(values: Iterable[float]) -> tuple[float, float]:
    """Decades (low, high) around ``values``: the latency axis is logarithmic, since one slow
    tool on a linear axis squashes every other one to a sliver."""
    positive = [value for value in values if value > 0] or [1.0]
    # Strictly below the smallest value, so its bar has a length too.
    low = 10 ** math.floor(math.log10(min(positive)) - 1e-9)
    high = 10 ** math.ceil(math.log10(max(positive)))
    return low, high if high > low else low * 10


def latency_chart(
    rows: Sequence[LatencyRow], label: str, link: NameLink | None = None
) -> SafeString:
    """Horizontal bars of p50, p95 and p99 latency (ms) per name, on one logarithmic scale.

    The number after each group is its p99, labelled so; with ``link``, names open their calls.
    """
    if not rows:
        return mark_safe("")
    name_w = 200
    row_h = 30
    axis_h = 16
    height = PLOT_TOP + axis_h + len(rows) * row_h + PLOT_BOTTOM
    plot_w = WIDTH - name_w - 110
    low, high = _log_scale(
        value for row in rows for value in (row.p50, row.p95, row.p99) if value is not None
    )
    span = math.log10(high) - math.log10(low)

    def width(value: float) -> float:
        if value <= low:
            return 1.0
        return max((math.log10(value) - math.log10(low)) / span * plot_w, 1.0)

    top = PLOT_TOP + axis_h
    bottom = top + len(rows) * row_h
    decades = [low * 10**step for step in range(round(span) + 1)]
    parts = [
        _html(
            '<line class="grid faint" x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}"/>'
            '<text class="axis" x="{0:.1f}" y="{3}" text-anchor="middle">{4}</text>',
            name_w + width(decade) if decade > low else name_w,
            top - 2,
            bottom,
            top - 6,
            _ms(decade),
        )
        for decade in decades
    ]
    for index, row in enumerate(rows):
        y = top + index * row_h
        shown = row.name if len(row.name) <= 28 else row.name[:27] + "…"
        name = _html(
            '<text class="name" x="{}" y="{}" text-anchor="end">{}</text>',
            name_w - 8,
            y + 18,
            shown,
        )
        parts.append(_html('<a href="{}">{}</a>', link(row.name), name) if link else name)
        for offset, (key, _color) in enumerate(SERIES):
            value = getattr(row, key)
            if value is None:
                continue
            parts.append(
                _html(
                    '<rect class="{}" x="{}" y="{}" width="{:.1f}" height="7">'
                    "<title>{} {}: {:.1f} ms</title></rect>",
                    key,
                    name_w,
                    y + 5 + offset * 8,
                    width(value),
                    row.name,
                    key,
                    value,
                )  # fmt: skip
            )
        if row.p99 is not None:
            parts.append(
                _html(
                    '<text class="axis" x="{:.1f}" y="{}">p99 {} ms</text>',
                    name_w + width(row.p99) + 6,
                    y + 24,
                    _ms(row.p99),
                )  # fmt: skip
            )
    legend = _join(
        '<rect class="{0}" x="{1}" y="{2}" width="10" height="10"/>'
        '<text class="axis" x="{3}" y="{4}">{0}</text>',
        ((key, name_w + i * 70, height - 16, name_w + i * 70 + 14, height - 7)
         for i, (key, _c) in enumerate(SERIES)),
    )  # fmt: skip
    scale = _html(
        '<text class="axis" x="{}" y="{}">ms, logarithmic scale</text>',
        name_w + len(SERIES) * 70 + 10,
        height - 7,
    )
    return _svg(height, label, mark_safe("".join([*parts, legend, scale])))  # noqa: S308


def _ms(value: float) -> str:
    """A latency as few digits as stay readable: 0.5, 12, 1200."""
    if value < 10:
        return f"{value:.1f}".rstrip("0").rstrip(".") if value % 1 else f"{value:.0f}"
    return f"{value:,.0f}"
