from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from tasks.extract_pages import extract_directory

PAGES_DIR = Path(__file__).resolve().parents[1] / "data" / "pages"


def test_extract_directory(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for page in sorted(PAGES_DIR.glob("*.html.gz")):
        shutil.copy(page, src / page.name)
    # One plain .html with a .url sidecar, one with a .json sidecar, and files to skip.
    first = sorted(PAGES_DIR.glob("*.html.gz"))[0]
    (src / "plain.html").write_bytes(gzip.decompress(first.read_bytes()))
    (src / "plain.url").write_text("\nhttps://mirror.example/plain?utm_source=x\n")
    (src / "14cc2a0c.json").write_text(json.dumps({"url": "https://sidecar.example/a"}))
    (src / "notes.txt").write_text("ignored")
    (src / "broken.html.gz").write_bytes(b"not gzip at all")

    out = tmp_path / "out" / "pages.jsonl"
    assert extract_directory(src, out) == 5
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert [line["id"] for line in lines] == [
        "0ec95c72",
        "14cc2a0c",
        "359fee22",
        "broken",
        "plain",
    ]  # file-name order
    assert set(by_id) == {"0ec95c72", "14cc2a0c", "359fee22", "broken", "plain"}
    for line in lines:
        assert set(line) == {"id", "url", "canonical_url", "title", "text", "published_at", "language"}

    assert by_id["plain"]["url"] == "https://mirror.example/plain?utm_source=x"
    assert by_id["14cc2a0c"]["url"] == "https://sidecar.example/a"
    # No sidecar: url falls back to the page's own canonical URL.
    assert by_id["359fee22"]["url"] == by_id["359fee22"]["canonical_url"]
    assert by_id["359fee22"]["url"].startswith("https://www.sciencealert.com/")
    assert by_id["359fee22"]["language"] == "en"
    assert len(by_id["359fee22"]["text"]) > 1000
    assert by_id["broken"] == {
        "id": "broken",
        "url": None,
        "canonical_url": None,
        "title": None,
        "text": "",
        "published_at": None,
        "language": None,
    }
