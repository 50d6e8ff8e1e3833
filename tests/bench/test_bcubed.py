from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bcubed import main, score_partition

GOLD = {"a": "x", "b": "x", "c": "x", "d": "y", "e": "y"}


def test_perfect_partition_scores_one() -> None:
    s = score_partition(GOLD, {"a": "1", "b": "1", "c": "1", "d": "2", "e": "2"})
    assert (s.bcubed_precision, s.bcubed_recall, s.bcubed_f1) == (1.0, 1.0, 1.0)
    assert (s.pairwise_precision, s.pairwise_recall, s.pairwise_f1) == (1.0, 1.0, 1.0)
    assert (s.predicted_clusters, s.gold_clusters) == (2, 2)


def test_all_singletons_have_precision_one() -> None:
    s = score_partition(GOLD, {k: k for k in GOLD})
    assert s.bcubed_precision == 1.0
    # recall: a, b, c each 1/3; d, e each 1/2 -> (1 + 1) / 5
    assert s.bcubed_recall == pytest.approx(2 / 5)
    assert s.pairwise_recall == 0.0


def test_hand_computed_case() -> None:
    # predicted {a, b} {c, d} {e}
    s = score_partition(GOLD, {"a": "1", "b": "1", "c": "2", "d": "2", "e": "3"})
    # precision: a 1, b 1, c 1/2, d 1/2, e 1 -> 4/5
    assert s.bcubed_precision == pytest.approx(4 / 5)
    # recall: a 2/3, b 2/3, c 1/3, d 1/2, e 1/2 -> (2/3+2/3+1/3+1/2+1/2)/5 = 8/15
    assert s.bcubed_recall == pytest.approx(8 / 15)
    assert s.bcubed_f1 == pytest.approx(2 * (4 / 5) * (8 / 15) / (4 / 5 + 8 / 15))
    # pairs: predicted {ab, cd}, gold {ab, ac, bc, de}; true {ab}
    assert (s.pairwise_precision, s.pairwise_recall) == (0.5, 0.25)


def test_missing_predictions_are_singletons() -> None:
    s = score_partition(GOLD, {"a": "1", "b": "1"})
    assert s.predicted_clusters == 4
    assert s.bcubed_precision == 1.0


def test_cli_linked_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": k, "event": v}) + "\n" for k, v in GOLD.items()))
    pred = tmp_path / "pred.jsonl"
    rows = [
        {"id": "a", "story_id": "s1", "copy_of": None, "linked_id": "L"},
        {"id": "b", "story_id": "s2", "copy_of": None, "linked_id": "L"},
        {"id": "c", "story_id": "s3", "copy_of": None, "linked_id": "L"},
        {"id": "d", "story_id": "s4", "copy_of": None, "linked_id": None},
        {"id": "e", "story_id": "s4", "copy_of": "d", "linked_id": None},
    ]
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--gold", str(gold), "--pred", str(pred), "--label", "linked", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bcubed_f1"] == 1.0
    assert main(["--gold", str(gold), "--pred", str(pred), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bcubed_f1"] < 1.0
