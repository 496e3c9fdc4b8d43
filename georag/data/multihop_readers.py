"""Readers of the multi-hop QA file layouts, each to a list of :class:`MultihopQuestion`.

Layouts: HotpotQA in IRCoT's JSON Lines, MuSiQue (a JSON list or JSON Lines),
2WikiMultihopQA's original records (distractor setting) and HippoRAG's open-corpus layout
(``NAME.json`` questions beside ``NAME_corpus.json`` passages). Every error is a one-line
:class:`~georag.data.beir.DataFormatError` naming the file and the record: ``path:line`` in
JSON Lines, ``path question i (id)`` in a JSON list.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from georag.data.beir import DataFormatError, Document, iter_jsonl

__all__ = [
    "MultihopQuestion",
    "Paragraph",
    "hipporag_files",
    "paragraph_id",
    "read_2wikimultihopqa",
    "read_hipporag",
    "read_hotpotqa_ircot",
    "read_json_questions",
    "read_jsonl_questions",
    "read_musique",
]

CORPUS_SUFFIX = "_corpus.json"


@dataclass(frozen=True)
class Paragraph:
    """One candidate paragraph of a question."""

    title: str
    text: str
    is_supporting: bool


@dataclass(frozen=True)
class MultihopQuestion:
    """A question with its candidate paragraphs and its answers (the answer, then aliases)."""

    question_id: str
    question: str
    paragraphs: tuple[Paragraph, ...]
    answers: tuple[str, ...] = ()


Parse = Callable[[dict, str], MultihopQuestion]


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


def _strings(record: dict, key: str, where: str) -> list[str]:
    """The optional list of strings ``record[key]`` (empty when absent)."""
    values = record.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataFormatError(f"{where}: field {key!r} must be a list of strings")
    return values


def _answers(record: dict, where: str) -> tuple[str, ...]:
    """``answer`` then ``answer_aliases`` (both optional), deduplicated in order."""
    first = [_field(record, "answer", where)] if "answer" in record else []
    return tuple(dict.fromkeys(first + _strings(record, "answer_aliases", where)))


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


def _hotpot_question(record: dict, where: str) -> MultihopQuestion:
    qid = str(_field(record, "question_id", where, (str, int)))
    text = _field(record, "question_text", where)
    paras = _paragraphs(record.get("contexts"), f"{where} ({qid})", "paragraph_text")
    objects = record.get("answers_objects", [])
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise DataFormatError(f"{where} ({qid}): field 'answers_objects' must be a list of objects")
    spans = [s for o in objects for s in _strings(o, "spans", f"{where} ({qid}) answers_objects")]
    return MultihopQuestion(qid, text, paras, tuple(dict.fromkeys(spans)))


def _musique_question(record: dict, where: str) -> MultihopQuestion:
    qid = str(_field(record, "id", where, (str, int)))
    text = _field(record, "question", where)
    paras = _paragraphs(record.get("paragraphs"), f"{where} ({qid})", "paragraph_text")
    return MultihopQuestion(qid, text, paras, _answers(record, f"{where} ({qid})"))


def _supporting_titles(record: dict, where: str) -> list[str]:
    """``supporting_facts`` as titles, in order, once each: a list of titles or of
    ``[title, sentence index]`` pairs."""
    facts = _field(record, "supporting_facts", where, list)
    titles = []
    for j, fact in enumerate(facts):
        if isinstance(fact, list) and len(fact) == 2 and type(fact[1]) is int:
            fact = fact[0]
        if not isinstance(fact, str):
            raise DataFormatError(
                f"{where}: supporting_facts[{j}] must be a title or a [title, sentence index] pair"
            )
        titles.append(fact)
    if not titles:
        raise DataFormatError(f"{where}: field 'supporting_facts' is empty")
    return list(dict.fromkeys(titles))


def _twowiki_question(record: dict, where: str) -> MultihopQuestion:
    qid = str(_field(record, "_id", where, (str, int)))
    at = f"{where} ({qid})"
    text = _field(record, "question", where)
    supporting = set(_supporting_titles(record, at))
    context = _field(record, "context", at, list)
    if not context:
        raise DataFormatError(f"{at}: expected a non-empty list of paragraphs")
    paras = []
    for j, item in enumerate(context):
        ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        if not ok or not isinstance(item[1], list) or not all(isinstance(s, str) for s in item[1]):
            raise DataFormatError(f"{at} paragraph {j}: expected [title, [sentences...]]")
        paras.append(Paragraph(item[0], " ".join(item[1]), item[0] in supporting))
    return MultihopQuestion(qid, text, tuple(paras), _answers(record, at))


def _read_json(path: Path) -> object:
    """The JSON value of ``path``; not UTF-8 or malformed JSON is an error naming the line."""
    blob = path.read_bytes()
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as err:
        line = blob.count(b"\n", 0, err.start) + 1
        raise DataFormatError(
            f"{path}:{line}: not UTF-8 (byte 0x{blob[err.start]:02x}; re-encode the file as UTF-8)"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None
    except RecursionError:
        raise DataFormatError(f"{path}: JSON nested too deeply") from None


def _json_list(path: Path, what: str) -> list:
    records = _read_json(path)
    if not isinstance(records, list):
        raise DataFormatError(f"{path}: expected a JSON list of {what}")
    return records


def _objects(records: list, where: str) -> Iterator[tuple[str, dict]]:
    """``(where, record)`` of each record of a JSON list, named ``where i``."""
    for i, record in enumerate(records):
        at = f"{where} {i}"
        if not isinstance(record, dict):
            raise DataFormatError(f"{at}: expected a JSON object")
        yield at, record


def _parse_list(path: Path, records: list, parse: Parse) -> list[MultihopQuestion]:
    return [parse(record, where) for where, record in _objects(records, f"{path} question")]


def _parse_lines(path: Path, parse: Parse) -> list[MultihopQuestion]:
    return [parse(record, f"{path}:{line_no}") for line_no, record in iter_jsonl(path)]


def read_hotpotqa_ircot(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read IRCoT's HotpotQA jsonl: ``question_id``, ``question_text``, ``contexts``.

    Each context holds ``title``, ``paragraph_text`` and ``is_supporting``; the answers
    are the ``spans`` of ``answers_objects``.
    """
    return _parse_lines(Path(path), _hotpot_question)


def read_musique(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read MuSiQue records: ``id``, ``question``, ``paragraphs``, ``answer``, ``answer_aliases``.

    A JSON list, or one record a line when the file ends in ``.jsonl``. Each paragraph holds
    ``title``, ``paragraph_text`` and ``is_supporting``.
    """
    path = Path(path)
    if path.suffix == ".jsonl":
        return _parse_lines(path, _musique_question)
    return _parse_list(path, _json_list(path, "questions"), _musique_question)


def read_2wikimultihopqa(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read 2WikiMultihopQA's original records (distractor setting), a JSON list.

    Each record holds ``_id``, ``question``, ``context`` (``[title, [sentences...]]``
    pairs), ``supporting_facts`` (``[title, sentence index]`` pairs) and ``answer``. A
    paragraph's text is its sentences joined by a space; it is supporting when its title is
    among the supporting facts' titles.
    """
    path = Path(path)
    return _parse_list(path, _json_list(path, "questions"), _twowiki_question)


def read_json_questions(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read a JSON list of 2WikiMultihopQA records (the first record has ``context``) or of
    MuSiQue records (otherwise)."""
    path = Path(path)
    records = _json_list(path, "questions")
    first = records[0] if records else None
    twowiki = isinstance(first, dict) and "context" in first
    return _parse_list(path, records, _twowiki_question if twowiki else _musique_question)


def read_jsonl_questions(path: str | os.PathLike) -> list[MultihopQuestion]:
    """Read JSON Lines of MuSiQue records (the first record has ``paragraphs`` and no
    ``contexts``) or of IRCoT's HotpotQA records (otherwise)."""
    path = Path(path)
    first = next(iter_jsonl(path), (0, {}))[1]
    musique = "paragraphs" in first and "contexts" not in first
    return _parse_lines(path, _musique_question if musique else _hotpot_question)


def _corpus_of(questions: Path) -> Path:
    return questions.with_name(f"{questions.stem}{CORPUS_SUFFIX}")


def hipporag_files(path: str | os.PathLike) -> tuple[Path, Path] | None:
    """The ``(questions, corpus)`` files of HippoRAG's layout at ``path``, or None.

    ``path`` is ``NAME.json`` with ``NAME_corpus.json`` beside it, or a folder holding
    exactly one such pair (more than one is an error).
    """
    path = Path(path)
    if path.is_dir():
        pairs = [
            p
            for p in sorted(path.glob("*.json"))
            if not p.name.endswith(CORPUS_SUFFIX) and _corpus_of(p).is_file()
        ]
        if len(pairs) > 1:
            names = ", ".join(p.name for p in pairs)
            raise ValueError(f"path: {path} holds several HippoRAG question files ({names})")
        return (pairs[0], _corpus_of(pairs[0])) if pairs else None
    if path.suffix == ".json" and path.is_file() and _corpus_of(path).is_file():
        return path, _corpus_of(path)
    return None


def _read_corpus(path: Path) -> dict[str, Document]:
    """A HippoRAG corpus file in file order, ids as :func:`paragraph_id`, duplicates once."""
    corpus: dict[str, Document] = {}
    for where, record in _objects(_json_list(path, "passages"), f"{path} passage"):
        title, text = _field(record, "title", where), _field(record, "text", where)
        doc_id = paragraph_id(title, text)
        corpus.setdefault(doc_id, Document(doc_id, title, text))
    if not corpus:
        raise DataFormatError(f"{path}: the corpus is empty")
    return corpus


def read_hipporag(
    path: str | os.PathLike,
) -> tuple[list[MultihopQuestion], dict[str, Document]]:
    """Read HippoRAG's layout: ``NAME.json`` questions over the ``NAME_corpus.json`` corpus.

    Parameters
    ----------
    path : str or path
        ``NAME.json`` (with ``NAME_corpus.json`` beside it) or the folder holding them.

    Returns
    -------
    questions : list of MultihopQuestion
        Each question's paragraphs are its supporting passages: every corpus passage whose
        title is a supporting title (all of them when a title repeats).
    corpus : dict of str to Document
        The corpus in file order, ids as :func:`paragraph_id`, duplicates kept once.

    Raises
    ------
    ValueError
        When ``path`` is not HippoRAG's layout.
    DataFormatError
        On malformed files, or a supporting title that no corpus passage has.

    Notes
    -----
    A question holds ``id`` (or ``_id``), ``question``, ``supporting_facts`` (titles, or
    ``[title, sentence index]`` pairs) and optionally ``answer`` and ``answer_aliases``; a
    passage holds ``title`` and ``text``.
    """
    files = hipporag_files(path)
    if files is None:
        raise ValueError(f"path: no NAME.json with NAME{CORPUS_SUFFIX} beside it at {path}")
    questions_path, corpus_path = files
    corpus = _read_corpus(corpus_path)
    by_title: dict[str, list[Document]] = {}
    for doc in corpus.values():
        by_title.setdefault(doc.title, []).append(doc)
    questions = []
    for where, record in _objects(
        _json_list(questions_path, "questions"), f"{questions_path} question"
    ):
        key = "_id" if "_id" in record and "id" not in record else "id"
        qid = str(_field(record, key, where, (str, int)))
        at = f"{where} ({qid})"
        text = _field(record, "question", where)
        paras = []
        for title in _supporting_titles(record, at):
            if title not in by_title:
                raise DataFormatError(
                    f"{at}: supporting title {title!r} is not in {corpus_path.name}"
                )
            paras += [Paragraph(d.title, d.text, True) for d in by_title[title]]
        questions.append(MultihopQuestion(qid, text, tuple(paras), _answers(record, at)))
    return questions, corpus
