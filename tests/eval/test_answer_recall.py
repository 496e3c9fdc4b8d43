"""Answer recall: SQuAD normalisation, word-boundary matches, the top-k cut, ties, skips."""

from __future__ import annotations

import pytest

from georag.eval.metrics import answer_recall, answer_recall_per_query, normalize_answer

TEXTS = {
    "d1": "Born in Paris.",
    "d2": "He moved to Detroit, Michigan, in 1960.",
    "d3": "The Motor City grew.",
    "d4": "In 19605 nothing happened.",
}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The  Detroit, Michigan!", "detroit michigan"),
        ("an Apple a day", "apple day"),
        ("Theatre (film)", "theatre film"),
        ("  ", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_answer_split_by_punctuation_is_found():
    run = {"q": {"d2": 1.0}}
    assert answer_recall_per_query(run, TEXTS, {"q": ["Detroit Michigan"]}) == {"q": 1.0}
    assert answer_recall_per_query(run, TEXTS, {"q": ["detroit, MICHIGAN."]}) == {"q": 1.0}


def test_an_alias_hit_counts():
    run = {"q": {"d3": 2.0, "d1": 1.0}}
    answers = {"q": ["Detroit", "Detroit, Michigan", "Motor City"]}
    assert answer_recall(run, TEXTS, answers, k=1) == 1.0


def test_matches_fall_on_word_boundaries():
    run = {"q": {"d4": 1.0}}
    assert answer_recall(run, TEXTS, {"q": ["1960"]}) == 0.0
    assert answer_recall({"q": {"d2": 1.0}}, TEXTS, {"q": ["1960"]}) == 1.0
    assert answer_recall({"q": {"d2": 1.0}}, TEXTS, {"q": ["Detroit Mich"]}) == 0.0


def test_k_cuts_the_ranking_by_score():
    run = {"q": {"d2": 0.1, "d1": 0.9, "d3": 0.5}}
    answers = {"q": ["Detroit"]}
    assert answer_recall(run, TEXTS, answers, k=2) == 0.0
    assert answer_recall(run, TEXTS, answers, k=3) == 1.0


def test_ties_go_to_the_larger_document_id():
    answers = {"q": ["Paris"]}
    assert answer_recall({"q": {"d1": 1.0, "d3": 1.0}}, TEXTS, answers, k=1) == 0.0
    assert answer_recall({"q": {"d3": 1.0, "d1": 1.0}}, TEXTS, answers, k=1) == 0.0
    assert answer_recall({"q": {"d1": 1.0, "d3": 1.0}}, TEXTS, answers, k=2) == 1.0


def test_queries_without_answers_are_skipped_and_missing_runs_count_zero():
    run = {"a": {"d1": 1.0}, "b": {"d2": 1.0}, "c": {"d2": 1.0}}
    answers = {"a": ["Paris"], "b": [], "c": ["", "  the "], "d": ["Paris"]}
    assert answer_recall_per_query(run, TEXTS, answers) == {"a": 1.0, "d": 0.0}
    assert answer_recall(run, TEXTS, answers) == 0.5
    with pytest.raises(ValueError, match="no query has an answer"):
        answer_recall(run, TEXTS, {"b": []})


def test_bad_arguments():
    with pytest.raises(ValueError, match="k: expected at least 1"):
        answer_recall({"q": {"d1": 1.0}}, TEXTS, {"q": ["x"]}, k=0)
    with pytest.raises(ValueError, match="no text for document 'd9'"):
        answer_recall({"q": {"d9": 1.0}}, TEXTS, {"q": ["x"]})
