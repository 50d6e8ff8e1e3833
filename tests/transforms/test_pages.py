"""Page assembly: representative choice, sources, sections and validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from transforms.pages import PageLimits, build_pages, choose_representative, section_slug, validate_page

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _member(story: str, article: str, publisher: str, authority: float, minutes: int, *, copy: bool = False,
            section: str | None = "World") -> dict[str, object]:
    return {
        "story_id": story, "article_id": article, "publisher_id": publisher, "publisher": publisher.title(),
        "authority": authority, "first_seen_at": NOW - timedelta(minutes=minutes), "is_copy": copy,
        "copy_of": "x" if copy else None, "title": f"title {article}", "snippet": "s", "url": f"http://p/{article}",
        "canonical_url": f"http://p/{article}", "image_url": None, "section": section, "is_opinion": False,
        "language": "en", "region": "US", "is_paywalled": False,
    }


def _score(story: str, edition: str, score: float) -> dict[str, object]:
    return {"story_id": story, "edition": edition, "score": score, "coverage": score, "freshness": 1.0,
            "regional_share": 1.0}


def test_representative_is_the_most_authoritative_original() -> None:
    members = [_member("s", "a", "small", 0.3, 50), _member("s", "b", "big", 0.9, 10),
               _member("s", "c", "wire", 1.0, 60, copy=True)]
    assert choose_representative(members)["article_id"] == "b"


def test_ties_go_to_the_first_report() -> None:
    members = [_member("s", "late", "p1", 0.5, 5), _member("s", "early", "p2", 0.5, 30)]
    assert choose_representative(members)["article_id"] == "early"


def test_pages_rank_by_score_and_count_copies_once() -> None:
    members = [
        _member("s1", "a", "p1", 0.9, 10), _member("s1", "b", "p2", 0.5, 20),
        _member("s1", "b2", "p2", 0.5, 25), _member("s1", "c", "p3", 0.5, 30, copy=True),
        _member("s2", "d", "p1", 0.9, 10), _member("s3", "e", "p1", 0.9, 10), _member("s4", "f", "p4", 0.2, 5),
    ]
    scores = [_score("s1", "en-US", 2.0), _score("s2", "en-US", 1.0), _score("s3", "en-US", 1.5),
              _score("s4", "en-US", 1.5)]
    pages, stories = build_pages(scores, members, NOW, PageLimits(top_stories=10, min_section_stories=3))
    top = pages[("en-US", "top")]
    assert [s["story_id"] for s in top["stories"]] == ["s1", "s3", "s4", "s2"]  # ties by id
    s1 = top["stories"][0]
    assert s1["source_count"] == 2 and s1["article_count"] == 4
    assert [s["article_id"] for s in s1["sources"]] == ["a", "b2", "c"]  # first report per publisher, copy last
    assert ("en-US", "world") in pages
    assert [s["article_id"] for s in stories["stories"]["s1"]["sources"]] == ["c", "b2", "b", "a"]


def test_validation_refuses_empty_and_halved_pages() -> None:
    story = {"story_id": "s", "title": "t", "sources": [{"article_id": "a"}]}
    assert validate_page({"stories": []}, None, min_stories=1, max_loss=0.5)
    previous = {"stories": [dict(story, story_id=str(i)) for i in range(10)]}
    assert validate_page({"stories": [story] * 1}, previous, min_stories=1, max_loss=0.5)
    halved = {"stories": [dict(story, story_id=str(i)) for i in range(6)]}
    assert validate_page(halved, previous, min_stories=1, max_loss=0.5) is None
    assert "representative" in validate_page({"stories": [dict(story, sources=[])]}, None, min_stories=1,
                                             max_loss=0.5)


def test_section_slug() -> None:
    assert section_slug("Science & Tech") == "science-tech"


def test_an_untitled_article_never_stands_for_a_story() -> None:
    members = [dict(_member("s", "blank", "big", 0.99, 5), title=""), dict(_member("s", "ws", "big2", 0.9, 6), title=" "),
               _member("s", "named", "small", 0.2, 30)]
    assert choose_representative(members)["article_id"] == "named"


def test_a_story_without_a_titled_article_is_skipped_not_the_page() -> None:
    members = [dict(_member("untitled", "u", "p1", 0.9, 5), title=""),
               *(_member(f"s{i}", f"a{i}", "p2", 0.5, 10) for i in range(3))]
    scores = [_score("untitled", "en-US", 9.0), *(_score(f"s{i}", "en-US", 1.0) for i in range(3))]
    pages, stories = build_pages(scores, members, NOW, PageLimits(top_stories=10, min_section_stories=3))
    assert [s["story_id"] for s in pages[("en-US", "top")]["stories"]] == ["s0", "s1", "s2"]
    assert "untitled" not in stories["stories"]
    assert validate_page(pages[("en-US", "top")], None, min_stories=1, max_loss=0.5) is None


def test_a_dateline_headline_never_stands_for_a_story() -> None:
    members = [dict(_member("s", "dated", "big", 0.99, 5), title="4 August 2013 Last updated at 19:47 GMT"),
               _member("s", "named", "small", 0.2, 30)]
    assert choose_representative(members)["article_id"] == "named"


def test_a_story_told_only_under_datelines_is_skipped() -> None:
    members = [dict(_member("dated", "d", "p1", 0.9, 5), title="Saturday, August 24, 2013"),
               *(_member(f"s{i}", f"a{i}", "p2", 0.5, 10) for i in range(3))]
    scores = [_score("dated", "en-US", 9.0), *(_score(f"s{i}", "en-US", 1.0) for i in range(3))]
    pages, _ = build_pages(scores, members, NOW, PageLimits(top_stories=10, min_section_stories=3))
    assert [s["story_id"] for s in pages[("en-US", "top")]["stories"]] == ["s0", "s1", "s2"]


@pytest.mark.parametrize(("snippet", "shown"), [("Analysis\u2026", ""), ("\u2026", ""),
                                                ("Crews fought the blaze all night.", "Crews fought the blaze all night.")],
                         ids=["one-word", "ellipsis-only", "a-lede"])
def test_a_one_word_snippet_is_not_shown(snippet: str, shown: str) -> None:
    members = [dict(_member("s1", "a", "p1", 0.9, 10), snippet=snippet)]
    pages, stories = build_pages([_score("s1", "en-US", 1.0)], members, NOW, PageLimits(top_stories=10))
    assert pages[("en-US", "top")]["stories"][0]["snippet"] == shown
    assert stories["stories"]["s1"]["snippet"] == shown
