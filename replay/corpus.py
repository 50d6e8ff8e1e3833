"""Corpus loading, the publisher set and the deterministic release schedule of the replay site.

Everything here is a pure function of (corpus, seed, start, span, port): two runs with the same
inputs build equal objects. Randomness comes only from a seeded blake2b hash, never from ``hash()``,
``random`` or the line order of the corpus files.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

RELEASE_WINDOW_SECONDS = 90 * 60
"""Articles of one event are released within this long after the event starts."""
REPRINT_MIN_DELAY_SECONDS = 5 * 60
REPRINT_MAX_DELAY_SECONDS = 60 * 60
REPRINT_SHARE_WIRE = 0.35
"""Share of a wire's stories that get syndicated (1-3 reprints each)."""
REPRINT_SHARE_OTHER = 0.11
"""Share of other publishers' stories that get one reprint; with the wires about 15% overall."""
TRACKING_LINK_SHARE = 0.25
TRACKING_QUERY = "utm_source=rss&utm_medium=feed"
HOST_PREFIX = "127.0.1."

Edit = Literal["dateline", "headline", "footer"]
EDITS: tuple[Edit, ...] = ("dateline", "headline", "footer")


@dataclass(frozen=True, slots=True)
class CorpusArticle:
    """One line of a clustering corpus (``clustering/*.jsonl``)."""

    article_id: str
    title: str
    text: str
    language: str
    event: str
    section: str | None = None
    """The section the corpus files the article under (a line's ``section``, or Google News'
    ``category``), None when it says none: the replay's feeds and pages name only this one."""


CATEGORY_SECTIONS = {"b": "business", "t": "technology", "e": "entertainment", "m": "health"}
"""Google News 2014's categories (UCI News Aggregator) as sections."""


@dataclass(frozen=True, slots=True)
class Publisher:
    """One simulated publisher, served on its own loopback host."""

    publisher_id: str
    name: str
    host: str
    base_url: str
    region: str
    language: str
    tier: int
    authority: float
    paywalled: bool
    section: str | None
    """The section the publisher's one feed is registered under: None, as a replayed feed carries
    articles of every section (naming one section for all of them filed a church fire under
    health; issue 33). Each item names its own where the corpus gives one."""
    is_wire: bool
    opted_out: bool = False

    @property
    def domain(self) -> str:
        return self.base_url.removeprefix("http://")

    @property
    def rss_url(self) -> str:
        return f"{self.base_url}/feeds/rss.xml"

    @property
    def atom_url(self) -> str:
        return f"{self.base_url}/feeds/atom.xml"


@dataclass(frozen=True, slots=True)
class ReplayArticle:
    """One article as the replay publishes it: the ground truth for tests and benchmarks.

    ``url`` is the canonical page URL; ``feed_url`` is the link the feed gives, which for some
    articles carries tracking parameters.
    """

    article_id: str
    publisher_id: str
    url: str
    title: str
    text: str
    language: str
    published_at: datetime
    event: str
    reprint_of: str | None
    edits: tuple[str, ...]
    feed_url: str
    section: str | None = None
    """The section its feed item and page name (the corpus's, see :class:`CorpusArticle`), or None."""

    @property
    def slug(self) -> str:
        return self.url.rsplit("/", 1)[-1].removesuffix(".html")

    @property
    def root_id(self) -> str:
        """The id of the original story (itself unless this is a reprint)."""
        return self.reprint_of or self.article_id


def stable_hash(seed: int, *parts: str) -> int:
    """A 64-bit hash of the seed and parts that is the same in every process and Python version."""
    digest = hashlib.blake2b("\x1f".join([str(seed), *parts]).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def stable_unit(seed: int, *parts: str) -> float:
    """A number in [0, 1) drawn from ``stable_hash``."""
    return stable_hash(seed, *parts) / 2**64


def load_corpus(paths: Sequence[Path]) -> list[CorpusArticle]:
    """Read clustering JSONL files into articles (file order; callers must not rely on it).

    Raises:
        ValueError: a line lacks a required key, or an article id appears twice.
    """
    articles: list[CorpusArticle] = []
    seen: set[str] = set()
    for path in paths:
        with Path(path).open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                try:
                    named = row.get("section") or CATEGORY_SECTIONS.get(str(row.get("category")))
                    article = CorpusArticle(
                        article_id=str(row["id"]), title=str(row["title"]), text=str(row["text"]),
                        language=str(row["language"]), event=str(row["event"]),
                        section=str(named) if named else None,
                    )
                except KeyError as e:
                    raise ValueError(f"{path}:{line_no}: missing key {e}") from e
                if article.article_id in seen:
                    raise ValueError(f"{path}:{line_no}: duplicate article id {article.article_id!r}")
                seen.add(article.article_id)
                articles.append(article)
    return articles


def sample_corpus(articles: Iterable[CorpusArticle], *, seed: int, limit: int | None) -> list[CorpusArticle]:
    """Order articles by a seeded hash of their id and keep the first ``limit`` (all if None)."""
    ordered = sorted(articles, key=lambda a: (stable_hash(seed, "order", a.article_id), a.article_id))
    return ordered if limit is None else ordered[:limit]


# --- publishers -------------------------------------------------------------------------------

_Role = Literal["wire", "lead", "paper"]
# (language, region, role): the fixed shape of the publisher set; the seed picks names and numbers.
_TEMPLATE: tuple[tuple[str, str, _Role], ...] = (
    ("en", "US", "wire"), ("en", "US", "lead"), ("en", "US", "paper"), ("en", "US", "paper"),
    ("en", "GB", "wire"), ("en", "GB", "lead"), ("en", "GB", "paper"), ("en", "GB", "paper"),
    ("en", "SG", "lead"), ("en", "SG", "paper"), ("en", "SG", "paper"),
    ("ms", "MY", "lead"), ("ms", "MY", "paper"), ("ms", "MY", "paper"), ("ms", "MY", "paper"),
    ("zh", "SG", "lead"), ("zh", "SG", "paper"), ("zh", "SG", "paper"),
    ("zh", "CN", "lead"), ("zh", "CN", "paper"),
)
_PAYWALLED_REGIONS = frozenset({("en", "US"), ("en", "GB")})  # their "lead" paper is paywalled
_WIRE_NAMES = {
    "US": ("Harbor Wire", "Continental Newswire", "Meridian Press Wire"),
    "GB": ("Albion News Agency", "Thames Wire", "Commonwealth Press Service"),
}
_EN_PLACES = {
    "US": ("Prairie", "Bayview", "Granite", "Cedar Falls", "Lakeshore", "Summit", "Harbor"),
    "GB": ("Kingsbridge", "Westmoor", "Ashford", "Marlow", "Elmstead", "Thornbury"),
    "SG": ("Marina", "Orchard", "Tanjong", "Kallang", "Serangoon", "Straits Bay"),
}
_EN_MASTHEADS = ("Ledger", "Courier", "Gazette", "Chronicle", "Observer", "Herald", "Tribune",
                 "Sentinel", "Dispatch", "Examiner", "Record", "Standard")
_MS_FIRST = ("Berita", "Warta", "Suara", "Utusan", "Harian", "Kabar")
_MS_SECOND = ("Semenanjung", "Lembah", "Selatan", "Nusantara", "Pagi", "Timur", "Bayu")
_ZH_NAMES = {
    "SG": (("晨光日报", "chenguang-ribao"), ("狮城快报", "shicheng-kuaibao"), ("东岸时报", "dongan-shibao"),
           ("南风新闻", "nanfeng-xinwen"), ("海湾商报", "haiwan-shangbao")),
    "CN": (("华夏观察报", "huaxia-guanchabao"), ("长河晚报", "changhe-wanbao"), ("北辰时讯", "beichen-shixun"),
           ("江城日报", "jiangcheng-ribao")),
}
_EXTRA_REGIONS = {"de": "DE", "fr": "FR", "es": "ES", "it": "IT", "nl": "NL", "pt": "PT", "id": "ID",
                  "ja": "JP", "ko": "KR", "ru": "RU", "ar": "SA", "hi": "IN", "ta": "IN"}


def slugify(text: str, max_len: int = 60) -> str:
    """ASCII slug of a text: lowercase words joined by '-', empty for non-Latin scripts.

    >>> slugify("The Harbor Ledger")
    'the-harbor-ledger'
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_len].rstrip("-")


def _pick(seed: int, key: str, pool: Sequence[str], used: set[str]) -> str:
    """The first unused entry of ``pool`` in a seeded order."""
    for candidate in sorted(pool, key=lambda p: stable_hash(seed, key, p)):
        if candidate not in used:
            used.add(candidate)
            return candidate
    raise ValueError(f"name pool {key!r} exhausted")


def _publisher_name(seed: int, language: str, region: str, role: _Role, used: set[str]) -> tuple[str, str]:
    """A (name, slug) pair, unique within ``used``."""
    if role == "wire":
        name = _pick(seed, f"wire-{region}", _WIRE_NAMES[region], used)
        return name, slugify(name)
    if language == "en":
        combos = [f"The {p} {m}" for p in _EN_PLACES[region] for m in _EN_MASTHEADS]
        name = _pick(seed, f"en-{region}", combos, used)
        return name, slugify(name.removeprefix("The "))
    if language == "ms":
        combos = [f"{a} {b}" for a in _MS_FIRST for b in _MS_SECOND]
        name = _pick(seed, "ms", combos, used)
        return name, slugify(name)
    if language == "zh":
        by_name = dict(_ZH_NAMES[region])
        name = _pick(seed, f"zh-{region}", list(by_name), used)
        return name, by_name[name]
    combos = [f"{region} {m}" for m in _EN_MASTHEADS]
    name = _pick(seed, f"{language}-{region}", combos, used)
    return name, slugify(f"{language}-{name}")


def build_publishers(seed: int, port: int, languages: Iterable[str] = ()) -> tuple[Publisher, ...]:
    """The fixed set of about 20 publishers, plus two for each extra language in ``languages``.

    Publisher i (from 1) is served at ``127.0.1.i:port``.
    """
    shape = list(_TEMPLATE)
    covered = {lang for lang, _, _ in shape}
    for language in sorted(set(languages) - covered):
        region = _EXTRA_REGIONS.get(language, "ZZ")
        shape += [(language, region, "lead"), (language, region, "paper")]
    if len(shape) > 254:
        raise ValueError("too many publishers for one 127.0.1.x block")
    used: set[str] = set()
    publishers = []
    for i, (language, region, role) in enumerate(shape, 1):
        name, publisher_id = _publisher_name(seed, language, region, role, used)
        tier = 1 if role in ("wire", "lead") else 2
        u = stable_unit(seed, "authority", publisher_id)
        authority = round(0.8 + 0.18 * u if tier == 1 else 0.35 + 0.35 * u, 2)
        host = f"{HOST_PREFIX}{i}"
        publishers.append(Publisher(
            publisher_id=publisher_id, name=name, host=host, base_url=f"http://{host}:{port}",
            region=region, language=language, tier=tier, authority=authority,
            paywalled=role == "lead" and (language, region) in _PAYWALLED_REGIONS,
            section=None, is_wire=role == "wire",
        ))
    return tuple(publishers)


# --- schedule ---------------------------------------------------------------------------------

_DATELINE_CITIES = {"US": "NEW YORK", "GB": "LONDON", "SG": "SINGAPORE", "MY": "KUALA LUMPUR",
                    "CN": "BEIJING"}
_HEADLINE_PREFIX = {"en": "UPDATE: ", "ms": "TERKINI: ", "zh": "更新："}
_HEADLINE_SUFFIX = {"en": " – report", "ms": " – laporan", "zh": "（更新）"}


def _dateline(origin: Publisher) -> str:
    if origin.language == "zh":
        return f"【{origin.name}讯】"
    city = _DATELINE_CITIES.get(origin.region, origin.region)
    return f"{city} ({origin.name}) — "


def _footer(origin: Publisher, language: str) -> str:
    if language == "zh":
        return f"本文原载于{origin.name}。"
    if language == "ms":
        return f"Artikel ini asalnya diterbitkan oleh {origin.name}."
    return f"This article originally appeared in {origin.name}."


def _edit_headline(seed: int, reprint_id: str, title: str, language: str) -> str:
    """Reword a headline: a prefix, a suffix, or (for longer Latin headlines) one word dropped."""
    words = title.split()
    droppable = [i for i, w in enumerate(words) if i > 0 and len(w) > 3]
    choice = stable_hash(seed, "headline", reprint_id) % 3
    if choice == 2 and len(words) >= 5 and droppable:
        drop = droppable[stable_hash(seed, "drop", reprint_id) % len(droppable)]
        return " ".join(w for i, w in enumerate(words) if i != drop)
    if choice == 1:
        return title + _HEADLINE_SUFFIX.get(language, _HEADLINE_SUFFIX["en"])
    return _HEADLINE_PREFIX.get(language, _HEADLINE_PREFIX["en"]) + title


def _choose_edits(seed: int, reprint_id: str) -> tuple[str, ...]:
    """A non-empty subset of EDITS, in EDITS order."""
    mask = 1 + stable_hash(seed, "edits", reprint_id) % 7
    return tuple(edit for bit, edit in enumerate(EDITS) if mask & (1 << bit))


def _article_url(publisher: Publisher, article_id: str, title: str) -> str:
    # The id hash keeps slugs unique; the title part makes them look like real article paths.
    digest = hashlib.blake2b(article_id.encode("utf-8"), digest_size=5).hexdigest()
    words = slugify(" ".join(title.split()[:10]))
    slug = f"{words}-{digest}" if words else digest
    return f"{publisher.base_url}/articles/{slug}.html"


def _feed_url(seed: int, article_id: str, url: str) -> str:
    if stable_unit(seed, "tracking", article_id) < TRACKING_LINK_SHARE:
        return f"{url}?{TRACKING_QUERY}"
    return url


def build_schedule(
    corpus: Sequence[CorpusArticle],
    publishers: Sequence[Publisher],
    *,
    seed: int,
    start: datetime,
    span_hours: float = 6.0,
) -> tuple[ReplayArticle, ...]:
    """Assign articles to publishers and release times, and add syndicated reprints.

    Each event starts at a seeded offset within ``span_hours`` of ``start``; its articles follow
    within RELEASE_WINDOW_SECONDS (skewed early, so stories start as bursts). About 15% of
    articles get reprints at other publishers of their language, 5-60 minutes later, each with
    a non-empty set of edits.

    Args:
        corpus: the articles to publish (any order).
        publishers: from ``build_publishers``.
        seed: drives every choice.
        start: the simulated time the replay starts at (timezone-aware).
        span_hours: how long after ``start`` events keep starting.

    Returns:
        Originals and reprints, sorted by (published_at, article_id).

    Raises:
        ValueError: ``start`` is naive, ``span_hours`` is not positive, or a language has no publisher.
    """
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    if span_hours <= 0:
        raise ValueError(f"span_hours must be positive, got {span_hours}")
    start = start.astimezone(UTC)
    span_seconds = int(span_hours * 3600)
    by_language: dict[str, list[Publisher]] = {}
    for p in publishers:
        by_language.setdefault(p.language, []).append(p)
    by_id = {p.publisher_id: p for p in publishers}

    scheduled: list[ReplayArticle] = []
    for article in sample_corpus(corpus, seed=seed, limit=None):
        candidates = by_language.get(article.language)
        if not candidates:
            raise ValueError(f"no publisher for language {article.language!r} ({article.article_id})")
        publisher = candidates[stable_hash(seed, "publisher", article.article_id) % len(candidates)]
        event_offset = int(span_seconds * stable_unit(seed, "event", article.event))
        jitter = int(RELEASE_WINDOW_SECONDS * stable_unit(seed, "jitter", article.article_id) ** 2)
        url = _article_url(publisher, article.article_id, article.title)
        scheduled.append(ReplayArticle(
            article_id=article.article_id, publisher_id=publisher.publisher_id, url=url,
            title=article.title, text=article.text, language=article.language,
            published_at=start + timedelta(seconds=event_offset + jitter), event=article.event,
            reprint_of=None, edits=(), feed_url=_feed_url(seed, article.article_id, url), section=article.section,
        ))

    reprints: list[ReplayArticle] = []
    for original in scheduled:
        origin = by_id[original.publisher_id]
        share = REPRINT_SHARE_WIRE if origin.is_wire else REPRINT_SHARE_OTHER
        if stable_unit(seed, "reprint", original.article_id) >= share:
            continue
        targets = sorted(
            (p for p in by_language[original.language] if p is not origin and not p.is_wire),
            key=lambda p: stable_hash(seed, "target", original.article_id, p.publisher_id),
        )
        count = 1 + stable_hash(seed, "copies", original.article_id) % 3 if origin.is_wire else 1
        for k, target in enumerate(targets[:count], 1):
            reprints.append(_reprint(seed, original, origin, target, k))

    return tuple(sorted(scheduled + reprints, key=lambda a: (a.published_at, a.article_id)))


def _reprint(seed: int, original: ReplayArticle, origin: Publisher, target: Publisher, k: int) -> ReplayArticle:
    article_id = f"{original.article_id}~r{k}"
    edits = _choose_edits(seed, article_id)
    title, text = original.title, original.text
    if "dateline" in edits:
        text = _dateline(origin) + text
    if "headline" in edits:
        title = _edit_headline(seed, article_id, title, original.language)
    if "footer" in edits:
        text = f"{text}\n{_footer(origin, original.language)}"
    span = REPRINT_MAX_DELAY_SECONDS - REPRINT_MIN_DELAY_SECONDS
    delay = REPRINT_MIN_DELAY_SECONDS + stable_hash(seed, "delay", article_id) % (span + 1)
    url = _article_url(target, article_id, title)
    return ReplayArticle(
        article_id=article_id, publisher_id=target.publisher_id, url=url, title=title, text=text,
        language=original.language, published_at=original.published_at + timedelta(seconds=delay),
        event=original.event, reprint_of=original.article_id, edits=edits,
        feed_url=_feed_url(seed, article_id, url), section=original.section,
    )
