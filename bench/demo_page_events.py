"""How many gold events a demo page shows as more than one story (issue 14).

Usage::

    .venv/bin/newsroom demo --cycles 18 --no-serve --store /tmp/demo/store
    .venv/bin/python -m bench.demo_page_events --store /tmp/demo/store [--edition en-US] [--section top]

Reads the newest published version of the page and maps every listed article back to the corpus
line it was built from: the replay site names an article's page ``<slug>-<blake2b(id, 5 bytes)>``
(``replay.corpus._article_url``), and a reprint's id is ``<original id>~r<k>``. Each story is
given the gold event most of its listed articles tell (its representative's on a tie), and the
script prints the page, then the events that appear as two or more stories. Dev corpora only:
their gold labels are what the count is made of.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

DEFAULT_CORPORA = (Path("/work/shared/corpus/clustering/ecbplus-dev.jsonl"),
                   Path("/work/shared/corpus/clustering/mmds-dev.jsonl"))
MAX_REPRINTS = 3
_DIGEST_RE = re.compile(r"-?([0-9a-f]{10})\.html(?:[?#].*)?$")


def _digest(article_id: str) -> str:
    return hashlib.blake2b(article_id.encode("utf-8"), digest_size=5).hexdigest()


def event_by_digest(corpora: list[Path]) -> dict[str, str]:
    """The replay page digest of every corpus article and of its possible reprints → gold event."""
    out: dict[str, str] = {}
    for path in corpora:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    article_id, event = str(row["id"]), str(row["event"])
                    out[_digest(article_id)] = event
                    for k in range(1, MAX_REPRINTS + 1):
                        out[_digest(f"{article_id}~r{k}")] = event
    return out


def latest_page(store: Path, edition: str, section: str) -> Path:
    versions = sorted((store / "pages" / edition / section).glob("v*.json"), key=lambda p: int(p.stem[1:]))
    if not versions:
        raise SystemExit(f"no page versions under {store / 'pages' / edition / section}")
    return versions[-1]


def story_events(page: dict[str, object], events: dict[str, str]) -> list[tuple[dict[str, object], str | None]]:
    """Each listed story with the gold event most of its listed sources tell."""
    out = []
    for story in page["stories"]:  # type: ignore[attr-defined]
        told = []
        for source in story["sources"]:
            match = _DIGEST_RE.search(str(source["url"]))
            told.append(events.get(match.group(1)) if match else None)
        counts = Counter(e for e in told if e is not None)
        if not counts:
            out.append((story, None))
            continue
        best = max(counts.values())
        leaders = [e for e, c in counts.items() if c == best]
        out.append((story, told[0] if told[0] in leaders else sorted(leaders)[0]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--edition", default="en-US")
    parser.add_argument("--section", default="top")
    parser.add_argument("--corpus", type=Path, action="append", help="corpus JSONL (default: the demo's dev corpora)")
    args = parser.parse_args(argv)
    path = latest_page(args.store, args.edition, args.section)
    page = json.loads(path.read_text(encoding="utf-8"))
    rows = story_events(page, event_by_digest(args.corpus or list(DEFAULT_CORPORA)))
    print(f"{path} (as of {page['as_of']}): {len(rows)} stories")
    by_event: dict[str | None, list[int]] = defaultdict(list)
    for story, event in rows:
        by_event[event].append(int(story["rank"]))
        print(f"{story['rank']:>3} {event or '?':>14} {story['source_count']:>2} src  {str(story['title'])[:70]!r}"
              f"  | {str(story['snippet'])[:40]!r}")
    repeated = {e: ranks for e, ranks in by_event.items() if e is not None and len(ranks) > 1}
    print(f"events shown as more than one story: {len(repeated)} "
          f"({sum(len(r) for r in repeated.values())} of {len(rows)} stories)")
    for event, ranks in sorted(repeated.items()):
        print(f"  {event}: ranks {ranks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
