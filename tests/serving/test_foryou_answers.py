"""For you gives 200 seeded readers the same answers as the code before issue 29.

The world is fixed (a 300-story edition with a front page and six section pages, published at a
fixed instant; 200 readers with follows, hides, reads and weights drawn from one seed), so every
answer is a pure function of the code. ``tests/data/foryou/answers.json`` holds the answers the code
at 3a6d4c0 (before issue 29 took the cards, click links and profile reads out of the request path)
gave: for each reader, page one and the page after it, with their mode, the stories in order with
their reasons, and the sha256 of the whole body with only the click tokens blanked
(they carry a random nonce and the time). So a match is the same stories, order and reasons, and
the same bytes besides.

Regenerate (only when an answer is meant to change, and review the diff):

    PYTHONPATH=<checkout> python tests/serving/test_foryou_answers.py --write
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.profiles import SqliteProfileStore
from serving.settings import ServingSettings
from serving.signing import Signer
from warehouse.profile_db import open_fold_store
from warehouse.snapshots import PAGE_SCHEMA, publish_page
from warehouse.store import LocalStore

ANSWERS = Path(__file__).resolve().parents[1] / "data" / "foryou" / "answers.json"
HMAC_KEY = "foryou-answers-key-0123456789abcdef-not-a-secret"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
READERS = 200
STORIES = 300
SECTIONS = ["world", "business", "technology", "science", "sports", "health", "politics", "culture"]
SECTION_PAGES = SECTIONS[:6]
ENTITIES = ["Mars", "OPEC", "Lisbon", "Nairobi", "Tokyo", "Jakarta", "WHO", "Nvidia", "UEFA", "Kenya"]
WORDS = ["battery", "budget", "regional", "leaders", "plan", "rail", "storm", "vaccine", "chips", "league",
         "harbour", "drought", "tariff", "orbit", "museum", "election", "ceasefire", "pension", "wildfire", "merger"]
PUBLISHERS = [f"pub-{i:02d}" for i in range(40)]
_TOKEN = re.compile(r'"/r/[A-Za-z0-9_-]+"')


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _publisher_name(pub: str) -> str:
    # Some names need escaping or are not ASCII: the bytes must still come out the same.
    special = {"pub-03": 'The "Quoted" Times', "pub-07": "Zeitung für Ölwirtschaft", "pub-11": "新闻日报"}
    return special.get(pub, pub.replace("-", " ").title())


def make_stories(rng: random.Random) -> list[dict[str, Any]]:
    """``STORIES`` page stories, best first, with sources, sections, entities and updates spread over a day."""
    stories = []
    for i in range(STORIES):
        sections = [SECTIONS[rng.randrange(len(SECTIONS))]]
        if rng.random() < 0.2:
            sections.append(SECTIONS[rng.randrange(len(SECTIONS))])
        sections = list(dict.fromkeys(sections))
        words = rng.sample(WORDS, 4)
        updated = NOW - timedelta(minutes=rng.randrange(0, 24 * 60))
        sources = []
        for j, pub in enumerate(rng.sample(PUBLISHERS, rng.randint(1, 7))):
            url = f"https://{pub}.example/news/{i}/{j}"
            if i == 5 and j == 0:
                url = "https://pub.example/a\r\nSet-Cookie: x=1"  # unsignable: click_url null
            elif i % 17 == 0 and j == 1:
                url = f"https://{pub}.example/新闻/{i}"  # signed percent-encoded
            sources.append({
                "article_id": f"s{i:04d}-a{j}", "publisher_id": pub, "publisher": _publisher_name(pub),
                "title": f"{words[0].title()} {words[1]} {words[2]} as {words[3]} {i}", "url": url,
                "first_seen_at": _iso(updated - timedelta(minutes=7 * j)), "is_copy": j == 6,
                "is_opinion": j == 2, "region": "US" if j % 3 else "GB",
            })
        story: dict[str, Any] = {
            "story_id": f"st{i:05d}", "rank": i + 1, "score": round(6.0 - i * 0.015 + rng.random() * 0.01, 4),
            "score_parts": {"coverage": round(rng.random() * 3, 4), "freshness": round(rng.random(), 4)},
            "title": f"{words[0].title()} {words[1]} {words[2]}: {words[3]} story {i}",
            "snippet": f"What happened with the {words[1]} and why the {words[2]} matters. " * 2,
            "image_url": f"https://img.example/{i}.jpg" if i % 4 else None,
            "sections": sections, "language": "en",
            "first_seen_at": sources[-1]["first_seen_at"], "updated_at": _iso(updated),
            "source_count": len(sources), "article_count": len(sources), "sources": sources,
        }
        if rng.random() < 0.5:
            story["entities"] = rng.sample(ENTITIES, rng.randint(1, 2))
        if i % 9 == 0:
            story["is_breaking"] = True
            story["breaking_since"] = _iso(updated)
        stories.append(story)
    return stories


def publish_world(root: Path) -> LocalStore:
    """The en-US front page (the best 60) and six section pages (their best 40, scored per section)."""
    rng = random.Random(29)
    store = LocalStore(root / "store")
    stories = make_stories(rng)
    pages = {"top": stories[:60]}
    for section in SECTION_PAGES:
        on_page = [dict(s, score=round(s["score"] * (0.8 + 0.4 * rng.random()), 4))
                   for s in stories if section in s["sections"]][:40]
        pages[section] = [dict(s, rank=k + 1) for k, s in enumerate(on_page)]
    for section, page in pages.items():
        payload = {"schema": PAGE_SCHEMA, "edition": "en-US", "section": section, "version": 0,
                   "as_of": _iso(NOW), "stories": page}
        assert publish_page(store, "en-US", section, payload, now=NOW, validate=lambda new, prev: None).published
    return store


def reader_names() -> list[str]:
    return [f"reader{i:03d}" for i in range(READERS)]


def seed_readers(path: Path) -> None:
    """Profiles for ``READERS`` readers: one in eight has none; the rest follow, hide, read and have weights."""
    rng = random.Random(2029)
    signer = Signer(HMAC_KEY.encode(), click_ttl_seconds=86400, session_ttl_seconds=86400)
    store = SqliteProfileStore(path)
    fold = open_fold_store(str(path))
    story_ids = [f"st{i:05d}" for i in range(STORIES)]
    topics = SECTIONS + [e.lower() for e in ENTITIES]
    try:
        with fold.transaction() as tx:
            for k, name in enumerate(reader_names()):
                if k % 8 == 0 or k % 5 == 1:
                    continue
                rows = [("topic", t, round(rng.random() * 3, 4), NOW.timestamp()) for t in rng.sample(topics, 5)]
                rows += [("source", p, round(rng.random() * 2, 4), NOW.timestamp()) for p in rng.sample(PUBLISHERS, 8)]
                rows += [("term", w, round(rng.random(), 4), NOW.timestamp()) for w in rng.sample(WORDS, 10)]
                tx.replace_weights(signer.reader_hash(name), rows)
        for k, name in enumerate(reader_names()):
            if k % 8 == 0:
                continue
            reader = signer.reader_hash(name)
            for topic in rng.sample(topics, rng.randint(0, 2)):
                store.follow(reader, "topic", topic)
            for pub in rng.sample(PUBLISHERS, rng.randint(0, 2)):
                store.follow(reader, "source", pub)
            for pub in rng.sample(PUBLISHERS, rng.randint(0, 3)):
                store.hide(reader, "source", pub)
            for story in rng.sample(story_ids[:120], rng.randint(0, 3)):
                store.hide(reader, "story", story)
            for story in rng.sample(story_ids[:150], rng.randint(0, 30)):
                # Read before or after the story's last update: only the latter keeps it out.
                store.record_read(reader, story, (NOW - timedelta(minutes=rng.randrange(0, 24 * 60))).timestamp())
    finally:
        fold.close()
        store.close()


def answer_of(body: bytes, reasons: dict[str, int]) -> dict[str, Any]:
    """What is compared: mode, version, each story (its number) with its reason (an index into
    ``reasons``, which grows as new ones appear), whether a next page exists, and the sha256 of the
    body with the click tokens blanked (topics, cards and the cursor are in there)."""
    feed = json.loads(body)
    return {
        "mode": feed["mode"],
        "version": feed["version"],
        "stories": [[int(s["story_id"][2:]), reasons.setdefault(s["reason"], len(reasons))] for s in feed["stories"]],
        "more": feed["next_cursor"] is not None,
        "sha256": hashlib.sha256(_TOKEN.sub('"/r/"', body.decode()).encode()).hexdigest(),
    }


def collect_answers(root: Path, reasons: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    """Page one and two of every reader's For you (limit 20), and of every tenth reader at limit 7."""
    store = publish_world(root)
    seed_readers(root / "profiles.sqlite3")
    settings = ServingSettings(refresh_seconds=3600, profiles_path=str(root / "profiles.sqlite3"),  # type: ignore[arg-type]
                               hmac_key=HMAC_KEY)
    answers: dict[str, list[dict[str, Any]]] = {}
    with TestClient(create_app(store, settings)) as client:
        for k, name in enumerate(reader_names()):
            token = client.post("/v1/session", json={"reader": name}).json()["token"]
            headers = {"Authorization": f"Bearer {token}"}
            pages = []
            for limit in ([20, 7] if k % 10 == 0 else [20]):
                cursor = None
                for _ in range(2):
                    params: dict[str, str | int] = {"edition": "en-US", "limit": limit}
                    if cursor:
                        params["cursor"] = cursor
                    response = client.get("/v1/feed", params=params, headers=headers)
                    assert response.status_code == 200, response.text
                    pages.append(answer_of(response.content, reasons))
                    cursor = response.json()["next_cursor"]
            answers[name] = pages
    return answers


@pytest.mark.slow
def test_for_you_answers_are_those_of_the_code_before(tmp_path: Path) -> None:
    expected = json.loads(ANSWERS.read_text())
    assert len(expected["readers"]) == READERS
    reasons = {reason: i for i, reason in enumerate(expected["reasons"])}
    got = collect_answers(tmp_path, reasons)
    assert len(reasons) == len(expected["reasons"])  # no reason the code before never gave
    modes = {page["mode"] for pages in got.values() for page in pages}
    assert modes == {"for_you", "top_stories"}  # both paths are covered
    for name, pages in expected["readers"].items():
        for i, (want, have) in enumerate(zip(pages, got[name], strict=True)):
            assert have["stories"] == want["stories"], (name, i)
            assert have == want, (name, i)


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        raise SystemExit(__doc__)
    found: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        result = collect_answers(Path(tmp), found)
    ANSWERS.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{json.dumps(name)}: {json.dumps(pages, separators=(',', ':'), ensure_ascii=False)}"
             for name, pages in result.items()]  # one reader a line: a reviewable diff
    ANSWERS.write_text('{"generated_by": "tests/serving/test_foryou_answers.py --write",\n'
                       f'"reasons": {json.dumps(list(found), ensure_ascii=False)},\n"readers": {{\n'
                       + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {ANSWERS} ({len(result)} readers)")  # noqa: T201
