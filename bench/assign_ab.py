"""Interleaved A/B of ``LanguageClusterer.assign`` between two checkouts, in one process (issue 15).

    taskset -c 0,1 .venv/bin/python bench/repair_scale.py write WRITER       # once (see there)
    taskset -c 0,1 .venv/bin/python bench/assign_ab.py --a /tmp/before --b . WRITER

On a shared machine, two processes timed one after the other can differ by 20% or more for the
same code. Here both checkouts run in one process: the ``transforms`` package of ``--b`` is
copied under another name (``transforms_b``, its imports rewritten), the pickled writer is
loaded twice (once for each), and one minute of ``--per-minute`` articles is fed to both in
chunks of ``--chunk``, alternately (A first in even chunks, B first in odd ones). A slow spell
of the machine hits both sides of a chunk alike, so the median of the per-chunk B/A ratios of
CPU time is the figure to read. The minute is the one ``repair_scale.py assign`` feeds (a
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
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
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
    from repair_scale import placement, unseen_minute

    stream_a = unseen_minute(writer_a, now, args.seed, args.per_minute)
    stream_b = [features_b.ArticleFeatures(**{k: getattr(f, k) for k in f.__slots__}) for f in stream_a]
    gc.enable()
    gc.collect()
    gc.freeze()

    sides: dict[str, tuple[Any, list[Any], list[Any]]] = {"a": (writer_a, stream_a, []), "b": (writer_b, stream_b, [])}
    cpu = {"a": 0.0, "b": 0.0}
    ratios = []
    for chunk, start in enumerate(range(0, len(stream_a), args.chunk)):
        spent = {}
        for side in ("a", "b") if chunk % 2 == 0 else ("b", "a"):
            writer, stream, out = sides[side]
            began = time.process_time()
            out.extend(writer.assign(f) for f in stream[start:start + args.chunk])
            spent[side] = time.process_time() - began
            cpu[side] += spent[side]
        ratios.append(spent["b"] / spent["a"])
    out_a, out_b = sides["a"][2], sides["b"][2]
    same = [placement(x) for x in out_a] == [placement(x) for x in out_b]
    largest = max(abs(x.score - y.score) for x, y in zip(out_a, out_b, strict=True))
    n = len(stream_a)
    return (f"A {cpu['a']:.2f} s = {n / cpu['a']:.0f}/s, B {cpu['b']:.2f} s = {n / cpu['b']:.0f}/s, "
            f"B/A {cpu['b'] / cpu['a']:.3f}; per-chunk B/A median {statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}..{max(ratios):.3f}] over {len(ratios)} chunks; "
            f"same placements {same}, largest score difference {largest:.1e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="checkout A (imported as transforms)")
    parser.add_argument("--b", type=Path, required=True, help="checkout B (imported as a renamed copy)")
    parser.add_argument("--per-minute", type=int, default=6_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--seed", type=int, default=99)
    parser.add_argument("writer", type=Path, help="a writer pickled by repair_scale.py write")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="assign-ab-"))
    try:
        _renamed_copy(args.b.resolve(), scratch)
        sys.path[:0] = [str(args.a.resolve()), str(scratch), str(_HERE)]
        print(_compare(args))  # noqa: T201
    finally:
        shutil.rmtree(scratch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
