"""Multi-hop QA sets (HotpotQA in IRCoT's jsonl, MuSiQue JSON) as one pooled retrieval corpus.

As HippoRAG does, every question's candidate paragraphs are pooled into one corpus,
deduplicated by ``(title, text)``; the supporting paragraphs of a question are its
relevance labels (gain 1). The result is a :class:`~georag.data.beir.BeirDataset`, so the
whole evaluation stack (first stage, rerankers, metrics) works on it unchanged.

Document ids are content hashes (``sha1(title + "\\n" + text)[:16]``), so the same paragraph
has the same id whatever slice of the file is loaded. Duplicate paragraphs (within a
question or across questions) become one document; it is relevant to a question when any
of its copies in that question is supporting.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from georag.data.beir import BeirDataset, DataFormatError, Document, iter_jsonl

__all__ = [
    "MultihopQuestion",
    "Paragraph",
    "load_hotpotqa_ircot",
    "load_musique",
    "load_multihop",
    "pool_questions",
    "paragraph_id",
]


@dataclass(frozen=True)
class Paragraph:
    """One candidate paragraph of a question."""

    title: str
    text: str
    is_supporting: bool


@dataclass(frozen=True)
class MultihopQuestion:
    """A question with its candidate paragraphs."""

    question_id: str
    question: str
    paragraphs: tuple[Paragraph, ...]


def paragraph_id(title: str, text: str) -> str:
    """The stable document id of a paragraph: ``sha1(title + "\\n" + text)[:16]``."""
    return hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def _field(record: dict, key: str, where: str, kind: type | tuple[type, ...] = str):
    if key not in record:
        raise DataFormatError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, kind):
        raise DataFormatError(f"{where}: field {key!r} has type {type(value).__name__}")
    return value


def _paragraphs(items: object, where: str, text_key: str) -> tuple[Paragraph, ...]:
    if not isinstance(items, list) or not items:
        raise DataFormatError(f"{where}: expected a non-empty list of paragraphs")
    out = []
    for j, item in enumerate(items):
        at = f"{where} paragraph {j}"
        if not isinstance(item, dict):
            raise DataFormatError(f"{at}: expected a JSON object")
        title = _field(item, "title", at)
        text = _field(item, text_key, at)
        supporting = _field(item, "is_supporting", at, bool)
        out.append(Paragraph(title, text, supporting))
    return tuple(out)


def read_hotpotqa_ircot(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read IRCoT's HotpotQA jsonl: ``question_id``, ``question_text``, ``contexts``.

    Each context holds ``title``, ``paragraph_text`` and ``is_supporting``.
    """
    path = Path(path)
    questions = []
    for line_no, record in iter_jsonl(path):
        where = f"{path}:{line_no}"
        qid = str(_field(record, "question_id", where, (str, int)))
        text = _field(record, "question_text", where)
        paras = _paragraphs(record.get("contexts"), f"{where} ({qid})", "paragraph_text")
        questions.append(MultihopQuestion(qid, text, paras))
    return questions


def read_musique(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read a MuSiQue JSON list: ``id``, ``question``, ``paragraphs``.

    Each paragraph holds ``title``, ``paragraph_text`` and ``is_supporting``.
    """
    path = Path(path)
    blob = path.read_bytes()
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as err:
        line = blob.count(b"\n", 0, err.start) + 1
        raise DataFormatError(
            f"{path}:{line}: not UTF-8 (byte 0x{blob[err.start]:02x}; re-encode the file as UTF-8)"
        ) from None
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None
    except RecursionError:
        raise DataFormatError(f"{path}: JSON nested too deeply") from None
    if not isinstance(records, list):
        raise DataFormatError(f"{path}: expected a JSON list of questions")
    questions = []
    for i, record in enumerate(records):
        where = f"{path} question {i}"
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected a JSON object")
        qid = str(_field(record, "id", where, (str, int)))
        text = _field(record, "question", where)
        paras = _paragraphs(record.get("paragraphs"), f"{where} ({qid})", "paragraph_text")
        questions.append(MultihopQuestion(qid, text, paras))
    return questions


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
        paragraphs.

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
    return BeirDataset(name, pooled, queries, qrels)


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


def load_multihop(
    path: str | os.PathLike, *, max_questions: int | None = None, name: str | None = None
) -> BeirDataset:
    """Load by extension: ``.jsonl`` is HotpotQA (IRCoT), ``.json`` is MuSiQue."""
    suffix = Path(path).suffix
    if not Path(path).is_file():
        raise ValueError(f"path: no file at {path}")
    if suffix == ".jsonl":
        return load_hotpotqa_ircot(path, max_questions=max_questions, name=name)
    if suffix == ".json":
        return load_musique(path, max_questions=max_questions, name=name)
    raise ValueError(
        f"path: expected a .jsonl (HotpotQA IRCoT) or .json (MuSiQue) file, got {path}"
    )
