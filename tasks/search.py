"""The search index of the live window, built by rank & publish once per published version (issue 30).

Which stories: every story active in the last ``active_hours`` (48 by default), as rank's story
aggregates hold them. A story the story snapshot holds (some edition lists it, so its Full
Coverage opens) is indexed with every headline its articles carry, its publishers, its named
entities, sections and the editions listing it; any other active story with what the aggregates
keep of it (its representative headline and snippet, its publishers, its sections) and the
editions of its language. At most ``search_max_stories`` stories, the listed ones first, then the
most recently updated.

The index is built only when what it would hold changed (a digest of the documents, kept on the
pointer), validated by opening it as a replica does and finding a story by its own headline, and
published beside the pages (``warehouse.search_versions.publish_search_index``): a version and a
pointer moved after it, under ``pages/search/``. Versions more than ``search_keep_versions``
below the live one are deleted (nothing rebuilds a past index).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict, cast

import polars as pl

from tasks.aggregates.members import AggregateView
from tasks.settings import RankSettings
from transforms.pages import iso
from transforms.story_scores import story_sections as sections_frame
from warehouse.search_index import (
    SearchCardJson,
    SearchDocument,
    SearchIndex,
    SearchIndexError,
    SearchQueryError,
    build_search_index,
    documents_digest,
    parse_query,
)
from warehouse.search_versions import prune_search_versions, publish_search_index
from warehouse.snapshot_json import StoryJson
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

CARD_SOURCES = 4
MAX_ENTITIES = 20
"""A story's most named entities that are indexed (its members may name hundreds)."""
_CARD_FIELDS = ("story_id", "title", "snippet", "image_url", "language", "sections", "first_seen_at", "updated_at",
                "source_count", "article_count", "representative_id", "editions")


def _card_of_snapshot_story(story: StoryJson) -> SearchCardJson:
    """A result card from a story snapshot entry: the representative source first, then originals."""
    card = cast("SearchCardJson", {k: story[k] for k in _CARD_FIELDS if k in story})
    rep = story.get("representative_id")
    sources = sorted(story.get("sources") or [], key=lambda s: (s.get("article_id") != rep, bool(s.get("is_copy")),
                                                               str(s.get("first_seen_at")), str(s.get("article_id"))))
    card["sources"] = sources[:CARD_SOURCES]
    card["has_coverage"] = True
    return card


def _entities(members: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    counts: Counter[str] = Counter()
    for m in members:
        for entity in m.get("entities") or ():
            if isinstance(entity, str) and entity:
                counts[entity] += 1
    return tuple(e for e, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_ENTITIES])


def _editions_by_language(publishers: pl.DataFrame) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in publishers.filter(~pl.col("is_opted_out")).select("language", "region").unique().sort(
            "language", "region").iter_rows():
        language, region = row
        out.setdefault(str(language), []).append(f"{language}-{region}")
    return out


def snapshot_documents(stories: Mapping[str, Mapping[str, Any]],
                       entities_of: Callable[[str], tuple[str, ...]]) -> list[SearchDocument]:
    """The story snapshot's stories as search documents (every headline, publisher, section and
    edition listing it; ``entities_of`` gives a story's named entities)."""
    docs: list[SearchDocument] = []
    for sid, story in sorted(stories.items()):
        sources = story.get("sources") or []
        title = str(story.get("title") or "")
        headlines = tuple(dict.fromkeys(str(s["title"]) for s in sources if s.get("title") and s["title"] != title))
        publishers = tuple(dict.fromkeys((str(s["publisher_id"]), str(s.get("publisher") or s["publisher_id"]))
                                         for s in sources))
        docs.append(SearchDocument(
            story_id=sid, language=str(story.get("language") or ""), updated_at=str(story.get("updated_at") or ""),
            title=title, headlines=headlines, snippet=str(story.get("snippet") or ""), publishers=publishers,
            entities=entities_of(sid), sections=tuple(story.get("sections") or ()),
            editions=tuple(story.get("editions") or ()), card=_card_of_snapshot_story(story)))
    return docs


def search_documents(view: AggregateView, snapshot: Mapping[str, Any], now: datetime,
                     settings: RankSettings) -> list[SearchDocument]:
    """The live window as search documents (see the module docstring), listed stories first."""
    stories: Mapping[str, Mapping[str, Any]] = snapshot.get("stories") or {}
    view.members.prefetch(stories)
    docs = snapshot_documents(stories, lambda sid: _entities(view.members[sid]))
    room = settings.search_max_stories - len(docs)
    if room <= 0:
        return docs[:settings.search_max_stories]
    since = now - timedelta(hours=settings.active_hours)
    rest = (view.stories.filter((pl.col("last_seen_at") >= since) & (pl.col("last_seen_at") <= now)
                                & ~pl.col("story_id").is_in(list(stories)) & pl.col("rep_title").is_not_null())
            .sort(["last_seen_at", "story_id"], descending=[True, False]).head(room))
    if rest.is_empty():
        return docs
    publishers_frame = view.registry.publishers
    names = dict(zip(publishers_frame["publisher_id"].to_list(), publishers_frame["name"].to_list(), strict=True))
    regions = dict(zip(publishers_frame["publisher_id"].to_list(), publishers_frame["region"].to_list(), strict=True))
    editions = _editions_by_language(publishers_frame)
    sections: dict[str, list[str]] = {}
    for sid, section in sections_frame(rest).iter_rows():
        sections.setdefault(sid, []).append(section)
    for r in rest.to_dicts():
        sid = r["story_id"]
        pubs = tuple((str(p), str(names.get(p) or p)) for p in r["publishers"] or ())
        rep = {"article_id": r["rep_article_id"], "publisher_id": r["rep_publisher_id"],
               "publisher": names.get(r["rep_publisher_id"]) or r["rep_publisher_id"], "title": r["rep_title"],
               "url": r["rep_url"], "first_seen_at": iso(r["rep_first_seen_at"]), "is_copy": bool(r["rep_is_copy"]),
               "is_opinion": bool(r["rep_is_opinion"]), "region": regions.get(r["rep_publisher_id"])}
        language = str(r["language"] or r["rep_language"] or "")
        card = {"story_id": sid, "title": r["rep_title"], "snippet": r["rep_snippet"] or "",
                "image_url": r["rep_image_url"], "language": language, "sections": sections.get(sid, []),
                "first_seen_at": iso(r["first_seen_at"]), "updated_at": iso(r["last_seen_at"]),
                "source_count": len(pubs), "article_count": r["article_count"], "representative_id": r["rep_article_id"],
                "sources": [rep], "has_coverage": False}
        docs.append(SearchDocument(
            story_id=sid, language=language, updated_at=str(iso(r["last_seen_at"])), title=str(r["rep_title"]),
            snippet=str(r["rep_snippet"] or ""), publishers=pubs, sections=tuple(sections.get(sid, [])),
            editions=tuple(editions.get(language, [])), card=card))
    return docs


def index_problem(data: bytes, documents: Sequence[SearchDocument]) -> str | None:
    """Why these bytes must not go live, or None: they open as a replica opens them, hold every
    document, and find a story by its own headline."""
    try:
        index = SearchIndex.from_bytes(data)
    except SearchIndexError as e:
        return str(e)
    try:
        if index.documents != len({d.story_id for d in documents}):
            return f"{index.documents} documents, not {len(documents)}"
        probe = next((d for d in documents if d.title.strip()), None)
        if probe is None:
            return None
        try:
            query = parse_query(" ".join(probe.title.replace('"', " ").split()[:8]).lstrip("-") or "x")
        except SearchQueryError:
            return None
        if probe.story_id not in {h.story_id for h in index.search(query, limit=50, facets=False).hits}:
            return f"story {probe.story_id} is not found by its own headline"
        return None
    finally:
        index.close()


class SearchPublishSummary(TypedDict):
    """What :func:`publish_search` did (the rank summary's ``search``): the counts once it got as
    far as publishing."""

    published: bool
    reason: str
    version: NotRequired[int]
    documents: NotRequired[int]
    pruned: NotRequired[int]


def publish_search(store: ObjectStore, view: AggregateView, snapshot: Mapping[str, Any], now: datetime,
                   settings: RankSettings, stories_version: int | None) -> SearchPublishSummary:
    """Build and publish the search index when what it holds changed; returns a summary.

    A failure here leaves the live index (and every page) in place: it is logged and named in
    the summary, and the next cycle builds again.
    """
    try:
        docs = search_documents(view, snapshot, now, settings)
        as_of = str(iso(now))
        # Built only past the digest check: an unchanged window costs no build.
        result = publish_search_index(
            store, lambda: build_search_index(docs, {"as_of": as_of, "stories_version": stories_version}),
            digest=documents_digest(docs), as_of=as_of, documents=len(docs), now=now,
            validate=lambda data: index_problem(data, docs))
        pruned = prune_search_versions(store, keep=settings.search_keep_versions) if result.published else []
    except Exception as e:  # noqa: BLE001 - the pages are published; the index waits for the next cycle
        log.warning("search_index_not_published error=%s: %s", type(e).__name__, e)
        return {"published": False, "reason": f"error: {type(e).__name__}: {e}"}
    if result.reason.startswith("invalid"):
        log.warning("search_index_refused reason=%s", result.reason)
    return {"published": result.published, "version": result.version, "reason": result.reason,
            "documents": len(docs), "pruned": len(pruned)}
