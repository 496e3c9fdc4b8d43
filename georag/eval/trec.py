"""TREC run files: ``qid Q0 docid rank score tag`` per line.

A run georag writes gets a sidecar ``<run>.manifest.json`` (format, version, SHA-256) and is
replaced together with it (:func:`georag._io.write_file_set`); :func:`read_run` checks it
when present, so a changed or torn run is an error naming the file. Runs from other tools
(no sidecar) are read as they are. :func:`stream_run` reads a large run query by query,
with the same line parser.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from georag._io import read_file_set, write_file_set
from georag.eval.metrics import Run

__all__ = ["write_run", "write_run_text", "read_run", "stream_run", "manifest_path"]

FORMAT = "georag-trec-run"
VERSION = 1


def manifest_path(path: str | os.PathLike) -> Path:
    """The sidecar manifest of the run at ``path``."""
    path = Path(path)
    return path.with_name(f"{path.name}.manifest.json")


def write_run_text(text: str, path: str | os.PathLike) -> None:
    """Write already formatted run lines to ``path`` with their manifest, as one set."""
    path = Path(path)
    write_file_set(
        path.parent,
        {path.name: text},
        manifest=manifest_path(path).name,
        format=FORMAT,
        version=VERSION,
    )


def write_run(run: Run, path: str | os.PathLike, *, tag: str = "georag") -> None:
    """Write ``run`` atomically, each query's documents in descending score order."""
    lines = []
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda item: -item[1])
        lines.extend(
            f"{qid} Q0 {doc} {rank} {score:.6f} {tag}"
            for rank, (doc, score) in enumerate(ranked, start=1)
        )
    write_run_text("\n".join(lines) + ("\n" if lines else ""), path)


def _records(
    lines: Iterable[bytes], path: str | os.PathLike
) -> Iterator[tuple[str, str, float, int]]:
    """``(query id, doc id, score, line number)`` of each non-blank line; a malformed line
    raises ValueError with the file and line number."""
    for line_no, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path}:{line_no}: not UTF-8 text ({err.reason} at byte {err.start})"
            ) from None
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise ValueError(f"{path}:{line_no}: expected 6 fields, got {len(fields)}")
        qid, _, doc, _, score, _ = fields
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"{path}:{line_no}: score {score!r} is not a number") from None
        yield qid, doc, value, line_no


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run file; malformed lines raise ValueError with the file and line number."""
    path = Path(path)
    sidecar = manifest_path(path)
    if sidecar.is_file() or sidecar.parent.joinpath(f".{sidecar.name}.pending").is_dir():
        blob = read_file_set(
            path.parent, manifest=sidecar.name, format=FORMAT, version=VERSION
        ).get(path.name)
        if blob is None:
            raise ValueError(f"{sidecar}: does not list {path.name}")
    elif path.is_file():
        blob = path.read_bytes()
    else:
        raise ValueError(f"path: no run file at {path}")
    run: Run = {}
    for qid, doc, score, _ in _records(blob.split(b"\n"), path):
        run.setdefault(qid, {})[doc] = score
    return run


def stream_run(path: str | os.PathLike) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """Yield ``(query_id, [(doc_id, score), ...])`` per query, reading the file once.

    The lines of one query must be contiguous (as every TREC tool writes them). The
    sidecar manifest is not checked (a run from another tool has none).
    """
    seen: set[str] = set()
    current, docs = None, []
    with open(path, "rb") as handle:
        for qid, doc, score, line_no in _records(handle, path):
            if qid != current:
                if current is not None:
                    yield current, docs
                if qid in seen:
                    raise ValueError(f"{path}:{line_no}: lines of query {qid!r} are not contiguous")
                seen.add(qid)
                current, docs = qid, []
            docs.append((doc, score))
    if current is not None:
        yield current, docs
