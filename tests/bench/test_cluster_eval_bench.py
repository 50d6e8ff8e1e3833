"""The clustering benchmark's baseline and the demo page's event count (bench/cluster_eval.py,
bench/demo_page_events.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.cluster_eval import baseline_clusters, stream_order
from bench.demo_page_events import event_by_digest, story_events


def _row(i: str, title: str, when: str | None, language: str = "en") -> dict[str, object]:
    return {"id": i, "title": title, "text": "", "language": language, "published_at": when}


def test_stream_order_follows_published_at_only_when_every_line_has_one() -> None:
    timed = [_row("late", "x", "2014-03-11T02:00:00Z"), _row("early", "y", "2014-03-10T02:00:00Z")]
    assert [r["id"] for r in stream_order(timed)] == ["early", "late"]
    mixed = [timed[0], _row("untimed", "z", None)]
    assert [r["id"] for r in stream_order(mixed)] == ["late", "untimed"]


def test_baseline_groups_headlines_that_share_their_words_and_keeps_languages_apart() -> None:
    rows = [
        _row("a", "Sbarro files for bankruptcy protection", "2014-03-10T01:00:00Z"),
        _row("b", "Neil Young launches PonoPlayer", "2014-03-10T02:00:00Z"),
        _row("c", "Sbarro bankruptcy protection filed again", "2014-03-10T03:00:00Z"),
        _row("d", "Sbarro files for bankruptcy protection", "2014-03-10T04:00:00Z", language="ms"),
    ]
    out = baseline_clusters(rows, 0.3)
    assert out["a"] == out["c"] != out["b"]
    assert out["d"] not in {out["a"], out["b"]}


def _digest(article_id: str) -> str:
    return hashlib.blake2b(article_id.encode("utf-8"), digest_size=5).hexdigest()


def test_page_stories_are_told_their_majority_event(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "1_1ecb", "event": "1_ecb"}\n{"id": "1_2ecb", "event": "1_ecb"}\n'
                      '{"id": "2_1ecb", "event": "2_ecb"}\n', encoding="utf-8")
    events = event_by_digest([corpus])

    def url(article_id: str, query: str = "") -> str:
        return f"http://127.0.1.2:8/articles/some-words-{_digest(article_id)}.html{query}"

    page = {"stories": [
        {"rank": 1, "sources": [{"url": url("2_1ecb")}, {"url": url("1_1ecb")}, {"url": url("1_2ecb~r1", "?utm_source=rss")}]},
        {"rank": 2, "sources": [{"url": "http://elsewhere/x.html"}]},
    ]}
    assert [event for _, event in story_events(page, events)] == ["1_ecb", None]
