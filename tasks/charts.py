"""Small SVG charts for the dashboards the health flow publishes as Prefect artifacts (issue 18).

The Prefect UI renders a markdown artifact's images, ``data:`` URIs included (checked in its UI
with headless Chromium), so a chart travels inside the artifact itself: nothing to host, nothing
fetched from elsewhere. Charts are drawn on a light card so they read on the UI's dark and light
themes alike. Plain functions over plain values: no I/O, no clock.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

INK = "#1b1b1b"
MUTED = "#6b6b6b"
RULE = "#d9d6cf"
CARD = "#fbfaf7"
PALETTE = ("#14487a", "#5f8fb4", "#c08a4a", "#8a6d1f", "#6fa37c", "#c76b86")
ERROR = "#b8455f"
SHARE_LINE = "#c08a4a"
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif\""


def data_uri(svg: str) -> str:
    """``svg`` as a ``data:image/svg+xml;base64,...`` URI for a markdown image."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def markdown_image(svg: str, alt: str) -> str:
    return f"![{alt.replace(']', ')')}]({data_uri(svg)})"


def format_seconds(seconds: float | None) -> str:
    """A duration as people say it.

    >>> [format_seconds(s) for s in (None, 4.2, 75, 3600 * 2.5, 86400 * 3)]
    ['n/a', '4 s', '1 min 15 s', '2 h 30 min', '3 d 0 h']
    """
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {(s % 3600) // 60} min"
    return f"{s // 86400} d {(s % 86400) // 3600} h"


def _text(x: float, y: float, text: str, *, size: int = 12, fill: str = INK, anchor: str = "start",
          weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" text-anchor="{anchor}" '
            f'font-weight="{weight}">{escape(text)}</text>')


def _frame(width: int, height: int, title: str, body: list[str], legend: Sequence[tuple[str, str]] = ()) -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" {FONT}>',
             f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" rx="8" fill="{CARD}" stroke="{RULE}"/>',
             _text(16, 26, title, size=15, weight="600")]
    x = width - 16
    for label, color in reversed(legend):
        x -= 8 + len(label) * 6.6
        parts.append(_text(x + 14, 26, label, size=11, fill=MUTED))
        parts.append(f'<rect x="{x:.1f}" y="17" width="10" height="10" rx="2" fill="{color}"/>')
        x -= 14
    return "".join(parts + body + ["</svg>"])


@dataclass(frozen=True, slots=True)
class RangeBar:
    """One row of a range chart: a solid bar to ``low`` (p50) and a light one on to ``high`` (p95)."""

    label: str
    low: float | None
    high: float | None
    group: str = ""


def range_chart(title: str, rows: Sequence[RangeBar], *, width: int = 760, unit: str = "seconds") -> str:
    """Horizontal p50 / p95 bars, grouped (a group name heads its rows), on a shared linear axis."""
    top = max((r.high or r.low or 0.0 for r in rows), default=0.0) or 1.0
    label_w, right = 170, 170
    plot = width - label_w - right - 16
    groups = [g for i, g in enumerate(r.group for r in rows) if g and g not in [r.group for r in rows][:i]]
    height = 48 + 24 * len(rows) + 22 * len(groups) + 30
    body: list[str] = []
    y = 48.0
    current = None
    for r in rows:
        if r.group and r.group != current:
            current = r.group
            body.append(_text(16, y + 14, r.group, size=12, weight="600"))
            y += 22
        body.append(_text(label_w, y + 14, r.label, size=12, fill=MUTED, anchor="end"))
        x0 = label_w + 8
        if r.high is not None:
            body.append(f'<rect x="{x0}" y="{y + 3:.1f}" width="{plot * r.high / top:.1f}" height="14" rx="2" '
                        f'fill="{PALETTE[1]}" fill-opacity="0.45"/>')
        if r.low is not None:
            body.append(f'<rect x="{x0}" y="{y + 3:.1f}" width="{plot * r.low / top:.1f}" height="14" rx="2" '
                        f'fill="{PALETTE[0]}"/>')
        value = (f"{format_seconds(r.low)} / {format_seconds(r.high)}" if unit == "seconds"
                 else f"{r.low} / {r.high}")
        body.append(_text(x0 + plot + 8, y + 14, value if r.low is not None else "no data", size=11, fill=INK))
        y += 24
    axis_y = y + 6
    body.append(f'<line x1="{label_w + 8}" y1="{axis_y}" x2="{label_w + 8 + plot}" y2="{axis_y}" stroke="{RULE}"/>')
    for i in range(5):
        value = top * i / 4
        x = label_w + 8 + plot * i / 4
        body.append(_text(x, axis_y + 16, format_seconds(value) if unit == "seconds" else f"{value:g}",
                          size=10, fill=MUTED, anchor="middle"))
    return _frame(width, height, title, body, legend=[("p50", PALETTE[0]), ("p95", PALETTE[1])])


def stacked_columns(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
                    *, share: Sequence[float | None] | None = None, share_label: str = "",
                    colors: Sequence[str] = PALETTE, width: int = 760, height: int = 260) -> str:
    """Columns stacked from ``series`` (name, values per label), with an optional share line (0..1)."""
    left, right, top_pad, bottom = 48, 48 if share is not None else 16, 44, 40
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    top = max(totals, default=0) or 1
    step = plot_w / max(len(labels), 1)
    body: list[str] = []
    for i in range(5):
        y = top_pad + plot_h * (1 - i / 4)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="{RULE}"/>')
        body.append(_text(left - 6, y + 4, f"{top * i / 4:.0f}", size=10, fill=MUTED, anchor="end"))
        if share is not None:
            body.append(_text(left + plot_w + 6, y + 4, f"{i * 25}%", size=10, fill=MUTED))
    for i, label in enumerate(labels):
        base = top_pad + plot_h
        for k, (_, values) in enumerate(series):
            h = plot_h * values[i] / top
            if h > 0:
                body.append(f'<rect x="{left + i * step + step * 0.15:.1f}" y="{base - h:.1f}" '
                            f'width="{step * 0.7:.1f}" height="{h:.1f}" fill="{colors[k % len(colors)]}"/>')
            base -= h
        if len(labels) <= 12 or i % max(1, len(labels) // 12) == 0:
            body.append(_text(left + i * step + step / 2, top_pad + plot_h + 16, label, size=10, fill=MUTED,
                              anchor="middle"))
    if share is not None:
        points = [(left + i * step + step / 2, top_pad + plot_h * (1 - s)) for i, s in enumerate(share)
                  if s is not None]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            body.append(f'<polyline points="{path}" fill="none" stroke="{SHARE_LINE}" stroke-width="2.5"/>')
            body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{SHARE_LINE}"/>' for x, y in points]
    legend = [(name, colors[k % len(colors)]) for k, (name, _) in enumerate(series)]
    if share is not None:
        legend.append((share_label, SHARE_LINE))
    return _frame(width, height, title, body, legend=legend)


def bar_list(title: str, rows: Sequence[tuple[str, float, str]], *, width: int = 760,
             color: str = PALETTE[0]) -> str:
    """Horizontal bars, one per (label, value, value text), longest first as given."""
    label_w, right = 230, 120
    plot = width - label_w - right - 16
    top = max((v for _, v, _ in rows), default=0) or 1
    height = 48 + 24 * max(len(rows), 1) + 12
    body: list[str] = []
    y = 44.0
    if not rows:
        body.append(_text(16, y + 14, "nothing in the last 24 hours", size=12, fill=MUTED))
    for label, value, text in rows:
        shown = label if len(label) <= 34 else label[:33] + "…"
        body.append(_text(label_w, y + 14, shown, size=12, fill=MUTED, anchor="end"))
        body.append(f'<rect x="{label_w + 8}" y="{y + 3:.1f}" width="{max(plot * value / top, 1):.1f}" height="14" '
                    f'rx="2" fill="{color}"/>')
        body.append(_text(label_w + 16 + plot * value / top, y + 14, text, size=11))
        y += 24
    return _frame(width, height, title, body)
