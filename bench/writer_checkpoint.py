"""Load and save time of a language writer's checkpoint with 50,000 active stories (issue 4).

Usage::

    taskset -c 0,1 .venv/bin/python bench/writer_checkpoint.py [--stories 50000]

Every cluster run loads its language's checkpoint (gzip JSON), rebuilds the term and LSH indexes
(``LanguageClusterer.from_state``) and saves it again (``to_state``). Times each step for the
synthetic 50,000-story checkpoint of bench/cluster_speed.py, in the current format (version 3:
MinHash signatures as base64, LSH keys rebuilt vectorised) and, as the baseline in the same run,
the same checkpoint written as version 2 (signatures as lists of ints; the loader still reads it).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_speed import _Synth, build_state  # noqa: E402

from transforms.clustering import ClusterParams, LanguageClusterer, _decode_minhash, paused_gc  # noqa: E402


def _timed(label: str, state: dict[str, object]) -> float:
    start = time.perf_counter()
    blob = gzip.compress(json.dumps(state, separators=(",", ":")).encode(), compresslevel=1)
    encoded = time.perf_counter()
    data = gzip.decompress(blob)
    with paused_gc():  # as tasks.cluster.load_writer_state parses it
        loaded = json.loads(data)
    parsed = time.perf_counter()
    clusterer = LanguageClusterer.from_state(loaded)
    built = time.perf_counter()
    with paused_gc():
        clusterer.to_state()
    saved = time.perf_counter()
    print(f"{label:34} {len(blob) / 1e6:7.1f} MB gzip | dump+gzip {encoded - start:5.1f} s | "
          f"gunzip+parse {parsed - encoded:5.1f} s | from_state {built - parsed:5.1f} s | "
          f"to_state {saved - built:5.1f} s | load total {built - encoded:5.1f} s")
    del clusterer, loaded
    gc.collect()
    return built - encoded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=50_000)
    args = parser.parse_args(argv)
    state, _, _ = build_state(_Synth(7), args.stories, ClusterParams())
    old = {**state, "version": 2, "recent": [[*row[:4], _decode_minhash(row[4]).tolist()]
                                             for row in state["recent"]]}  # type: ignore[attr-defined]
    gc.collect()
    baseline = _timed("version 2 (signatures as int lists)", old)
    current = _timed("version 3 (base64 signatures)", state)
    print(f"load: {baseline / current:.2f}x faster than version 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
