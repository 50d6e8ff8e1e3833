"""Registry files from operators: every row validated, errors by line, nothing half-imported (#16).

Each class of bad input has its own case; the CLI cases run ``newsroom publishers import`` for real
and check that it exits non-zero with one ``FILE:LINE: why`` line per bad row and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_paths import CORPUS

from tasks.registry import RegistryImportError, import_publishers, load_registry, read_publishers_csv
from warehouse.store import LocalStore

REPO = Path(__file__).resolve().parents[2]
HEADER = "publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
GOOD = "herald,Herald,herald.example,GB,en,1,0.8,false,false,https://herald.example/rss,world\n"

# (file body after the header, the line the error is on, what the message says)
BAD_ROWS = [
    ("ftp", "a,A,a.example,GB,en,2,0.5,,,ftp://a.example/rss,\n", 3, "http(s)"),
    ("javascript", "a,A,a.example,GB,en,2,0.5,,,javascript:alert(1),\n", 3, "http(s)"),
    ("not-a-url", "a,A,a.example,GB,en,2,0.5,,,news feed,\n", 3, "not an absolute URL"),
    ("no-host", "a,A,a.example,GB,en,2,0.5,,,https:///rss,\n", 3, "no host"),
    ("host-with-space", "a,A,a.example,GB,en,2,0.5,,,https://a b.example/rss,\n", 3, "invalid host"),
    ("private-address", "a,A,a.example,GB,en,2,0.5,,,http://10.0.0.7/rss,\n", 3, "non-public address"),
    ("link-local", "a,A,a.example,GB,en,2,0.5,,,http://169.254.169.254/latest,\n", 3, "non-public address"),
    ("localhost", "a,A,a.example,GB,en,2,0.5,,,http://localhost:8080/rss,\n", 3, "non-public address"),
    ("missing-fields", "a,A,a.example,GB\n", 3, "4 fields, the header has 11"),
    ("extra-fields", "a,A,a.example,GB,en,2,0.5,,,https://a.example/rss,,extra\n", 3, "12 fields"),
    ("duplicate-id-differs", "herald,Herald Two,herald.example,GB,en,1,0.8,false,false,https://herald.example/2,\n",
     3, "other name than on line 2"),
    ("duplicate-feed", "herald,Herald,herald.example,GB,en,1,0.8,false,false,https://herald.example/rss,uk\n",
     3, "already the feed on line 2"),
    ("shared-feed", "b,B,b.example,GB,en,2,0.5,,,https://herald.example/rss,\n", 3, "of publisher herald on line 2"),
    ("language", "a,A,a.example,GB,english!!,2,0.5,,,https://a.example/rss,\n", 3, "language tag"),
    ("language-word", "a,A,a.example,GB,English,2,0.5,,,https://a.example/rss,\n", 3, "language tag"),
    ("tier-word", "a,A,a.example,GB,en,one,0.5,,,https://a.example/rss,\n", 3, "tier must be one of 1, 2, 3"),
    ("tier-range", "a,A,a.example,GB,en,7,0.5,,,https://a.example/rss,\n", 3, "tier"),
    ("authority-word", "a,A,a.example,GB,en,2,high,,,https://a.example/rss,\n", 3, "authority"),
    ("authority-nan", "a,A,a.example,GB,en,2,nan,,,https://a.example/rss,\n", 3, "authority"),
    ("flag", "a,A,a.example,GB,en,2,0.5,maybe,,https://a.example/rss,\n", 3, "paywalled must be true or false"),
    ("region", "a,A,a.example,United Kingdom,en,2,0.5,,,https://a.example/rss,\n", 3, "region"),
    ("empty-id", ",A,a.example,GB,en,2,0.5,,,https://a.example/rss,\n", 3, "publisher_id is empty"),
    ("id-with-slash", "a/b,A,a.example,GB,en,2,0.5,,,https://a.example/rss,\n", 3, "publisher_id must be"),
    ("domain", "a,A,a|b.example,GB,en,2,0.5,,,https://a.example/rss,\n", 3, "domain"),
    ("quoted-newline-keeps-lines", '"a","A\nB",a.example,GB,en,2,0.5,,,ftp://x/rss,\n', 3, "http(s)"),
    ("after-multiline-record", '"a","A B",a.example,GB,en,2,0.5,,,https://a.example/rss,"two\nlines"\n'
     "c,C,c.example,GB,en,2,0.5,,,ftp://c.example/rss,\n", 5, "http(s)"),
]


def _write(tmp_path: Path, body: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(body.encode("utf-8"))
    return path


@pytest.mark.parametrize(("rows", "line", "message"), [(r, ln, m) for _, r, ln, m in BAD_ROWS],
                         ids=[i for i, *_ in BAD_ROWS])
def test_a_bad_row_is_named_by_line_and_nothing_is_imported(tmp_path: Path, rows: str, line: int, message: str) -> None:
    store = LocalStore(tmp_path / "store")
    path = _write(tmp_path, HEADER + GOOD + rows)
    with pytest.raises(RegistryImportError) as err:
        import_publishers(store, path, private_networks=())
    assert any(e.line == line and message in e.message for e in err.value.errors), err.value.errors
    assert load_registry(store).publishers == {}  # not even the good row


@pytest.mark.parametrize(("rows", "line", "message"), [(r, ln, m) for _, r, ln, m in BAD_ROWS],
                         ids=[i for i, *_ in BAD_ROWS])
def test_skip_invalid_imports_the_good_rows_and_lists_the_bad(tmp_path: Path, rows: str, line: int,
                                                               message: str) -> None:
    store = LocalStore(tmp_path / "store")
    result = import_publishers(store, _write(tmp_path, HEADER + GOOD + rows), skip_invalid=True, private_networks=())
    assert any(e.line == line and message in e.message for e in result.skipped), result.skipped
    registry = load_registry(store)
    assert "herald" in registry.publishers
    assert [f["url"] for f in registry.feeds if f["publisher_id"] == "herald"][0] == "https://herald.example/rss"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("publisher_id;name;domain;region;language;tier;authority;paywalled;opted_out;feed_url;section\n"
         "a;A;a.example;GB;en;2;0.5;;;https://a.example/rss;\n", "';'-separated"),
        ("publisher_id\tname\tfeed_url\na\tA\thttps://a.example/rss\n", "'\\t'-separated"),
        ("name,domain,feed_url\nA,a.example,https://a.example/rss\n", "no publisher_id column"),
        ("publisher_id,name,name\na,A,B\n", "columns named twice: name"),
        ("", "empty file"),
        (HEADER, "no publisher rows"),
    ],
    ids=["semicolons", "tabs", "no-id-column", "duplicate-column", "empty", "header-only"],
)
def test_a_bad_header_is_an_error_not_zero_rows(body: str, message: str) -> None:
    errors = read_publishers_csv(body).errors
    assert errors and errors[0].line == 1 and message in errors[0].message, errors


def test_a_byte_order_mark_is_read_as_utf8(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + GOOD).encode())
    result = import_publishers(store, path)
    assert list(result.registry.publishers) == ["herald"] and result.registry.feeds[0]["url"].endswith("/rss")


def test_a_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes((HEADER + "a,Caf\xe9,a.example,GB,en,2,0.5,,,https://a.example/rss,\n").encode("latin-1"))
    with pytest.raises(RegistryImportError) as err:
        import_publishers(LocalStore(tmp_path / "store"), path)
    assert err.value.errors[0].line == 2 and "not UTF-8" in err.value.errors[0].message


def test_one_publisher_with_several_feeds_is_fine(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    body = HEADER + GOOD + GOOD.replace("/rss,world", "/sport.rss,sport")
    result = import_publishers(store, _write(tmp_path, body))
    assert len(result.registry.feeds) == 2 and result.skipped == ()


def test_a_feed_already_registered_to_another_publisher_is_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    import_publishers(store, _write(tmp_path, HEADER + GOOD))
    other = _write(tmp_path, HEADER + "thief,T,t.example,GB,en,2,0.5,,,https://herald.example/rss,\n", "q.csv")
    with pytest.raises(RegistryImportError, match=r"line 2: .*already registered to publisher herald"):
        import_publishers(store, other)
    assert set(load_registry(store).publishers) == {"herald"}


def test_private_feeds_are_allowed_in_the_allowed_networks(tmp_path: Path) -> None:
    body = HEADER + "a,A,a.example,GB,en,2,0.5,,,http://127.0.1.5:8080/rss,\n"
    assert read_publishers_csv(body, private_networks=("127.0.0.0/8",)).errors == ()
    assert read_publishers_csv(body, private_networks=()).errors


# --- OPML ------------------------------------------------------------------------------------------

def test_a_real_opml_file_imports(tmp_path: Path) -> None:
    opml = CORPUS / "feeds" / "real" / "rsparser" / "Subs.opml"
    result = import_publishers(LocalStore(tmp_path / "store"), opml, private_networks=())
    assert result.skipped == () and len(result.registry.feeds) == opml.read_text().count("xmlUrl=")


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ('<opml version="2.0"><body>\n<outline xmlUrl="https://a.example/rss" tier="one"/>\n</body></opml>', 2, "tier"),
        ('<opml version="2.0"><body>\n\n<outline xmlUrl="javascript:alert(1)"/></body></opml>', 3, "http(s)"),
        ('<opml version="2.0"><body>\n<outline xmlUrl="https://a.example/rss" publisher_id="a"/>\n'
         '<outline xmlUrl="https://a.example/rss" publisher_id="b"/></body></opml>', 3, "of publisher a on line 2"),
        ('<opml version="2.0"><body>\n<outline xmlUrl="https://a.example/rss"\n</body></opml>', 3, "not well-formed"),
        ('<?xml version="1.0"?>\n<!DOCTYPE opml [<!ENTITY a "b">]>\n<opml><body/></opml>', 1, "forbidden XML"),
    ],
    ids=["tier", "javascript", "shared-feed", "not-well-formed", "entity"],
)
def test_a_bad_opml_outline_is_named_by_line(tmp_path: Path, body: str, line: int, message: str) -> None:
    store = LocalStore(tmp_path / "store")
    with pytest.raises(RegistryImportError) as err:
        import_publishers(store, _write(tmp_path, body, "p.opml"))
    assert any(e.line == line and message in e.message for e in err.value.errors), err.value.errors
    assert load_registry(store).feeds == []


# --- the command line -------------------------------------------------------------------------------

def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store")}
    env.pop("NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES", None)
    return subprocess.run([sys.executable, "-m", "flows.cli", "publishers", "import", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_cli_reports_every_bad_row_and_imports_nothing(tmp_path: Path) -> None:
    body = HEADER + GOOD + "".join(rows for i, rows, _, _ in BAD_ROWS if i in ("ftp", "private-address", "tier-word"))
    path = _write(tmp_path, body)
    done = _cli(tmp_path, str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert [ln.split(":")[1] for ln in lines[:3]] == ["3", "4", "5"], lines
    assert "nothing imported" in lines[-1]
    assert not (tmp_path / "store" / "registry").exists()
    skipped = _cli(tmp_path, str(path), "--skip-invalid")
    assert skipped.returncode == 1 and "imported 1 publishers, 1 feeds (3 invalid row(s) skipped)" in skipped.stdout


@pytest.mark.parametrize("name", ["missing.csv", "bad.opml"])
def test_the_cli_never_shows_a_traceback(tmp_path: Path, name: str) -> None:
    if name == "bad.opml":
        _write(tmp_path, "<opml><body><outline xmlUrl='x", name)
    done = _cli(tmp_path, str(tmp_path / name))
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.startswith(str(tmp_path / name))
