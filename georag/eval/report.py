"""Result tables: results.json (rows), results.md (a Markdown table) and results.csv."""

from __future__ import annotations

import csv
import io
import json
import platform
from pathlib import Path

import torch

from georag.retrieval.cache import atomic_write_bytes

__all__ = ["write_reports", "markdown_table", "environment"]

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
    """Write results.json, results.md and results.csv into ``out`` (atomically)."""
    out.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(rows, indent=2)
    atomic_write_bytes(out / "results.json", lambda tmp: tmp.write_text(payload))
    header = ""
    if config is not None:
        header = (
            "```\n"
            + json.dumps({"config": config, "environment": environment()}, indent=2)
            + "\n```\n\n"
        )
    table = markdown_table(rows)
    atomic_write_bytes(out / "results.md", lambda tmp: tmp.write_text(header + table))
    buffer = io.StringIO()
    keys = list(dict.fromkeys(k for row in rows for k in row))
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(out / "results.csv", lambda tmp: tmp.write_text(buffer.getvalue()))
