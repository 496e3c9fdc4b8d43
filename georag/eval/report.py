"""Result tables: results.json (rows), results.md (a Markdown table) and results.csv."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
from pathlib import Path

import torch

from georag._io import ArtifactError, read_file_set, write_file_set

__all__ = ["write_reports", "read_results", "markdown_table", "environment", "LEGEND"]

LEGEND = (
    "ms_per_query: median latency of one query alone (B=1), this stage only; queries_per_s: "
    "throughput with the whole query set batched; first_stage_ms_per_query: B=1 latency of "
    "the first stage; kept_mean: candidates kept per query."
)
MANIFEST = "results.manifest.json"
FORMAT = "georag-results"
VERSION = 1

COLUMNS = (
    "dataset",
    "method",
    "ndcg@10",
    "recall@10",
    "recall@100",
    "mrr@10",
    "kept_mean",
    "ms_per_query",
    "queries_per_s",
    "first_stage_ms_per_query",
)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return "" if value is None else str(value)


def markdown_table(rows: list[dict], columns: tuple[str, ...] = COLUMNS) -> str:
    """Rows as a Markdown table (missing cells left blank)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def environment() -> dict[str, str]:
    """Machine and library versions, for the record."""
    import faiss
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "faiss": faiss.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "threads": str(torch.get_num_threads()),
    }


def write_reports(rows: list[dict], out: Path, *, config: dict | None = None) -> None:
    """Write results.json, results.md and results.csv into ``out`` as one set.

    The three files and ``results.manifest.json`` (their SHA-256) are replaced together
    (:func:`georag._io.write_file_set`): a reader never sees files from two runs.
    """
    payload = json.dumps(rows, indent=2)
    header = ""
    if config is not None:
        header = (
            "```\n"
            + json.dumps({"config": config, "environment": environment()}, indent=2)
            + "\n```\n\n"
        )
    table = markdown_table(rows)
    buffer = io.StringIO()
    keys = list(dict.fromkeys(k for row in rows for k in row))
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    files = {"results.json": payload, "results.md": header + table + "\n" + LEGEND + "\n",
             "results.csv": buffer.getvalue()}
    write_file_set(out, files, manifest=MANIFEST, format=FORMAT, version=VERSION)


def read_results(path: str | os.PathLike) -> list[dict]:
    """Read a ``results.json`` (checked against its manifest when it has one) into rows.

    Raises
    ------
    ValueError
        Naming the file: missing, corrupt (checksum), not JSON, or not a list of objects.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    if (path.parent / MANIFEST).is_file() and path.name == "results.json":
        blob = read_file_set(path.parent, manifest=MANIFEST, format=FORMAT,
                             version=VERSION)["results.json"]
    elif path.is_file():
        blob = path.read_bytes()
    else:
        raise ValueError(f"--results: no such file {path}")
    try:
        rows = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        reason = getattr(err, "msg", None) or type(err).__name__
        raise ArtifactError(f"{path}: not a JSON results file ({reason})") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ArtifactError(f"{path}: expected a JSON list of result rows")
    return rows
