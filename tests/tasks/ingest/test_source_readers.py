"""Source readers (tasks/ingest/readers.py): polling reads each source with the reader of its kind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

import pytest

from tasks.http import make_client
from tasks.ingest import readers
from tasks.ingest.feed_job import FeedJob, SourceKind, source_kind_of
from tasks.ingest.poll import poll_feed
from tasks.settings import IngestSettings
from transforms.feeds import FeedItem, ParsedFeed
from transforms.poll_outcome import PollExchange
from transforms.records import FeedState

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def _settings() -> IngestSettings:
    return IngestSettings(allow_private_addresses=True, embeddings=False)  # type: ignore[call-arg]


def _parsed(guid: str) -> ParsedFeed:
    item = FeedItem(guid=guid, link=f"https://pub.example/{guid}", title=guid, summary="", published_at=None,
                    updated_at=None, categories=(), author=None, image_url=None, language=None)
    return ParsedFeed(title="T", link=None, language=None, items=(item,), ttl_minutes=None,
                      skip_hours=frozenset(), skip_days=frozenset(), hub_url=None, self_url=None,
                      is_malformed=False, error=None)


def test_every_kind_of_source_has_a_reader() -> None:
    assert set(readers.SOURCE_READERS) == set(get_args(SourceKind))


def test_a_registered_feed_is_of_the_feed_kind_and_jobs_default_to_it() -> None:
    row = {"feed_id": "f", "url": "https://pub.example/sitemap.xml", "publisher_id": "p", "section_hint": ""}
    assert source_kind_of(row) == "feed"
    assert FeedJob("f", "https://pub.example/rss", "p", "en", "US", "", FeedState("f")).kind == "feed"


def test_poll_reads_a_source_with_the_reader_its_kind_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The poll asks the registry, not a hard-wired fetch: the registered reader's items are the poll's."""
    seen: list[str] = []

    def reader(job: FeedJob, client: object, settings: IngestSettings) -> PollExchange:
        seen.append(job.feed_id)
        return PollExchange(status=200, headers={}, parsed=_parsed("from-the-reader"))

    monkeypatch.setitem(readers.SOURCE_READERS, "feed", reader)  # type: ignore[arg-type]
    job = FeedJob("f", "https://pub.example/rss", "p", "en", "US", "", FeedState("f"))
    settings = _settings()
    with make_client(settings) as client:
        outcome = poll_feed(job, client, settings, NOW)
    assert seen == ["f"]
    assert [item.guid for item in outcome.new_items] == ["from-the-reader"]
    assert outcome.report.status == 200 and outcome.report.error_kind is None
