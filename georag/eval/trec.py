"""TREC run files: ``qid Q0 docid rank score tag`` per line."""

from __future__ import annotations

import os
from pathlib import Path

from georag.eval.metrics import Run
from georag.retrieval.cache import atomic_write_bytes

__all__ = ["write_run", "read_run"]


def write_run(run: Run, path: str | os.PathLike, *, tag: str = "georag") -> None:
    """Write ``run`` atomically, each query's documents in descending score order."""
    lines = []
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda item: -item[1])
        lines.extend(
            f"{qid} Q0 {doc} {rank} {score:.6f} {tag}"
            for rank, (doc, score) in enumerate(ranked, start=1)
        )
    text = "\n".join(lines) + ("\n" if lines else "")
    atomic_write_bytes(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run file; malformed lines raise ValueError with the line number."""
    run: Run = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 6:
                raise ValueError(f"{path}:{line_no}: expected 6 fields, got {len(fields)}")
            qid, _, doc, _, score, _ = fields
            try:
                run.setdefault(qid, {})[doc] = float(score)
            except ValueError:
                raise ValueError(f"{path}:{line_no}: score {score!r} is not a number") from None
    return run
