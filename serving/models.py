"""Response models for the OpenAPI docs: the JSON contract of docs/snapshots.md, as served.

Routes answer with the published bytes themselves (so every reader gets identical bytes and the
ETag is the pointer's sha256); these models document those bytes, they do not re-encode them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator


class EditionPublic(BaseModel):
    edition: str = Field(description="`{language}-{REGION}`, for example `en-US`.", examples=["en-US"])
    sections: list[str] = Field(description="Live sections, `top` first.", examples=[["top", "world"]])


class EditionListPublic(RootModel[list[EditionPublic]]):
    """Every edition with at least one live page."""


class SourcePublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    article_id: str
    publisher_id: str
    publisher: str = Field(description="Publisher display name.")
    title: str
    url: str = Field(description="The article on the publisher's site.")
    first_seen_at: datetime
    is_copy: bool = Field(description="A syndicated reprint of another source's article.")
    is_opinion: bool = Field(default=False, description="Labelled opinion or analysis, not news.")
    region: str | None = Field(default=None, description="The publisher's region, e.g. `US`.")
    is_paywalled: bool = Field(default=False, description="The publisher asks readers to subscribe.")


class RepresentativeChoicePublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    candidates: int = Field(description="Titled articles that could stand for the story on this edition.")
    near_ties: list[str] = Field(description="Article ids within the tie margin of the best; they rotate hourly.")
    stepped_aside: list[str] = Field(description="Publishers past their daily share of representative impressions.")


class StoryPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    story_id: str
    rank: int | None = None
    score: float | None = None
    score_parts: dict[str, float] = Field(default_factory=dict)
    representative_id: str | None = Field(default=None, description="The article whose headline is shown.")
    is_breaking: bool = Field(default=False, description="On a page: the story is Breaking (docs/snapshots.md).")
    breaking_since: datetime | None = None
    representative_choice: RepresentativeChoicePublic | None = Field(
        default=None, description="On a page: how the representative was chosen (the reader page's \"Why this story?\")."
    )
    title: str = Field(description="The representative article's headline.")
    snippet: str = Field(description="At most 200 characters.")
    image_url: str | None = None
    sections: list[str] = Field(default_factory=list)
    language: str
    first_seen_at: datetime
    updated_at: datetime
    source_count: int = Field(description="Distinct sources, not counting syndicated copies.")
    article_count: int
    sources: list[SourcePublic] = Field(
        description="On a page: `sources[0]` is the representative article. "
        "In Full Coverage: every article, oldest first."
    )
    editions: list[str] | None = Field(default=None, description="Full Coverage only: editions showing it.")


class PublisherCoveragePublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    publisher_id: str
    publisher: str | None = None
    region: str | None = None
    article_count: int


class LinkedStoryPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    story_id: str = Field(description="The same story in another language.")
    language: str | None = None
    title: str | None = Field(None, description="That story's headline, in its language.")


class FullCoveragePublic(StoryPublic):
    """Full Coverage: the story with every article and the views derived from them."""

    timeline: list[SourcePublic] = Field(description="Every article, oldest first.")
    publishers: list[PublisherCoveragePublic] = Field(description="Who covered it, most articles first.")
    local_sources: dict[str, list[str]] = Field(
        description="Per edition showing the story: article ids from publishers in that edition's region."
    )
    opinion_count: int = Field(description="Articles labelled opinion (see each source's `is_opinion`).")
    linked: list[LinkedStoryPublic] = Field(
        description="Links to this story in other languages; empty when none are known."
    )
    is_partial: bool = Field(
        default=False,
        description="True when no valid story snapshot holds the story and it is answered from the cards of the "
        "pages listing it: `sources` are the articles those cards show, not necessarily every one (issue 32).",
    )


class TopicPagePublic(BaseModel):
    topic_id: str = Field(description="A section slug or a named entity.")
    label: str
    edition: str | None
    version: int = Field(description="Version of the story snapshot this page was cut from.")
    stories: list[StoryPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at the end.")


class SearchCardPublic(StoryPublic):
    has_coverage: bool = Field(description="Its Full Coverage opens (`GET /v1/stories/{id}`): some edition lists "
                                           "it. A story no page lists is found by search all the same, with its "
                                           "representative article.")


class FacetValuePublic(BaseModel):
    value: str
    count: int
    label: str | None = Field(default=None, description="A display name (publishers).")


class SearchPagePublic(BaseModel):
    query: str = Field(description="The query as understood, in its one spelling.")
    edition: str | None
    section: str | None
    publisher: str | None
    language: str | None
    since: str | None
    version: int = Field(description="The search index version that answered.")
    as_of: str = Field(description="When that version was built.")
    total: int = Field(description="Stories matching, with the filters.")
    stories: list[SearchCardPublic] = Field(description="Best first: relevance (BM25), then the most recently updated.")
    facets: dict[str, list[FacetValuePublic]] = Field(
        description="`section`, `publisher` and `language`: the values among the matches and how many stories "
                    "have each, each counted with the other filters but not its own.")
    next_offset: int | None = Field(description="Pass as `offset` for the next page; null at the end.")


class VersionPublic(BaseModel):
    edition: str
    section: str
    version: int = Field(description="The live version; a change means new stories.")
    as_of: str = Field(description="When that version was published.")


class SourceCardPublic(SourcePublic):
    click_url: str | None = Field(
        description="`/r/{token}`: logs an anonymous click, then redirects to `url`; safe to share. "
        "For a click that counts for the reader, use `POST /v1/click-token` with the session. "
        "Null when `url` cannot be signed (not http(s), too long, control characters)."
    )


class FeedStoryPublic(StoryPublic):
    sources: list[SourceCardPublic]  # type: ignore[assignment]
    reason: str = Field(description='Why this story is here, e.g. "Because you follow Technology".')
    topic: str | None = Field(description="The story's main topic (a section slug), for follow controls.")


class FeedPublic(BaseModel):
    mode: Literal["for_you", "top_stories", "top_stories_fallback"] = Field(
        description="`for_you`: re-ranked for this reader. `top_stories`: no profile yet. "
        "`top_stories_fallback`: profiles are unavailable, so the edition's top stories are shown."
    )
    edition: str
    version: int = Field(description="The edition's live top-page version the pool was cut from.")
    stories: list[FeedStoryPublic]
    next_cursor: str | None


class SessionRequest(BaseModel):
    reader: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$",
        description="A reader name (demo sign-in; a real identity provider is out of scope).",
    )


class SessionPublic(BaseModel):
    token: str = Field(description="Send as `Authorization: Bearer <token>` to personal endpoints.")
    reader: str
    expires_at: int = Field(description="Unix seconds.")


class ProfilePublic(BaseModel):
    reader: str
    follows: dict[str, list[str]] = Field(description="`topic` and `source` ids followed, and `keyword`: the "
                                                      "queries followed, each in its one spelling.")
    breaking_alerts: bool = Field(default=False, description="Opted in to Breaking alerts on the live stream.")
    hides: dict[str, list[str]] = Field(description="`source` and `story` ids hidden.")
    topic_weights: dict[str, float] = Field(description="Decayed topic weights from clicks, strongest first.")
    source_weights: dict[str, float]
    reads: int = Field(description="Stories read (the last 200 are kept).")


class KeywordRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=800, description="A search query (the language of `GET /v1/search`).")


class SubscriptionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=4096, description="A site's or a feed's address (http or https).")


class PendingItemPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    title: str | None = None
    link: str | None = None


class SubscriptionPublic(BaseModel):
    feed_id: str
    feed_url: str = Field(description="The feed found (the address itself, or one its page names).")
    site_url: str
    title: str
    created_at: int = Field(description="Unix seconds.")
    status: str = Field(description="`pending` (waiting for an operator; polled by ingest), `accepted` (in the "
                                    "registry: read like any other source) or `failing` (ingest's last poll failed).")
    polled_at: str | None = Field(default=None, description="When ingest last polled it.")
    error: str | None = Field(default=None, description="What went wrong at that poll.")
    items: list[PendingItemPublic] = Field(default_factory=list, description="Its latest items at that poll.")


class SubscriptionListPublic(BaseModel):
    sources: list[SubscriptionPublic]


class HideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    story: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

    @model_validator(mode="after")
    def _exactly_one(self) -> HideRequest:
        if (self.source is None) == (self.story is None):
            raise ValueError("give exactly one of `source` or `story`")
        return self


class ClickTokenRequest(BaseModel):
    article_id: str = Field(min_length=1, max_length=200)
    surface: Literal["top", "section", "topic", "story", "for_you", "search"] = "top"
    position: int = Field(default=0, ge=0, le=10_000)


class ClickTokenPublic(BaseModel):
    token: str
    click_url: str = Field(description="`/r/{token}`")


class PagePublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_: Literal["newsroom.page/1"] = Field(alias="schema")
    edition: str
    section: str
    version: int
    as_of: datetime
    stories: list[StoryPublic]


class SkippedPublic(BaseModel):
    version: int = Field(description="A version passed over on the way to the one served.")
    problem: str = Field(description="Why, e.g. `pointer names a missing version`, `version bytes do not match "
                                     "the pointer's sha256`, `not JSON (...)`, `lists 3 stories no valid story "
                                     "snapshot holds`.")


class DegradedPublic(BaseModel):
    what: str = Field(description="The page (`edition/section`), `stories` (the story snapshot), "
                                  "`stories/{story_id}` (a story a served page lists) or `pages` (the listing).")
    problem: str = Field(description="Why its live version is not served, e.g. `unreadable pointer`, "
                                     "`pointer names a missing version`, `store unreachable`; for a story, where "
                                     "it is answered from, or that no valid story snapshot holds it.")
    serving_version: int | None = Field(description="The older valid version served instead; null when none is.")
    skipped: list[SkippedPublic] = Field(default_factory=list,
                                         description="Every version passed over on the way, newest first.")


class HealthPublic(BaseModel):
    status: Literal["ok", "degraded", "unavailable"] = Field(
        description="`degraded`: something is served from an older valid version, or not at all (see "
                    "`degraded`); `unavailable` (HTTP 503): no page can be served."
    )
    pages: int = Field(description="Pages held in memory, live or standing in.")
    stories_version: int | None = Field(description="Version of the story snapshot held, if any.")
    search_version: int | None = Field(default=None, description="Version of the search index held, if any "
                                                                 "(issue 30; GET /v1/search answers 503 without one).")
    degraded: list[DegradedPublic] = Field(default_factory=list,
                                           description="What the last refresh could not serve as published.")


class ErrorPublic(BaseModel):
    detail: str
