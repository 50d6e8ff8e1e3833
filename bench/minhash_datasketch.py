"""Copy signatures: newsroom's MinHash (transforms/signatures.py) against datasketch's, same run.

Usage::

    .venv/bin/python -m bench.minhash_datasketch [--corpus-dir ../shared/corpus/clustering] [--rounds 3]

Why the question: datasketch is the stack's MinHash library, and newsroom computes its own
signatures. Both are 128 permutations over the same 4-word shingles of every ECB+ and MMDS dev
text. The bench prints, per implementation, the CPU time to sign every text (best of ``--rounds``),
and the mean absolute error of the estimated Jaccard against the exact Jaccard over every pair of
texts of one ECB+ event (the pairs copy detection must tell apart). Then the memory a copy index
of ``--index-size`` recent articles holds (tracemalloc), 32 bands x 4 rows both: datasketch's
``MinHashLSH`` with its ``MinHash`` objects against the writer's ``CopyIndex``. Then one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from datasketch import MinHash, MinHashLSH

from bench.harness import CORPUS_DIR, best_of, print_json_line
from transforms.clustering.copies import CopyIndex
from transforms.signatures import (
    LSH_BANDS,
    LSH_ROWS,
    NUM_PERM,
    estimate_jaccard,
    minhash_signature,
    shingle_tokens,
    tokenize,
)

_CORPUS = CORPUS_DIR / "clustering"


def _texts(corpus: Path) -> list[tuple[str, list[str]]]:
    """(event, shingles) of every dev text, in file order."""
    out = []
    for name in ("ecbplus-dev.jsonl", "mmds-dev.jsonl"):
        for line in (corpus / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            event = f"{name}:{row.get('event') or row.get('event_id') or row.get('cluster')}"
            out.append((event, shingle_tokens(tokenize(row.get("text") or "", row.get("language") or "en"))))
    return out


def _ours(shingles: list[list[str]]) -> list[np.ndarray]:
    return [minhash_signature(s) for s in shingles]


def _datasketch(shingles: list[list[str]]) -> list[MinHash]:
    out = []
    for s in shingles:
        m = MinHash(num_perm=NUM_PERM, seed=1)
        m.update_batch([x.encode("utf-8") for x in set(s)])
        out.append(m)
    return out


def _index_bytes(size: int) -> tuple[int, int]:
    """Bytes held by a datasketch LSH index and by a CopyIndex of ``size`` random signatures."""
    import tracemalloc

    rng = np.random.default_rng(1)
    signatures = rng.integers(0, 2**32 - 1, size=(size, NUM_PERM), dtype=np.uint32)
    tracemalloc.start()
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(LSH_BANDS, LSH_ROWS))
    for i, row in enumerate(signatures):
        lsh.insert(f"a{i:08d}", MinHash(num_perm=NUM_PERM, hashvalues=row, scheme="affine32"))
    datasketch_bytes = tracemalloc.get_traced_memory()[0]
    del lsh
    tracemalloc.stop()
    tracemalloc.start()
    index = CopyIndex(LSH_BANDS, LSH_ROWS)
    for i, row in enumerate(signatures):
        index.remember(f"a{i:08d}", f"s{i:08d}", f"a{i:08d}", i, row)
    ours_bytes = tracemalloc.get_traced_memory()[0]
    del index
    tracemalloc.stop()
    return datasketch_bytes, ours_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=_CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--index-size", type=int, default=20_000)
    args = parser.parse_args(argv)
    texts = _texts(args.corpus_dir)
    shingles = [s for _, s in texts]
    ours_cpu, ours = best_of(lambda: _ours(shingles), args.rounds, cpu=True, collect=False)
    ds_cpu, ds = best_of(lambda: _datasketch(shingles), args.rounds, cpu=True, collect=False)

    by_event: dict[str, list[int]] = defaultdict(list)
    for i, (event, _) in enumerate(texts):
        if event.startswith("ecbplus"):
            by_event[event].append(i)
    errors_ours, errors_ds = [], []
    for members in by_event.values():
        for i, j in itertools.combinations(members, 2):
            a, b = set(shingles[i]), set(shingles[j])
            if not a or not b:
                continue
            exact = len(a & b) / len(a | b)
            errors_ours.append(abs(estimate_jaccard(ours[i], ours[j]) - exact))
            errors_ds.append(abs(ds[i].jaccard(ds[j]) - exact))
    result = {
        "texts": len(texts), "pairs": len(errors_ours),
        "ours_cpu_s": round(ours_cpu, 3), "datasketch_cpu_s": round(ds_cpu, 3),
        "datasketch_over_ours": round(ds_cpu / ours_cpu, 2),
        "ours_mean_abs_error": round(float(np.mean(errors_ours)), 4),
        "datasketch_mean_abs_error": round(float(np.mean(errors_ds)), 4),
    }
    ds_bytes, ours_bytes = _index_bytes(args.index_size)
    result.update(index_size=args.index_size, datasketch_index_bytes_per_article=ds_bytes // args.index_size,
                  ours_index_bytes_per_article=ours_bytes // args.index_size)
    print(f"{len(texts)} texts: newsroom {ours_cpu:.3f} s CPU, datasketch {ds_cpu:.3f} s CPU "  # noqa: T201
          f"({result['datasketch_over_ours']}x); Jaccard error over {len(errors_ours)} same-event pairs: "
          f"newsroom {result['ours_mean_abs_error']}, datasketch {result['datasketch_mean_abs_error']}; "
          f"copy index of {args.index_size}: datasketch {ds_bytes // args.index_size} B/article, "
          f"newsroom {ours_bytes // args.index_size} B/article")
    print_json_line(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
