"""JSON Feed 1.0/1.1 to records; feedparser 6.0 does not read it. Its text fields are plain text by the spec."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping

from transforms.canonical_url import absolute_http_url
from transforms.feeds import fields
from transforms.feeds.entry import FeedItem, ParsedFeed, empty_feed, finish_items, item_guid
from transforms.text import normalize_whitespace
from transforms.times import parse_stated_datetime


def parse_json_feed(body: bytes, url: str, max_items: int) -> ParsedFeed:
    """JSON Feed 1.0/1.1 (https://jsonfeed.org/version/1.1); other JSON comes back malformed."""
    try:
        data = json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return empty_feed(is_malformed=True, error=f"JSON document does not parse: {type(e).__name__}: {e}")
    if not isinstance(data, dict) or not (
        str(data.get("version", "")).startswith("https://jsonfeed.org/version/")
        or isinstance(data.get("items"), list)
    ):
        return empty_feed(is_malformed=True, error="JSON document is not a JSON Feed (no version, no items)")
    base = absolute_http_url(data.get("feed_url"), url) or url
    language = fields.normalize_language(data.get("language"))
    # JSON Feed 1.1: an item without authors has the feed's (1.1 "authors", 1.0 "author").
    feed_authors = _json_authors(data)
    items = [_json_item_to_item(raw, base, language, feed_authors) for raw in _list_of_dicts(data.get("items"))]
    hub_url = next(
        (u for u in (absolute_http_url(h.get("url"), base) for h in _list_of_dicts(data.get("hubs"))) if u),
        None,
    )
    return ParsedFeed(
        title=fields.truncate_title(_json_text(data.get("title"))) or None,
        link=absolute_http_url(data.get("home_page_url"), base),
        language=language,
        items=finish_items(items, max_items),
        hub_url=hub_url,
        self_url=absolute_http_url(data.get("feed_url"), url),
    )


def _json_item_to_item(raw: Mapping[str, object], base: str, feed_language: str | None,
                       feed_authors: tuple[str, ...] = ()) -> FeedItem:
    link = absolute_http_url(raw.get("url") or raw.get("external_url"), base)
    # JSON Feed titles, summaries and content_text are plain text by the spec: markup quoted in
    # them is text ("Why <div> soup is bad"); only content_html is HTML (#16).
    full_title = _json_text(raw.get("title"))
    summary = (_json_text(raw.get("summary")) or _json_text(raw.get("content_text"))
               or fields.plain_text(_str_or_none(raw.get("content_html")), keep_chars=fields.SUMMARY_MAX_CHARS))
    published = _str_or_none(raw.get("date_published"))
    updated_at = parse_stated_datetime(_str_or_none(raw.get("date_modified")))
    raw_id = raw.get("id")  # a string in the spec, but numbers are common
    tags = raw.get("tags")
    return FeedItem(
        guid=item_guid(None if raw_id is None else str(raw_id), link, full_title, published or "", summary),
        link=link,
        title=fields.truncate_title(full_title),
        summary=fields.truncate_text(summary, fields.SUMMARY_MAX_CHARS),
        published_at=parse_stated_datetime(published) or updated_at,
        updated_at=updated_at,
        categories=fields.unique_texts(
            fields.plain_line(t) for t in (tags if isinstance(tags, list) else []) if isinstance(t, str)
        ),
        author=fields.byline(_json_authors(raw) or feed_authors),
        image_url=absolute_http_url(raw.get("image") or raw.get("banner_image"), base),
        language=fields.normalize_language(raw.get("language")) or feed_language,
    )


def _json_text(value: object) -> str:
    """A JSON Feed plain-text field: character references decoded (feeds made from HTML sources
    carry ``&amp;``), whitespace collapsed, control characters dropped; never parsed as markup."""
    if not isinstance(value, str):
        return ""
    text = html.unescape(value[:fields.PLAIN_TEXT_MAX_INPUT_CHARS]) if "&" in value else value[:fields.PLAIN_TEXT_MAX_INPUT_CHARS]
    return normalize_whitespace(fields.CONTROL_CHARS_RE.sub(" ", text))


def _json_authors(obj: Mapping[str, object]) -> tuple[str, ...]:
    authors = _list_of_dicts(obj.get("authors")) or _list_of_dicts([obj.get("author")])  # 1.1, then 1.0
    return fields.unique_texts(fields.author_name(_json_text(a.get("name"))) for a in authors)


def _list_of_dicts(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
