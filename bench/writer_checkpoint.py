"""Save and load time of a language writer's state with 50,000 active stories (issue 4).

Usage::

    taskset -c 0,1 .venv/bin/python -m bench.writer_checkpoint [--stories 50000]

Every cluster run loads its language's state blob, rebuilds the term and LSH indexes
(``LanguageClusterer.from_state``), and at the end builds the state again (``to_state``) and
saves it. Times each step for the synthetic 50,000-story state of bench/cluster_speed.py in the
blob format the writer uses (``warehouse.state_blobs``: orjson, key-sorted, Zstandard level 1)
and, as the baseline in the same run, the format before it (``json.dumps(sort_keys=True)`` and
gzip level 9 to save; gunzip and ``json.loads`` to load), which old checkpoints still use.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.cluster_speed import _Synth, build_state
from tasks.progress import terminal_progress
from tasks.writer.state import paused_gc
from transforms.clustering import ClusterParams, LanguageClusterer
from warehouse.state_blobs import decode_state, encode_state


def _gzip_json(state: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(state, sort_keys=True).encode(), mtime=0)


def _gunzip_json(blob: bytes) -> dict[str, Any]:
    return json.loads(gzip.decompress(blob))  # type: ignore[no-any-return]


def _timed(label: str, clusterer: LanguageClusterer, save: Callable[[dict[str, Any]], bytes],
           load: Callable[[bytes], dict[str, Any]]) -> tuple[float, float]:
    """(save seconds, load seconds) of one format, each step printed."""
    gc.collect()
    start = time.perf_counter()
    with paused_gc():  # as tasks.writer.session.commit builds it
        state = {"clusterer": clusterer.to_state(), "seen": {}}
    built = time.perf_counter()
    blob = save(state)
    saved = time.perf_counter()
    del state
    gc.collect()
    start_load = time.perf_counter()
    with paused_gc():  # as tasks.writer.session.load_writer_state parses and rebuilds it
        loaded = load(blob)
        parsed = time.perf_counter()
        LanguageClusterer.from_state(loaded["clusterer"])
        rebuilt = time.perf_counter()
    print(f"{label:30} {len(blob) / 1e6:6.1f} MB | to_state {built - start:5.1f} s | encode {saved - built:5.1f} s | "
          f"decode {parsed - start_load:5.1f} s | from_state {rebuilt - parsed:5.1f} s | "
          f"save {saved - start:5.1f} s | load {rebuilt - start_load:5.1f} s")
    return saved - start, rebuilt - start_load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=50_000)
    args = parser.parse_args(argv)
    with terminal_progress() as progress:  # stages only: nothing draws inside a timed step
        progress.stage(f"synthesising {args.stories} stories")
        state, _, _ = build_state(_Synth(7), args.stories, ClusterParams())
        with paused_gc():
            clusterer = LanguageClusterer.from_state(state)
        del state
        progress.stage("before: json + gzip 9")
        base_save, base_load = _timed("before: json + gzip 9", clusterer, _gzip_json, _gunzip_json)
        progress.stage("now: orjson + zstd 1")
        save, load = _timed("now: orjson + zstd 1", clusterer, encode_state, decode_state)
    print(f"save {base_save / save:.1f}x faster, load {base_load / load:.2f}x faster, "
          f"a run's state I/O {base_save + base_load:.1f} s -> {save + load:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
