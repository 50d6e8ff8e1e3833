"""Markdown summaries of flow runs, published as Prefect artifacts for the UI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prefect.artifacts import create_markdown_artifact


def damaged_markdown(damaged: Sequence[Mapping[str, Any]]) -> str:
    """The objects a run could not read and what it did instead (issue 16); empty when none."""
    if not damaged:
        return ""
    lines = ["", "### Damaged objects (docs/store-faults.md)", "", "| object | problem | done instead |", "|---|---|---|"]
    lines += [f"| `{d['key']}` | {d['problem']} | {d['action']} |" for d in damaged]
    return "\n".join(lines) + "\n"


def _table(rows: Sequence[tuple[str, object]]) -> str:
    lines = ["| metric | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def ingest_markdown(summary: Mapping[str, Any], now: str) -> str:
    polled = int(summary.get("feeds_polled", 0))
    not_modified = int(summary.get("not_modified", 0))
    share = f"{not_modified / polled:.0%}" if polled else "n/a"
    rows: list[tuple[str, object]] = [
        ("feeds polled", polled), ("304 Not Modified", f"{not_modified} ({share})"),
        ("new items", summary.get("new_items", 0)), ("new articles", summary.get("new_articles", 0)),
    ]
    for kind, count in sorted((summary.get("errors") or {}).items()):
        rows.append((f"errors: {kind}", count))
    for tier, lag in sorted((summary.get("lag_seconds_by_tier") or {}).items()):
        rows.append((f"publish → first seen, tier {tier} (p50 / p95 s)", f"{lag['p50']:.0f} / {lag['p95']:.0f}"))
    failures = summary.get("failures") or []
    listed = "".join(f"| {f['url']} | {f['kind']} | {f['interval_seconds']} s ({f['reason']}) |\n" for f in failures[:20])
    more = f"\n{len(failures) - 20} more feeds with errors or warnings.\n" if len(failures) > 20 else ""
    failure_table = (f"\n### Feeds with errors or warnings\n\n| feed | kind | next poll in |\n|---|---|---|\n{listed}{more}"
                     if failures else "")
    over = summary.get("over_budget") or []
    pages = "".join(f"| {p['url']} | {p['kind']} |\n" for p in over[:20])
    more_pages = f"\n{len(over) - 20} more pages over their budget.\n" if len(over) > 20 else ""
    budget_table = (f"\n### Pages over their budget\n\n| page | kind |\n|---|---|\n{pages}{more_pages}" if over else "")
    return (f"## Ingest at {now}\n\n{_table(rows)}\n{failure_table}{budget_table}"
            f"{damaged_markdown(summary.get('damaged') or [])}")


def cluster_markdown(summaries: Sequence[Mapping[str, Any]], now: str) -> str:
    lines = [f"## Cluster at {now}", "", "| language | articles | new stories | joined | copies | active stories |",
             "|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.get('language')} | {s.get('articles', 0)} | {s.get('new_story', 0)} | "
                     f"{s.get('assign', 0)} | {s.get('copy', 0)} | {s.get('stories', '')} |")
    sizes: dict[int, int] = {}
    for s in summaries:
        for size, count in (s.get("sizes") or {}).items():
            sizes[int(size)] = sizes.get(int(size), 0) + int(count)
    if sizes:
        lines += ["", "### Active stories by number of articles", "", "```", *size_chart(sizes), "```"]
    return "\n".join(lines) + "\n" + damaged_markdown([d for s in summaries for d in s.get("damaged") or []])


def size_chart(sizes: Mapping[int, int], width: int = 40) -> list[str]:
    """A horizontal bar chart of story sizes, grouped 1, 2, 3, 4-5, 6-10, 11-20, 21+.

    >>> size_chart({1: 4, 2: 2, 30: 1}, width=4)
    ['    1 | ████ 4', '    2 | ██ 2', '    3 |  0', '  4-5 |  0', ' 6-10 |  0', '11-20 |  0', '  21+ | █ 1']
    """
    bins = [("1", 1, 1), ("2", 2, 2), ("3", 3, 3), ("4-5", 4, 5), ("6-10", 6, 10), ("11-20", 11, 20),
            ("21+", 21, 10**9)]
    counts = [(label, sum(c for n, c in sizes.items() if low <= n <= high)) for label, low, high in bins]
    top = max((c for _, c in counts), default=0) or 1
    return [f"{label:>5} | {'█' * round(width * c / top)} {c}" for label, c in counts]


def rank_markdown(summary: Mapping[str, Any], now: str) -> str:
    rows: list[tuple[str, object]] = [
        ("pages computed", summary.get("pages", 0)), ("pages published", len(summary.get("published", []))),
        ("stories listed", summary.get("stories", 0)), ("story snapshot version", summary.get("stories_version")),
    ]
    aggregates = summary.get("aggregates") or {}
    if aggregates:  # issue 15: what the cycle folded onto the story aggregates, and what it read
        rows.append(("story aggregates", f"{aggregates.get('mode')} (fold {aggregates.get('seq')}"
                                         + (f", {aggregates['reason']}" if aggregates.get("reason") else "")
                                         + f"), {aggregates.get('stories', 0)} stories, "
                                         f"{aggregates.get('bytes_read', 0) / 1e6:.1f} MB read"))
    for page, reason in sorted((summary.get("refused") or {}).items()):
        rows.append((f"refused: {page}", reason))
    return f"## Rank & publish at {now}\n\n{_table(rows)}\n{damaged_markdown(summary.get('damaged') or [])}"


def publish_artifact(key: str, markdown: str, description: str) -> None:
    """Attach a markdown artifact to the current flow run (a no-op outside a run)."""
    create_markdown_artifact(markdown=markdown, key=key, description=description)


def health_markdown(report: Mapping[str, Any], now: str) -> str:
    if report["healthy"]:
        return f"## Health at {now}\n\nAll checks pass.\n"
    lines = [f"## Health at {now}", "", "| check | subject | detail |", "|---|---|---|"]
    lines += [f"| {f['check']} | {f['subject']} | {f['detail']} |" for f in report["flags"]]
    return "\n".join(lines) + "\n"


def maintenance_markdown(report: Mapping[str, Any], now: str) -> str:
    rows = [(k.replace("_", " "), v) for k, v in report.items() if k not in ("notes", "damaged")]
    return f"## Maintenance at {now}\n\n{_table(rows)}\n{damaged_markdown(report.get('damaged') or [])}"
