"""Multi-hop loaders: pooling, deduplication, labels, malformed files."""

from __future__ import annotations

import json

import pytest

from georag.data.beir import DataFormatError, Document
from georag.data.multihop import (
    MultihopQuestion,
    Paragraph,
    load_hotpotqa_ircot,
    load_multihop,
    load_musique,
    paragraph_id,
    pool_questions,
)


def _hotpot_line(qid, paras):
    return json.dumps(
        {
            "question_id": qid,
            "question_text": f"question {qid}",
            "contexts": [
                {"id": str(i), "title": t, "paragraph_text": x, "is_supporting": s}
                for i, (t, x, s) in enumerate(paras)
            ],
        }
    )


def test_hotpot_pools_dedups_and_labels(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(
        "\n".join(
            [
                _hotpot_line(
                    "a", [("T1", "one", True), ("T2", "two", False), ("T3", "three", True)]
                ),
                _hotpot_line(
                    "b", [("T2", "two", True), ("T1", "one", False), ("T1", "one", False)]
                ),
                "",
            ]
        )
    )
    data = load_hotpotqa_ircot(path)
    assert len(data.corpus) == 3  # T1/one appears three times, T2/two twice
    ids = {d.title: d.doc_id for d in data.corpus.values()}
    assert ids["T1"] == paragraph_id("T1", "one")
    assert data.qrels == {"a": {ids["T1"]: 1, ids["T3"]: 1}, "b": {ids["T2"]: 1}}
    assert data.queries == {"a": "question a", "b": "question b"}
    assert list(data.corpus) == [ids["T1"], ids["T2"], ids["T3"]]  # order of first appearance


def test_duplicate_copy_supporting_in_one_copy_is_relevant():
    q = MultihopQuestion("q", "?", (Paragraph("T", "x", False), Paragraph("T", "x", True)))
    data = pool_questions([q], name="n")
    assert data.qrels == {"q": {paragraph_id("T", "x"): 1}} and len(data.corpus) == 1


def test_same_title_different_text_are_two_documents():
    q = MultihopQuestion("q", "?", (Paragraph("T", "x", True), Paragraph("T", "y", False)))
    assert len(pool_questions([q], name="n").corpus) == 2


def test_musique_loader(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            [
                {
                    "id": "m1",
                    "question": "who?",
                    "paragraphs": [
                        {"idx": 0, "title": "A", "paragraph_text": "a", "is_supporting": True},
                        {"idx": 1, "title": "B", "paragraph_text": "b", "is_supporting": False},
                    ],
                }
            ]
        )
    )
    data = load_multihop(path)
    assert data.name == "m" and data.qrels == {"m1": {paragraph_id("A", "a"): 1}}
    assert isinstance(next(iter(data.corpus.values())), Document)


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "malformed JSON"),
        ('{"question_id": "a", "contexts": []}', "question_text"),
        ('{"question_id": "a", "question_text": "q", "contexts": []}', "non-empty list"),
        (
            '{"question_id": "a", "question_text": "q", "contexts": [{"title": "t", '
            '"paragraph_text": "x"}]}',
            "is_supporting",
        ),
        ("[1, 2]", "JSON object"),
    ],
)
def test_malformed_hotpot_names_file_and_line(tmp_path, content, match):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + content + "\n")
    with pytest.raises(DataFormatError, match=match) as err:
        load_hotpotqa_ircot(path)
    assert "bad.jsonl:2" in str(err.value)


def test_malformed_musique(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"id": 1}')
    with pytest.raises(DataFormatError, match="JSON list"):
        load_musique(path)
    path.write_text(
        '[{"id": "x", "question": "q", "paragraphs": [{"title": 3, '
        '"paragraph_text": "t", "is_supporting": true}]}]'
    )
    with pytest.raises(DataFormatError, match="'title' has type int"):
        load_musique(path)


def test_question_without_support_and_duplicate_ids_raise():
    none = MultihopQuestion("q", "?", (Paragraph("T", "x", False),))
    with pytest.raises(ValueError, match="no supporting paragraph"):
        pool_questions([none], name="n")
    ok = MultihopQuestion("q", "?", (Paragraph("T", "x", True),))
    with pytest.raises(ValueError, match="duplicate question id"):
        pool_questions([ok, ok], name="n")
    with pytest.raises(ValueError, match="empty list"):
        pool_questions([], name="n")


def test_paragraphs_all_missing_from_a_fixed_corpus_raise():
    corpus = {paragraph_id("U", "u"): Document(paragraph_id("U", "u"), "U", "u")}
    q = MultihopQuestion("q", "?", (Paragraph("T", "x", True), Paragraph("S", "y", True)))
    with pytest.raises(ValueError, match="2 supporting paragraph.*'q'.*missing"):
        pool_questions([q], name="n", corpus=corpus)
    inside = MultihopQuestion("r", "?", (Paragraph("U", "u", True), Paragraph("T", "x", False)))
    assert pool_questions([inside], name="n", corpus=corpus).qrels == {
        "r": {paragraph_id("U", "u"): 1}
    }


def test_unknown_extension(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a")
    with pytest.raises(ValueError, match=".jsonl"):
        load_multihop(path)


def test_real_files_slices(data_dir):
    hotpot = load_multihop(
        data_dir / "hotpotqa_dev500_ircot/dev_subsampled.jsonl", max_questions=20
    )
    assert len(hotpot.queries) == 20
    assert all(len(r) == 2 for r in hotpot.qrels.values())  # 2 supporting each
    assert all(d in hotpot.corpus for r in hotpot.qrels.values() for d in r)
    for name in ("musique_train100_hipporag", "musique_qa100_kag"):
        mus = load_multihop(data_dir / f"musique_small/{name}.json", max_questions=10)
        assert len(mus.queries) == 10
        assert all(2 <= len(r) <= 4 for r in mus.qrels.values())
        assert len(mus.corpus) <= 200
