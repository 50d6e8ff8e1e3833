"""What ``newsroom health`` spends checking a writer's state blob, against the load a writer run does (issue 16).

Usage::

    taskset -c 0,1 .venv/bin/python -m bench.state_verify [--stories 50000] [--repeats 3]

Health checks the state blob each language's checkpoint names by streaming its decompression
(``warehouse.state_blobs.verify_state``: a truncated or garbled blob fails, nothing is parsed);
a writer run loads the same blob (``decode_state``: decompress and parse). Both are timed on the
synthetic state of bench/cluster_speed.py, in the same run, best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bench.cluster_speed import _Synth, build_state
from bench.harness import best_of
from tasks.writer.state import paused_gc
from transforms.clustering import ClusterParams
from warehouse.state_blobs import decode_state, encode_state, verify_state


def _best(step: Callable[[], object], repeats: int) -> float:
    """The best wall seconds of ``step`` run as the writer runs it: with the collector paused."""
    def paused() -> None:
        with paused_gc():
            step()
    return best_of(paused, repeats)[0]


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
