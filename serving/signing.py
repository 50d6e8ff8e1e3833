"""Signed tokens: click tokens for ``/r/{token}``, reader sessions, and reader pseudonyms.

Every token is ``base64url(payload || HMAC-SHA256(subkey, payload))`` without padding, where the
payload is compact JSON. Each use has its own subkey derived from the one configured key, so a
session can never be replayed as a click token or the other way round.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import urlsplit

from serving.errors import InvalidTokenError

logger = logging.getLogger(__name__)

Surface = Literal["top", "section", "topic", "story", "for_you"]
SURFACES: frozenset[str] = frozenset(get_args(Surface))
MAC_BYTES = 32
MAX_URL_CHARS = 2048
MAX_TOKEN_CHARS = 4096
_CLICK_VERSION = 1
_SESSION_VERSION = 1


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if len(text) > MAX_TOKEN_CHARS:
        raise InvalidTokenError("token too long")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise InvalidTokenError("token is not base64url") from e


def is_web_url(url: str) -> bool:
    """Whether ``url`` is an absolute http(s) URL short enough to sign.

    >>> is_web_url("https://example.org/a"), is_web_url("javascript:alert(1)"), is_web_url("//x")
    (True, False, False)
    """
    if len(url) > MAX_URL_CHARS:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


@dataclass(frozen=True, slots=True)
class ClickPayload:
    """What a click token names. ``reader_hash`` is empty for readers who are not signed in."""

    article_id: str
    story_id: str
    url: str
    reader_hash: str
    surface: Surface
    position: int
    issued_at: int


@dataclass(frozen=True, slots=True)
class Session:
    reader: str
    reader_hash: str
    expires_at: int


class Signer:
    """Issues and verifies every signed token with subkeys of one secret key."""

    def __init__(self, key: bytes, *, click_ttl_seconds: int, session_ttl_seconds: int) -> None:
        if len(key) < 32:
            raise ValueError("the signing key must be at least 32 bytes")
        self._click_key = hmac.digest(key, b"newsroom/click/v1", hashlib.sha256)
        self._session_key = hmac.digest(key, b"newsroom/session/v1", hashlib.sha256)
        self._reader_key = hmac.digest(key, b"newsroom/reader/v1", hashlib.sha256)
        self.click_ttl_seconds = click_ttl_seconds
        self.session_ttl_seconds = session_ttl_seconds

    @classmethod
    def from_secret(cls, secret: str | None, *, click_ttl_seconds: int, session_ttl_seconds: int) -> Signer:
        """A signer for the configured key, or for a fresh random one (logged) when unset."""
        if secret is None:
            logger.warning(
                "signing_key_ephemeral setting=NEWSROOM_SERVING_HMAC_KEY "
                "effect=sessions_and_click_tokens_do_not_survive_restart"
            )
            key = secrets.token_bytes(32)
        else:
            key = secret.encode()
        return cls(key, click_ttl_seconds=click_ttl_seconds, session_ttl_seconds=session_ttl_seconds)

    # -- readers --------------------------------------------------------------------------------

    def reader_hash(self, reader: str) -> str:
        """A stable pseudonym for a reader: what profiles and the clicks log are keyed by."""
        return hmac.new(self._reader_key, reader.encode(), hashlib.sha256).hexdigest()[:32]

    # -- sealing --------------------------------------------------------------------------------

    @staticmethod
    def _seal(key: bytes, payload: list[object]) -> str:
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        return _b64encode(data + hmac.digest(key, data, hashlib.sha256))

    @staticmethod
    def _open(key: bytes, token: str) -> list[object]:
        raw = _b64decode(token)
        if len(raw) <= MAC_BYTES:
            raise InvalidTokenError("token too short")
        data, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
        if not hmac.compare_digest(mac, hmac.digest(key, data, hashlib.sha256)):
            raise InvalidTokenError("bad signature")
        try:
            payload = json.loads(data)
        except ValueError as e:  # signed by us, so this is a bug or a key reuse: still refuse
            raise InvalidTokenError("unreadable payload") from e
        if not isinstance(payload, list):
            raise InvalidTokenError("unreadable payload")
        return payload

    # -- clicks ---------------------------------------------------------------------------------

    def issue_click(
        self,
        *,
        article_id: str,
        story_id: str,
        url: str,
        reader_hash: str,
        surface: Surface,
        position: int,
        now: float | None = None,
    ) -> str:
        """A token for ``/r/{token}``. Raises ValueError for a URL that is not http(s)."""
        if not is_web_url(url):
            raise ValueError(f"not an http(s) URL: {url[:80]!r}")
        issued_at = int(now if now is not None else time.time())
        return self._seal(
            self._click_key,
            [_CLICK_VERSION, article_id, story_id, url, reader_hash, surface, position, issued_at],
        )

    def verify_click(self, token: str, now: float | None = None) -> ClickPayload:
        """The payload of a genuine, unexpired click token. Raises InvalidTokenError otherwise."""
        payload = self._open(self._click_key, token)
        if len(payload) != 8 or payload[0] != _CLICK_VERSION:
            raise InvalidTokenError("unknown token version")
        _, article_id, story_id, url, reader_hash, surface, position, issued_at = payload
        if not (
            isinstance(article_id, str)
            and isinstance(story_id, str)
            and isinstance(url, str)
            and isinstance(reader_hash, str)
            and isinstance(surface, str)
            and surface in SURFACES
            and isinstance(position, int)
            and isinstance(issued_at, int)
        ):
            raise InvalidTokenError("malformed payload")
        current = now if now is not None else time.time()
        if not (issued_at - 60 <= current <= issued_at + self.click_ttl_seconds):
            raise InvalidTokenError("expired")
        if not is_web_url(url):  # defence in depth: never redirect anywhere but the web
            raise InvalidTokenError("not a web URL")
        return ClickPayload(article_id, story_id, url, reader_hash, surface, position, issued_at)  # type: ignore[arg-type]

    # -- sessions -------------------------------------------------------------------------------

    def issue_session(self, reader: str, now: float | None = None) -> tuple[str, Session]:
        expires_at = int(now if now is not None else time.time()) + self.session_ttl_seconds
        token = self._seal(self._session_key, [_SESSION_VERSION, reader, expires_at])
        return token, Session(reader, self.reader_hash(reader), expires_at)

    def reader_hash_or_anonymous(self, session_token: str | None) -> str:
        """The reader hash of a valid session, or ``""`` (anonymous) for none or an invalid one."""
        if not session_token:
            return ""
        try:
            return self.verify_session(session_token).reader_hash
        except InvalidTokenError:
            return ""

    def verify_session(self, token: str, now: float | None = None) -> Session:
        payload = self._open(self._session_key, token)
        if len(payload) != 3 or payload[0] != _SESSION_VERSION:
            raise InvalidTokenError("unknown session version")
        _, reader, expires_at = payload
        if not isinstance(reader, str) or not isinstance(expires_at, int):
            raise InvalidTokenError("malformed session")
        if (now if now is not None else time.time()) > expires_at:
            raise InvalidTokenError("session expired")
        return Session(reader, self.reader_hash(reader), expires_at)
