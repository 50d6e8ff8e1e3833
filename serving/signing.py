"""Signed tokens: click tokens for ``/r/{token}``, reader sessions, and reader pseudonyms.

Every token is ``base64url(payload || HMAC-SHA256(subkey, payload))`` without padding, where the
payload is compact JSON. Each use has its own subkey derived from the one configured key, so a
session can never be replayed as a click token or the other way round. Tokens are decoded
strictly: only the canonical base64url spelling of the bytes is accepted, so one token has exactly
one string form (the clicks log dedupes by token).

Click tokens (version 2) are ``[2, article_id, story_id, url, reader_box, surface, position,
issued_at, nonce]``:

* ``nonce`` is 16 random bytes, so two readers clicking the same article in the same second get
  different tokens (and different clicks), while a reload of one link stays one click.
* ``reader_box`` is ``""`` for an anonymous click, else the reader's pseudonym encrypted under a
  key of its own: ``reader_hash XOR HMAC-SHA256(reader_key, nonce)``, authenticated by the token's
  MAC (encrypt-then-MAC; a fresh random nonce per token, so the pad is never reused). Anyone may
  read a token's JSON; nobody without the key learns who it was minted for.
* Only ``POST /v1/click-token`` with the reader's own session mints a personal token, and its
  attribution lapses after ``PERSONAL_CLICK_SECONDS``: a personal link that is shared or replayed
  later still redirects, but as an anonymous click (see ``verify_click``).

Publisher URLs are made header-safe before they are signed (``header_safe_url``): non-ASCII is
percent-encoded as UTF-8 (hosts as IDNA per UTS #46, as browsers and the pipeline's canonical URLs
do) and control characters are refused, so the ``Location`` of ``/r/{token}`` can always be sent.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args
from urllib.parse import quote, urlsplit, urlunsplit

import idna

from serving.errors import InvalidTokenError, UnsignableUrlError

logger = logging.getLogger(__name__)

Surface = Literal["top", "section", "topic", "story", "for_you", "search"]
SURFACES: frozenset[str] = frozenset(get_args(Surface))
MAC_BYTES = 32
MAX_URL_CHARS = 2048
MAX_TOKEN_CHARS = 4096
PERSONAL_CLICK_SECONDS = 300
"""How long a personal click token attributes its click to the reader it was minted for.

The reader page mints one right before it navigates, so minutes are plenty; past this the token
still redirects (for its full TTL) but logs an anonymous click."""
NONCE_BYTES = 16
SESSIONS_REMEMBERED = 50_000
_READER_BYTES = 16  # a reader_hash is 32 hex digits
_CLICK_VERSION = 2
_CLICK_VERSION_1 = 1  # before nonces: still redirected until they expire, always anonymous
_SESSION_VERSION = 1
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
# RFC 3986 reserved and unreserved characters, and "%" so an already-encoded URL is left as is.
_URL_SAFE = "%:/?#[]@!$&'()*+,;=~-._"
# WHATWG URL forbidden domain code points that urlsplit lets through in a host (#16).
_FORBIDDEN_HOST_CHARS = frozenset(" #%/<>?@[\\]^|")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    """Decode unpadded base64url strictly: only the canonical spelling of some bytes is accepted.

    The standard decoder drops characters outside the alphabet and ignores non-zero trailing bits,
    so many strings decode to the same token; a click must have exactly one spelling.
    """
    if len(text) > MAX_TOKEN_CHARS:
        raise InvalidTokenError("token too long")
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise InvalidTokenError("token is not base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error) as e:
        raise InvalidTokenError("token is not base64url") from e
    if _b64encode(data) != text:
        raise InvalidTokenError("token is not canonical base64url")
    return data


def _has_control_chars(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def header_safe_url(url: str) -> str | None:
    """``url`` as an ASCII http(s) URL that can go in a ``Location`` header, or None.

    Non-ASCII is percent-encoded as UTF-8 (the host becomes IDNA), as browsers do with an IRI
    (RFC 3987 section 3.1); spaces and other characters that are never literal in a URI are
    percent-encoded too, while ``%`` is kept, so an already-encoded URL comes back unchanged.
    URLs holding control characters (CR, LF, NUL, tab, DEL, C1) are refused: they are either
    broken or an attempt at header injection. So are URLs longer than MAX_URL_CHARS once encoded.

    >>> header_safe_url("https://news.example/新闻/a b")
    'https://news.example/%E6%96%B0%E9%97%BB/a%20b'
    >>> header_safe_url("https://news.example/%E6%96%B0%E9%97%BB/a%20b")
    'https://news.example/%E6%96%B0%E9%97%BB/a%20b'
    >>> header_safe_url("https://x.example/a\\r\\nSet-Cookie: a=b"), header_safe_url("javascript:alert(1)")
    (None, None)
    """
    if len(url) > MAX_URL_CHARS or _has_control_chars(url):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    if any(ch in _FORBIDDEN_HOST_CHARS for ch in host):
        return None  # not a name a resolver looks up: "a b.example", "a|b.example"
    netloc = parts.netloc
    if not netloc.isascii():
        if ":" in host:
            return None  # an IPv6 literal is ASCII
        try:
            # UTS #46, not IDNA 2003: "straße.de" is xn--strae-oqa.de, not strasse.de (another domain).
            hostport = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError):
            return None
        hostport += f":{port}" if port is not None else ""
        userinfo = netloc.rpartition("@")[0] if "@" in netloc else ""
        netloc = f"{quote(userinfo, safe=_URL_SAFE)}@{hostport}" if userinfo else hostport
    safe = urlunsplit((
        parts.scheme,
        netloc,
        quote(parts.path, safe=_URL_SAFE),
        quote(parts.query, safe=_URL_SAFE),
        quote(parts.fragment, safe=_URL_SAFE),
    ))
    return safe if len(safe) <= MAX_URL_CHARS else None


def is_web_url(url: str) -> bool:
    """Whether ``url`` is an absolute, header-safe http(s) URL short enough to sign.

    >>> is_web_url("https://example.org/a"), is_web_url("javascript:alert(1)"), is_web_url("//x")
    (True, False, False)
    >>> is_web_url("https://news.example/新闻"), is_web_url("https://x.example/\\r\\n")
    (False, False)
    """
    return header_safe_url(url) == url


@dataclass(frozen=True, slots=True)
class ClickPayload:
    """What a click token names.

    ``reader_hash`` is empty for an anonymous click: a reader not signed in, or a personal token
    used after PERSONAL_CLICK_SECONDS. ``click_id`` derives from the token's MAC, so every
    spelling of one token (there is one) and every reload of it is the same click.
    """

    article_id: str
    story_id: str
    url: str
    reader_hash: str
    surface: Surface
    position: int
    issued_at: int
    click_id: str


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
        self._reader_box_key = hmac.digest(key, b"newsroom/click-reader/v2", hashlib.sha256)
        self.click_ttl_seconds = click_ttl_seconds
        self.session_ttl_seconds = session_ttl_seconds
        # A reader sends the same session token with every request: its MAC, JSON and pseudonym are
        # worked out once (issue 29). Only genuine tokens are remembered (a refusal raises, and
        # lru_cache keeps no exceptions); expiry is checked on every use.
        self._opened_session = lru_cache(maxsize=SESSIONS_REMEMBERED)(self._open_session)

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
    def _open(key: bytes, token: str) -> tuple[list[object], bytes]:
        """The payload of a genuine token, and its MAC."""
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
        return payload, mac

    def _reader_pad(self, nonce: bytes) -> bytes:
        return hmac.digest(self._reader_box_key, nonce, hashlib.sha256)[:_READER_BYTES]

    def _seal_reader(self, reader_hash: str, nonce: bytes) -> str:
        if not reader_hash:
            return ""
        plain = bytes.fromhex(reader_hash)
        if len(plain) != _READER_BYTES:
            raise ValueError("a reader hash is 32 hex digits")
        return _b64encode(bytes(a ^ b for a, b in zip(plain, self._reader_pad(nonce), strict=True)))

    def _open_reader(self, box: str, nonce: bytes) -> str:
        if not box:
            return ""
        sealed = _b64decode(box)
        if len(sealed) != _READER_BYTES:
            raise InvalidTokenError("malformed payload")
        return bytes(a ^ b for a, b in zip(sealed, self._reader_pad(nonce), strict=True)).hex()

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
        """A token for ``/r/{token}``, with a fresh nonce: no two calls give the same token.

        Args:
            article_id: The article clicked.
            story_id: The story listing it.
            url: The publisher's URL; made header-safe (``header_safe_url``) before it is signed.
            reader_hash: The reader's pseudonym, sealed into the token; ``""`` for anonymous.
                Pass it only for a request made with the reader's own session.
            surface: Where the link was shown.
            position: Its position there.
            now: Unix seconds (tests); None for the clock.

        Returns:
            The token.

        Raises:
            UnsignableUrlError: ``url`` is not an http(s) URL that can be put in a header.
        """
        safe_url = header_safe_url(url)
        if safe_url is None:
            raise UnsignableUrlError(article_id)
        issued_at = int(now if now is not None else time.time())
        nonce = secrets.token_bytes(NONCE_BYTES)
        return self._seal(
            self._click_key,
            [_CLICK_VERSION, article_id, story_id, safe_url, self._seal_reader(reader_hash, nonce),
             surface, position, issued_at, _b64encode(nonce)],
        )

    def verify_click(self, token: str, now: float | None = None) -> ClickPayload:
        """The payload of a genuine, unexpired click token. Raises InvalidTokenError otherwise.

        A personal token older than PERSONAL_CLICK_SECONDS is answered as an anonymous click:
        whoever holds a shared link still reaches the article, but cannot act as its reader.
        A version-1 token (no nonce, readable pseudonym) is honoured until it expires, anonymously.
        """
        payload, mac = self._open(self._click_key, token)
        if len(payload) == 9 and payload[0] == _CLICK_VERSION:
            _, article_id, story_id, url, reader_box, surface, position, issued_at, nonce_text = payload
            if not isinstance(reader_box, str) or not isinstance(nonce_text, str):
                raise InvalidTokenError("malformed payload")
            nonce = _b64decode(nonce_text)
            reader_hash = self._open_reader(reader_box, nonce)
        elif len(payload) == 8 and payload[0] == _CLICK_VERSION_1:
            _, article_id, story_id, url, _readable, surface, position, issued_at = payload
            reader_hash = ""
        else:
            raise InvalidTokenError("unknown token version")
        if not (
            isinstance(article_id, str)
            and isinstance(story_id, str)
            and isinstance(url, str)
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
        if current > issued_at + PERSONAL_CLICK_SECONDS:
            reader_hash = ""
        click_id = hashlib.blake2b(mac, digest_size=12).hexdigest()
        return ClickPayload(
            article_id, story_id, url, reader_hash, surface, position, issued_at, click_id  # type: ignore[arg-type]
        )

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
        session = self._opened_session(token)
        if (now if now is not None else time.time()) > session.expires_at:
            raise InvalidTokenError("session expired")
        return session

    def _open_session(self, token: str) -> Session:
        """A genuine session token's session, expired or not (``_opened_session`` memoises it)."""
        payload, _ = self._open(self._session_key, token)
        if len(payload) != 3 or payload[0] != _SESSION_VERSION:
            raise InvalidTokenError("unknown session version")
        _, reader, expires_at = payload
        if not isinstance(reader, str) or not isinstance(expires_at, int):
            raise InvalidTokenError("malformed session")
        return Session(reader, self.reader_hash(reader), expires_at)
