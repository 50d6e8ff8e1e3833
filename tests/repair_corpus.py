"""Small two-event news corpora for the repair and writer tests (written for these tests).

Two events of one kind: a heavyweight title fight in Mannheim (Klitschko v Rahman) and one in
Bern (Klitschko v Thompson) four years apart, each told by several outlets in its own words.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from transforms.features import features_from_text, features_to_row
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment

_MANNHEIM = [
    "Wladimir Klitschko stopped Hasim Rahman in the seventh round in Mannheim on Saturday, {d}. "
    "Rahman, the former champion, barely landed a punch at the SAP Arena as Klitschko kept his IBF title.",
    "Hasim Rahman was outclassed by Wladimir Klitschko at the SAP Arena in Mannheim. The referee waved it off "
    "in round seven after Rahman took a left-right-left combination, {d}.",
    "Klitschko retained his IBF and WBO belts against substitute Hasim Rahman in Mannheim, {d}. "
    "Rahman, 36, never threatened and the SAP Arena crowd cheered the seventh-round stoppage.",
    "In Mannheim, Klitschko dismantled Rahman. The American substitute Hasim Rahman was stopped in the "
    "seventh round at the SAP Arena, {d}, and Klitschko extended his streak.",
    "Substitute Hasim Rahman lasted into the seventh round before Wladimir Klitschko stopped him in Mannheim, "
    "{d}. Rahman complained about the stoppage at the SAP Arena.",
    "The SAP Arena in Mannheim saw Klitschko stop Rahman, {d}. Hasim Rahman had replaced an injured challenger "
    "and Klitschko punished him until the seventh round.",
]
_BERN = [
    "Wladimir Klitschko stopped Tony Thompson in the sixth round at the Stade de Suisse in Bern, {d}. "
    "Thompson, 40, was down twice before the referee ended the rematch.",
    "Tony Thompson lost the rematch to Wladimir Klitschko in Bern. The Stade de Suisse crowd watched Thompson "
    "go down in the fifth and sixth rounds, {d}.",
    "Klitschko kept his WBA, IBF and WBO titles by beating Tony Thompson again in Bern, {d}. "
    "Thompson had no answer at the Stade de Suisse and was stopped in round six.",
    "In Bern, Klitschko beat Thompson for a second time. Tony Thompson, the 40-year-old American, was stopped "
    "in the sixth round at the Stade de Suisse, {d}.",
    "The Stade de Suisse in Bern hosted the Klitschko-Thompson rematch, {d}. Tony Thompson was knocked down "
    "twice and stopped in the sixth round.",
    "Thompson was stopped by Klitschko in Bern, {d}, in a rematch at the Stade de Suisse. Tony Thompson said "
    "he had trained for a year for the fight.",
]


def mannheim(i: int) -> str:
    """Article ``i`` (0–5) about the Mannheim fight."""
    return _MANNHEIM[i].format(d="December 13, 2008")


def bern(i: int) -> str:
    """Article ``i`` (0–5) about the Bern fight."""
    return _BERN[i].format(d="July 7, 2012")


T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
PUBLISHERS = [f"pub{i}" for i in range(8)]


def write_articles(store: ObjectStore, articles: list[tuple[str, str, int, str]], language: str = "en") -> None:
    """One article segment per (article_id, text, minute, publisher), as the ingest writes them."""
    for article_id, text, minute, publisher in articles:
        seen = T0 + timedelta(minutes=minute)
        features = features_from_text(article_id, text.split(". ")[0][:80], text, language, seen, publisher)
        row = {**features_to_row(features), "version": 1,
               "content_hash": hashlib.sha1(text.encode()).hexdigest(), "url": f"http://{publisher}.test/{article_id}",
               "canonical_url": f"http://{publisher}.test/{article_id}", "feed_id": f"feed-{publisher}",
               "region": "US", "snippet": text[:120], "image_url": None, "author": None, "section": "sport",
               "categories": [], "is_opinion": False, "published_at": seen}
        write_segment(store, layout.article_segment_key(seen, article_id), rows_to_table([row], ARTICLES_SCHEMA),
                      ARTICLES_SCHEMA)


def two_event_stream() -> list[tuple[str, str, int, str]]:
    out = []
    for i in range(6):
        out.append((f"m{i}", mannheim(i), 2 * i, PUBLISHERS[i]))
        out.append((f"b{i}", bern(i), 2 * i + 1, PUBLISHERS[(i + 3) % 8]))
    return out


def changes_of(store: ObjectStore) -> list[dict[str, Any]]:
    keys = list_segments(store, layout.STORY_CHANGES_PREFIX)
    return read_segments(store, keys, STORY_CHANGES_SCHEMA).to_pylist() if keys else []


def final_story(changes: list[dict[str, Any]]) -> dict[str, str]:
    latest: dict[str, dict[str, Any]] = {}
    for c in sorted(changes, key=lambda c: c["offset"]):
        if c["article_id"]:
            latest[c["article_id"]] = c
    return {a: c["story_id"] for a, c in latest.items()}


def break_writer_state(store: ObjectStore, language: str) -> None:
    """Point ``language``'s writer checkpoint at an unreadable state blob: every run of it fails."""
    store.put(layout.story_state_key(language, 0), b"not a state")
    store.put(layout.story_checkpoint_key(language), json.dumps(
        {"offset": 0, "state_key": layout.story_state_key(language, 0), "consumed": []}).encode())
