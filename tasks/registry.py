"""The publisher registry: import from CSV or OPML, export as OPML."""

from __future__ import annotations

import csv
import hashlib
import io
import ipaddress
import math
import re
import unicodedata
import xml.etree.ElementTree as ET
import xml.sax
import xml.sax.handler
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast
from urllib.parse import urlsplit

import defusedxml.sax
from defusedxml import DefusedXmlException

from tasks.errors import RegistryImportError, RowError
from tasks.http import is_fetchable_address
from transforms.canonical_url import normalize_feed_url, normalize_host
from transforms.feeds import normalize_language
from warehouse import layout
from warehouse.schemas import FEEDS_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import read_table, rows_to_table, write_table

_TRUE = frozenset({"1", "true", "yes", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "n", "f"})
TIERS = (1, 2, 3)
MAX_FEED_URL_CHARS = 2048
MAX_NAME_CHARS = 200
CSV_COLUMNS = ("publisher_id", "name", "domain", "region", "language", "tier", "authority", "paywalled",
               "opted_out", "feed_url", "section", "kind")
"""The columns read; ``publisher_id`` is required, others default. Any other column is ignored."""
MAX_CSV_COLUMNS = 100
"""A header with more columns is refused before any row is read: twelve are read, a spreadsheet's
export adds a few, and every record is checked against the header's width."""
FEED_KINDS = ("rss", "atom", "json", "sitemap")
"""What a feed's ``kind`` (OPML ``type``) may say: RSS, Atom, JSON Feed or a Google News sitemap. It
is a hint (the parser sniffs the body), but an unknown one is a typo or a format we cannot read."""
# Unicode's explicit directional formatting characters (UAX #9 §2.1: embeddings, overrides,
# isolates): they reorder the text around them wherever it is shown, so a name holding one can
# display as another ("Trojan Source", CVE-2021-42574). Implicit marks (LRM, RLM, ALM) stay allowed.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_PUBLISHER_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# A BCP 47 tag, sloppily spelled as publishers write it ("en", "en-GB", "en_GB", "EN US", "fil").
_LANGUAGE_TAG_RE = re.compile(r"[A-Za-z]{2,3}(?:[-_ ][A-Za-z0-9]{1,8})*")
_REGION_RE = re.compile(r"[A-Za-z]{2}")
_PUBLISHER_FIELDS = ("name", "domain", "region", "language", "tier", "authority", "is_paywalled", "is_opted_out")


class PublisherRow(TypedDict):
    """One publisher of the registry, a ``PUBLISHERS_SCHEMA`` row."""

    publisher_id: str
    name: str
    domain: str | None
    region: str | None
    language: str | None
    tier: int
    authority: float
    is_paywalled: bool
    is_opted_out: bool


class FeedRow(TypedDict):
    """One feed of the registry, a ``FEEDS_SCHEMA`` row."""

    feed_id: str
    url: str
    publisher_id: str
    kind: str | None
    section_hint: str | None


@dataclass(frozen=True, slots=True)
class Registry:
    """The publishers (by id) and their feeds, as stored under ``registry/``."""

    publishers: dict[str, PublisherRow]
    feeds: list[FeedRow]

    def read_feeds(self) -> list[FeedRow]:
        """The feeds we read: every feed of a registered publisher that has not opted out."""
        return [f for f in self.feeds
                if (p := self.publishers.get(f["publisher_id"])) is not None and not p["is_opted_out"]]


@dataclass(frozen=True, slots=True)
class ParsedRegistry:
    """What a registry file holds: its valid rows (with the line each came from) and its invalid ones."""

    registry: Registry
    errors: tuple[RowError, ...]
    feed_lines: dict[str, int]

    def or_raise(self) -> Registry:
        if self.errors:
            raise RegistryImportError(self.errors)
        return self.registry


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The registry after an import, and the rows skipped with ``skip_invalid``."""

    registry: Registry
    imported_publishers: int
    imported_feeds: int
    skipped: tuple[RowError, ...]


def feed_id_for(url: str) -> str:
    """A feed's id: a hash of its URL as stored (:func:`transforms.canonical_url.normalize_feed_url`'s form)."""
    return hashlib.blake2b(url.strip().encode(), digest_size=8).hexdigest()


def control_character_problem(text: str) -> str | None:
    """Which character makes ``text`` unfit to show as a name, or None.

    Refused: C0 and C1 controls and DEL (category Cc), line and paragraph separators, and the
    bidirectional embeddings, overrides and isolates (:data:`_BIDI_CONTROLS`).

    >>> control_character_problem("Herald"), control_character_problem("Her\u202eald")
    (None, 'holds the control character U+202E (RIGHT-TO-LEFT OVERRIDE)')
    """
    for ch in text:
        if ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            name = unicodedata.name(ch, "a control character")
            return f"holds the control character U+{ord(ch):04X} ({name})"
    return None


def _flag(name: str, value: str | None, problems: list[str]) -> bool:
    text = (value or "").strip().lower()
    if text and text not in _TRUE | _FALSE:
        problems.append(f"{name} must be true or false, got {value!r}")
    return text in _TRUE


def _authority(publisher_id: str, value: str | None, problems: list[str]) -> float:
    """A publisher's authority: a finite number in [0, 1] (0.5 when the row leaves it blank)."""
    text = (value or "").strip()
    if not text:
        return 0.5
    try:
        authority = float(text)
    except ValueError:
        authority = math.nan
    if not (math.isfinite(authority) and 0.0 <= authority <= 1.0):
        problems.append(f"publisher {publisher_id}: authority must be a number in [0, 1], got {value!r}")
        return 0.5
    return authority


def _tier(value: str | None, problems: list[str]) -> int:
    text = (value or "").strip()
    if not text:
        return 2
    if text not in {str(t) for t in TIERS}:
        problems.append(f"tier must be one of {', '.join(map(str, TIERS))}, got {value!r}")
        return 2
    return int(text)


def _language(value: str | None, problems: list[str]) -> str:
    text = (value or "").strip()
    if not text:
        return "und"
    if not _LANGUAGE_TAG_RE.fullmatch(text):
        problems.append(f"language must be a language tag such as en, en-GB or fil, got {value!r}")
        return "und"
    return normalize_language(text) or "und"


def _region(value: str | None, problems: list[str]) -> str:
    text = (value or "").strip()
    if text and not _REGION_RE.fullmatch(text):
        problems.append(f"region must be a two-letter country code such as GB, got {value!r}")
    return text.upper() if _REGION_RE.fullmatch(text) else "ZZ"


def _domain(value: str | None, problems: list[str]) -> str:
    """The publisher's site: a host, with a port when it is not the default (``127.0.1.5:8080``)."""
    text = (value or "").strip().lower()
    if not text:
        return ""
    try:
        parts = urlsplit(f"//{text}")
        _ = parts.port
        if not parts.hostname or parts.path or parts.query or parts.fragment or "@" in parts.netloc:
            raise ValueError(f"not a host: {text[:120]!r}")
        normalize_host(parts.hostname)
    except ValueError as e:
        problems.append(f"domain: {e}")
        return ""
    return text


def _text(name: str, value: str | None, problems: list[str]) -> str:
    text = (value or "").strip()
    if len(text) > MAX_NAME_CHARS:
        problems.append(f"{name} is longer than {MAX_NAME_CHARS} characters")
    elif problem := control_character_problem(text):
        problems.append(f"{name} {problem}")
    return text


def _kind(value: str | None, problems: list[str]) -> str:
    text = (value or "").strip().lower()
    if not text:
        return "rss"
    if text not in FEED_KINDS:
        problems.append(f"kind must be one of {', '.join(FEED_KINDS)}, got {(value or '')[:40]!r}")
        return "rss"
    return text


def feed_url_problem(url: str, private_networks: Sequence[str] | None = None) -> str | None:
    """Why ``url`` cannot be a feed's address, or None when it can.

    A feed is an absolute http(s) URL with a valid host. With ``private_networks`` given (the ingest
    setting's list: empty unless private addresses are allowed), an IP-literal or ``localhost`` host
    outside the public internet and those networks is refused too, by the rule every fetch follows
    (:func:`tasks.http.is_fetchable_address`); an IPv4 address in any form the resolver reads
    (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``) is checked as the address it is. A
    name is checked when it is fetched, after DNS, as every fetch is.

    >>> feed_url_problem("https://news.example/rss"), feed_url_problem("ftp://news.example/rss")
    (None, "feed_url must be an http(s) URL, got scheme 'ftp'")
    >>> feed_url_problem("http://0x0a000007/rss", private_networks=())
    'feed_url points at a non-public address (10.0.0.7); set NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES to allow it'
    """
    if len(url) > MAX_FEED_URL_CHARS:
        return f"feed_url is longer than {MAX_FEED_URL_CHARS} characters"
    if problem := control_character_problem(url):
        return f"feed_url {problem}"
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port
    except ValueError as e:
        return f"feed_url is not a URL: {e}"
    if not parts.scheme:
        return f"feed_url is not an absolute URL: {url[:80]!r}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"feed_url must be an http(s) URL, got scheme {parts.scheme.lower()[:20]!r}"
    if not host:
        return "feed_url has no host"
    try:
        host = normalize_host(host)
    except ValueError as e:
        return f"feed_url: {e}"
    if private_networks is None:
        return None
    address = "127.0.0.1" if host == "localhost" or host.endswith(".localhost") else host
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None  # a name: checked after DNS, when it is fetched
    if not is_fetchable_address(str(ip), private_networks):
        return (f"feed_url points at a non-public address ({host}); "
                "set NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES to allow it")
    return None


def _publisher_row(raw: Mapping[str, str | None], problems: list[str]) -> PublisherRow:
    publisher_id = (raw.get("publisher_id") or raw.get("publisher") or "").strip()
    if not publisher_id:
        problems.append("publisher_id is empty")
    elif not _PUBLISHER_ID_RE.fullmatch(publisher_id):
        problems.append(f"publisher_id must be 1-100 letters, digits, '.', '_' or '-', got {publisher_id[:120]!r}")
    return {
        "publisher_id": publisher_id,
        "name": _text("name", raw.get("name"), problems) or publisher_id,
        "domain": _domain(raw.get("domain"), problems),
        "region": _region(raw.get("region"), problems),
        "language": _language(raw.get("language"), problems),
        "tier": _tier(raw.get("tier"), problems),
        "authority": _authority(publisher_id, raw.get("authority"), problems),
        "is_paywalled": _flag("paywalled", raw.get("paywalled"), problems),
        "is_opted_out": _flag("opted_out", raw.get("opted_out"), problems),
    }


def _feed_row(raw: Mapping[str, str | None], publisher_id: str, private_networks: Sequence[str] | None,
              problems: list[str]) -> FeedRow | None:
    url = (raw.get("feed_url") or raw.get("xmlUrl") or "").strip()
    if not url:
        return None
    problem = feed_url_problem(url, private_networks)
    if problem:
        problems.append(problem)
        return None
    # One feed, one spelling: HTTP://CASE.example:80/feed is http://case.example/feed, so it is
    # stored, keyed and checked for duplicates as that (an id already stored under another
    # spelling is kept by import_publishers).
    try:
        url = normalize_feed_url(url)
    except ValueError as e:  # feed_url_problem checked the same parts; kept so no row can raise
        problems.append(f"feed_url: {e}")
        return None
    return {"feed_id": feed_id_for(url), "url": url, "publisher_id": publisher_id,
            "kind": _kind(raw.get("kind") or raw.get("type"), problems),
            "section_hint": _text("section", raw.get("section"), problems)}


class _RowCollector:
    """Validates rows one by one and across rows: one publisher, one set of fields; one feed, one publisher."""

    def __init__(self, private_networks: Sequence[str] | None) -> None:
        self.private_networks = private_networks
        self.publishers: dict[str, PublisherRow] = {}
        self.publisher_lines: dict[str, int] = {}
        self.feeds: dict[str, FeedRow] = {}
        self.feed_lines: dict[str, int] = {}
        self.errors: list[RowError] = []

    def add(self, line: int, raw: Mapping[str, str | None]) -> None:
        problems: list[str] = []
        publisher = _publisher_row(raw, problems)
        feed = _feed_row(raw, publisher["publisher_id"], self.private_networks, problems)
        publisher_id = publisher["publisher_id"]
        known = self.publishers.get(publisher_id)
        if known is not None and not problems:
            differing = [f for f in _PUBLISHER_FIELDS if known[f] != publisher[f]]
            if differing:
                problems.append(f"publisher {publisher_id} has other {', '.join(differing)} than on line "
                                f"{self.publisher_lines[publisher_id]} (one publisher, one set of fields)")
        if feed is not None and feed["feed_id"] in self.feeds and not problems:
            first = self.feeds[feed["feed_id"]]
            owner = "" if first["publisher_id"] == publisher_id else f" of publisher {first['publisher_id']}"
            problems.append(f"feed {feed['url'][:120]} is already the feed{owner} on line {self.feed_lines[feed['feed_id']]}")
        if problems:
            self.errors.extend(RowError(line, p) for p in problems)
            return
        self.publishers.setdefault(publisher_id, publisher)
        self.publisher_lines.setdefault(publisher_id, line)
        if feed is not None:
            self.feeds[feed["feed_id"]] = feed
            self.feed_lines[feed["feed_id"]] = line

    def result(self) -> ParsedRegistry:
        if not self.publishers and not self.errors:
            self.errors.append(RowError(1, "no publisher rows"))
        registry = Registry(self.publishers, sorted(self.feeds.values(), key=lambda f: f["feed_id"]))
        return ParsedRegistry(registry, tuple(sorted(self.errors, key=lambda e: e.line)), self.feed_lines)


def read_publishers_csv(text: str, *, private_networks: Sequence[str] | None = None) -> ParsedRegistry:
    """Validate every record of a registry CSV (see :data:`CSV_COLUMNS`); line numbers are 1-based.

    A UTF-8 byte-order mark is dropped. A header without ``publisher_id`` (a ``;``- or tab-separated
    file reads as one column) and records with more or fewer fields than the header are errors.
    """
    text = text.removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""))
    collector = _RowCollector(private_networks)
    try:
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            return ParsedRegistry(Registry({}, []), (RowError(1, "empty file: expected a header row "
                                                              f"({','.join(CSV_COLUMNS[:-1])})"),), {})
        if len(header) > MAX_CSV_COLUMNS:
            return ParsedRegistry(Registry({}, []), (RowError(1, f"the header has {len(header):,} columns; at most "
                                                              f"{MAX_CSV_COLUMNS} are read ({','.join(CSV_COLUMNS)})"),), {})
        columns = [h.strip().lower() for h in header]
        header_errors = []
        if "publisher_id" not in columns and "publisher" not in columns:
            separator = next((s for s in (";", "\t", "|") if s in header[0]), None)
            hint = (f"; the file looks {separator!r}-separated: separate columns with ','" if separator and
                    len(header) == 1 else "")
            header_errors.append(RowError(1, f"no publisher_id column (columns: {', '.join(columns)[:200]}){hint}"))
        duplicated = sorted(c for c, n in Counter(columns).items() if c and n > 1)
        if duplicated:
            header_errors.append(RowError(1, f"columns named twice: {', '.join(duplicated)}"))
        if header_errors:
            return ParsedRegistry(Registry({}, []), tuple(header_errors), {})
        line = reader.line_num + 1
        for record in reader:
            start, line = line, reader.line_num + 1
            if not record or not any(field.strip() for field in record):
                continue
            if len(record) != len(columns):
                collector.errors.append(RowError(start, f"{len(record)} fields, the header has {len(columns)}"))
                continue
            collector.add(start, dict(zip(columns, record, strict=True)))
    except csv.Error as e:
        collector.errors.append(RowError(reader.line_num, f"not CSV: {e}"))
    return collector.result()


def parse_publishers_csv(text: str) -> Registry:
    """Rows of ``publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section``.

    Raises:
        RegistryImportError: any row is invalid (every row's error, with its line).
    """
    return read_publishers_csv(text).or_raise()


class _OutlineReader(xml.sax.handler.ContentHandler):
    def __init__(self, collector: _RowCollector) -> None:
        super().__init__()
        self.collector = collector

    def startElement(self, name: str, attrs: Any) -> None:  # noqa: N802 (SAX's naming)
        url = (attrs.get("xmlUrl") or "").strip()
        if name != "outline" or not url:
            return  # a folder outline, or the head
        raw = {k: attrs.get(k) for k in attrs.getNames()}
        raw.setdefault("publisher_id", raw.get("publisher") or feed_id_for(url))
        raw.setdefault("name", raw.get("title") or raw.get("text") or raw["publisher_id"])
        raw["feed_url"] = url
        self.collector.add(self._locator.getLineNumber() if self._locator else 0, raw)


def read_publishers_opml(text: str, *, private_networks: Sequence[str] | None = None) -> ParsedRegistry:
    """OPML outlines with ``xmlUrl``; newsroom attributes (region, language, tier, ...) are optional.

    Parsed with defusedxml (no entities, no DTD fetches); an outline's line is where it starts.
    """
    collector = _RowCollector(private_networks)
    try:
        defusedxml.sax.parseString(text.removeprefix("\ufeff").encode("utf-8"), _OutlineReader(collector))
    except xml.sax.SAXParseException as e:
        collector.errors.append(RowError(e.getLineNumber(), f"not well-formed OPML: {e.getMessage()}"))
    except DefusedXmlException as e:
        collector.errors.append(RowError(1, f"OPML uses forbidden XML features: {type(e).__name__}"))
    return collector.result()


def read_registry_file(path: Path, *, private_networks: Sequence[str] | None = None) -> ParsedRegistry:
    """A CSV or OPML registry file, validated (OPML when its first character is ``<``)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        return ParsedRegistry(Registry({}, []), (RowError(line, f"not UTF-8 text: {e.reason} at byte {e.start}"),), {})
    if text.lstrip().startswith("<"):
        return read_publishers_opml(text, private_networks=private_networks)
    return read_publishers_csv(text, private_networks=private_networks)


def import_publishers(store: ObjectStore, path: Path, *, skip_invalid: bool = False,
                      private_networks: Sequence[str] | None = None) -> ImportResult:
    """Merge a CSV or OPML file into the registry (rows with the same id are replaced).

    Every row is validated first. Any invalid row means nothing is written, unless ``skip_invalid``:
    then the valid rows are merged and the invalid ones are returned in ``skipped``. A feed already
    registered to another publisher is an invalid row (one feed, one publisher).

    Args:
        store: The object store.
        path: A CSV (see :data:`CSV_COLUMNS`) or OPML file, UTF-8 (a byte-order mark is fine).
        skip_invalid: Import the valid rows even when some are invalid.
        private_networks: Refuse feeds on IP-literal hosts outside the public internet and these
            networks (the CLI passes the ingest setting); None checks no address here (every
            fetch is checked after DNS anyway).

    Raises:
        RegistryImportError: a row is invalid and ``skip_invalid`` is off; nothing was written.
        OSError: the file cannot be read.
    """
    parsed = read_registry_file(path, private_networks=private_networks)
    current = load_registry(store)
    owners = {f["feed_id"]: f["publisher_id"] for f in current.feeds}
    stored_ids = _stored_feed_ids(current.feeds)
    errors = list(parsed.errors)
    feeds = []
    for parsed_feed in parsed.registry.feeds:
        # A feed stored before URLs were normalised keeps its id (its state, lease and articles
        # are keyed on it); its URL is stored in the normal form from now on.
        feed = {**parsed_feed, "feed_id": stored_ids.get(parsed_feed["url"], parsed_feed["feed_id"])}
        owner = owners.get(feed["feed_id"])
        if owner is not None and owner != feed["publisher_id"]:
            errors.append(RowError(parsed.feed_lines.get(parsed_feed["feed_id"], 0),
                                   f"feed {feed['url'][:120]} is already registered to publisher {owner}"))
        else:
            feeds.append(feed)
    errors.sort(key=lambda e: e.line)
    if errors and not skip_invalid:
        raise RegistryImportError(errors, path=str(path))
    # A publisher whose every feed was refused above is not imported either.
    refused = {f["publisher_id"] for f in parsed.registry.feeds} - {f["publisher_id"] for f in feeds}
    incoming = {pid: row for pid, row in parsed.registry.publishers.items() if pid not in refused}
    publishers = {**current.publishers, **incoming}
    merged = {f["feed_id"]: f for f in current.feeds} | {f["feed_id"]: f for f in feeds}
    registry = Registry(publishers, sorted(merged.values(), key=lambda f: f["feed_id"]))
    if incoming or feeds:
        write_table(store, layout.PUBLISHERS_KEY,
                    rows_to_table(sorted(publishers.values(), key=lambda p: p["publisher_id"]), PUBLISHERS_SCHEMA),
                    PUBLISHERS_SCHEMA)
        write_table(store, layout.FEEDS_KEY, rows_to_table(registry.feeds, FEEDS_SCHEMA), FEEDS_SCHEMA)
    return ImportResult(registry, len(incoming), len(feeds), tuple(errors))


def _stored_feed_ids(feeds: Sequence[FeedRow]) -> dict[str, str]:
    """The id each stored feed has, by its normalised URL.

    When spellings once made several feeds of one URL, the one stored under the normal form wins,
    else the smallest id; the others stay as they are (an operator removes them).
    """
    ids: dict[str, str] = {}
    for feed in sorted(feeds, key=lambda f: str(f["feed_id"])):
        try:
            url = normalize_feed_url(str(feed["url"]))
        except ValueError:
            continue  # stored before URLs were checked: no spelling of a valid URL matches it
        if feed["feed_id"] == feed_id_for(url):
            ids[url] = str(feed["feed_id"])
        else:
            ids.setdefault(url, str(feed["feed_id"]))
    return ids


def load_registry(store: ObjectStore) -> Registry:
    publishers, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)
    feeds, _ = read_table(store, layout.FEEDS_KEY, FEEDS_SCHEMA)
    # read_table checked both tables against their schemas: each row has the keys and types of its record.
    publisher_rows = cast(list[PublisherRow], publishers.to_pylist())
    return Registry({p["publisher_id"]: p for p in publisher_rows}, cast(list[FeedRow], feeds.to_pylist()))


def export_opml(registry: Registry) -> str:
    root = ET.Element("opml", version="2.0")
    ET.SubElement(ET.SubElement(root, "head"), "title").text = "newsroom publishers"
    body = ET.SubElement(root, "body")
    for feed in registry.feeds:
        p = registry.publishers.get(feed["publisher_id"], {})
        ET.SubElement(body, "outline", {
            "type": feed["kind"] or "rss", "text": str(p.get("name", "")), "xmlUrl": feed["url"],
            "publisher_id": feed["publisher_id"], "domain": str(p.get("domain", "")),
            "region": str(p.get("region", "")), "language": str(p.get("language", "")),
            "tier": str(p.get("tier", "")), "authority": str(p.get("authority", "")),
            "paywalled": str(p.get("is_paywalled", False)).lower(),
            "opted_out": str(p.get("is_opted_out", False)).lower(), "section": feed["section_hint"] or "",
        })
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
