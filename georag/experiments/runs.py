"""Per-query runs of an experiment, saved so that tables of several scripts can be tested jointly.

One file per (script, data set): the rows' runs (``{row: {query id: {doc id: score}}}``, the
top ``k`` documents of each report query), the qrels counted, the report queries of each
fold, the protocol in words and the script's command. The file is gzip-compressed JSON
sealed with a SHA-256 manifest (:func:`georag._io.seal`), written atomically and checked on
load: a truncated, corrupted or foreign file is an :class:`~georag._io.ArtifactError`
naming it.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from georag._io import ArtifactError, atomic_write, seal, unseal

__all__ = ["QueryRuns", "save_runs", "load_runs", "top_k"]

FORMAT = "georag.query_runs"
VERSION = 1
SUFFIX = ".runs.json.gz"


@dataclass
class QueryRuns:
    """The per-query runs of one script on one data set.

    Attributes
    ----------
    dataset : str
    source : str
        The script (or table) the rows come from, e.g. ``"geometry_adds"``.
    protocol : str
        The split in words (what is trained on, what is reported on).
    command : str
        The command that reproduces the file.
    folds : dict
        ``{fold label: [report query ids]}``; the folds partition the judged queries.
    qrels : dict
        ``{query id: {doc id: gain}}`` of the report queries.
    runs : dict
        ``{row: {query id: {doc id: score}}}``.
    extra : dict
        Anything else the script records per row (training seconds, tuned knobs).
    """

    dataset: str
    source: str
    protocol: str
    command: str
    folds: dict[str, list[str]]
    qrels: dict[str, dict[str, int]]
    runs: dict[str, dict[str, dict[str, float]]]
    extra: dict = field(default_factory=dict)


def top_k(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    """The ``k`` best-scored documents of each query of ``run`` (ties: document id order)."""
    return {
        query: dict(sorted(docs.items(), key=lambda item: (-item[1], item[0]))[:k])
        for query, docs in run.items()
    }


def path_of(folder: str | os.PathLike, dataset: str) -> Path:
    """Where :func:`save_runs` writes the runs of ``dataset`` in ``folder``."""
    return Path(folder) / f"{dataset}{SUFFIX}"


def save_runs(folder: str | os.PathLike, runs: QueryRuns, *, k: int = 100) -> Path:
    """Write ``runs`` (each query's top ``k``) atomically to ``folder/<dataset>.runs.json.gz``.

    Raises
    ------
    ValueError
        When the folds do not partition the judged queries, or a row has a query that
        is not judged.
    """
    judged = set(runs.qrels)
    in_folds = [q for ids in runs.folds.values() for q in ids]
    if len(in_folds) != len(set(in_folds)) or set(in_folds) != judged:
        raise ValueError(f"folds: the folds of {runs.dataset} do not partition its judged queries")
    for row, run in runs.runs.items():
        if not set(run) <= judged:
            raise ValueError(f"runs: row {row!r} holds queries that are not judged")
    body = {
        "dataset": runs.dataset,
        "source": runs.source,
        "protocol": runs.protocol,
        "command": runs.command,
        "folds": runs.folds,
        "qrels": runs.qrels,
        "runs": {row: top_k(run, k) for row, run in runs.runs.items()},
        "extra": runs.extra,
    }
    payload = gzip.compress(json.dumps(body, sort_keys=True).encode(), mtime=0)
    path = path_of(folder, runs.dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, seal(payload, format=FORMAT, version=VERSION, k=k))


def load_runs(path: str | os.PathLike) -> QueryRuns:
    """Read and check a file of :func:`save_runs`.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ArtifactError
        A truncated, corrupted or foreign file, naming ``path``.
    """
    path = Path(path)
    payload, _ = unseal(path.read_bytes(), where=path, format=FORMAT, version=VERSION)
    try:
        body = json.loads(gzip.decompress(payload))
        return QueryRuns(**body)
    except (OSError, ValueError, TypeError) as error:
        raise ArtifactError(f"{path}: not a georag query-runs file ({error})") from None
