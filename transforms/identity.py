"""Article identity: one canonical id per article, versions for changed content, links for copies
of the same page under another URL (AMP, print).

Pure: the caller passes what is already known and gets decisions back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Literal

IdentityKind = Literal["new", "new_version", "unchanged", "linked"]


@dataclass(frozen=True, slots=True)
class KnownArticle:
    article_id: str
    version: int
    content_hash: str


@dataclass(frozen=True, slots=True)
class IdentityDecision:
    article_id: str
    kind: IdentityKind
    version: int
    linked_to: str | None = None


def resolve_identity(article_id: str, content_hash: str, by_id: MutableMapping[str, KnownArticle],
                     by_hash: MutableMapping[str, str]) -> IdentityDecision:
    """Decide what a fetched article is, and record it in the two indexes.

    - the same canonical URL with the same content: ``unchanged`` (never stored twice);
    - the same canonical URL with new content: ``new_version`` (version + 1);
    - another URL whose content hash is already known (an AMP or print page): ``linked`` to it;
    - otherwise ``new`` (version 1).

    >>> ids, hashes = {}, {}
    >>> resolve_identity("a", "h1", ids, hashes).kind, resolve_identity("a", "h1", ids, hashes).kind
    ('new', 'unchanged')
    >>> resolve_identity("a", "h2", ids, hashes)
    IdentityDecision(article_id='a', kind='new_version', version=2, linked_to=None)
    >>> resolve_identity("amp", "h2", ids, hashes)
    IdentityDecision(article_id='amp', kind='linked', version=0, linked_to='a')
    """
    known = by_id.get(article_id)
    if known is not None:
        if known.content_hash == content_hash:
            return IdentityDecision(article_id, "unchanged", known.version)
        version = known.version + 1
        by_id[article_id] = KnownArticle(article_id, version, content_hash)
        by_hash.setdefault(content_hash, article_id)
        return IdentityDecision(article_id, "new_version", version)
    original = by_hash.get(content_hash)
    if original is not None:
        return IdentityDecision(article_id, "linked", 0, original)
    by_id[article_id] = KnownArticle(article_id, 1, content_hash)
    by_hash[content_hash] = article_id
    return IdentityDecision(article_id, "new", 1)


def index_shard(key: str, shards: int = 16) -> int:
    """The index shard of a hex id or hash (its first hex digit, folded into ``shards``); any other
    key is hashed first.

    >>> index_shard("f00d"), index_shard("0abc"), index_shard("a1", shards=4), index_shard("xyz") < 16
    (15, 0, 2, True)
    """
    if shards < 1 or 16 % shards:
        raise ValueError("shards must divide 16")
    first = key[:1].lower()
    if not first or first not in "0123456789abcdef":
        first = hashlib.blake2b(key.encode(), digest_size=1).hexdigest()[0]
    return int(first, 16) % shards


def shards_for(keys: Iterable[str], shards: int = 16) -> set[int]:
    return {index_shard(k, shards) for k in keys}
