"""A page's body text: trafilatura (precision mode, no comments) plus three general repairs,
each measured with ``bench/extract_eval.py``:

* sibling chunks: CMSs that split a body into several same-class containers around ads lose
  every chunk but the first; paragraphs in same-class sibling containers are added back
  (:func:`add_sibling_chunks`);
* boilerplate lines ("Read more: ...", newsletter and social prompts) are dropped;
* when trafilatura finds (almost) nothing, the JSON-LD ``articleBody`` or trafilatura's
  recall mode / baseline are used instead.

The body text is cut to :data:`BODY_MAX_CHARS` before it is matched and cleaned (issue 32).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import lxml.etree
import lxml.html
import trafilatura

from transforms.html_tree import parse_tree
from transforms.json_ld import ld_first_str_raw
from transforms.text import normalize_whitespace

BODY_MAX_CHARS = 200_000
"""The body text is cut to this many characters; the pages corpus's longest is 52,991."""
# Below this many characters trafilatura's precision output is treated as "found nothing".
MIN_BODY_CHARS = 200
# JSON-LD articleBody replaces the extracted text only when it is this many times longer.
JSON_LD_BODY_RATIO = 2.0
# A paragraph added from a sibling chunk must be at least this long and mostly not links.
MIN_SIBLING_PARAGRAPH_CHARS = 60
MAX_SIBLING_LINK_DENSITY = 0.3
SIBLING_LEVELS = 3
# Paragraphs and output lines are matched on this many leading non-space characters.
MATCH_PREFIX_CHARS = 40
MATCH_MIN_CHARS = 25
MAX_SIBLING_ADDITIONS = 200
MAX_SIBLING_PARAGRAPHS = 3000
BOILERPLATE_MAX_CHARS = 250
_EXCLUDED_ANCESTORS = frozenset(
    {"nav", "footer", "header", "aside", "form", "script", "style", "noscript", "figure", "figcaption"}
)
_BOILERPLATE_RES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(read more|also read|read also|see also|related|related stories|related articles|"
        r"recommended|more from|more on this|read next|don't miss)\s*[:\-\u2013\u2014|\u00bb>]",
        r"^also on [\w.-]+\.[a-z]{2,}\b",
        r"^(like this story|share this|follow us|sign up for|subscribe to|click here|"
        r"get the latest|have a tip)\b",
        r"^(advertisement|advertising|sponsored content|story continues below|"
        r"article continues below)\W*$",
        r"\bfollow (us|[\w@.]+( [\w@.]+)?) on (facebook|twitter|instagram)\b",
        r"^\d*\s*comments?$",
    )
)
_SPACE_RE = re.compile(r"\s+")
_TABLE_ROW_RE = re.compile(r"^\|(.*)\|\s*$")


def _trafilatura_text(tree: lxml.html.HtmlElement, *, favor_recall: bool = False) -> str:
    try:
        result = trafilatura.extract(
            tree,
            favor_precision=not favor_recall,
            favor_recall=favor_recall,
            include_comments=False,
            include_tables=True,
            include_images=False,
            include_links=False,
            deduplicate=False,
            with_metadata=False,
            output_format="txt",
        )
    except (RecursionError, ValueError, TypeError, lxml.etree.LxmlError):
        return ""
    return (result or "")[:BODY_MAX_CHARS]


def _has_excluded_ancestor(element: lxml.html.HtmlElement, stop: lxml.html.HtmlElement) -> bool:
    for ancestor in element.iterancestors():
        if ancestor is stop:
            return False
        if ancestor.tag in _EXCLUDED_ANCESTORS:
            return True
    return False


def _link_density(element: lxml.html.HtmlElement, text_len: int) -> float:
    link_chars = sum(len(a.text_content()) for a in element.iter("a"))
    return link_chars / text_len if text_len else 1.0


def _signature(element: lxml.html.HtmlElement) -> tuple[str, str] | None:
    cls = (element.get("class") or "").strip()
    return (str(element.tag), cls) if cls else None


def _squash(text: str) -> str:
    return _SPACE_RE.sub("", text)


def _is_separate_article(element: lxml.html.HtmlElement) -> bool:
    """A container with its own headline is another story (related, next-article), not a chunk."""
    return element.tag == "article" or any(True for _ in element.iter("h1", "article", "header"))


def _is_plain_paragraph(p: lxml.html.HtmlElement, key: str) -> bool:
    """Running text: no embedded code or styles, no escaped markup."""
    if any(True for _ in p.iter("script", "style", "noscript", "iframe", "form")):
        return False
    return "&lt;" not in key and "&amp;" not in key and "{" not in key


def add_sibling_chunks(tree: lxml.html.HtmlElement, text: str) -> str:
    """Add paragraphs from same-class sibling containers of the containers trafilatura used.

    Splitting a body into ``<div class="chunk">`` blocks around ads or embeds is common, and
    trafilatura keeps only the best-scoring block. Readability-style sibling merging restricted
    to an identical tag and class (and to containers without their own headline) keeps this
    from pulling in sidebars or the next article. Skipped on pages with very many paragraphs.
    """
    lines = text.split("\n")
    paragraphs = [p for p in tree.iter("p") if isinstance(p, lxml.html.HtmlElement)]
    if len(paragraphs) > MAX_SIBLING_PARAGRAPHS:
        return text  # not an article page; also bounds the substring tests below
    found = _squash(text)
    keys = {p: normalize_whitespace(p.text_content()[:BODY_MAX_CHARS]) for p in paragraphs}
    squashed = {p: _squash(key) for p, key in keys.items()}
    line_of = _lines_of_used_paragraphs(lines, paragraphs, squashed, found)
    if len(line_of) < 2:
        return text
    additions = _sibling_additions(line_of, keys, squashed, found)
    if not additions or len(additions) > MAX_SIBLING_ADDITIONS:
        # Hundreds of same-class blocks are a listing or a pathological page, not a split body.
        return text
    return _insert_in_document_order(lines, paragraphs, line_of, additions)


def _lines_of_used_paragraphs(lines: list[str], paragraphs: list[lxml.html.HtmlElement],
                              squashed: Mapping[lxml.html.HtmlElement, str], found: str
                              ) -> dict[lxml.html.HtmlElement, int]:
    """The paragraphs trafilatura used, each with the output line it starts (-1: inside a line)."""
    # Paragraphs are matched to output lines by a whitespace-free prefix: <br> and inline
    # tags space text differently in the DOM and in trafilatura's output.
    line_by_prefix: dict[str, int] = {}
    for i, line in enumerate(lines):
        squashed_line = _squash(line)
        if len(squashed_line) >= MATCH_MIN_CHARS:
            line_by_prefix.setdefault(squashed_line[:MATCH_PREFIX_CHARS], i)
    line_of: dict[lxml.html.HtmlElement, int] = {}
    for p in paragraphs:
        if len(squashed[p]) < MATCH_MIN_CHARS or squashed[p] not in found:
            continue
        # Paragraph -> output line, to re-insert additions in order; -1 when it is inside a
        # line rather than starting one (it still counts as used).
        line_of[p] = line_by_prefix.get(squashed[p][:MATCH_PREFIX_CHARS], -1)
    return line_of


def _sibling_groups(used_paragraphs: Iterable[lxml.html.HtmlElement]
                    ) -> tuple[set[lxml.html.HtmlElement], set[tuple[lxml.html.HtmlElement, tuple[str, str]]]]:
    """The containers trafilatura drew from, and each one's (parent, tag and class) to search siblings by.

    Containers trafilatura drew from are left alone (what it dropped there it dropped on
    purpose); only their same-class siblings are searched.
    """
    used: set[lxml.html.HtmlElement] = set()
    groups: set[tuple[lxml.html.HtmlElement, tuple[str, str]]] = set()
    for p in used_paragraphs:
        container = p.getparent()
        for _ in range(SIBLING_LEVELS):
            if container is None or container.tag in ("body", "html"):
                break
            used.add(container)
            parent = container.getparent()
            signature = _signature(container)
            if parent is not None and signature is not None:
                groups.add((parent, signature))
            container = parent
    return used, groups


def _sibling_additions(line_of: Mapping[lxml.html.HtmlElement, int], keys: Mapping[lxml.html.HtmlElement, str],
                       squashed: Mapping[lxml.html.HtmlElement, str], found: str) -> dict[lxml.html.HtmlElement, str]:
    """The running-text paragraphs of same-class sibling containers that trafilatura's text lacks."""
    used, groups = _sibling_groups(line_of)
    additions: dict[lxml.html.HtmlElement, str] = {}
    for parent, signature in groups:
        for sibling in parent:
            if not isinstance(sibling, lxml.html.HtmlElement) or _signature(sibling) != signature:
                continue
            if sibling in used or _is_separate_article(sibling):
                continue
            for p in sibling.iter("p"):
                key = keys.get(p, "")
                if p in line_of or p in additions or len(key) < MIN_SIBLING_PARAGRAPH_CHARS:
                    continue
                # Already used, possibly with some inline text (links) dropped by trafilatura.
                head, tail = squashed[p][:MATCH_PREFIX_CHARS], squashed[p][-MATCH_PREFIX_CHARS:]
                if head in found or tail in found:
                    continue
                if _has_excluded_ancestor(p, sibling) or not _is_plain_paragraph(p, key):
                    continue
                if _link_density(p, len(key)) > MAX_SIBLING_LINK_DENSITY:
                    continue
                additions[p] = key
    return additions


def _insert_in_document_order(lines: list[str], paragraphs: list[lxml.html.HtmlElement],
                              line_of: Mapping[lxml.html.HtmlElement, int],
                              additions: Mapping[lxml.html.HtmlElement, str]) -> str:
    """Each added paragraph after the line of the nearest earlier matched paragraph (or first,
    when it precedes them all)."""
    inserts: dict[int, list[str]] = {}
    last_line = -1
    for p in paragraphs:
        if line_of.get(p, -1) >= 0:
            last_line = line_of[p]
        elif p in additions:
            inserts.setdefault(last_line, []).append(additions[p])
    out: list[str] = list(inserts.get(-1, []))
    for i, line in enumerate(lines):
        out.append(line)
        out.extend(inserts.get(i, []))
    return "\n".join(out)


def _is_boilerplate_line(line: str) -> bool:
    if len(line) > BOILERPLATE_MAX_CHARS:
        return False
    return any(pattern.search(line) for pattern in _BOILERPLATE_RES)


def _clean_lines(text: str) -> str:
    out: list[str] = []
    for raw in text.split("\n"):
        line = normalize_whitespace(raw)
        row = _TABLE_ROW_RE.match(line)
        if row:
            line = " ".join(cell.strip() for cell in row.group(1).split("|") if cell.strip())
        if line and not _is_boilerplate_line(line):
            out.append(line)
    return "\n".join(out)


def _html_fragment_text(value: str) -> str:
    """Plain text of a JSON-LD articleBody, which some sites fill with HTML."""
    if "<" not in value:
        return normalize_whitespace(value, keep_newlines=True)
    fragment = parse_tree(f"<html><body>{value}</body></html>")
    if fragment is None:
        return normalize_whitespace(re.sub(r"<[^>]+>", " ", value), keep_newlines=True)
    for br in fragment.iter("br"):
        br.tail = "\n" + (br.tail or "")
    for block in fragment.iter("p", "div", "li", "h1", "h2", "h3", "h4", "blockquote"):
        block.tail = "\n" + (block.tail or "")
    return normalize_whitespace(fragment.text_content(), keep_newlines=True)


def extract_body(tree: lxml.html.HtmlElement, ld: Sequence[Mapping[str, object]]) -> str:
    """The page's body text, paragraphs separated by newlines; ``ld``: its JSON-LD objects (``articleBody``)."""
    text = _trafilatura_text(tree)
    if len(text) < MIN_BODY_CHARS:
        recall_text = _trafilatura_text(tree, favor_recall=True)
        if len(recall_text) > len(text):
            text = recall_text
    if text:
        text = add_sibling_chunks(tree, text)
    text = _clean_lines(text)
    ld_body = ld_first_str_raw(ld, "articleBody")
    if ld_body:
        ld_text = _clean_lines(_html_fragment_text(ld_body[:BODY_MAX_CHARS]))
        if len(ld_text) >= MIN_BODY_CHARS and len(ld_text) >= JSON_LD_BODY_RATIO * len(text):
            text = ld_text
    if not text:
        try:
            _, baseline_text, _ = trafilatura.baseline(tree)
        except (RecursionError, ValueError, TypeError, lxml.etree.LxmlError):
            baseline_text = ""
        text = _clean_lines((baseline_text or "")[:BODY_MAX_CHARS])
    return text[:BODY_MAX_CHARS]
