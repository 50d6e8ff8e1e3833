"""Click links and tokens (serving/signing.py): header-safe publisher URLs, strict token spellings,
one click per token and reader, and shared links that carry no readable pseudonym (the serving
review's D1, D3, D4 and D9).
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from conftest import (
    FIRST_ARTICLE,
    clicks_in,
    client_with_first_url,
    sign_in,
    signer,
    token_json,
)
from fastapi.testclient import TestClient

from serving.errors import InvalidTokenError
from serving.signing import PERSONAL_CLICK_SECONDS, header_safe_url, is_web_url
from warehouse.store import ObjectStore

# -- D1: publisher URLs must fit in a Location header --------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://news.example/a?b=1#c", "https://news.example/a?b=1#c"),
        ("https://news.example/新闻/2024/头条", "https://news.example/%E6%96%B0%E9%97%BB/2024/%E5%A4%B4%E6%9D%A1"),
        ("https://news.example/%E6%96%B0%E9%97%BB/x", "https://news.example/%E6%96%B0%E9%97%BB/x"),
        ("https://news.example/a b?q=ü#é", "https://news.example/a%20b?q=%C3%BC#%C3%A9"),
        ("https://bücher.example/a", "https://xn--bcher-kva.example/a"),
        ("https://news.example/a\r\nSet-Cookie: x=1", None),
        ("https://news.example/a\nb", None),
        ("https://news.example/a\x00", None),
        ("https://news.example/\ta", None),
        ("https://news.example/a\x7f", None),
        ("https://news.example/a\x85", None),
        ("javascript:alert(1)", None),
        ("https://news.example/" + "a" * 2100, None),
        ("https://news.example/" + "新" * 700, None),  # short as text, too long once encoded
        # UTS #46 like the pipeline's canonical URLs, not IDNA 2003 (strasse.de is another domain) (#16)
        ("https://straße.de:8443/a", "https://xn--strae-oqa.de:8443/a"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("https://a b.example/a", None),
        ("https://a|b.example/a", None),
        ("https://a<b.example/a", None),
        ("https://\u2488.example/a", None),
    ],
    ids=["ascii", "iri-path", "already-encoded", "space-query-fragment", "idn-host", "crlf", "lf", "nul",
         "tab", "del", "c1-nel", "not-web", "too-long", "too-long-encoded", "uts46-sharp-s", "ipv6-literal",
         "host-space", "host-pipe", "host-angle", "host-disallowed-by-uts46"],
)
def test_header_safe_url_encodes_non_ascii_and_refuses_control_chars(url: str, expected: str | None) -> None:
    safe = header_safe_url(url)
    assert safe == expected
    if safe is not None:
        assert safe.isascii() and header_safe_url(safe) == safe and is_web_url(safe)  # idempotent


def test_iri_publisher_url_redirects_percent_encoded(tmp_path: Path) -> None:
    store, client = client_with_first_url(tmp_path, "https://news.example/新闻/2024/头条")
    with client:
        minted = client.post("/v1/click-token", json={"article_id": FIRST_ARTICLE})
        assert minted.status_code == 200
        response = client.get(minted.json()["click_url"], follow_redirects=False)
        assert response.status_code == 302
        assert response.headers["location"] == "https://news.example/%E6%96%B0%E9%97%BB/2024/%E5%A4%B4%E6%9D%A1"
        assert len(clicks_in(store, client)) == 1


@pytest.mark.parametrize(
    "url", ["https://news.example/a\r\nSet-Cookie: x=1", "https://news.example/a?" + "x" * 2100],
    ids=["crlf", "over-2048-chars"],
)
def test_unsignable_publisher_url_is_a_4xx_and_never_breaks_for_you(tmp_path: Path, url: str) -> None:
    store, client = client_with_first_url(tmp_path, url)
    with client:
        minted = client.post("/v1/click-token", json={"article_id": FIRST_ARTICLE})
        assert minted.status_code == 422
        assert minted.json() == {"detail": "this article's publisher URL cannot be linked to"}

        feed = client.get("/v1/feed?limit=50", headers=sign_in(client, "alice"))
        assert feed.status_code == 200
        sources = {src["article_id"]: src for s in feed.json()["stories"] for src in s["sources"]}
        assert sources[FIRST_ARTICLE]["click_url"] is None
        others = [src for aid, src in sources.items() if aid != FIRST_ARTICLE]
        assert others and all(src["click_url"].startswith("/r/") for src in others)
        assert clicks_in(store, client) == []


# -- D3 and D9: one token, one spelling, one click; two readers, two clicks -----------------------


def _respellings(token: str) -> list[str]:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    # A different last character that the lenient decoder maps to the same bytes (unused low bits).
    same_bytes = [
        token[:-1] + c for c in alphabet
        if c != token[-1] and base64.urlsafe_b64decode(token[:-1] + c + "=" * (-len(token) % 4)) == raw
    ]
    return [token + "....", token + "~~~~", token + "!!!!", token + "$$$$", "." + token, token + "=", *same_bytes[:1]]


def test_click_tokens_decode_strictly_so_respellings_log_no_extra_click(
    client: TestClient, local_store: ObjectStore
) -> None:
    token = client.post("/v1/click-token", json={"article_id": FIRST_ARTICLE}).json()["token"]
    if len(token) % 4 == 0:  # no unused bits to play with: make one by trying other articles
        token = client.post("/v1/click-token", json={"article_id": "0196f1c2a3b40002-a0"}).json()["token"]
    assert client.get(f"/r/{token}", follow_redirects=False).status_code == 302
    for spelling in _respellings(token):
        response = client.get(f"/r/{spelling}", follow_redirects=False)
        assert response.status_code == 400, spelling[-6:]
        assert "location" not in response.headers
    assert client.get(f"/r/{token}", follow_redirects=False).status_code == 302  # a reload
    assert len(clicks_in(local_store, client)) == 1


def test_same_article_same_second_gives_each_reader_their_own_click(
    client: TestClient, local_store: ObjectStore
) -> None:
    body = {"article_id": FIRST_ARTICLE, "surface": "top", "position": 0}
    first = client.post("/v1/click-token", json=body).json()["token"]
    second = client.post("/v1/click-token", json=body).json()["token"]
    assert first != second
    for token in (first, second, first):  # the last one is a reload
        assert client.get(f"/r/{token}", follow_redirects=False).status_code == 302
    rows = clicks_in(local_store, client)
    assert len(rows) == 2 and len({r["click_id"] for r in rows}) == 2


def test_click_id_derives_from_the_mac_not_the_token_text() -> None:
    s = signer()
    token = s.issue_click(article_id="a", story_id="s", url="https://x.example/", reader_hash="",
                          surface="top", position=0)
    click = s.verify_click(token)
    assert click.click_id == s.verify_click(token).click_id
    assert len(click.click_id) == 24


# -- D4: shared links carry no readable pseudonym and write into no profile -----------------------


def test_for_you_links_name_no_reader_and_write_into_no_profile(client: TestClient, local_store: ObjectStore) -> None:
    alice = sign_in(client, "alice")
    alice_hash = signer().reader_hash("alice")
    source = client.get("/v1/feed", headers=alice).json()["stories"][0]["sources"][0]
    token = source["click_url"].removeprefix("/r/")
    assert alice_hash not in token_json(token)

    # Someone else follows alice's card link: they reach the article, alice's profile is untouched.
    assert client.get(source["click_url"], follow_redirects=False).status_code == 302
    assert client.get("/v1/me", headers=alice).json()["reads"] == 0
    assert [r["reader_hash"] for r in clicks_in(local_store, client)] == [""]


def test_personal_click_needs_the_session_and_keeps_the_pseudonym_sealed(
    client: TestClient, local_store: ObjectStore
) -> None:
    alice = sign_in(client, "alice")
    alice_hash = signer().reader_hash("alice")
    minted = client.post("/v1/click-token", headers=alice,
                         json={"article_id": FIRST_ARTICLE, "surface": "for_you", "position": 0})
    assert minted.status_code == 200
    token = minted.json()["token"]
    payload = token_json(token)
    assert alice_hash not in payload and "alice" not in payload
    assert client.get("/v1/me", headers=alice).json()["reads"] == 1  # recorded on alice's session

    assert client.get(f"/r/{token}", follow_redirects=False).status_code == 302
    assert [r["reader_hash"] for r in clicks_in(local_store, client)] == [alice_hash]


def test_a_personal_token_replayed_late_is_an_anonymous_click() -> None:
    s = signer()
    alice_hash = s.reader_hash("alice")
    issued = time.time() - PERSONAL_CLICK_SECONDS - 5
    token = s.issue_click(article_id="a", story_id="s", url="https://x.example/", reader_hash=alice_hash,
                          surface="for_you", position=0, now=issued)
    assert s.verify_click(token, now=issued + 1).reader_hash == alice_hash
    late = s.verify_click(token)
    assert late.reader_hash == "" and late.url == "https://x.example/"


def test_version_1_tokens_still_redirect_but_anonymously() -> None:
    s = signer()
    v1 = s._seal(s._click_key, [1, "a", "s", "https://x.example/", s.reader_hash("alice"), "top", 0, int(time.time())])
    click = s.verify_click(v1)
    assert click.reader_hash == "" and click.url == "https://x.example/"


def test_a_remembered_session_still_expires_and_a_forged_one_is_never_remembered() -> None:
    s = signer()
    token, session = s.issue_session("alice", now=1_000.0)
    assert s.verify_session(token, now=1_001.0) == session  # worked out once, then remembered
    assert s.verify_session(token, now=1_002.0) == session
    with pytest.raises(InvalidTokenError, match="expired"):
        s.verify_session(token, now=session.expires_at + 1.0)
    forged = token[:-2] + ("AA" if token[-2:] != "AA" else "BA")
    for _ in range(2):
        with pytest.raises(InvalidTokenError):
            s.verify_session(forged, now=1_001.0)
