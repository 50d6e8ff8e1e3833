"""Sections the stream teaches, on stories the model never saw (issue 33).

Usage::

    .venv/bin/python -m bench.section_stream [--corpus-dir /work/shared/corpus] [--named-share 0.7]

Two measures, both through ``transforms.sections.guess_and_learn`` (what ingest's commit runs):

- **Google News 2014 dev, split by story.** The 42 stories are cut in two halves by a hash of their
  id. For each half, the cold start is the shipped recipe (``scripts/train_section_model.py``:
  the written English headlines and Google News, the same weights, C and threshold) fitted
  *without that half's stories*. The half is then streamed in ``published_at`` order; a share of
  its headlines (``--named-share``, by a hash of the id) stand for articles whose feed names their
  section, and teach; the others name none and are scored as they arrive. Printed: coverage and
  accuracy (Google News' four categories, science counting as technology) on the headlines naming
  none, by the cold start alone and as taught, and the cold start on the whole half (the figure
  for stories the model never saw, nothing taught).
- **The captured real feeds** (``feeds/real``): every item one of whose categories is a canonical
  section (``transforms.sections.canonical_section``), feed by feed in file order, each guessed and
  then folded in (prequential: an item is never guessed by a model it taught). The shipped model
  is the cold start. Accuracy counts the first named section as the label, and also any section
  the item's categories name (blog tags often name two).

The last line is every figure as one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import scripts.train_section_model as recipe
from bench.harness import print_json_line
from tasks.sections import load_section_model
from transforms.embedding import EMBEDDING_MODEL_ID, embed_articles, embed_texts, embedding_text
from transforms.feeds import parse_feed
from transforms.sections import (
    SectionModel,
    canonical_section,
    empty_learned,
    guess_and_learn,
    section_model_from_dict,
)

DEFAULT_CORPUS = Path("/work/shared/corpus")
SALT = "sections-33"


def _unit(key: str) -> float:
    return int.from_bytes(hashlib.blake2b(f"{SALT}:{key}".encode(), digest_size=4).digest(), "big") / 2**32


def _four(section: str | None) -> str | None:
    return "technology" if section == "science" else section


def _score(guesses: Sequence[str | None], truth: Sequence[str], accept: Sequence[frozenset[str]] | None = None
           ) -> dict[str, float]:
    answered = [i for i, g in enumerate(guesses) if g]
    if accept is None:
        right = sum(_four(guesses[i]) == _four(truth[i]) for i in answered)
    else:
        right = sum(guesses[i] in accept[i] for i in answered)
    return {"items": len(truth), "coverage": round(len(answered) / len(truth), 3) if truth else 0.0,
            "accuracy": round(right / len(answered), 3) if answered else 0.0}


def _cold_start(x: np.ndarray, y: np.ndarray, groups: list[str], sections: list[str], keep: np.ndarray,
                threshold: float) -> SectionModel:
    """The shipped recipe fitted on the rows ``keep`` only."""
    w = recipe.sample_weights([sections[i] for i in np.where(keep)[0]], [groups[i] for i in np.where(keep)[0]])
    fitted = recipe._fit(x[keep], y[keep], w)
    return section_model_from_dict({"classes": list(fitted.classes_), "weights": fitted.coef_.tolist(),
                                    "intercepts": fitted.intercept_.tolist(), "min_probability": threshold,
                                    "embedding": {"model": "use-multilingual-v3"}, "version": "split"})


def google_news_split(corpus: Path, named_share: float) -> list[dict[str, object]]:
    rows, sections, groups, sources = recipe.load_training(corpus)
    texts = [embedding_text(str(r.get("title") or ""), str(r.get("text") or ""), str(r.get("language") or "en"))
             for r in rows]
    x = embed_texts(texts).astype(np.float64)
    y = np.array(sections)
    threshold = load_section_model().min_probability
    out = []
    for half in (0, 1):
        in_half = np.array([src == "gnews2014-dev" and (_unit(str(r["event"])) < 0.5) == (half == 0)
                            for r, src in zip(rows, sources, strict=True)])
        model = _cold_start(x, y, groups, sections, ~in_half, threshold)
        order = sorted(np.where(in_half)[0], key=lambda i: (str(rows[i]["published_at"]), str(rows[i]["id"])))
        named = [_unit("named:" + str(rows[i]["id"])) < named_share for i in order]
        cold = guess_and_learn([("en", None, x[i]) for i in order], model, empty_learned(model, EMBEDDING_MODEL_ID))
        taught = guess_and_learn([("en", sections[i] if n else None, x[i]) for i, n in zip(order, named, strict=True)],
                                 model, empty_learned(model, EMBEDDING_MODEL_ID))
        unnamed = [k for k, n in enumerate(named) if not n]
        truth = [sections[i] for i in order]
        out.append({"half": half, "stories": len({rows[i]["event"] for i in order}),
                    "cold_start_whole_half": _score(cold, truth),
                    "unnamed_cold_start": _score([cold[k] for k in unnamed], [truth[k] for k in unnamed]),
                    "unnamed_taught": _score([taught[k] for k in unnamed], [truth[k] for k in unnamed])})
    return out


def real_feeds(corpus: Path) -> dict[str, object]:
    items: list[tuple[str, str, str, frozenset[str]]] = []
    for path in sorted((corpus / "feeds" / "real").rglob("*")):
        if path.suffix not in (".xml", ".rss", ".atom", ".rdf", ".json") or not path.is_file():
            continue
        try:
            feed = parse_feed(path.read_bytes(), "https://feed.example/")
        except Exception:  # noqa: BLE001 - a refused or unparseable capture has no items to score
            continue
        for item in feed.items:
            named = [s for s in map(canonical_section, item.categories or ()) if s]
            if named:
                items.append((item.title or "", item.summary or "", named[0], frozenset(named)))
    model = load_section_model()
    vectors = embed_articles([(title, summary, "en") for title, summary, _, _ in items])
    shipped = guess_and_learn([("en", None, v) for v in vectors], model, empty_learned(model, EMBEDDING_MODEL_ID))
    taught = guess_and_learn([("en", s, v) for (_, _, s, _), v in zip(items, vectors, strict=True)], model,
                             empty_learned(model, EMBEDDING_MODEL_ID))
    first = [s for _, _, s, _ in items]
    accept = [a for _, _, _, a in items]
    return {"items": len(items),
            "shipped_first_category": _score(shipped, first, [frozenset({s}) for s in first]),
            "shipped_any_category": _score(shipped, first, accept),
            "taught_first_category": _score(taught, first, [frozenset({s}) for s in first]),
            "taught_any_category": _score(taught, first, accept)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--named-share", type=float, default=0.7)
    args = parser.parse_args(argv)
    figures: dict[str, object] = {"named_share": args.named_share}
    split = google_news_split(args.corpus_dir, args.named_share)
    for row in split:
        print(f"gnews2014-dev half {row['half']} ({row['stories']} stories the cold start never saw)")
        for key in ("cold_start_whole_half", "unnamed_cold_start", "unnamed_taught"):
            print(f"  {key:24} {json.dumps(row[key])}")
    figures["gnews2014_split"] = split
    feeds = real_feeds(args.corpus_dir)
    print(f"captured real feeds, {feeds['items']} items naming a section")
    for key, value in feeds.items():
        if key != "items":
            print(f"  {key:24} {json.dumps(value)}")
    figures["real_feeds"] = feeds
    print_json_line(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
