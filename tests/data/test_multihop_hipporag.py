"""Multi-hop layouts beyond IRCoT/MuSiQue JSON: HippoRAG's open corpus, 2WikiMultihopQA's
original records, MuSiQue JSON Lines; layout detection, answers, one-line errors."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from georag.data.beir import BeirDataset, DataFormatError, Document
from georag.data.datasets import MULTIHOP_FILES, load_dataset
from georag.data.multihop import (
    MultihopQuestion,
    Paragraph,
    load_2wikimultihopqa,
    load_hipporag,
    load_multihop,
    paragraph_id,
    pool_questions,
)
from georag.data.multihop_readers import hipporag_files, read_hipporag, read_musique

CORPUS = [
    {"title": "A", "text": "a one"},
    {"title": "B", "text": "b"},
    {"title": "A", "text": "a two"},  # a repeated title: both passages are relevant
    {"title": "C", "text": "c"},
    {"title": "B", "text": "b"},  # an exact duplicate: one document
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "first?",
        "answer": "Detroit",
        "answer_aliases": ["Detroit, Michigan", "Detroit", "Motor City"],
        "supporting_facts": ["A", "B"],
    },
    {
        "_id": "q2",
        "question": "second?",
        "answer": "1960",
        "supporting_facts": [["B", 0], ["B", 1], ["C", 2]],
    },
]


def _write(path, value):
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def _hipporag(folder, questions=QUESTIONS, corpus=CORPUS, name="toy"):
    folder.mkdir(exist_ok=True)
    _write(folder / f"{name}_corpus.json", corpus)
    return _write(folder / f"{name}.json", questions)


def _ids(*pairs):
    return {paragraph_id(t, x): 1 for t, x in pairs}


def test_hipporag_both_supporting_forms_and_repeated_titles(tmp_path):
    _hipporag(tmp_path / "set")
    data = load_hipporag(tmp_path / "set")
    assert data.name == "set"
    assert [(d.title, d.text) for d in data.corpus.values()] == [
        ("A", "a one"),
        ("B", "b"),
        ("A", "a two"),
        ("C", "c"),
    ]
    assert data.qrels == {
        "q1": _ids(("A", "a one"), ("A", "a two"), ("B", "b")),
        "q2": _ids(("B", "b"), ("C", "c")),
    }
    assert data.queries == {"q1": "first?", "q2": "second?"}
    assert data.answers == {
        "q1": ("Detroit", "Detroit, Michigan", "Motor City"),
        "q2": ("1960",),
    }


def test_hipporag_file_path_folder_and_detection_agree(tmp_path):
    questions = _hipporag(tmp_path / "set")
    by_file = load_multihop(questions)
    assert by_file.name == "toy"
    for other in (load_multihop(tmp_path / "set"), load_dataset(tmp_path / "set")):
        assert (other.corpus, other.qrels, other.answers) == (
            by_file.corpus,
            by_file.qrels,
            by_file.answers,
        )
    assert load_dataset(questions).name == "toy"
    assert hipporag_files(tmp_path / "set") == (questions, tmp_path / "set" / "toy_corpus.json")


def test_hipporag_max_questions_keeps_the_open_corpus(tmp_path):
    data = load_multihop(_hipporag(tmp_path / "set"), max_questions=1, name="cut")
    assert data.name == "cut" and list(data.queries) == ["q1"] and len(data.corpus) == 4


def test_hipporag_missing_supporting_title_is_one_line(tmp_path):
    bad = [QUESTIONS[0], {**QUESTIONS[1], "supporting_facts": [["B", 0], ["Nowhere", 1]]}]
    path = _hipporag(tmp_path / "set", questions=bad)
    with pytest.raises(DataFormatError) as err:
        load_multihop(path)
    message = str(err.value)
    assert message == (
        f"{path} question 1 (q2): supporting title 'Nowhere' is not in toy_corpus.json"
    )


@pytest.mark.parametrize(
    "questions, corpus, message",
    [
        ('[{"id": "q1",', CORPUS, r"toy.json:1: malformed JSON"),
        (QUESTIONS, '[{"title": "A",\n "text": }]', r"toy_corpus.json:2: malformed JSON"),
        ({"id": "q1"}, CORPUS, r"toy.json: expected a JSON list of questions"),
        (QUESTIONS, {"A": "a"}, r"toy_corpus.json: expected a JSON list of passages"),
        (QUESTIONS, [], r"toy_corpus.json: the corpus is empty"),
        (QUESTIONS, [{"title": 3, "text": "x"}], r"toy_corpus.json passage 0: field 'title'"),
        (QUESTIONS, [{"title": "A"}], r"toy_corpus.json passage 0: missing field 'text'"),
        ([QUESTIONS[0], 7], CORPUS, r"toy.json question 1: expected a JSON object"),
        (
            [{"question": "?", "supporting_facts": ["A"]}],
            CORPUS,
            r"question 0: missing field 'id'",
        ),
        (
            [{"id": "x", "question": "?", "supporting_facts": "A"}],
            CORPUS,
            r"question 0 \(x\): field 'supporting_facts' has type str",
        ),
        (
            [{"id": "x", "question": "?", "supporting_facts": [["A", "0"]]}],
            CORPUS,
            r"question 0 \(x\): supporting_facts\[0\] must be a title or a \[title, sentence",
        ),
        (
            [{"id": "x", "question": "?", "supporting_facts": []}],
            CORPUS,
            r"question 0 \(x\): field 'supporting_facts' is empty",
        ),
        (
            [{"id": "x", "question": "?", "supporting_facts": ["A"], "answer_aliases": "y"}],
            CORPUS,
            r"question 0 \(x\): field 'answer_aliases' must be a list of strings",
        ),
        (
            [{"id": "x", "question": "?", "supporting_facts": ["A"], "answer": 1960}],
            CORPUS,
            r"question 0 \(x\): field 'answer' has type int",
        ),
    ],
)
def test_hipporag_malformed_files_name_file_and_record(tmp_path, questions, corpus, message):
    path = _hipporag(tmp_path / "set", questions=questions, corpus=corpus)
    with pytest.raises(DataFormatError, match=message) as err:
        load_multihop(path)
    assert "\n" not in str(err.value)


def test_hipporag_paths_that_are_not_the_layout(tmp_path):
    _hipporag(tmp_path / "two", name="x")
    _hipporag(tmp_path / "two", name="y")
    with pytest.raises(ValueError, match=r"several HippoRAG question files \(x.json, y.json\)"):
        load_multihop(tmp_path / "two")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no NAME.json with NAME_corpus.json"):
        load_multihop(tmp_path / "empty")
    with pytest.raises(ValueError, match="no NAME.json with NAME_corpus.json beside it"):
        read_hipporag(tmp_path / "empty")
    with pytest.raises(ValueError, match="toy_corpus.json is the corpus .* pass toy.json"):
        load_multihop(_hipporag(tmp_path / "set").with_name("toy_corpus.json"))


def _twowiki(qid, context, facts, answer="ans"):
    return {
        "_id": qid,
        "type": "compositional",
        "question": f"question {qid}",
        "context": context,
        "supporting_facts": facts,
        "answer": answer,
    }


TWOWIKI = [
    _twowiki(
        "w1",
        [["A", ["First.", "Second."]], ["B", ["Bee."]], ["C", ["Sea."]]],
        [["A", 0], ["A", 1], ["C", 0]],
        answer="October 5, 1987",
    ),
    _twowiki("w2", [["C", ["Sea."]], ["D", ["Dee."]]], [["D", 0]]),
]


def test_2wiki_records_are_pooled_and_detected(tmp_path):
    path = _write(tmp_path / "wiki.json", TWOWIKI)
    data = load_multihop(path)
    assert data.name == "wiki"
    assert [(d.title, d.text) for d in data.corpus.values()] == [
        ("A", "First. Second."),
        ("B", "Bee."),
        ("C", "Sea."),
        ("D", "Dee."),
    ]
    assert data.qrels == {
        "w1": _ids(("A", "First. Second."), ("C", "Sea.")),
        "w2": _ids(("D", "Dee.")),
    }
    assert data.answers == {"w1": ("October 5, 1987",), "w2": ("ans",)}
    direct = load_2wikimultihopqa(path, max_questions=1)
    assert list(direct.queries) == ["w1"] and len(direct.corpus) == 3


@pytest.mark.parametrize(
    "record, message",
    [
        ({**TWOWIKI[0], "context": [["A", "First."]]}, r"\(w1\) paragraph 0: expected \[title"),
        ({**TWOWIKI[0], "context": [["A", ["x"], 3]]}, r"\(w1\) paragraph 0: expected \[title"),
        ({**TWOWIKI[0], "context": []}, r"\(w1\): expected a non-empty list of paragraphs"),
        ({**TWOWIKI[0], "supporting_facts": [[0, 0]]}, r"\(w1\): supporting_facts\[0\]"),
        ({**TWOWIKI[0], "answer": None}, r"\(w1\): field 'answer' has type NoneType"),
        ({k: v for k, v in TWOWIKI[0].items() if k != "_id"}, r"missing field '_id'"),
    ],
)
def test_2wiki_malformed_records_name_file_and_question(tmp_path, record, message):
    path = _write(tmp_path / "wiki.json", [TWOWIKI[1], record])
    with pytest.raises(DataFormatError, match=message) as err:
        load_multihop(path)
    assert f"{path} question 1" in str(err.value)


def test_2wiki_question_without_support_in_its_context(tmp_path):
    path = _write(tmp_path / "wiki.json", [{**TWOWIKI[1], "supporting_facts": [["Z", 0]]}])
    with pytest.raises(ValueError, match="'w2' has no supporting paragraph"):
        load_multihop(path)


def _musique(qid, answer="yes", aliases=()):
    return {
        "id": qid,
        "question": f"question {qid}",
        "paragraphs": [
            {"idx": 0, "title": "A", "paragraph_text": "a", "is_supporting": True},
            {"idx": 1, "title": qid, "paragraph_text": "b", "is_supporting": False},
        ],
        "answer": answer,
        "answer_aliases": list(aliases),
        "answerable": True,
    }


def test_musique_json_lines_are_detected_by_keys(tmp_path):
    records = [_musique("m1", "1960", ["1960", "nineteen sixty"]), _musique("m2")]
    path = _write(tmp_path / "mus.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    data = load_multihop(path)
    assert data.qrels == {"m1": _ids(("A", "a")), "m2": _ids(("A", "a"))}
    assert data.answers == {"m1": ("1960", "nineteen sixty"), "m2": ("yes",)}
    assert len(data.corpus) == 3
    assert [q.question_id for q in read_musique(path)] == ["m1", "m2"]
    as_list = _write(tmp_path / "mus.json", records)
    assert load_multihop(as_list).answers == data.answers


def test_musique_json_lines_errors_name_file_and_line(tmp_path):
    lines = [json.dumps(_musique("m1")), json.dumps({**_musique("m2"), "answer_aliases": [1]})]
    path = _write(tmp_path / "mus.jsonl", "\n".join(lines))
    with pytest.raises(DataFormatError, match=r"mus.jsonl:2 \(m2\): field 'answer_aliases'"):
        load_multihop(path)


def test_hotpot_answers_come_from_the_spans(tmp_path):
    record = {
        "question_id": "h1",
        "question_text": "q?",
        "answers_objects": [{"number": "", "spans": ["Chief of Protocol", "Chief of Protocol"]}],
        "contexts": [{"title": "T", "paragraph_text": "t", "is_supporting": True}],
    }
    path = _write(tmp_path / "h.jsonl", json.dumps(record) + "\n")
    assert load_multihop(path).answers == {"h1": ("Chief of Protocol",)}
    _write(path, json.dumps({**record, "answers_objects": [{"spans": "x"}]}))
    with pytest.raises(DataFormatError, match=r"h.jsonl:1 \(h1\) answers_objects: field 'spans'"):
        load_multihop(path)


def test_answers_default_empty_and_carried_by_pooling():
    doc = Document("d", "", "x")
    assert BeirDataset("n", {"d": doc}, {"q": "?"}, {"q": {"d": 1}}).answers == {}
    with_answers = MultihopQuestion("q", "?", (Paragraph("T", "x", True),), ("a", "b"))
    without = MultihopQuestion("r", "?", (Paragraph("T", "x", True),))
    assert pool_questions([with_answers, without], name="n").answers == {"q": ("a", "b")}


@pytest.mark.data
def test_real_2wiki_hipporag(data_dir):
    data = load_dataset("2wikimultihopqa_hipporag", data_dir=data_dir)
    assert (len(data.queries), len(data.corpus)) == (1000, 6119)
    assert Counter(len(r) for r in data.qrels.values()) == {2: 765, 4: 235}
    assert all(d in data.corpus for r in data.qrels.values() for d in r)
    assert len(data.answers) == 1000 and all(data.answers.values())
    same = load_multihop(data_dir / "2wikimultihopqa_hipporag" / "2wikimultihopqa.json")
    assert same.qrels == data.qrels and same.name == "2wikimultihopqa"


@pytest.mark.data
def test_real_2wiki_train500_and_musique_train200(data_dir):
    wiki = load_dataset("2wikimultihopqa_train500", data_dir=data_dir)
    assert len(wiki.queries) == 500 and len(wiki.answers) == 500
    assert all(len(r) >= 2 for r in wiki.qrels.values())
    questions = json.loads((data_dir / MULTIHOP_FILES["2wikimultihopqa_train500"]).read_text())
    assert all(len(q["context"]) == 10 for q in questions)
    musique = load_dataset("musique_train200", data_dir=data_dir)
    assert len(musique.queries) == 200 and len(musique.answers) == 200
    assert all(2 <= len(r) <= 4 for r in musique.qrels.values())
