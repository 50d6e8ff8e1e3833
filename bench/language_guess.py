"""Language guess on the dev corpora: the stopword guess against py3langid (issue 16).

Each article's title and text are guessed without their declared language, as ingest does for a page
that declares none. ``py3langid`` runs over all 97 languages of its model and over the configured
languages only (the corpus's own: en, ms, zh). Prints accuracy and "no guess" counts per language.

    .venv/bin/python -m bench.language_guess [--corpus-dir ../shared/corpus]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from bench.harness import CORPUS_DIR
from transforms.extraction import guess_language


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus-dir", default=str(CORPUS_DIR))
    args = parser.parse_args()
    import py3langid
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    restricted = LanguageIdentifier.from_model_file(MODEL_FILE)
    restricted.set_languages(["en", "ms", "zh"])
    guessers = {
        "stopwords": lambda t: guess_language(t),
        "stopwords_configured": lambda t: guess_language(t, candidates=frozenset({"en", "ms", "zh"})),
        "py3langid_all": lambda t: py3langid.classify(t)[0],
        "py3langid_configured": lambda t: restricted.classify(t)[0],
    }
    for name in ("clustering/mmds-dev.jsonl", "clustering/ecbplus-dev.jsonl"):
        rows = [json.loads(line) for line in (Path(args.corpus_dir) / name).read_text().splitlines() if line.strip()]
        print(f"{name}: {len(rows)} articles, {dict(Counter(r['language'] for r in rows))}")
        for guesser, guess in guessers.items():
            try:
                guess("warm up")
            except TypeError:
                print(f"  {guesser:22s} n/a")
                continue
            started = time.perf_counter()
            got = [(r["language"], guess(f"{r['title']}\n{r['text']}")) for r in rows]
            elapsed = time.perf_counter() - started
            right = sum(1 for want, g in got if want == g)
            none = sum(1 for _, g in got if g is None)
            per = {lang: f"{sum(1 for w, g in got if w == lang and g == lang)}/{sum(1 for w, _ in got if w == lang)}"
                   for lang in sorted({w for w, _ in got})}
            wrong = Counter(f"{w}->{g}" for w, g in got if g is not None and g != w).most_common(3)
            print(f"  {guesser:22s} right {right}/{len(rows)} ({right / len(rows):.1%}) none {none} per {per} "
                  f"wrong {wrong} ms/article {1000 * elapsed / len(rows):.2f}")


if __name__ == "__main__":
    main()
