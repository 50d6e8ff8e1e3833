"""CPU time of ``LanguageClusterer.assign`` alone, for A/B runs of two checkouts (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.assign_cpu write --stories 50000 --articles 5000 STREAM
    taskset -c 0,1 .venv/bin/python -m bench.assign_cpu time --code-root A STREAM   # then B, A, B ...

``write`` builds ``bench/cluster_speed.py``'s synthetic checkpoint and stream (seeded, so every
checkout writes the same) and pickles them, once: on a busy 2-core machine the generation alone
takes minutes. ``time`` loads that checkpoint with the code under ``--code-root`` (a checkout,
or a ``git archive`` of one), fills the story norms, freezes the loaded objects out of the garbage
collector as the writer does, and assigns the stream, printing wall and CPU (``process_time``)
rates and a hash of every decision (ids, copies, new-story flags, scores), so two checkouts can be
compared for speed and checked for the same decisions in one run. CPU time is the figure to
compare on a shared machine: wall time there measures the share of a core the run was given.
``--repair`` then times one repair pass (``repair_stories``) at the stream's end.

The stream's articles carry sentence embeddings and 10% are headline-only (``--no-embeddings``,
``--headline-share``; issue 14). A checkout whose checkpoint format is older than the one written
is given the checkpoint in its own format (members without the fields it does not know, as a
state it wrote itself would be): it reads no embeddings from the stored stories, as it uses none.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import sys
from pathlib import Path

from bench.harness import REPO, import_checkout, timed


def _write(args: argparse.Namespace) -> None:
    from bench import cluster_speed
    from transforms.clustering import ClusterParams

    synth = cluster_speed._Synth(args.seed, embeddings=not args.no_embeddings, headline_share=args.headline_share)
    state, topics, prebuilt = cluster_speed.build_state(synth, args.stories, ClusterParams())
    stream = cluster_speed.build_stream(synth, args.articles, topics, prebuilt, len(prebuilt) / 48.0)
    with args.stream.open("wb") as fh:
        pickle.dump((state, [features for features, _, _ in stream]), fh, protocol=5)


def _time(args: argparse.Namespace) -> None:
    import_checkout(args.code_root)
    import transforms.clustering as clustering

    gc.disable()
    with args.stream.open("rb") as fh:
        state, stream = pickle.load(fh)
    from transforms.clustering import STATE_VERSION

    if state["version"] == 4 and STATE_VERSION == 3:  # a version 3 state holds members of 7 fields
        stories = [[*raw[:8], [m[:7] for m in raw[8]], *raw[9:]] for raw in state["stories"]]
        state = {**state, "version": 3, "stories": stories}
    clusterer = clustering.LanguageClusterer.from_state(state)
    if hasattr(clusterer, "warm_story_norms"):
        clusterer.warm_story_norms()
    else:  # a checkout from before transforms/clustering/ was a package
        idf = clusterer.idf()
        for sid in clusterer.story_ids():
            clusterer._story_norms(clusterer._stories[sid], idf)  # noqa: SLF001
    gc.enable()
    gc.collect()
    gc.freeze()
    run = timed(lambda: [clusterer.assign(features) for features in stream])
    out, wall, cpu = run.result, run.wall, run.cpu
    decisions = repr([(a.article_id, a.story_id, a.copy_of, a.is_new_story, a.score) for a in out]).encode()
    print(f"{clustering.__file__}: {len(out)} articles, wall {wall:.2f} s = {len(out) / wall:.1f}/s, "  # noqa: T201
          f"CPU {cpu:.2f} s = {len(out) / cpu:.1f}/s, decisions {hashlib.sha1(decisions).hexdigest()[:12]}")
    if args.repair:
        # One repair pass at the end of the stream, over the stories active in its lookback.
        now = max(features.first_seen_at for features in stream)
        repair = timed(lambda: clustering.repair_stories(clusterer, now))
        repairs, wall, cpu = repair.result, repair.wall, repair.cpu
        kinds = {kind: sum(r.kind == kind for r in repairs) for kind in ("split", "merge")}
        print(f"{clustering.__file__}: repair pass, wall {wall:.2f} s, CPU {cpu:.2f} s, "  # noqa: T201
              f"{len(clusterer.story_ids())} stories, splits {kinds['split']}, merges {kinds['merge']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="build and pickle the checkpoint and stream")
    write.add_argument("--stories", type=int, default=50_000)
    write.add_argument("--articles", type=int, default=5_000)
    write.add_argument("--seed", type=int, default=7)
    write.add_argument("--no-embeddings", action="store_true", help="articles without sentence embeddings")
    write.add_argument("--headline-share", type=float, default=0.1, help="share of headline-only articles")
    write.add_argument("stream", type=Path)
    time_parser = sub.add_parser("time", help="time assign over a pickled stream with one checkout's code")
    time_parser.add_argument("--code-root", type=Path, default=REPO)
    time_parser.add_argument("--repair", action="store_true", help="then time one repair pass at the stream's end")
    time_parser.add_argument("stream", type=Path)
    args = parser.parse_args(argv)
    _write(args) if args.command == "write" else _time(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
