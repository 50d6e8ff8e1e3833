"""`newsroom extract`: run page extraction over a folder of saved pages, one JSON line each.

Used for evaluation: unlike the pipeline, this output carries the body ``text``.

Input folder layout: ``<id>.html`` or ``<id>.html.gz`` pages, read in sorted file-name order.
A page's fetched URL may come from a sidecar next to it, checked in this order:

* ``<id>.url``: a text file whose first non-empty line is the URL;
* ``<id>.json``: a JSON object with a ``"url"`` string.

Without a sidecar the page's own rel=canonical / og:url is used, else ``url`` is null.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import TypedDict

from tasks.progress import NO_PROGRESS, Progress, counted
from transforms.extraction import MAX_HTML_BYTES, extract_page

PAGE_SUFFIXES = (".html.gz", ".html")


def _page_id(path: Path) -> str | None:
    for suffix in PAGE_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return None


def _read_page(path: Path, max_bytes: int) -> bytes:
    """Raw page bytes, at most ``max_bytes + 1`` (so the extractor knows it was cut)."""
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as f:
                return f.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error):
            # Not actually gzip (or truncated): treat as a page that yields nothing.
            return b""
    with path.open("rb") as f:
        return f.read(max_bytes + 1)


def _sidecar_url(folder: Path, page_id: str) -> str | None:
    url_file = folder / f"{page_id}.url"
    if url_file.is_file():
        for line in url_file.read_text("utf-8", errors="replace").splitlines():
            if line.strip():
                return line.strip()
    json_file = folder / f"{page_id}.json"
    if json_file.is_file():
        try:
            data = json.loads(json_file.read_text("utf-8", errors="replace"))
        except ValueError:
            return None
        url = data.get("url") if isinstance(data, dict) else None
        if isinstance(url, str) and url.strip():
            return url.strip()
    return None


class ExtractRecord(TypedDict):
    """One output line of ``newsroom extract``."""

    id: str
    url: str | None
    canonical_url: str | None
    title: str | None
    text: str
    published_at: str | None
    language: str | None


def extract_record(
    page_id: str, html: bytes, sidecar_url: str | None, max_bytes: int = MAX_HTML_BYTES
) -> ExtractRecord:
    """The output line for one page (a plain dict, JSON-ready)."""
    page = extract_page(html, sidecar_url or "", max_bytes=max_bytes)
    return {
        "id": page_id,
        "url": sidecar_url or page.canonical_url,
        "canonical_url": page.canonical_url,
        "title": page.title,
        "text": page.text,
        "published_at": page.published_at.isoformat() if page.published_at else None,
        "language": page.language,
    }


def extract_directory(input_dir: Path, output: Path, max_bytes: int = MAX_HTML_BYTES,
                      progress: Progress = NO_PROGRESS) -> int:
    """Extract every ``.html`` / ``.html.gz`` page in ``input_dir`` into JSON lines at ``output``.

    Args:
        input_dir: Folder holding the pages (not searched recursively).
        output: The JSON-lines file to write (replaced if it exists).
        max_bytes: Per-page cap on the bytes parsed.
        progress: Where to report pages done (``newsroom extract`` draws a bar on a terminal).

    Returns:
        The number of lines written (one per page, including pages that yield no text).

    Raises:
        NotADirectoryError: ``input_dir`` is not a folder.
    """
    if not input_dir.is_dir():
        raise NotADirectoryError(str(input_dir))
    pages = sorted((p for p in input_dir.iterdir() if p.is_file() and _page_id(p)), key=lambda p: p.name)
    output.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    advance = progress.stage("extracting pages", len(pages))
    with output.open("w", encoding="utf-8") as out:
        for path in counted(pages, advance):
            page_id = _page_id(path)
            assert page_id is not None  # filtered above
            record = extract_record(
                page_id, _read_page(path, max_bytes), _sidecar_url(input_dir, page_id), max_bytes
            )
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
