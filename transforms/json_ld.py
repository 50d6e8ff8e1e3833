"""A page's JSON-LD: the article-like objects it declares and the fields read from them.

JSON-LD is what a page states, not yet validated: each object is read as a ``Mapping[str, object]``
and every field is checked for its type where it is read. A block over :data:`JSON_LD_MAX_CHARS`
is not parsed (issue 32).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

import lxml.html

from transforms.feeds import author_name
from transforms.html_tree import META_MAX_CHARS
from transforms.text import normalize_whitespace

JSON_LD_MAX_CHARS = 1_000_000
"""A JSON-LD block longer than this is not parsed (an ``articleBody`` is tens of KB)."""
_ARTICLE_TYPES = frozenset(
    {
        "article",
        "newsarticle",
        "reportagenewsarticle",
        "analysisnewsarticle",
        "opinionnewsarticle",
        "reviewnewsarticle",
        "backgroundnewsarticle",
        "askpublicnewsarticle",
        "blogposting",
        "liveblogposting",
        "socialmediaposting",
        "scholarlyarticle",
        "techarticle",
        "report",
        "webpage",
    }
)


def walk_json(node: object) -> Iterator[Mapping[str, object]]:
    """Every JSON object in ``node``, depth first in document order."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def json_ld_objects(tree: lxml.html.HtmlElement) -> list[Mapping[str, object]]:
    """All JSON-LD objects of article-like type, in document order."""
    objects: list[Mapping[str, object]] = []
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json" or not script.text:
            continue
        if len(script.text) > JSON_LD_MAX_CHARS:
            continue
        raw = script.text.strip().removeprefix("<!--").removesuffix("-->").strip()
        try:
            data = json.loads(raw, strict=False)
        except (ValueError, RecursionError):
            continue
        for obj in walk_json(data):
            types = obj.get("@type")
            names = [types] if isinstance(types, str) else types if isinstance(types, list) else []
            if any(isinstance(t, str) and t.lower() in _ARTICLE_TYPES for t in names):
                objects.append(obj)
    # Prefer real article types over a generic WebPage wrapper.
    return sorted(objects, key=lambda o: "webpage" in str(o.get("@type", "")).lower())


def ld_types(objects: Sequence[Mapping[str, object]]) -> set[str]:
    types: set[str] = set()
    for obj in objects:
        value = obj.get("@type")
        for t in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(t, str):
                types.add(t.lower())
    return types


def ld_first_str(objects: Sequence[Mapping[str, object]], key: str) -> str | None:
    for obj in objects:
        value = obj.get(key)
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v.strip()), None)
        if isinstance(value, dict):
            value = value.get("name") or value.get("@value")
        if isinstance(value, str) and value.strip():
            return normalize_whitespace(value[:META_MAX_CHARS])
    return None


def ld_first_str_raw(objects: Sequence[Mapping[str, object]], key: str) -> str | None:
    for obj in objects:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def ld_author(objects: Sequence[Mapping[str, object]]) -> str | None:
    for obj in objects:
        value = obj.get("author") or obj.get("creator")
        items = value if isinstance(value, list) else [value]
        names: list[str] = []
        for item in items:
            name = item.get("name") if isinstance(item, dict) else item
            if isinstance(name, str) and name.strip() and not name.strip().startswith("http"):
                names.append(author_name(name[:META_MAX_CHARS]))  # no e-mail address is ever kept (#16)
        names = [n for n in names if n]
        if names:
            return ", ".join(dict.fromkeys(names))
    return None
