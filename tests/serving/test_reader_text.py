"""The reader page renders data as text, never as markup (#16): titles such as ``Why <div> soup is bad``
reach the DOM through ``textContent``, so no headline can inject or lose markup."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "serving" / "static"
HTML_SINKS = re.compile(r"\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|createContextualFragment"
                        r"|DOMParser|\.srcdoc\b")


@pytest.mark.parametrize("name", ["app.js", "index.html"])
def test_the_reader_page_has_no_html_sink(name: str) -> None:
    assert not HTML_SINKS.findall((STATIC / name).read_text(encoding="utf-8"))


def test_headlines_and_snippets_are_set_as_text() -> None:
    app = (STATIC / "app.js").read_text(encoding="utf-8")
    assert "headline.textContent = story.title" in app and "snippet.textContent = story.snippet" in app
