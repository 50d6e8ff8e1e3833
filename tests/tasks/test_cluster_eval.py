"""``newsroom cluster-eval``, the command other tools score: what it reads, what it writes back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from corpus_paths import CORPUS  # noqa: E402

from bench.bcubed import score_partition  # noqa: E402

NEWSROOM = Path(sys.executable).with_name("newsroom")


def _rows() -> list[dict[str, object]]:
    """Forty real MMDS articles (three languages) with opaque integer ids, plus a verbatim reprint."""
    with (CORPUS / "clustering" / "mmds-dev.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:40]
    for number, row in enumerate(rows):
        row["id"] = 9_000 + number * 7
    rows.append(dict(rows[3], id=123_456))
    return rows


def _run(tmp_path: Path, rows: list[dict[str, object]], name: str) -> subprocess.CompletedProcess[str]:
    source, output = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-out.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return subprocess.run([str(NEWSROOM), "cluster-eval", "--input", str(source), "--output", str(output)],
                          capture_output=True, text=True, timeout=600, check=False)


def _output(tmp_path: Path, name: str) -> list[dict[str, object]]:
    with (tmp_path / f"{name}-out.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_ids_come_back_as_written_in_input_order_and_gold_labels_are_never_read(tmp_path: Path) -> None:
    rows = _rows()
    assert _run(tmp_path, rows, "a").returncode == 0
    out = _output(tmp_path, "a")
    assert [o["id"] for o in out] == [r["id"] for r in rows]  # numbers stay numbers, input order
    assert set(out[0]) == {"id", "story_id", "copy_of", "linked_id"}
    reprint, original = out[-1], out[3]
    assert reprint["copy_of"] == rows[3]["id"] and reprint["story_id"] == original["story_id"]
    by_id = {o["id"]: o for o in out}
    event = {r["id"]: r["event"] for r in rows}
    for o in out:  # the data holds one real syndicated pair too
        if o["copy_of"] is not None:
            assert event[o["copy_of"]] == event[o["id"]] and by_id[o["copy_of"]]["story_id"] == o["story_id"]

    score = score_partition({str(r["id"]): str(r["event"]) for r in rows},
                            {str(o["id"]): str(o["linked_id"] or o["story_id"]) for o in out})
    assert score.bcubed_precision >= 0.9 and score.bcubed_f1 >= 0.8, score

    relabelled = [dict(r, event=f"other-{i % 3}", topic="x") for i, r in enumerate(rows)]
    assert _run(tmp_path, relabelled, "b").returncode == 0
    assert _output(tmp_path, "b") == out


def test_ids_equal_as_text_are_refused(tmp_path: Path) -> None:
    rows = _rows()[:3]
    rows[1]["id"], rows[2]["id"] = 7, "7"
    done = _run(tmp_path, rows, "dup")
    assert done.returncode != 0 and "not unique" in done.stderr
