"""Multi-hop QA sets as one retrieval corpus with supporting-paragraph relevance labels.

Layouts (read by :mod:`georag.data.multihop_readers`): HotpotQA in IRCoT's jsonl, MuSiQue
(JSON or JSON Lines) and 2WikiMultihopQA's original records are pooled as HippoRAG does:
every question's candidate paragraphs form one corpus, deduplicated by ``(title, text)``;
the supporting paragraphs of a question are its relevance labels (gain 1). HippoRAG's own
layout brings an open corpus (``NAME_corpus.json``), used as it is. The result is a
:class:`~georag.data.beir.BeirDataset` whose ``answers`` hold each question's answer and
aliases, so the whole evaluation stack (first stage, rerankers, metrics) works on it
unchanged.

Document ids are content hashes (``sha1(title + "\\n" + text)[:16]``), so the same paragraph
has the same id whatever slice of the file is loaded. Duplicate paragraphs (within a
question or across questions) become one document; it is relevant to a question when any
of its copies in that question is supporting.
"""

from __future__ import annotations

import os
from pathlib import Path

from georag.data.beir import BeirDataset, Document
from georag.data.multihop_readers import (
    CORPUS_SUFFIX,
    MultihopQuestion,
    Paragraph,
    hipporag_files,
    paragraph_id,
    read_2wikimultihopqa,
    read_hipporag,
    read_hotpotqa_ircot,
    read_json_questions,
    read_jsonl_questions,
    read_musique,
)

__all__ = [
    "MultihopQuestion",
    "Paragraph",
    "load_2wikimultihopqa",
    "load_hipporag",
    "load_hotpotqa_ircot",
    "load_musique",
    "load_multihop",
    "pool_questions",
    "paragraph_id",
]


def pool_questions(
    questions: list[MultihopQuestion], *, name: str, corpus: dict[str, Document] | None = None
) -> BeirDataset:
    """Pool the questions' paragraphs into one corpus with supporting-paragraph qrels.

    Parameters
    ----------
    questions : list of MultihopQuestion
    name : str
        Data set name.
    corpus : dict of str to Document, optional
        A fixed corpus to label against instead of pooling (ids as :func:`paragraph_id`).
        Every supporting paragraph must then be in it.

    Returns
    -------
    BeirDataset
        Corpus in order of first appearance; ``qrels[qid][doc_id] = 1`` for supporting
        paragraphs; ``answers`` for the questions that have answers.

    Raises
    ------
    ValueError
        When ``questions`` is empty, a question id repeats, a question has no supporting
        paragraph, or (with ``corpus``) a supporting paragraph is not in the corpus.
    """
    if not questions:
        raise ValueError("questions: empty list")
    pooled: dict[str, Document] = {} if corpus is None else corpus
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, tuple[str, ...]] = {}
    for q in questions:
        if q.question_id in queries:
            raise ValueError(f"questions: duplicate question id {q.question_id!r}")
        relevant: dict[str, int] = {}
        missing = 0
        for p in q.paragraphs:
            doc_id = paragraph_id(p.title, p.text)
            if corpus is None:
                pooled.setdefault(doc_id, Document(doc_id, p.title, p.text))
            elif doc_id not in corpus:
                missing += p.is_supporting
                continue
            if p.is_supporting:
                relevant[doc_id] = 1
        if missing:
            raise ValueError(
                f"corpus: {missing} supporting paragraph(s) of question "
                f"{q.question_id!r} are missing from the corpus"
            )
        if not relevant:
            raise ValueError(f"questions: question {q.question_id!r} has no supporting paragraph")
        queries[q.question_id] = q.question
        qrels[q.question_id] = relevant
        if q.answers:
            answers[q.question_id] = q.answers
    return BeirDataset(name, pooled, queries, qrels, answers)


def load_hotpotqa_ircot(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """HotpotQA (IRCoT jsonl) pooled into one corpus; see :func:`pool_questions`."""
    questions = read_hotpotqa_ircot(path)[:max_questions]
    return pool_questions(questions, name=name or Path(path).stem)


def load_musique(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """MuSiQue JSON pooled into one corpus; see :func:`pool_questions`."""
    questions = read_musique(path)[:max_questions]
    return pool_questions(questions, name=name or Path(path).stem)


def load_2wikimultihopqa(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """2WikiMultihopQA's original records pooled into one corpus; see :func:`pool_questions`."""
    questions = read_2wikimultihopqa(path)[:max_questions]
    return pool_questions(questions, name=name or Path(path).stem)


def load_hipporag(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """HippoRAG's layout: the questions labelled against the open corpus file.

    Parameters
    ----------
    path : str or path
        ``NAME.json`` with ``NAME_corpus.json`` beside it, or the folder holding them.
    max_questions : int, optional
        Keep the first questions only; the corpus stays whole.
    name : str, optional
        Data set name; defaults to the folder's name or the questions file's stem.

    Returns
    -------
    BeirDataset
        A question's relevant documents are the corpus passages whose title is one of its
        supporting titles; see :func:`georag.data.multihop_readers.read_hipporag`.
    """
    path = Path(path)
    questions, corpus = read_hipporag(path)
    default = path.name if path.is_dir() else path.stem
    return pool_questions(questions[:max_questions], name=name or default, corpus=corpus)


def load_multihop(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """Load a multi-hop set, its layout told by the path and the first record.

    Parameters
    ----------
    path : str or path
        A folder holding ``NAME.json`` and ``NAME_corpus.json``, or ``NAME.json`` with
        ``NAME_corpus.json`` beside it (HippoRAG's layout); another ``.json`` (2WikiMultihopQA
        records when the first has ``context``, MuSiQue otherwise); a ``.jsonl`` (MuSiQue when
        the first record has ``paragraphs`` and no ``contexts``, HotpotQA IRCoT otherwise).
    max_questions : int, optional
        Keep the first questions only.
    name : str, optional
        Data set name; defaults to the folder's name or the file's stem.

    Returns
    -------
    BeirDataset

    Raises
    ------
    ValueError
        When nothing of a known layout is at ``path``; its subclass
        :class:`~georag.data.beir.DataFormatError` for malformed files.
    """
    path = Path(path)
    if hipporag_files(path) is not None:
        return load_hipporag(path, max_questions=max_questions, name=name)
    if path.is_dir():
        raise ValueError(f"path: folder {path} holds no NAME.json with NAME{CORPUS_SUFFIX}")
    if not path.is_file():
        raise ValueError(f"path: no file at {path}")
    if path.name.endswith(CORPUS_SUFFIX):
        questions_file = path.with_name(path.name.removesuffix(CORPUS_SUFFIX) + ".json")
        if questions_file.is_file():
            raise ValueError(
                f"path: {path.name} is the corpus of HippoRAG's layout; "
                f"pass {questions_file.name} or its folder"
            )
    if path.suffix == ".jsonl":
        questions = read_jsonl_questions(path)
    elif path.suffix == ".json":
        questions = read_json_questions(path)
    else:
        raise ValueError(
            f"path: expected a .jsonl (HotpotQA IRCoT, MuSiQue), a .json (MuSiQue, "
            f"2WikiMultihopQA, HippoRAG's layout) or a HippoRAG folder, got {path}"
        )
    return pool_questions(questions[:max_questions], name=name or path.stem)
