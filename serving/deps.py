"""Dependencies as ``Annotated`` aliases. None of them reads cookies or credentials."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from serving.cache import SnapshotCache
from serving.settings import ServingSettings

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""Editions, sections and story ids: the same safe names `warehouse.layout` accepts in keys."""


def get_cache(request: Request) -> SnapshotCache:
    cache: SnapshotCache = request.app.state.cache
    return cache


def get_app_settings(request: Request) -> ServingSettings:
    settings: ServingSettings = request.app.state.settings
    return settings


CacheDep = Annotated[SnapshotCache, Depends(get_cache)]
SettingsDep = Annotated[ServingSettings, Depends(get_app_settings)]

EditionPath = Annotated[str, Path(pattern=NAME_PATTERN, description="`{language}-{REGION}`, e.g. `en-US`.")]
SectionPath = Annotated[str, Path(pattern=NAME_PATTERN, description="`top` or a section slug.")]
StoryIdPath = Annotated[str, Path(pattern=NAME_PATTERN, description="A story id from a page.")]
