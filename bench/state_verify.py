"""What ``newsroom health`` spends checking a writer's state blob, against the load a writer run does (issue 16).

Usage::

    taskset -c 0,1 .venv/bin/python bench/state_verify.py [--stories 50000] [--repeats 3]

Health checks the state blob each language's checkpoint names by streaming its decompression
(``warehouse.state_blobs.verify_state``: a truncated or garbled blob fails, nothing is parsed);
a writer run loads the same blob (``decode_state``: decompress and parse). Both are timed on the
synthetic state of bench/cluster_speed.py, in the same run, best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_speed import _Synth, build_state  # noqa: E402

from tasks.writer.state import paused_gc  # noqa: E402
from transforms.clustering import ClusterParams  # noqa: E402
from warehouse.state_blobs import decode_state, encode_state, verify_state  # noqa: E402


def _best(step: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        with paused_gc():
            step()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    state, _, _ = build_state(_Synth(7), args.stories, ClusterParams())
    blob = encode_state({"clusterer": state, "seen": [], "consumed": [], "updated_at": "2026-12-01T00:00:00Z"})
    del state
    load = _best(lambda: decode_state(blob), args.repeats)
    verify = _best(lambda: verify_state(blob), args.repeats)
    print(f"stories={args.stories} blob={len(blob) / 1e6:.1f} MB  writer load (decode_state) {load:.2f} s  "
          f"health check (verify_state) {verify:.2f} s  ratio {verify / load:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
