"""Ingest, step 4's CPU half: one fetched page's article row, or the page error saying why there is none.

:func:`article_or_error` is what an article worker runs for each page (:mod:`tasks.ingest.budget`):
extraction, features, the embedding and the section guess, never keeping the body. This module and
what it imports stay free of Prefect and of the network, so a worker holds the extraction libraries
and the models only.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from tasks.ingest.budget import ArticleRequest
from tasks.ingest.feed_job import FeedJob
from tasks.sections import guess_sections
from transforms.canonical_url import article_id_from_url, canonicalize_url, choose_canonical_url
from transforms.embedding import embed_articles
from transforms.errors import TransformError
from transforms.extraction import extract_page
from transforms.features import features_from_text
from transforms.feeds import FeedItem, is_plausible_published_at, truncate_title
from transforms.records import ArticleRow
from transforms.text import snippet_from_text
from warehouse.schemas import SNIPPET_MAX_CHARS

log = logging.getLogger(__name__)

ARTICLE_WORK = f"{__name__}:article_or_error"
"""What the article workers run for each fetched page (:mod:`tasks.ingest.budget`)."""
ERROR_MAX_CHARS = 500
"""An error message quoting a page (a value in a ValueError) is cut to this: it is logged and reported."""
NO_RESPONSE_KINDS = frozenset({"timeout", "connect", "protocol", "dns", "host_backoff"})
"""Failures with no HTTP response: the host's rate backs off, and a page failing so is retried."""
MAX_CATEGORIES = 64
"""An item's categories kept in its row: each is capped by the feed parser, their number here (a feed
can list thousands on one item, and the row is stored)."""
BUDGET_KINDS = frozenset({"time_budget", "memory_budget", "worker_lost", "worker_start"})
"""Page errors of the per-article budget (:class:`tasks.errors.ArticleBudgetError`)."""
RETRIED_KINDS = frozenset({"worker_start"})
"""Failures of ours, not the page's: the page is retried next poll (an article worker did not start)."""


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
        """A timeout, no response, 429 or 5xx, or no article worker could start: the item is polled
        again next run."""
        return self.error_kind in NO_RESPONSE_KINDS or self.error_kind in RETRIED_KINDS or (
            self.error_kind == "http_status" and self.status is not None
            and (self.status == 429 or self.status >= 500))


def article_or_error(request: ArticleRequest) -> ArticleRow | PageError:
    """The row of one fetched page, or the page error saying why there is none (what an article
    worker runs for each request). A ``MemoryError`` propagates: the caller decides what it means."""
    job, item = request.job, request.item
    url = item.link or ""
    try:
        return build_article_row(job, item, request.html, request.fetched_url, request.now, embed=request.embed,
                                 http_charset=request.http_charset)
    except (TransformError, ValueError, UnicodeError) as e:
        return PageError(job.feed_id, item.guid, url, "extract", f"{type(e).__name__}: {e}"[:ERROR_MAX_CHARS], 200)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - per-item boundary: one strange page never fails the run
        log.exception("page_extract_crashed url=%s", url)
        return PageError(job.feed_id, item.guid, url, "internal", f"{type(e).__name__}: {e}"[:ERROR_MAX_CHARS], 200)


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
        section=page.section or job.section_hint or None, categories=tuple(item.categories[:MAX_CATEGORIES]),
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
