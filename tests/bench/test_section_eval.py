"""``bench/section_eval.py``: how labels are read and how answers are scored (issue 21)."""

from __future__ import annotations

from bench.section_eval import Gold, gold_from_rows, score_sections


def test_google_news_categories_map_to_the_sections_a_reader_would_accept() -> None:
    rows = [{"id": 1, "category": "t", "language": "en"}, {"id": 2, "category": "m"}, {"id": 3, "section": "world"},
            {"id": 4, "title": "no label"}]
    gold = gold_from_rows(rows)
    assert gold == {"1": Gold(frozenset({"technology", "science"}), "technology", "en"),
                    "2": Gold(frozenset({"health"}), "health", "und"),
                    "3": Gold(frozenset({"world"}), "world", "und")}


def test_a_labels_file_overrides_and_an_empty_label_means_no_section_fits() -> None:
    rows = [{"id": 7, "category": "b", "language": "zh"}, {"id": 8, "language": "ms"}, {"id": 9}]
    gold = gold_from_rows(rows, {"7": "world|politics", "8": ""})
    assert gold["7"] == Gold(frozenset({"world", "politics"}), "world", "zh")
    assert gold["8"].accepted == frozenset() and "9" not in gold


def test_coverage_and_accuracy_count_only_labelled_lines() -> None:
    gold = {"a": Gold(frozenset({"technology", "science"}), "technology", "en"),
            "b": Gold(frozenset({"business"}), "business", "zh"),
            "c": Gold(frozenset({"health"}), "health", "zh"),
            "d": Gold(frozenset(), "(none)", "zh")}
    scores = score_sections(gold, {"a": "science", "b": "world", "d": "sports"}, by="language")
    everything = scores["all"]
    assert (everything.labelled, everything.answered, everything.right) == (3, 2, 1)
    assert everything.coverage == 2 / 3 and everything.accuracy == 0.5
    assert (everything.unlabelled, everything.unlabelled_answered) == (1, 1)
    assert everything.confusions == {("business", "world"): 1}
    assert (scores["zh"].labelled, scores["zh"].answered, scores["zh"].right) == (2, 1, 0)
    assert (scores["en"].coverage, scores["en"].accuracy) == (1.0, 1.0)
