"""Per-article features kept instead of the body: signatures, a sparse term vector, entities.

:func:`features_from_text` is the one function that turns a fetched article into the features
the clusterer uses. The ingest flow calls it on the fetched body just before the body is
dropped, and ``cluster-eval`` calls it on the evaluation text, so both see the same numbers.

Term weights need no corpus. A term's weight is ``(1 + ln tf) × prior``, where:

- ``tf`` counts the term in the body, plus title occurrences (×3) and lede occurrences (×1.5):
  the headline and first sentences say what the story is about;
- ``prior`` is a fixed, language-aware rule: stopwords (English, Malay/Indonesian, and
  Chinese function characters) are dropped; a word seen capitalised mid-sentence (a proper
  noun) counts ×1.6; a four-digit year ×1.5; other numbers ×0.9; words of 1–2 letters ×0.5.

Only the 64 heaviest terms are kept and the vector is L2-normalised. Corpus statistics (an
online IDF) are applied later, by the clusterer, which sees the stream
(:mod:`transforms.clustering`).

Every text is capped in characters before a regular expression sees it (issue 32): the body at
:data:`FEATURE_TEXT_MAX_CHARS`, the title at :data:`FEATURE_TITLE_MAX_CHARS`. A term is at most
:data:`TERM_MAX_CHARS` characters and an entity at most :data:`ENTITY_MAX_CHARS`: a longer token is
a URL, a hash or a page without spaces, never a word worth keeping as a term (the stored rows and
the clusterer's IDF table key on them).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from newsroom.times import parse_iso_datetime
from transforms.embedding import EMBEDDING_MODEL_ID, LEGACY_EMBEDDING_MODEL_ID
from transforms.records import ArticleRow
from transforms.signatures import (
    SIGNATURE_VERSION,
    copy_shingles,
    is_cjk_language,
    minhash_signature,
    simhash_fingerprint,
    tokenize,
)

TOP_K_TERMS = 64
MAX_ENTITIES = 32
TITLE_WEIGHT = 3.0
LEDE_WEIGHT = 1.5
LEDE_CHARS = 400
FEATURES_VERSION = "feat-v1"
FEATURE_TEXT_MAX_CHARS = 200_000
"""The most characters of a body that signatures, terms and entities are computed on: about 30,000
words, several times the longest article of the dev corpora (53,000 characters on the pages corpus)."""
FEATURE_TITLE_MAX_CHARS = 1_000
"""The most characters of a title that terms and entities are computed on (ingest keeps 300)."""
TERM_MAX_CHARS = 64
"""A longer token is never a term; the dev corpora's longest word is 48 characters."""
ENTITY_MAX_CHARS = 100
"""A longer run of capitalised words is never an entity (it is a shouted sentence, or one huge token)."""

_EN_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can cannot could did do does doing don't down during each even ever every few
    for from further get gets got had has have having he her here hers herself him himself his how however i
    if in into is isn't it it's its itself just last least less let like made make many may me might more
    most much must my myself never new no nor not now of off often on once one only or other others our ours
    ourselves out over own per put said same say says she should since so some still such than that the their
    theirs them themselves then there these they this those though through thus to too two under until up
    upon us very was wasn't we were what when where whether which while who whom whose why will with within
    without would yet you your yours yourself yourselves mr mrs ms dr s t re ve ll d m told according also
    around across along among another back become came come comes going go goes gone know known take taken
    took well year years week weeks day days time times including include includes us via will would
    monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow tonight
    january february march april june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)
_MS_STOPWORDS = frozenset(
    """
    yang dan di ke dari untuk dengan pada ini itu dalam tidak akan ada oleh atau juga sebagai telah bagi
    kepada mereka ia dia kami kita saya anda sudah lebih karena kerana bahawa bahwa adalah iaitu yakni
    para satu dua tiga seorang sebuah beberapa semua hanya masih boleh dapat bisa harus perlu antara
    selepas setelah sebelum semasa ketika jika kalau namun tetapi tapi serta lagi pula pun lalu kata
    berkata katanya menurut hari ini tahun bulan minggu encik cik puan tuan dr hingga sehingga sejak
    atas bawah luar dalam begitu sangat paling secara agar supaya maka jadi sama turut iaitu tersebut
    isnin selasa rabu khamis jumaat sabtu ahad senin kamis jumat minggu
    """.split()
)
# Chinese function characters: a CJK bigram containing one carries little topical meaning.
_ZH_STOPCHARS = frozenset("的了是在和有也与及等这那将为对于中上个不以被并而其之或就都很还把向从到让给着过们他她它我你日月年")
_LATIN_STOPWORDS = _EN_STOPWORDS | _MS_STOPWORDS

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_CAP_WORD_RE = re.compile(r"[^\W\d_][\w'’\-]*", re.UNICODE)
_LATIN_WORD_RE = re.compile(r"[A-Za-z\u00c0-\u024f][A-Za-z\u00c0-\u024f0-9'’\-]*")
_YEAR_RE = re.compile(r"^(1[89]\d\d|20\d\d)$")
DATE_TERM_PREFIX = "date:"
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|januari|februari|mac|mei|julai|ogos|okt(?:ober)?|disember|desember)"
)
# A written-out date: "Sep 27, 2013", "27 September 2013", "2/3/2009", "2013-09-17", "2013年9月17日".
_DATE_RES = (
    re.compile(rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+((?:19|20)\d\d)\b", re.IGNORECASE),
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+((?:19|20)\d\d)\b", re.IGNORECASE),
    re.compile(r"\b\d{1,2}[/.]\d{1,2}[/.]((?:19|20)\d\d)\b"),
    re.compile(r"\b((?:19|20)\d\d)-\d\d-\d\d\b"),
    re.compile(r"((?:19|20)\d\d)\s*年\s*\d{1,2}\s*月"),
)
DATELINE_CHARS = 300
_NUMBER_RE = re.compile(r"^\d+$")
# Words that are capitalised for grammar, not because they name something.
_NON_NAME_CAPS = _LATIN_STOPWORDS | frozenset(
    """
    i he she it we they you the a an this that these those there here what when where why how who
    but and or so if as at in on of for to by with from after before while
    """.split()
)


@dataclass(frozen=True, slots=True)
class ArticleFeatures:
    """What newsroom keeps about an article's text (the body itself is never stored)."""

    article_id: str
    language: str
    first_seen_at: datetime
    publisher_id: str | None
    title: str
    simhash: int
    minhash: tuple[int, ...]
    terms: tuple[str, ...]
    term_weights: tuple[float, ...]
    entities: tuple[str, ...]
    embedding: tuple[float, ...] | None
    signature_version: str
    embedding_model: str | None = EMBEDDING_MODEL_ID
    """The model ``embedding`` was made by (``transforms.embedding.EMBEDDING_MODEL_ID``); features
    built in this process carry this release's, a stored row the one it names (issue 33)."""


# Arrow types of features_to_row's columns, for the warehouse schema (names only: no pyarrow here).
FEATURE_COLUMNS: Mapping[str, str] = {
    "article_id": "string",
    "language": "string",
    "first_seen_at": "timestamp[us, UTC]",
    "publisher_id": "string (nullable)",
    "title": "string",
    "simhash": "uint64",
    "minhash": "list<uint32>",
    "terms": "list<string>",
    "term_weights": "list<float32>",
    "entities": "list<string>",
    "embedding": "list<float32> (nullable)",
    "signature_version": "string",
}


def _split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_SPLIT_RE.split(text) if s.strip()]


def _is_term(token: str, cjk: bool) -> bool:
    if len(token) > TERM_MAX_CHARS:
        return False
    if cjk and not token.isascii():
        return not any(ch in _ZH_STOPCHARS for ch in token)
    if token in _LATIN_STOPWORDS:
        return False
    if _NUMBER_RE.match(token):
        return len(token) >= 2 or token != "0"
    return len(token) >= 2


def _term_prior(token: str, proper: frozenset[str]) -> float:
    if _YEAR_RE.match(token):
        return 1.5
    if _NUMBER_RE.match(token):
        return 0.9
    prior = 1.0
    if token in proper:
        prior *= 1.6
    if len(token) <= 2 and token.isascii():
        prior *= 0.5
    return prior


def extract_entities(text: str, language: str, limit: int = MAX_ENTITIES) -> tuple[str, ...]:
    """Proper names by a cheap heuristic: runs of capitalised words not opening a sentence.

    Latin-script text: a run of capitalised words (``Tara Reid``, ``Wasilla Bible Church``) is
    one entity; a single capitalised word counts only when it does not open a sentence and is
    not a common word. CJK text: Latin-script words and acronyms embedded in it
    (``Leonard Glenn Francis``, ``NEA``), which are often the names newswires give in
    brackets. Entities are ranked by frequency (then first occurrence) and case-folded.

    Args:
        text: Title and body; only the first ``FEATURE_TEXT_MAX_CHARS`` characters are read.
        language: ISO 639-1 code.
        limit: Most entities to return.

    Returns:
        Case-folded entity strings, most frequent first.

    >>> extract_entities("The actress Tara Reid entered rehab. On Monday, Reid said so.", "en")
    ('tara reid', 'reid')
    """
    text = unicodedata.normalize("NFKC", text[:FEATURE_TEXT_MAX_CHARS])
    cjk = is_cjk_language(language)
    word_re = _LATIN_WORD_RE if cjk else _CAP_WORD_RE
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}

    def _flush(run: list[str], starts_sentence: bool) -> None:
        if run and (len(run) > 1 or not starts_sentence):
            name = " ".join(run).casefold()
            if 2 <= len(name) <= ENTITY_MAX_CHARS:
                counts[name] += 1
                first.setdefault(name, len(first))

    for sentence in _split_sentences(text):
        matches = list(word_re.finditer(sentence))
        if not cjk and len(matches) >= 3:
            caps = sum(1 for m in matches if m.group()[0].isupper())
            if caps / len(matches) > 0.6:
                continue  # a Title Case headline: capitals say nothing about names
        run: list[str] = []
        run_start = 0
        prev_end = 0
        for idx, match in enumerate(matches):
            bare = match.group().strip("'’-")
            if bare.endswith(("'s", "’s")):
                bare = bare[:-2]
            gap = sentence[prev_end : match.start()]
            prev_end = match.end()
            if run and gap.strip():
                _flush(run, run_start == 0 and not cjk)
                run = []
            is_cap = bool(bare) and (bare[0].isupper() or (cjk and bare.isascii() and bare.isalpha()))
            if is_cap and bare.casefold() in _NON_NAME_CAPS and not (bare.isupper() and len(bare) > 1):
                is_cap = False
            if is_cap:
                if not run:
                    run_start = idx
                run.append(bare)
            elif run:
                _flush(run, run_start == 0 and not cjk)
                run = []
        _flush(run, run_start == 0 and not cjk)
    ranked = sorted(counts, key=lambda n: (-counts[n], first[n]))
    return tuple(ranked[:limit])


def _proper_tokens(entities: Sequence[str], language: str) -> frozenset[str]:
    out: set[str] = set()
    for name in entities:
        out.update(tokenize(name, language))
    return frozenset(out)


def term_vector(
    title: str,
    text: str,
    language: str,
    entities: Sequence[str] = (),
    k: int = TOP_K_TERMS,
    dated: str | None = None,
) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Sparse, L2-normalised top-``k`` term vector of title + lede + body (see module doc).

    Args:
        title: Headline; only its first ``FEATURE_TITLE_MAX_CHARS`` characters are read.
        text: Body (may repeat the headline in its first line); only its first
            ``FEATURE_TEXT_MAX_CHARS`` characters are read.
        language: ISO 639-1 code.
        entities: Entities of the text; their words get the proper-noun prior.
        k: Most terms to keep, at most 64.
        dated: The article's dateline year (:func:`dateline_year`); if given, it is kept as
            the pseudo-term ``date:<year>`` with the weight of a title term, so articles
            dated in other years can be told apart even when they tell the same kind of story.

    Returns:
        ``(terms, weights)``, heaviest first, ties by term; empty tuples for an empty text.

    Raises:
        ValueError: If ``k`` is not in [1, 64].
    """
    if not 1 <= k <= TOP_K_TERMS:
        raise ValueError(f"k must be in [1, {TOP_K_TERMS}], got {k}")
    cjk = is_cjk_language(language)
    proper = _proper_tokens(entities, language)
    title, text = title[:FEATURE_TITLE_MAX_CHARS], text[:FEATURE_TEXT_MAX_CHARS]
    tf: dict[str, float] = {}
    for part, weight in ((title, TITLE_WEIGHT), (text[:LEDE_CHARS], LEDE_WEIGHT - 1.0), (text, 1.0)):
        for token in tokenize(part, language):
            if _is_term(token, cjk):
                tf[token] = tf.get(token, 0.0) + weight
    weighted = {t: (1.0 + math.log(c)) * _term_prior(t, proper) for t, c in tf.items() if c > 0}
    ranked = sorted(weighted.items(), key=lambda kv: (-kv[1], kv[0]))
    if dated is not None:
        ranked = [(DATE_TERM_PREFIX + dated, 1.0 + math.log(TITLE_WEIGHT))] + ranked[: k - 1]
    ranked = ranked[:k]
    norm = math.sqrt(sum(w * w for _, w in ranked))
    if norm == 0:
        return (), ()
    return tuple(t for t, _ in ranked), tuple(w / norm for _, w in ranked)


def dateline_year(text: str) -> str | None:
    """The year of a full date written near the top of an article (its dateline), if any.

    A news text that spells out a full date in its first lines is almost always giving its
    own publication date. Only the first ``DATELINE_CHARS`` characters are searched, and only
    full dates count (a bare year in a lede is often a past event).

    >>> dateline_year("Posted: Sep 27, 2013 5:50 PM\\nA jury ...")
    '2013'
    >>> dateline_year("The 1931 bridge will close.") is None
    True
    """
    head = unicodedata.normalize("NFKC", text[:DATELINE_CHARS])
    found: list[tuple[int, str]] = []
    for pattern in _DATE_RES:
        match = pattern.search(head)
        if match:
            found.append((match.start(), match.group(1)))
    return min(found)[1] if found else None


def features_from_text(
    article_id: str,
    title: str,
    text: str,
    language: str,
    first_seen_at: datetime,
    publisher_id: str | None = None,
    embedding: Sequence[float] | None = None,
    embedding_model: str = EMBEDDING_MODEL_ID,
) -> ArticleFeatures:
    """Compute everything newsroom keeps about an article from its text, in memory.

    Signatures are computed on the body only, so a changed headline does not hide a copy;
    the term vector and entities use title and body.

    A body of fewer than ``MIN_COPY_SHINGLES`` distinct shingles (a paywall notice, "Watch
    the video.", a caption, no body at all) is not taken for the article's text: unrelated
    pages share such notices, and two articles whose body is the same one would be a copy
    (Jaccard 1.0) and, on terms that are mostly the notice's, one story. The article gets the
    empty signatures (a copy of nothing, never an original: see
    :func:`transforms.signatures.copy_shingles`), and its terms, entities and dateline come
    from the title alone. A short reprint of a short text is then no copy; it still joins its
    original's story when the titles agree.

    Args:
        article_id: Canonical article id.
        title: Headline (kept as given); its first ``FEATURE_TITLE_MAX_CHARS`` characters are read.
        text: Extracted body; used here and then dropped by the caller. Its first
            ``FEATURE_TEXT_MAX_CHARS`` characters are read.
        language: ISO 639-1 code.
        first_seen_at: When newsroom first saw the article; must be timezone-aware.
        publisher_id: Publisher, if known.
        embedding: A sentence embedding computed by the caller, if any.
        embedding_model: The model that made it (this release's by default).

    Returns:
        The article's features.

    Raises:
        ValueError: If ``first_seen_at`` is naive or ``article_id`` is empty.
    """
    if not article_id:
        raise ValueError("article_id must not be empty")
    if first_seen_at.tzinfo is None:
        raise ValueError(f"first_seen_at must be timezone-aware, got {first_seen_at!r}")
    language = language.lower()
    text = text[:FEATURE_TEXT_MAX_CHARS]
    shingles = copy_shingles(text, language)
    simhash, minhash = simhash_fingerprint(shingles), minhash_signature(shingles)
    text = text if shingles else ""  # too short to sign is too short to describe the article
    read_title = title[:FEATURE_TITLE_MAX_CHARS]
    combined = f"{read_title}\n{text}" if not text.startswith(read_title) else text
    entities = extract_entities(combined, language)
    terms, weights = term_vector(read_title, text, language, entities, dated=dateline_year(combined))
    return ArticleFeatures(
        article_id=article_id,
        language=language,
        first_seen_at=first_seen_at.astimezone(UTC),
        publisher_id=publisher_id,
        title=title,
        simhash=simhash,
        minhash=tuple(int(v) for v in minhash),
        terms=terms,
        term_weights=weights,
        entities=entities,
        embedding=None if embedding is None else tuple(float(v) for v in embedding),
        signature_version=SIGNATURE_VERSION,
        embedding_model=None if embedding is None else embedding_model,
    )


def features_to_row(features: ArticleFeatures) -> dict[str, object]:
    """Map features to Arrow-friendly columns (see ``FEATURE_COLUMNS``)."""
    return {
        "article_id": features.article_id,
        "language": features.language,
        "first_seen_at": features.first_seen_at,
        "publisher_id": features.publisher_id,
        "title": features.title,
        "simhash": features.simhash,
        "minhash": list(features.minhash),
        "terms": list(features.terms),
        "term_weights": list(features.term_weights),
        "entities": list(features.entities),
        "embedding": None if features.embedding is None else list(features.embedding),
        "signature_version": features.signature_version,
        "embedding_model": None if features.embedding is None else features.embedding_model,
    }


def features_from_row(row: Mapping[str, object]) -> ArticleFeatures:
    """Inverse of :func:`features_to_row`; float32 round-off in weights is accepted.

    Raises:
        ValueError: If a column is missing or the signature version is not the current one.
    """
    missing = [c for c in FEATURE_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"feature row lacks columns {missing}")
    version = str(row["signature_version"])
    if version != SIGNATURE_VERSION:
        raise ValueError(f"signature version {version!r} is not {SIGNATURE_VERSION!r}; recompute the features")
    seen = row["first_seen_at"]
    if isinstance(seen, str):
        seen = parse_iso_datetime(seen)
    if not isinstance(seen, datetime) or seen.tzinfo is None:
        raise ValueError(f"first_seen_at must be a timezone-aware datetime, got {seen!r}")
    embedding = row["embedding"]
    publisher = row["publisher_id"]
    return ArticleFeatures(
        article_id=str(row["article_id"]),
        language=str(row["language"]),
        first_seen_at=seen.astimezone(UTC),
        publisher_id=None if publisher is None else str(publisher),
        title=str(row["title"]),
        simhash=int(row["simhash"]),  # type: ignore[call-overload]
        minhash=tuple(int(v) for v in row["minhash"]),  # type: ignore[attr-defined]
        terms=tuple(str(t) for t in row["terms"]),  # type: ignore[attr-defined]
        term_weights=tuple(float(w) for w in row["term_weights"]),  # type: ignore[attr-defined]
        entities=tuple(str(e) for e in row["entities"]),  # type: ignore[attr-defined]
        embedding=None if embedding is None else tuple(float(v) for v in embedding),  # type: ignore[attr-defined]
        signature_version=version,
        # A row written before the id was stored names none: the legacy model (issue 33).
        embedding_model=None if embedding is None else str(row.get("embedding_model") or LEGACY_EMBEDDING_MODEL_ID),
    )


def features_of_row(row: ArticleRow) -> ArticleFeatures:
    """The features a stored article row holds: a view sharing the row's values (its tuples as they
    are), not a copy rebuilt value by value as :func:`features_from_row` builds one from a mapping.

    Raises:
        ValueError: If the row's signature version is not the current one.
    """
    if row.signature_version != SIGNATURE_VERSION:
        raise ValueError(f"signature version {row.signature_version!r} is not {SIGNATURE_VERSION!r}; "
                         "recompute the features")
    return ArticleFeatures(
        article_id=row.article_id,
        language=row.language,
        first_seen_at=row.first_seen_at.astimezone(UTC),
        publisher_id=row.publisher_id,
        title=row.title,
        simhash=row.simhash,
        minhash=row.minhash,
        terms=row.terms,
        term_weights=row.term_weights,
        entities=row.entities,
        embedding=row.embedding,
        signature_version=row.signature_version,
        # A row written before the id was stored names none: the legacy model (issue 33).
        embedding_model=None if row.embedding is None else (row.embedding_model or LEGACY_EMBEDDING_MODEL_ID),
    )
