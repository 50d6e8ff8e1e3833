"""Interleaved A/B of ``LanguageClusterer.assign`` between two checkouts, in one process (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.repair_scale write WRITER       # once (see there)
    taskset -c 0,1 .venv/bin/python -m bench.assign_ab --a /tmp/before --b . WRITER

On a shared machine, two processes timed one after the other can differ by 20% or more for the
same code. Here both checkouts run in one process: the ``transforms`` package of ``--b`` is
copied under another name (``transforms_b``, its imports rewritten), the pickled writer is
loaded twice (once for each), and one minute of ``--per-minute`` articles is fed to both in
chunks of ``--chunk``, alternately (A first in even chunks, B first in odd ones). A slow spell
of the machine hits both sides of a chunk alike, so the median of the per-chunk B/A ratios of
CPU time is the figure to read. The minute is the one ``python -m bench.repair_scale assign`` feeds (a
fresh world's articles, follow-ups filed under the newest 20,000 stories: ``unseen_minute``).

It also reports whether the two placed every article alike (story, copy, new story) and the
largest difference between their scores. Both writers are held at once: twice the memory of
one (about 8 GiB at 150,000 stories).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import import_checkout, interleaved_rounds, ratio_spread

_RENAMED = "transforms_b"


class _RenamingUnpickler(pickle.Unpickler):
    """Loads objects of ``transforms`` as those of the renamed copy."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "transforms" or module.startswith("transforms."):
            module = _RENAMED + module[len("transforms"):]
        return super().find_class(module, name)


def _renamed_copy(code_root: Path, into: Path) -> None:
    target = into / _RENAMED
    shutil.copytree(code_root / "transforms", target, ignore=shutil.ignore_patterns("__pycache__"))
    imports = re.compile(r"\b(from|import) transforms(?=[.\s])")
    for path in target.rglob("*.py"):
        path.write_text(imports.sub(rf"\1 {_RENAMED}", path.read_text()))


def _compare(args: argparse.Namespace) -> str:
    gc.disable()
    with args.writer.open("rb") as fh:
        writer_a, now = pickle.load(fh)
    with args.writer.open("rb") as fh:
        writer_b, _ = _RenamingUnpickler(fh).load()
    if not type(writer_b).__module__.startswith(_RENAMED + "."):
        raise RuntimeError(f"B's writer was loaded as {type(writer_b).__module__}, not from the copy of --b")
    import transforms_b.features as features_b  # type: ignore[import-not-found]

    from bench.repair_scale import placement, unseen_minute

    stream_a = unseen_minute(writer_a, now, args.seed, args.per_minute)
    stream_b = [features_b.ArticleFeatures(**{k: getattr(f, k) for k in f.__slots__}) for f in stream_a]
    gc.enable()
    gc.collect()
    gc.freeze()

    out_a: list[Any] = []
    out_b: list[Any] = []

    def assign_chunk(writer: Any, stream: list[Any], out: list[Any]) -> Callable[[int], float]:
        def run(chunk: int) -> float:
            began = time.process_time()
            out.extend(writer.assign(f) for f in stream[chunk * args.chunk:(chunk + 1) * args.chunk])
            return time.process_time() - began
        return run

    chunks = -(-len(stream_a) // args.chunk)
    spent = interleaved_rounds({"a": assign_chunk(writer_a, stream_a, out_a),
                                "b": assign_chunk(writer_b, stream_b, out_b)}, chunks)
    cpu = {side: sum(seconds) for side, seconds in spent.items()}
    same = [placement(x) for x in out_a] == [placement(x) for x in out_b]
    largest = max(abs(x.score - y.score) for x, y in zip(out_a, out_b, strict=True))
    n = len(stream_a)
    return (f"A {cpu['a']:.2f} s = {n / cpu['a']:.0f}/s, B {cpu['b']:.2f} s = {n / cpu['b']:.0f}/s, "
            f"B/A {cpu['b'] / cpu['a']:.3f}; per-chunk B/A median "
            f"{ratio_spread(spent['b'], spent['a']).describe('chunks')}; "
            f"same placements {same}, largest score difference {largest:.1e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="checkout A (imported as transforms)")
    parser.add_argument("--b", type=Path, required=True, help="checkout B (imported as a renamed copy)")
    parser.add_argument("--per-minute", type=int, default=6_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--seed", type=int, default=99)
    parser.add_argument("writer", type=Path, help="a writer pickled by python -m bench.repair_scale write")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="assign-ab-"))
    try:
        _renamed_copy(args.b.resolve(), scratch)
        import_checkout(args.a)
        import_checkout(scratch, (_RENAMED,))
        print(_compare(args))  # noqa: T201
    finally:
        shutil.rmtree(scratch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
