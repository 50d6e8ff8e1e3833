"""The publisher registry: import from CSV or OPML, export as OPML."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import defusedxml.ElementTree as DET

from transforms.feeds import normalize_language
from warehouse import layout
from warehouse.schemas import FEEDS_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import read_table, rows_to_table, write_table

_TRUE = {"1", "true", "yes", "y", "t"}


@dataclass(frozen=True, slots=True)
class Registry:
    publishers: dict[str, dict[str, Any]]
    feeds: list[dict[str, Any]]

    def read_feeds(self) -> list[dict[str, Any]]:
        """The feeds we read: every feed of a registered publisher that has not opted out."""
        return [f for f in self.feeds
                if (p := self.publishers.get(f["publisher_id"])) is not None and not p["is_opted_out"]]


def feed_id_for(url: str) -> str:
    return hashlib.blake2b(url.strip().encode(), digest_size=8).hexdigest()


def _bool(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _authority(publisher_id: str, value: str | None) -> float:
    """A publisher's authority: a finite number in [0, 1] (0.5 when the row leaves it blank)."""
    text = (value or "").strip()
    if not text:
        return 0.5
    try:
        authority = float(text)
    except ValueError:
        authority = math.nan
    if not (math.isfinite(authority) and 0.0 <= authority <= 1.0):
        raise ValueError(f"publisher {publisher_id}: authority must be a number in [0, 1], got {value!r}")
    return authority


def _publisher_row(raw: dict[str, str]) -> dict[str, Any]:
    publisher_id = (raw.get("publisher_id") or raw.get("publisher") or "").strip()
    if not publisher_id:
        raise ValueError(f"a publisher row needs publisher_id: {raw}")
    return {
        "publisher_id": publisher_id,
        "name": (raw.get("name") or publisher_id).strip(),
        "domain": (raw.get("domain") or "").strip().lower(),
        "region": (raw.get("region") or "").strip().upper() or "ZZ",
        "language": normalize_language(raw.get("language")) or "und",
        "tier": int(raw.get("tier") or 2),
        "authority": _authority(publisher_id, raw.get("authority")),
        "is_paywalled": _bool(raw.get("paywalled")),
        "is_opted_out": _bool(raw.get("opted_out")),
    }


def parse_publishers_csv(text: str) -> Registry:
    """Rows of ``publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section``."""
    publishers: dict[str, dict[str, Any]] = {}
    feeds: list[dict[str, Any]] = []
    for raw in csv.DictReader(io.StringIO(text)):
        row = _publisher_row(raw)
        publishers[row["publisher_id"]] = row
        url = (raw.get("feed_url") or "").strip()
        if url:
            feeds.append({"feed_id": feed_id_for(url), "url": url, "publisher_id": row["publisher_id"],
                          "kind": (raw.get("kind") or "rss").strip(), "section_hint": (raw.get("section") or "").strip()})
    return Registry(publishers, feeds)


def parse_publishers_opml(text: str) -> Registry:
    """OPML outlines with ``xmlUrl``; newsroom attributes (region, language, tier, ...) are optional."""
    root = DET.fromstring(text)
    publishers: dict[str, dict[str, Any]] = {}
    feeds: list[dict[str, Any]] = []
    for outline in root.iter("outline"):
        url = outline.get("xmlUrl")
        if not url:
            continue
        attrs = dict(outline.attrib)
        attrs.setdefault("publisher_id", attrs.get("publisher") or feed_id_for(url))
        attrs.setdefault("name", attrs.get("title") or attrs.get("text") or attrs["publisher_id"])
        row = _publisher_row(attrs)
        publishers.setdefault(row["publisher_id"], row)
        feeds.append({"feed_id": feed_id_for(url), "url": url, "publisher_id": row["publisher_id"],
                      "kind": attrs.get("type", "rss"), "section_hint": attrs.get("section", "")})
    return Registry(publishers, feeds)


def import_publishers(store: ObjectStore, path: Path) -> Registry:
    """Merge a CSV or OPML file into the registry (rows with the same id are replaced)."""
    text = path.read_text(encoding="utf-8")
    incoming = parse_publishers_opml(text) if text.lstrip().startswith("<") else parse_publishers_csv(text)
    current = load_registry(store)
    publishers = {**current.publishers, **incoming.publishers}
    feeds = {f["feed_id"]: f for f in current.feeds} | {f["feed_id"]: f for f in incoming.feeds}
    registry = Registry(publishers, sorted(feeds.values(), key=lambda f: f["feed_id"]))
    write_table(store, layout.PUBLISHERS_KEY,
                rows_to_table(sorted(publishers.values(), key=lambda p: p["publisher_id"]), PUBLISHERS_SCHEMA),
                PUBLISHERS_SCHEMA)
    write_table(store, layout.FEEDS_KEY, rows_to_table(registry.feeds, FEEDS_SCHEMA), FEEDS_SCHEMA)
    return registry


def load_registry(store: ObjectStore) -> Registry:
    publishers, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)
    feeds, _ = read_table(store, layout.FEEDS_KEY, FEEDS_SCHEMA)
    return Registry({p["publisher_id"]: p for p in publishers.to_pylist()}, feeds.to_pylist())


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
