"""BEIR-layout data sets: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

:func:`load_beir` takes a folder path or a data set name. A name resolves under
``data_dir`` (or the ``GEORAG_DATA`` environment variable) and, when it is not there,
is downloaded as the public BEIR zip into a cache folder.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from georag.data.download import BEIR_DATASETS, BEIR_URL, download_and_extract
from georag.resources import data_roots, default_cache_dir

__all__ = ["Document", "BeirDataset", "load_beir", "resolve_dataset", "DataFormatError"]


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and the line."""


@dataclass(frozen=True)
class Document:
    """One corpus entry."""

    doc_id: str
    title: str
    text: str

    @property
    def full_text(self) -> str:
        """Title and text joined by a space (the text alone when there is no title)."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


@dataclass(frozen=True)
class BeirDataset:
    """A loaded BEIR data set.

    Attributes
    ----------
    name : str
    corpus : dict of str to Document
    queries : dict of str to str
        Only the queries judged in ``qrels`` (the split's queries).
    qrels : dict of str to dict of str to int
        ``qrels[query_id][doc_id] = relevance``; relevance 0 means judged non-relevant.
    answers : dict of str to tuple of str
        ``answers[query_id]``: the answer then its aliases, for the queries that have
        answers (multi-hop QA sets); empty for BEIR sets.
    """

    name: str
    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError(f"dataset {self.name!r}: the corpus is empty")
        if not self.queries:
            raise ValueError(f"dataset {self.name!r}: no queries")


def decode_line(raw: bytes, path: Path, line_no: int) -> str:
    """UTF-8 text of one line; other encodings are an error naming the file and line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataFormatError(
            f"{path}:{line_no}: not UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}"
            "; re-encode the file as UTF-8)"
        ) from None


def parse_json(text: str | bytes, where: str) -> object:
    """``json.loads`` whose failures (malformed, nested too deeply) name ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{where}: malformed JSON ({err.msg})") from None
    except RecursionError:
        raise DataFormatError(f"{where}: JSON nested too deeply") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, object)`` for each non-blank line; errors name file and line."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            line = decode_line(raw, path, line_no)
            if not line.strip():
                continue
            record = parse_json(line, f"{path}:{line_no}")
            if not isinstance(record, dict):
                raise DataFormatError(f"{path}:{line_no}: expected a JSON object")
            yield line_no, record


def _require(record: dict, key: str, path: Path, line_no: int) -> str:
    if key not in record:
        raise DataFormatError(f"{path}:{line_no}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, (str, int)):
        raise DataFormatError(f"{path}:{line_no}: field {key!r} must be a string")
    return str(value)


def read_corpus(path: Path) -> dict[str, Document]:
    """Read ``corpus.jsonl``: objects with ``_id``, ``text`` and an optional ``title``."""
    corpus: dict[str, Document] = {}
    for line_no, record in iter_jsonl(path):
        doc_id = _require(record, "_id", path, line_no)
        text = _require(record, "text", path, line_no)
        if doc_id in corpus:
            raise DataFormatError(f"{path}:{line_no}: duplicate document id {doc_id!r}")
        title = record.get("title")
        if title is not None and not isinstance(title, str):
            raise DataFormatError(
                f"{path}:{line_no}: field 'title' must be a string, got {type(title).__name__}"
            )
        corpus[doc_id] = Document(doc_id, title or "", text)
    if not corpus:
        raise DataFormatError(f"{path}: the corpus is empty")
    if not any(doc.full_text.strip() for doc in corpus.values()):
        raise DataFormatError(f"{path}: every document's title and text are empty")
    return corpus


def read_queries(path: Path) -> dict[str, str]:
    """Read ``queries.jsonl``: objects with ``_id`` and ``text``."""
    queries: dict[str, str] = {}
    for line_no, record in iter_jsonl(path):
        query_id = _require(record, "_id", path, line_no)
        if query_id in queries:
            raise DataFormatError(f"{path}:{line_no}: duplicate query id {query_id!r}")
        queries[query_id] = _require(record, "text", path, line_no)
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read a qrels TSV with header ``query-id  corpus-id  score``."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open("rb") as handle:
        lines = [decode_line(raw, path, n) for n, raw in enumerate(handle, start=1)]
    for line_no, row in enumerate(csv.reader(lines, delimiter="\t"), start=1):
        if not row or (line_no == 1 and row[0] == "query-id"):
            continue
        if len(row) != 3:
            raise DataFormatError(f"{path}:{line_no}: expected 3 tab-separated fields")
        query_id, doc_id, score = row
        try:
            value = float(score)
        except ValueError:
            raise DataFormatError(f"{path}:{line_no}: score {score!r} is not a number") from None
        if not math.isfinite(value) or abs(value) > 2**31:
            raise DataFormatError(
                f"{path}:{line_no}: score {score!r} is not a finite relevance grade"
            )
        relevance = int(value)
        qrels.setdefault(query_id, {})[doc_id] = relevance
    return qrels


def resolve_dataset(
    name_or_path: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    *,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Find a data set folder.

    Parameters
    ----------
    name_or_path : str or path
        An existing folder, or a data set name (``scifact``).
    data_dir : path, optional
        Where names resolve; defaults to ``$GEORAG_DATA``.
    download : bool
        Download the public BEIR zip when the name is not found locally.
    cache_dir : path, optional
        Download cache; defaults to ``$GEORAG_CACHE/datasets`` or ``~/.cache/georag/datasets``.
    """
    path = Path(name_or_path)
    if path.is_dir():
        return path
    name = str(name_or_path)
    roots = data_roots(data_dir)
    for root in roots:
        if (root / name).is_dir():
            return root / name
    cache = Path(cache_dir) if cache_dir else default_cache_dir() / "datasets"
    if (cache / name).is_dir():
        return cache / name
    if "/" in name or os.sep in name:
        raise ValueError(f"name_or_path: folder {name!r} does not exist")
    if not download or name not in BEIR_DATASETS:
        raise ValueError(_not_found(name, roots + [cache], download=download))
    return download_and_extract(BEIR_URL.format(name=name), cache, name)


def local_datasets(roots: list[Path]) -> list[str]:
    """Names of the BEIR folders (holding ``corpus.jsonl``) under ``roots``."""
    found = set()
    for root in roots:
        if root.is_dir():
            found.update(p.name for p in root.iterdir() if (p / "corpus.jsonl").is_file())
    return sorted(found)


def _not_found(name: str, roots: list[Path], *, download: bool) -> str:
    local = local_datasets(roots)
    close = difflib.get_close_matches(name, local + list(BEIR_DATASETS), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    where = ", ".join(str(r) for r in roots) or "nowhere (set --data-dir or $GEORAG_DATA)"
    what = "not found" if download else "not found (downloads are off)"
    return (
        f"name_or_path: data set {name!r} {what}; {hint}local sets: "
        f"{', '.join(local) or 'none'} (under {where}); downloadable BEIR sets: "
        f"{', '.join(BEIR_DATASETS)}"
    )


def load_beir(
    name_or_path: str | os.PathLike,
    *,
    split: str = "test",
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> BeirDataset:
    """Load a BEIR data set and check that its files agree.

    Only the queries judged in ``qrels/<split>.tsv`` are kept. Raises
    :class:`DataFormatError` on malformed lines, missing fields, duplicate ids, or qrels
    naming ids that are not in the corpus or the queries.
    """
    folder = resolve_dataset(name_or_path, data_dir, download=download, cache_dir=cache_dir)
    for required in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / required).is_file():
            raise DataFormatError(f"{folder}: missing {required}")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise ValueError(f"split: no qrels/{split}.tsv in {folder} (available: {available})")
    corpus = read_corpus(folder / "corpus.jsonl")
    all_queries = read_queries(folder / "queries.jsonl")
    qrels = read_qrels(qrels_path)
    unknown_queries = sorted(set(qrels) - set(all_queries))
    if unknown_queries:
        raise DataFormatError(f"{qrels_path}: unknown query ids {unknown_queries[:5]}")
    unknown_docs = sorted({d for judged in qrels.values() for d in judged} - set(corpus))
    if unknown_docs:
        raise DataFormatError(f"{qrels_path}: unknown document ids {unknown_docs[:5]}")
    queries = {qid: all_queries[qid] for qid in all_queries if qid in qrels}
    return BeirDataset(folder.name, corpus, queries, qrels)
