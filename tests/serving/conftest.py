"""Fixture snapshots for the serving tests, published with the real warehouse write side."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.settings import ServingSettings
from serving.signing import Signer
from warehouse import layout
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.snapshots import PAGE_SCHEMA, STORIES_SCHEMA, publish_page, publish_stories
from warehouse.store import LocalStore, ObjectStore, StoredObject
from warehouse.tables import list_segments, read_segments


def accept(new: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
    """A validator that refuses nothing: these tests are about serving, not page checks."""
    return None


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# (story_id, sections, headline, snippet, has image, [(publisher_id, publisher, headline, minutes ago, is_copy)])
# The representative article is listed first; Full Coverage lists every article oldest first.
_STORIES: list[tuple[str, list[str], str, str, bool, list[tuple[str, str, str, int, bool]]]] = [
    (
        "0196f1c2a3b40001",
        ["world"],
        "Coastal cities agree on a shared plan to raise sea walls before the next storm season",
        "Mayors from eleven port cities signed a joint funding agreement on Tuesday, pooling engineering "
        "crews and committing to finish the first sections of new barriers within eighteen months.",
        True,
        [
            ("harbor-times", "The Harbor Times", "Port cities sign joint sea wall pact", 95, False),
            ("daily-ledger", "The Daily Ledger", "Eleven mayors pool funds for storm barriers", 140, False),
            ("wire-service", "Continental Wire", "Cities agree sea wall plan ahead of storms", 180, False),
            ("valley-post", "Valley Post", "Cities agree sea wall plan ahead of storms", 170, True),
            ("civic-review", "Civic Review", "What the sea wall deal means for homeowners", 60, False),
        ],
    ),
    (
        "0196f1c2a3b40002",
        ["business"],
        "Regional rail operator orders 40 battery trains to replace its diesel fleet",
        "The order, the largest of its kind on the continent, covers lines that were never electrified "
        "and is expected to cut the operator's fuel bill by a third.",
        True,
        [
            (
                "metro-business",
                "Metro Business Journal",
                "Rail operator places record battery train order",
                75,
                False,
            ),
            ("daily-ledger", "The Daily Ledger", "Diesel trains to be retired on rural lines", 120, False),
            ("tech-dispatch", "Tech Dispatch", "Inside the battery trains replacing diesel", 50, False),
        ],
    ),
    (
        "0196f1c2a3b40003",
        ["science"],
        "Astronomers spot water vapour around a nearby rocky exoplanet",
        "Observations over six nights suggest a thin atmosphere, a first for a planet this small "
        "orbiting a quiet star.",
        False,
        [
            ("science-weekly", "Science Weekly", "Water vapour found on small rocky world", 200, False),
            ("wire-service", "Continental Wire", "Telescope detects water near rocky planet", 230, False),
            ("harbor-times", "The Harbor Times", "Telescope detects water near rocky planet", 225, True),
        ],
    ),
    (
        "0196f1c2a3b40004",
        ["sports"],
        "Underdogs reach the cup final after a penalty shoot-out that went to the ninth round",
        "The second-division side had not won an away match since March.",
        True,
        [
            ("sports-desk", "The Sports Desk", "Ninth-round penalty sends underdogs to final", 30, False),
            ("valley-post", "Valley Post", "Local club reaches first cup final in 40 years", 25, False),
        ],
    ),
    (
        "0196f1c2a3b40005",
        ["technology"],
        "Open-source maintainers publish a common plan for handling security reports",
        "More than thirty projects agreed on one disclosure policy and a shared contact address.",
        False,
        [
            ("tech-dispatch", "Tech Dispatch", "Maintainers unite on security disclosure rules", 300, False),
            (
                "metro-business",
                "Metro Business Journal",
                "Why companies care about a volunteer security pact",
                260,
                False,
            ),
        ],
    ),
]

ALIASES = {"0196f1c2a3b40999": "0196f1c2a3b40001", "0196f1c2a3b40998": "0196f1c2a3b40999"}


HMAC_KEY = "test-signing-key-0123456789abcdef-not-a-secret"
"""Tests sign with this key (NEWSROOM_SERVING_HMAC_KEY); it protects nothing outside tests."""

# Publisher regions (Full Coverage "local sources") and opinion pieces.
REGIONS = {"harbor-times": "US", "daily-ledger": "US", "valley-post": "US", "civic-review": "GB",
           "metro-business": "GB", "wire-service": "US", "tech-dispatch": "US", "science-weekly": "GB",
           "sports-desk": "GB"}
OPINION_PUBLISHERS = {"civic-review"}


def _source(
    article_id: str, pub_id: str, pub: str, title: str, seen: datetime, is_copy: bool,
    url_base: str | None = None,
) -> dict[str, Any]:
    url = f"{url_base}/{pub_id}/news/{article_id}" if url_base else f"https://{pub_id}.example/news/{article_id}"
    return {
        "article_id": article_id,
        "publisher_id": pub_id,
        "publisher": pub,
        "title": title,
        "url": url,
        "first_seen_at": _iso(seen),
        "is_copy": is_copy,
        "is_opinion": pub_id in OPINION_PUBLISHERS,
        "region": REGIONS[pub_id],
    }


RANKING = {"coverage_weight": 1.0, "velocity_weight": 0.5, "freshness_weight": 1.0, "regional_weight": 0.5,
           "smoothing_cycles": 5, "freshness_half_life_hours": 4.0, "coverage_window_hours": 6.0,
           "breaking_hours": 2.0, "publisher_daily_share_cap": 0.1, "representative_tie_margin": 0.05}
"""The ranking weights a page carries (docs/snapshots.md), as rank & publish writes them by default."""

# Per story (by rank): velocity, regional share, Breaking, the publishers that stepped aside for
# the daily cap, near-ties, as rank & publish writes them (score_parts, representative_choice).
_WHY: list[tuple[float, float, bool, list[str], int]] = [
    (0.6931, 0.8, True, [], 1), (0.0, 0.5, False, ["daily-ledger"], 2), (0.1823, 1.0, False, [], 1),
    (0.0, 0.0, False, [], 3),
]


def _why(score: float, rank: int, rows: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """``score_parts`` consistent with ``score`` under ``RANKING``: the coverage is what makes them agree."""
    velocity, share, breaking, aside, ties = _WHY[(rank - 1) % len(_WHY)]
    latest = max(datetime.fromisoformat(r["first_seen_at"].replace("Z", "+00:00")) for r in rows if not r["is_copy"])
    freshness = 0.5 ** ((now - latest).total_seconds() / 3600 / RANKING["freshness_half_life_hours"])
    factor = 1 - RANKING["regional_weight"] + RANKING["regional_weight"] * share
    coverage = (score / factor) / freshness - RANKING["velocity_weight"] * velocity
    originals = [r for r in rows if not r["is_copy"]]
    return {
        "score_parts": {"coverage": round(coverage, 4), "velocity": velocity, "freshness": round(freshness, 4),
                        "regional_share": share},
        "is_breaking": breaking, "breaking_since": _iso(now - timedelta(minutes=50)) if breaking else None,
        "representative_choice": {"candidates": len(originals), "stepped_aside": aside,
                                  "near_ties": [r["article_id"] for r in originals[:ties]]},
    }


def make_stories(now: datetime, image_base: str | None = None, url_base: str | None = None) -> list[dict[str, Any]]:
    """Page story objects (representative source first), ranked in list order."""
    stories = []
    for rank, (story_id, sections, title, snippet, has_image, sources) in enumerate(_STORIES, start=1):
        rows = [
            _source(f"{story_id}-a{i}", pub_id, pub, headline, now - timedelta(minutes=ago), is_copy, url_base)
            for i, (pub_id, pub, headline, ago, is_copy) in enumerate(sources)
        ]
        seen = sorted(r["first_seen_at"] for r in rows)
        base = image_base or "https://images.example/news"
        stories.append(
            {
                "story_id": story_id,
                "rank": rank,
                "score": round(3.0 - rank * 0.4, 2),
                **_why(round(3.0 - rank * 0.4, 2), rank, rows, now),
                "title": title,
                "snippet": snippet,
                "image_url": f"{base}/{story_id}.svg" if has_image else None,
                "sections": sections,
                "language": "en",
                "first_seen_at": seen[0],
                "updated_at": seen[-1],
                "source_count": sum(1 for r in rows if not r["is_copy"]),
                "article_count": len(rows),
                "sources": rows,
            }
        )
    return stories


def page_payload(edition: str, section: str, stories: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    return {
        "schema": PAGE_SCHEMA,
        "edition": edition,
        "section": section,
        "version": 0,
        "as_of": _iso(now),
        "ranking": RANKING,
        "stories": stories,
    }


def stories_payload(
    stories: list[dict[str, Any]], editions: list[str], now: datetime, aliases: dict[str, str]
) -> dict[str, Any]:
    full = {}
    for story in stories:
        item = copy.deepcopy(story)
        item["sources"] = sorted(item["sources"], key=lambda s: (s["first_seen_at"], s["article_id"]))
        item["editions"] = editions
        if story["story_id"] == "0196f1c2a3b40003":
            item["linked"] = [{"story_id": "0196f1c2a3b4f003", "language": "de", "title": "Bahnstreik beendet"}]
        full[story["story_id"]] = item
    return {"schema": STORIES_SCHEMA, "version": 0, "as_of": _iso(now), "stories": full, "aliases": aliases}


@dataclass(frozen=True, slots=True)
class PublishedFixture:
    stories: list[dict[str, Any]]
    stories_snapshot: dict[str, Any]
    pages: dict[tuple[str, str], list[dict[str, Any]]]


def publish_fixture(
    store: ObjectStore, now: datetime | None = None, image_base: str | None = None, url_base: str | None = None
) -> PublishedFixture:
    """Publish pages for en-US (top, world, business) and en-GB (top), and the story snapshot."""
    now = now or datetime.now(UTC).replace(microsecond=0)
    stories = make_stories(now, image_base, url_base)
    pages = {
        ("en-US", "top"): stories,
        ("en-US", "world"): [s for s in stories if "world" in s["sections"]],
        ("en-US", "business"): [s for s in stories if "business" in s["sections"]],
        ("en-GB", "top"): list(reversed(stories[:3])),
    }
    for (edition, section), page_stories in pages.items():
        result = publish_page(
            store,
            edition,
            section,
            page_payload(edition, section, page_stories, now),
            now=now,
            validate=accept,
        )
        assert result.published, result
    snapshot = stories_payload(stories, ["en-GB", "en-US"], now, ALIASES)
    result = publish_stories(store, snapshot, now=now, validate=accept)
    assert result.published, result
    return PublishedFixture(stories, dict(snapshot, version=result.version), pages)


class FlakyStore:
    """An ObjectStore wrapper that raises OSError from every call while ``failing`` is set."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.failing = False
        self.gets: list[str] = []

    def _check(self) -> None:
        if self.failing:
            raise OSError("store unreachable")

    @property
    def uri(self) -> str:
        return self.inner.uri

    def get(self, key: str) -> StoredObject:
        self._check()
        self.gets.append(key)
        return self.inner.get(key)

    def head(self, key: str) -> str | None:
        self._check()
        return self.inner.head(key)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str = "application/octet-stream",
    ) -> str:
        self._check()
        return self.inner.put(
            key, data, if_none_match=if_none_match, if_match=if_match, content_type=content_type
        )

    def list(self, prefix: str) -> list[str]:
        self._check()
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self._check()
        self.inner.delete(key)


def flush_clicks(client: TestClient) -> int:
    """Write the app's buffered clicks now, as its flusher does every interval; returns how many."""
    written: int = client.app.state.click_log.flush()  # type: ignore[attr-defined]
    return written


def settings_for(tmp_path: Path, **extra: object) -> ServingSettings:
    """Serving settings for a test app: the fixture's HMAC key, a profile store under ``tmp_path``."""
    return ServingSettings(  # type: ignore[arg-type]
        refresh_seconds=3600, profiles_path=str(tmp_path / "profiles.sqlite3"), hmac_key=HMAC_KEY, **extra
    )


@pytest.fixture
def local_store(tmp_path: Path) -> ObjectStore:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    return store


@pytest.fixture
def client(local_store: ObjectStore, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(local_store, settings_for(tmp_path))) as c:
        yield c


# -- readers, tokens and clicks over the fixture -------------------------------------------------

FIRST_ARTICLE = "0196f1c2a3b40001-a0"
"""The lead article of the fixture's first story."""
SPORTS_STORY = "0196f1c2a3b40004"


def signer() -> Signer:
    return Signer(HMAC_KEY.encode(), click_ttl_seconds=86400, session_ttl_seconds=86400)


def publish_with_first_url(store: ObjectStore, url: str) -> None:
    """The en-US front page and story snapshot, with the first story's lead article at ``url``."""
    now = datetime.now(UTC).replace(microsecond=0)
    stories = make_stories(now)
    stories[0]["sources"][0]["url"] = url
    assert publish_page(store, "en-US", "top", page_payload("en-US", "top", stories, now), now=now,
                        validate=accept).published
    assert publish_stories(store, stories_payload(stories, ["en-US"], now, ALIASES), now=now, validate=accept).published


def client_with_first_url(tmp_path: Path, url: str) -> tuple[ObjectStore, TestClient]:
    store = LocalStore(tmp_path / "store")
    publish_with_first_url(store, url)
    return store, TestClient(create_app(store, settings_for(tmp_path)), raise_server_exceptions=False)


def sign_in(client: TestClient, reader: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + client.post("/v1/session", json={"reader": reader}).json()["token"]}


def clicks_in(store: ObjectStore, client: TestClient | None = None) -> list[dict[str, object]]:
    """The clicks written to ``store``, after ``client``'s app wrote its buffer when given."""
    if client is not None:
        flush_clicks(client)
    keys = list_segments(store, layout.CLICKS_PREFIX)
    return read_segments(store, keys, CLICKS_SCHEMA).to_pylist() if keys else []


def token_json(token: str) -> str:
    """What anyone can read from a token without the key: its payload, as text."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    return raw[:-32].decode()


# -- the search index of the live window (issue 30) ------------------------------------------------


def publish_search(store: ObjectStore, stories: dict[str, dict[str, Any]], now: datetime | None = None) -> int:
    """Build and publish a search index over story snapshot ``stories`` as rank does; returns its version."""
    from tasks.search import snapshot_documents
    from warehouse.search_index import build_search_index, documents_digest
    from warehouse.search_versions import publish_search_index

    now = now or datetime.now(UTC).replace(microsecond=0)
    docs = snapshot_documents(stories, lambda sid: ())
    at = _iso(now)
    result = publish_search_index(store, lambda: build_search_index(docs, {"as_of": at}), digest=documents_digest(docs),
                                  as_of=at, documents=len(docs), now=now, validate=lambda data: None)
    assert result.published, result
    return result.version
