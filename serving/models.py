"""Response models for the OpenAPI docs: the JSON contract of docs/snapshots.md, as served.

Routes answer with the published bytes themselves (so every reader gets identical bytes and the
ETag is the pointer's sha256); these models document those bytes, they do not re-encode them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel


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


class StoryPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    story_id: str
    rank: int | None = None
    score: float | None = None
    score_parts: dict[str, float] = Field(default_factory=dict)
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


class PagePublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_: Literal["newsroom.page/1"] = Field(alias="schema")
    edition: str
    section: str
    version: int
    as_of: datetime
    stories: list[StoryPublic]


class HealthPublic(BaseModel):
    status: Literal["ok", "degraded"] = Field(
        description="`degraded`: the last refresh could not read the store; the last good pages are served."
    )
    pages: int = Field(description="Live pages held in memory.")
    stories_version: int | None = Field(description="Version of the live story snapshot, if any.")


class ErrorPublic(BaseModel):
    detail: str
