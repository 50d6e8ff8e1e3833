"""A replay that publishes in real time, for freshness measurements (issue 31).

The default site releases a corpus over hours of simulated time. This one publishes the way a news
day does, at 1x: each publisher posts on its own Poisson schedule (wires and leading papers many
times an hour, the rest a few), the stories of the corpus follow one another as news does, several
at a time, and a breaking event can be dropped in: many publishers reporting one event within
minutes (seed 003's earthquake, 300 sources in 15 minutes, at this site's scale).

Publishers come in three kinds, as on the web: ``hub`` publishers advertise the site's WebSub hub
in their feeds and so push; ``ping`` publishers advertise none but ping the aggregator when they post
(the caller sends the pings, from :meth:`LiveReplaySite.pings`); ``polled`` ones only wait to be
polled. Standard library only, like the rest of ``replay``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import urlsplit

from replay.corpus import CorpusArticle, Publisher, ReplayArticle, slugify, stable_hash, stable_unit
from replay.render import FEED_SIZE, render_atom, render_rss
from replay.site import ReplaySite, _Cached, _cached

PushKind = Literal["hub", "ping", "polled"]

CONCURRENT_STORIES = 10
"""Background stories told at once: the corpus's events are interleaved this many at a time, so a
background story grows by a few articles an hour per publisher, as most news does, and only the
burst looks like a burst."""


@dataclass(frozen=True, slots=True)
class LivePlan:
    """How the live site publishes.

    Attributes:
        start: When the schedule starts (the site's clock starts here; everything before the
            caller's "now" is history, already in the feeds at the first poll).
        end: When publishing stops.
        rates: Articles per hour, by publisher role (``wire``, ``lead``, ``paper``) and language;
            a key ``"<role>"`` applies to every language without its own ``"<role>:<language>"``.
        kinds: How each publisher role and region tells us it posted (``"<role>:<region>:<language>"``
            or ``"<role>:<region>:<language>:<n>"`` for the n-th such publisher, from 1); ``polled`` otherwise.
        burst_event: The corpus event published as a burst (its articles are left out of the background).
        burst_at: When the burst's first report is published.
        burst_offsets_seconds: When each burst article is published after the first (one per article,
            in corpus order), and ``burst_publishers`` who publishes it (``"<role>:<region>:<language>:<n>"``).
        left_out_events: Corpus events published by no one (near duplicates of the burst event).
        concurrent_stories: Background stories told at once.
    """

    start: datetime
    end: datetime
    rates: Mapping[str, float]
    kinds: Mapping[str, PushKind]
    burst_event: str | None = None
    burst_at: datetime | None = None
    burst_offsets_seconds: tuple[float, ...] = ()
    burst_publishers: tuple[str, ...] = ()
    left_out_events: tuple[str, ...] = ()
    concurrent_stories: int = CONCURRENT_STORIES


def publisher_label(publisher: Publisher, publishers: Sequence[Publisher]) -> str:
    """``"<role>:<region>:<language>:<n>"``: the n-th publisher of that role, region and language.

    Roles are ``wire`` (an agency), ``lead`` (the region's leading paper, tier 1) and ``paper``.
    """
    role = "wire" if publisher.is_wire else ("lead" if publisher.tier == 1 else "paper")
    same = [p for p in publishers if (p.is_wire, p.tier, p.region, p.language)
            == (publisher.is_wire, publisher.tier, publisher.region, publisher.language)]
    return f"{role}:{publisher.region}:{publisher.language}:{same.index(publisher) + 1}"


def kind_of(label: str, kinds: Mapping[str, PushKind]) -> PushKind:
    """A publisher's push kind from its label: an exact entry, else its ``role:region:language`` entry."""
    return kinds.get(label) or kinds.get(label.rsplit(":", 1)[0]) or "polled"


def rate_of(label: str, rates: Mapping[str, float]) -> float:
    role, _, language, _ = label.split(":")
    return float(rates.get(f"{role}:{language}", rates.get(role, 0.0)))


def _url(publisher: Publisher, article_id: str, title: str) -> str:
    digest = hashlib.blake2b(article_id.encode("utf-8"), digest_size=5).hexdigest()
    words = slugify(" ".join(title.split()[:10]))
    return f"{publisher.base_url}/articles/{words + '-' if words else ''}{digest}.html"


def _poisson_times(seed: int, key: str, per_hour: float, start: datetime, end: datetime) -> list[datetime]:
    """Seeded Poisson arrivals at ``per_hour`` between ``start`` and ``end``."""
    times: list[datetime] = []
    if per_hour <= 0:
        return times
    t, n = start, 0
    while True:
        u = max(stable_unit(seed, "arrival", key, str(n)), 1e-12)
        t += timedelta(seconds=-math.log(u) * 3600 / per_hour)
        n += 1
        if t >= end:
            return times
        times.append(t)


def _story_order(seed: int, articles: Sequence[CorpusArticle], concurrent: int) -> list[CorpusArticle]:
    """The corpus as a news stream: events in a seeded order, ``concurrent`` told at a time, each
    event's articles in a seeded order."""
    events: dict[str, list[CorpusArticle]] = {}
    for a in sorted(articles, key=lambda a: stable_hash(seed, "in-event", a.article_id)):
        events.setdefault(a.event, []).append(a)
    queue = sorted(events, key=lambda e: stable_hash(seed, "story", e))
    telling: list[list[CorpusArticle]] = []
    out: list[CorpusArticle] = []
    while queue or telling:
        while queue and len(telling) < concurrent:
            telling.append(list(events[queue.pop(0)]))
        for story in list(telling):
            out.append(story.pop(0))
            if not story:
                telling.remove(story)
    return out


def build_live_schedule(corpus: Sequence[CorpusArticle], publishers: Sequence[Publisher], plan: LivePlan, *,
                        seed: int) -> tuple[ReplayArticle, ...]:
    """Each publisher's posting times, filled with the corpus's stories in order, plus the burst.

    A language's posting times (every publisher of it, merged) take its background articles one
    after the other, so the articles of one event come out close together from several publishers.
    Posting times left when a language's articles run out stay empty.

    Raises:
        ValueError: a burst publisher label names no publisher, or the offsets and publishers differ in number.
    """
    labels = {publisher_label(p, publishers): p for p in publishers}
    skipped = {plan.burst_event, *plan.left_out_events} - {None}
    scheduled: list[ReplayArticle] = []
    for language in sorted({p.language for p in publishers}):
        slots = sorted((t, p.publisher_id) for label, p in labels.items() if p.language == language
                       for t in _poisson_times(seed, p.publisher_id, rate_of(label, plan.rates), plan.start, plan.end))
        stream = _story_order(seed, [a for a in corpus if a.language == language and a.event not in skipped],
                              plan.concurrent_stories)
        by_id = {p.publisher_id: p for p in publishers}
        for (at, publisher_id), article in zip(slots, stream, strict=False):
            url = _url(by_id[publisher_id], article.article_id, article.title)
            scheduled.append(ReplayArticle(article.article_id, publisher_id, url, article.title, article.text,
                                           article.language, at, article.event, None, (), url))
    if plan.burst_event is not None and plan.burst_at is not None:
        burst = sorted((a for a in corpus if a.event == plan.burst_event), key=lambda a: a.article_id)
        if not len(plan.burst_offsets_seconds) == len(plan.burst_publishers) <= len(burst):
            raise ValueError("one burst offset and publisher per burst article, at most as many as the event has")
        for offset, label, article in zip(plan.burst_offsets_seconds, plan.burst_publishers, burst, strict=False):
            if label not in labels:
                raise ValueError(f"no publisher {label!r}; known: {sorted(labels)}")
            publisher = labels[label]
            url = _url(publisher, article.article_id, article.title)
            scheduled.append(ReplayArticle(article.article_id, publisher.publisher_id, url, article.title,
                                           article.text, article.language,
                                           plan.burst_at + timedelta(seconds=offset), article.event, None, (), url))
    return tuple(sorted(scheduled, key=lambda a: (a.published_at, a.article_id)))


class LiveReplaySite(ReplaySite):
    """The replay site on a :class:`LivePlan`: real-time publishing, a burst, and only ``hub``
    publishers advertising (and served by) the WebSub hub. Its clock runs at ``speed`` from the
    wall clock's time when it starts, so what the plan put before then is already published."""

    def __init__(self, corpus: Sequence[CorpusArticle], plan: LivePlan, *, seed: int = 7, speed: float = 1.0) -> None:
        super().__init__(corpus, seed=seed, start=plan.start, speed=speed)
        self.plan = plan
        self._live_corpus = tuple(corpus)
        self._kinds: dict[str, PushKind] = {}

    def _install_schedule(self, port: int, publishers: tuple[Publisher, ...]) -> None:
        super()._install_schedule(port, publishers)
        articles = build_live_schedule(self._live_corpus, publishers, self.plan, seed=self._seed)
        by_publisher: dict[str, list[ReplayArticle]] = {p.publisher_id: [] for p in publishers}
        for article in articles:
            by_publisher[article.publisher_id].append(article)
        host_of = {p.publisher_id: p.host for p in publishers}
        self._articles = articles
        self._by_publisher = by_publisher
        self._times = {pid: [a.published_at for a in items] for pid, items in by_publisher.items()}
        self._by_path = {(host_of[a.publisher_id], urlsplit(a.url).path): a for a in articles}
        self._cache = {}
        self._kinds = {p.publisher_id: kind_of(publisher_label(p, publishers), self.plan.kinds) for p in publishers}

    def start(self, port: int = 0) -> None:
        super().start(port)
        self.set_clock(max(self.now, datetime.now(UTC)))

    def kind(self, publisher_id: str) -> PushKind:
        """How the publisher tells the aggregator it posted: ``hub``, ``ping`` or ``polled``."""
        return self._kinds[publisher_id]

    def pings(self) -> list[tuple[datetime, str]]:
        """(when, publisher id) of every post of a ``ping`` publisher: when it pings the aggregator."""
        return [(a.published_at, a.publisher_id) for a in self.articles if self.kind(a.publisher_id) == "ping"]

    def _feed(self, publisher: Publisher, fmt: Literal["rss", "atom"]) -> _Cached:
        if self.kind(publisher.publisher_id) == "hub":
            return super()._feed(publisher, fmt)
        released = self.released(publisher.publisher_id)
        key = ("feed-nohub", fmt, publisher.publisher_id, str(len(released)))
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        newest = list(reversed(released[-FEED_SIZE:]))
        updated_at = newest[0].published_at if newest else self.plan.start
        body = (render_rss if fmt == "rss" else render_atom)(publisher, newest, updated_at, hub_url=None)
        doc = _cached(body, updated_at, f"application/{fmt}+xml; charset=utf-8")
        with self._lock:
            self._cache[key] = doc
        return doc

    def _hub_content(self, topic: str) -> tuple[bytes, str, int] | None:
        found = self._topics.get(topic)
        if found is None or self.kind(found[0].publisher_id) != "hub":
            return None  # the hub serves only the feeds that advertise it
        return super()._hub_content(topic)
