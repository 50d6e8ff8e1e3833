"""Ingest, step 4: fetch each new item's page and build its article row, never keeping the body.

The body is read in memory, turned into a snippet and signatures, and dropped: no article body is
ever written.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

import httpx

from tasks.errors import FetchError
from tasks.http import fetch_url
from tasks.ingest.plan import FeedJob
from tasks.ingest.robots import RobotsCache
from tasks.sections import guess_sections
from tasks.settings import IngestSettings
from transforms.canonical_url import article_id_from_url, canonicalize_url, choose_canonical_url
from transforms.embedding import embed_articles
from transforms.errors import TransformError
from transforms.extraction import charset_from_content_type, extract_page
from transforms.features import features_from_text
from transforms.feeds import FeedItem, is_plausible_published_at, truncate_title
from transforms.records import ArticleRow
from transforms.text import snippet_from_text
from warehouse.schemas import SNIPPET_MAX_CHARS

log = logging.getLogger(__name__)

NO_RESPONSE_KINDS = frozenset({"timeout", "connect", "protocol", "dns", "host_backoff"})
"""Failures with no HTTP response: the host's rate backs off, and a page failing so is retried."""


@dataclass(frozen=True, slots=True)
class PageError:
    """A new item whose page gave no article this run: recorded in the run report by ``error_kind``."""

    feed_id: str
    guid: str
    url: str
    error_kind: str
    error: str
    status: int | None = None
    """The page's HTTP status (200 when it answered but could not be read); None: no response."""

    @property
    def is_transient(self) -> bool:
        """A timeout, no response, 429 or 5xx: the item is polled again next run."""
        return self.error_kind in NO_RESPONSE_KINDS or (
            self.error_kind == "http_status" and self.status is not None
            and (self.status == 429 or self.status >= 500))


def no_link_error(job: FeedJob, item: FeedItem) -> PageError:
    """The page error of a feed item without a usable link (none, or not http(s)); not retried."""
    return PageError(job.feed_id, item.guid, "", "no_link",
                     f"item has no http(s) link, so no page to fetch: {item.title[:80]!r}")


def skipped_page(job: FeedJob, item: FeedItem) -> PageError:
    """A page not fetched because its host kept failing this run; retried next poll."""
    return PageError(job.feed_id, item.guid, item.link or "", "host_backoff",
                     "skipped: the host kept failing this run; retried next poll")


def page_status(outcome: ArticleRow | PageError) -> int | None:
    """The HTTP status an outcome stands for, for the host's rate (None: no response)."""
    return outcome.status if isinstance(outcome, PageError) else 200


def fetch_article(job: FeedJob, item: FeedItem, client: httpx.Client, robots: RobotsCache,
                  settings: IngestSettings, now: datetime) -> ArticleRow | PageError:
    """Fetch one item's page (robots.txt checked on every hop) and build its row; never raises for
    what the publisher sends."""
    url = item.link or ""
    try:
        # Every hop, redirects included, matched as sent: robots patterns are percent-encoded (RFC 9309 §2.2.2).
        fetched = fetch_url(client, url, settings, max_bytes=settings.max_page_bytes, allow=robots.check)
        if not 200 <= fetched.status < 300:
            raise FetchError("http_status", f"HTTP {fetched.status}", url=url, status=fetched.status)
        return build_article_row(job, item, fetched.body, fetched.final_url, now, embed=settings.embeddings,
                                 http_charset=charset_from_content_type(fetched.headers.get("content-type")))
    except FetchError as e:
        status = None if e.kind in NO_RESPONSE_KINDS else e.status or 200
        return PageError(job.feed_id, item.guid, url, e.kind, str(e), status)
    except (TransformError, ValueError, UnicodeError) as e:
        return PageError(job.feed_id, item.guid, url, "extract", f"{type(e).__name__}: {e}", 200)
    except Exception as e:  # noqa: BLE001 - per-item boundary: one strange page never fails the run
        log.exception("page_fetch_crashed url=%s", url)
        return PageError(job.feed_id, item.guid, url, "internal", f"{type(e).__name__}: {e}", 200)


def build_article_row(job: FeedJob, item: FeedItem, html: bytes, fetched_url: str, now: datetime, *,
                      embed: bool = True, http_charset: str | None = None) -> ArticleRow:
    """Extract one fetched page into an ``ArticleRow``: a capped headline, the snippet, signatures and
    (with ``embed``) the sentence embedding of the title and lede; never the body. ``http_charset`` is
    the response's Content-Type charset, which decides the page's decoding over its ``<meta>``."""
    page = extract_page(html, fetched_url, http_charset=http_charset,
                        languages=frozenset(job.site_languages) or None)
    canonical = canonicalize_url(choose_canonical_url(fetched_url, page.canonical_url, None))
    title = truncate_title(page.title or item.title or "")
    body = page.text or item.summary or ""
    # Declarations first (page, feed, publisher); a guess from the text only when none declares one,
    # and only among the site's languages: the stopword guess once made every Malay page Indonesian (#16).
    declared = None if page.is_language_guessed else page.language
    publisher_language = job.language if job.language and job.language != "und" else None
    language = declared or item.language or publisher_language or page.language or "und"
    embedding = embed_articles([(title, body, language)])[0] if embed else None
    section_guess = guess_sections([embedding])[0]  # the same call as `newsroom classify-sections` (issue 21)
    features = features_from_text(article_id_from_url(canonical), title, body, language, now, job.publisher_id,
                                  embedding=embedding)
    content_hash = hashlib.blake2b(f"{title}\n{body}".encode(), digest_size=16).hexdigest()
    published_at, implausible_published_at = _published_times(page.published_at, item.published_at, now)
    return ArticleRow(
        article_id=features.article_id, version=1, content_hash=content_hash,
        url=item.link or fetched_url, canonical_url=canonical, feed_id=job.feed_id,
        publisher_id=job.publisher_id, language=features.language, region=job.region, title=features.title,
        snippet=snippet_from_text(body, page.description or item.summary, SNIPPET_MAX_CHARS, title=title),
        image_url=page.image_url or item.image_url, author=page.author or item.author,
        section=page.section or job.section_hint or None, categories=tuple(item.categories),
        is_opinion=bool(page.is_opinion), published_at=published_at, first_seen_at=features.first_seen_at,
        simhash=features.simhash, minhash=tuple(features.minhash), terms=tuple(features.terms),
        term_weights=tuple(features.term_weights), entities=tuple(features.entities),
        embedding=None if features.embedding is None else tuple(features.embedding),
        signature_version=features.signature_version, implausible_published_at=implausible_published_at,
        section_guess=section_guess, embedding_model=None if features.embedding is None else features.embedding_model,
    )


def _published_times(page_says: datetime | None, feed_says: datetime | None,
                     now: datetime) -> tuple[datetime | None, datetime | None]:
    """``published_at``: the page's stated time, else the feed's, whichever is plausible (see
    :func:`~transforms.feeds.is_plausible_published_at`); ``implausible_published_at``: the first
    stated time when it is not, so the claim is kept without skewing lag or polling (#16)."""
    stated = [t for t in (page_says, feed_says) if t is not None]
    plausible = [t for t in stated if is_plausible_published_at(t, now)]
    implausible = stated[0] if stated and not is_plausible_published_at(stated[0], now) else None
    return (plausible[0] if plausible else None), implausible
