"""A story row's running facts (transforms/story_aggregates.py) agree with page assembly's rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from transforms.story_aggregates import AggregateRules, story_from_members

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _member(article_id: str, title: str | None, minutes: int) -> dict[str, object]:
    return {"article_id": article_id, "publisher_id": f"pub-{article_id}", "copy_of": None, "language": "en",
            "title": title, "snippet": "", "image_url": None, "url": f"https://example.com/{article_id}",
            "first_seen_at": AT - timedelta(minutes=minutes), "is_opinion": False, "section": None,
            "categories": None, "section_guess": None, "region": "US"}


@pytest.mark.parametrize(("titles", "titled"), [
    (["4 August 2013 Last updated at 19:47 GMT"], 0),  # a date line where the headline goes (issue 14)
    (["   ", None], 0),
    (["4 August 2013 Last updated at 19:47 GMT", "Budget passes after all-night session"], 1),
], ids=["date-line-only", "untitled", "date-line-and-headline"])
def test_a_date_line_is_not_a_title_a_story_can_be_listed_under(titles: list[str | None], titled: int) -> None:
    # A story told only under date lines is never listed (transforms.pages.is_listable): its row
    # must say so, or rank hands page assembly a story with nothing to stand for it.
    members = [_member(f"a{i}", title, 10 - i) for i, title in enumerate(titles)]
    story = story_from_members("s1", "en", members, {}, AggregateRules(), AT)
    assert story["titled_count"] == titled
    if titled:
        assert story["rep_title"] == "Budget passes after all-night session"
