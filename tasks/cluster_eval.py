"""``newsroom cluster-eval``: run the pipeline's dedup and clustering over a JSONL file.

Input lines carry ``id, title, text, language, published_at, source``; every other key
(notably any gold label) is ignored and never read. Output is one line per article, in input
order: ``{"id", "story_id", "copy_of", "linked_id"}``. ``id`` and ``copy_of`` echo the input's
ids as they were written (a number stays a number), so a scorer can join on them as it reads them.

Order and time. Articles are clustered in ``published_at`` order where every line has one
(ties keep input order), else in input order. An article without ``published_at`` gets a
synthetic first-seen time: ``SYNTHETIC_EPOCH + i`` seconds for its position ``i`` in input
order. The whole file then spans minutes, well inside the clusterer's active window, so the
time penalty is negligible and line order only decides which article comes first; ids and
order carry no other signal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from newsroom.times import parse_iso_datetime
from tasks.progress import NO_PROGRESS, Progress, counted
from transforms.clustering import ClusterParams, RepairParams, cluster_and_repair, link_languages
from transforms.embedding import embed_articles
from transforms.features import ArticleFeatures, features_from_text

SYNTHETIC_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
EMBED_CHUNK = 256
"""Articles embedded per call, so progress moves while the model works through a big file."""


def read_eval_articles(input_path: Path, embed: bool = True, progress: Progress = NO_PROGRESS
                       ) -> list[ArticleFeatures]:
    """Read a cluster-eval JSONL file and compute each article's features, in stream order.

    ``embed``: also compute each article's sentence embedding (title and lede), as ingestion does.
    """
    rows: list[tuple[datetime, int, dict[str, object]]] = []
    with input_path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            raw = json.loads(line)
            index = len(rows)
            row = {k: raw.get(k) for k in ("id", "title", "text", "language", "published_at", "source")}
            when = parse_iso_datetime(row["published_at"], naive="utc") or SYNTHETIC_EPOCH + timedelta(seconds=index)
            rows.append((when, index, row))
    if all(parse_iso_datetime(r["published_at"], naive="utc") is not None for _, _, r in rows):
        rows.sort(key=lambda x: (x[0], x[1]))
    texts = [(str(row["title"] or ""), str(row["text"] or ""), str(row["language"] or "und")) for _, _, row in rows]
    embeddings: list[tuple[float, ...] | None] = []
    if embed:
        advance = progress.stage("embedding titles and ledes", len(texts))
        for start in range(0, len(texts), EMBED_CHUNK):
            embeddings.extend(embed_articles(texts[start : start + EMBED_CHUNK]))
            advance(len(texts[start : start + EMBED_CHUNK]))
    else:
        embeddings.extend([None] * len(rows))
    out: list[ArticleFeatures] = []
    advance = progress.stage("signatures and features", len(rows))
    for (when, _, row), (title, text, language), embedding in counted(
            zip(rows, texts, embeddings, strict=True), advance):
        out.append(
            features_from_text(
                article_id=str(row["id"]),
                title=title,
                text=text,
                language=language,
                first_seen_at=when,
                publisher_id=None if row["source"] is None else str(row["source"]),
                embedding=embedding,
            )
        )
    return out


def run_cluster_eval(
    input_path: Path, output_path: Path, params: ClusterParams | None = None, repair_params: RepairParams | None = None,
    progress: Progress = NO_PROGRESS,
) -> int:
    """Cluster the articles of ``input_path`` and write the assignments to ``output_path``.

    Args:
        input_path: JSONL with ``id, title, text, language, published_at, source`` per line.
        output_path: Where to write ``{"id", "story_id", "copy_of", "linked_id"}`` lines.
        params: Clusterer parameters; the tuned defaults if omitted.
        repair_params: Repair bars (merges and splits, as the repair flow runs them).
        progress: Where to report stages and counts (``newsroom cluster-eval`` draws bars on a terminal).

    Returns:
        The number of articles written.
    """
    params = params or ClusterParams()
    articles = read_eval_articles(input_path, progress=progress)
    assignments = cluster_and_repair(counted(articles, progress.stage("clustering and repair", len(articles))),
                                     params, repair_params)
    progress.stage("cross-language links")
    links = link_languages(articles, assignments, params)
    by_id = {a.article_id: a for a in assignments}
    input_order = [f.article_id for f in articles]
    # Write in input order (the file's own order), whatever order the stream used.
    with input_path.open(encoding="utf-8") as fh:
        raw_ids = [json.loads(line)["id"] for line in fh if line.strip()]
    ids = [str(raw) for raw in raw_ids]
    if sorted(ids) != sorted(input_order) or len(set(ids)) != len(ids):
        raise ValueError(f"{input_path}: article ids are not unique")
    as_written = dict(zip(ids, raw_ids, strict=True))
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with output_path.open("w", encoding="utf-8") as out:
        for article_id in ids:
            a = by_id[article_id]
            out.write(
                json.dumps(
                    {"id": as_written[article_id], "story_id": a.story_id,
                     "copy_of": None if a.copy_of is None else as_written[a.copy_of],
                     "linked_id": links.get(a.story_id)},
                    ensure_ascii=False,
                )
                + "\n"
            )
    return len(ids)
