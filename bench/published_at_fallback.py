"""htmldate as a fallback for pages whose publication time ``extract_page`` does not find (issue 16).

For the pages of the corpus that state a date (the regex of bench/extract_eval.py), prints how many
``extract_page`` finds, how many of the rest htmldate finds (``original_date=True``, no extensive
search, so it reads markup rather than guessing from URLs and free text), how often the two agree on
the day where both find one, and htmldate's cost as a ratio of ``extract_page``'s, same run.

    .venv/bin/python -m bench.published_at_fallback --pages ../shared/corpus/pages
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from htmldate import find_date

from bench.extract_eval import _STATES, load_pages
from transforms.extraction import extract_page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, required=True)
    args = parser.parse_args()
    raw, truth = load_pages(args.pages)
    ids = sorted(raw)
    texts = {i: raw[i].decode("utf-8") for i in ids}
    extract_page(raw[ids[0]], truth[ids[0]]["url"])
    find_date(texts[ids[0]])
    started = time.perf_counter()
    ours = {i: extract_page(raw[i], truth[i]["url"]).published_at for i in ids}
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    theirs = {i: find_date(texts[i], original_date=True, extensive_search=False, outputformat="%Y-%m-%d")
              for i in ids}
    theirs_s = time.perf_counter() - started
    stating = [i for i in ids if _STATES["published_at"].search(texts[i])]
    missing = [i for i in stating if ours[i] is None]
    both = [i for i in ids if ours[i] is not None and theirs[i] is not None]
    agree = [i for i in both if ours[i].strftime("%Y-%m-%d") == theirs[i]]
    print(f"pages: {len(ids)}; stating a date: {len(stating)}")
    print(f"extract_page finds: {len(stating) - len(missing)} / {len(stating)}; all pages: "
          f"{sum(1 for i in ids if ours[i])} / {len(ids)}")
    print(f"htmldate finds, where extract_page does not (stating): {sum(1 for i in missing if theirs[i])} / {len(missing)}"
          f" {[(i[:8], theirs[i]) for i in missing]}")
    print(f"htmldate finds, all pages: {sum(1 for i in ids if theirs[i])} / {len(ids)}; where extract_page finds "
          f"none (any page): {sum(1 for i in ids if ours[i] is None and theirs[i])}")
    print(f"same day where both find one: {len(agree)} / {len(both)}; differing: "
          f"{[(i[:8], ours[i].date().isoformat(), theirs[i]) for i in both if i not in agree]}")
    print(f"htmldate time / extract_page time (same run): {theirs_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
