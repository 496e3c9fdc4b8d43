"""Result tables: results.json (rows), results.md (Markdown), results.tex (LaTeX), results.csv.

A metric cell shows the mean, its 95% bootstrap interval ``[low, high]`` when the row has
``<metric>_ci_low`` / ``_ci_high``, and a mark (see :func:`georag.eval.stats.mark`) when the
row has a Holm-corrected ``<metric>_p_value`` against a baseline row of the same data set.
:func:`render_markdown` and :func:`render_latex` draw any table of formatted cells the same
way (the tables of :mod:`georag.experiments` use them).
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
from pathlib import Path

import torch

from georag._io import ArtifactError, read_file_set, write_file_set
from georag.eval.stats import ALPHA, mark

__all__ = [
    "write_reports",
    "read_results",
    "markdown_table",
    "latex_table",
    "render_markdown",
    "render_latex",
    "environment",
    "LEGEND",
    "SIGNIFICANCE",
]

LEGEND = (
    "ms_per_query: median latency of one query alone (B=1, one CPU thread), this stage only; "
    "queries_per_s: throughput with the whole query set batched; first_stage_ms_per_query: "
    "the first stage's time per query in its one batched run over all queries (query "
    "embeddings given); kept_mean: candidates kept per query."
)
SIGNIFICANCE = (
    f"Metric cells: mean [95% percentile bootstrap interval over queries]; ▲ / ▼: better / "
    f"worse than the baseline (p < {ALPHA}, two-sided paired randomization test, "
    "Holm-corrected across the methods of one data set); `ndcg@10_p_value` is that p-value."
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
    "ndcg@10_p_value",
    "kept_mean",
    "ms_per_query",
    "queries_per_s",
    "first_stage_ms_per_query",
)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return "" if value is None else str(value)


def _baselines(rows: list[dict]) -> dict[tuple[str, str], float]:
    """``(dataset, metric) -> baseline mean``: the row whose p-value is None."""
    found = {}
    for row in rows:
        for key, value in row.items():
            if key.endswith("_p_value") and value is None:
                metric = key[: -len("_p_value")]
                found[(row.get("dataset"), metric)] = row.get(metric)
    return found


def _cells(rows: list[dict], columns: tuple[str, ...]) -> list[list[tuple[str, str, str]]]:
    """Per row and column: (value, interval, mark) as plain strings."""
    base = _baselines(rows)
    table = []
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if column.endswith("_p_value"):
                cells.append(("" if value is None else f"{value:.2g}", "", ""))
                continue
            low, high = row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
            interval = "" if low is None else f"{low:.4f}, {high:.4f}"
            sign = mark(row, column, base.get((row.get("dataset"), column)))
            cells.append((_fmt(value), interval, sign))
        table.append(cells)
    return table


def _present(rows: list[dict], columns: tuple[str, ...]) -> tuple[str, ...]:
    """The columns, less p-value columns that no row has (no baseline given)."""
    return tuple(c for c in columns if not c.endswith("_p_value") or any(c in row for row in rows))


Cells = list[list[tuple[str, str, str]]]  # per row and column: (value, interval, mark)


def render_markdown(columns: list[str] | tuple[str, ...], cells: Cells) -> str:
    """A Markdown table of formatted cells, without a final newline.

    Parameters
    ----------
    columns : sequence of str, length C
        The header.
    cells : list of list of (str, str, str)
        Per row, C cells ``(value, interval, mark)``: shown as ``value [interval] mark``
        (the interval and the mark only when not empty).
    """
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in cells:
        text = [
            value + (f" [{interval}]" if interval else "") + (f" {sign}" if sign else "")
            for value, interval, sign in row
        ]
        lines.append("| " + " | ".join(text) + " |")
    return "\n".join(lines)


def markdown_table(rows: list[dict], columns: tuple[str, ...] = COLUMNS) -> str:
    """Rows as a Markdown table (missing cells left blank, see the module doc)."""
    columns = _present(rows, columns)
    return render_markdown(columns, _cells(rows, columns)) + "\n"


TEX_SYMBOLS = {"Δ": "$\\Delta$", "→": "$\\to$", "≥": "$\\geq$", "≤": "$\\leq$"}


def _tex(text: str) -> str:
    for char in "&%$#_{}":
        text = text.replace(char, "\\" + char)
    for char, command in TEX_SYMBOLS.items():
        text = text.replace(char, command)
    return text


def render_latex(
    columns: list[str] | tuple[str, ...], cells: Cells, *, text_columns: int = 2
) -> str:
    """The table of :func:`render_markdown` as a LaTeX ``tabular`` (booktabs, amssymb).

    Parameters
    ----------
    columns, cells
        As for :func:`render_markdown`; text is escaped (``&%$#_{}``, and ``Δ →`` become
        math).
    text_columns : int
        The first this many columns are left-aligned text, the others right-aligned numbers.
    """
    marks = {"▲": "$^{\\blacktriangle}$", "▼": "$^{\\blacktriangledown}$", "": ""}
    lines = [
        "\\begin{tabular}{" + "l" * text_columns + "r" * (len(columns) - text_columns) + "}",
        "\\toprule",
        " & ".join(_tex(c) for c in columns) + " \\\\",
        "\\midrule",
    ]
    for row in cells:
        text = [
            _tex(value) + marks[sign] + (f" {{\\scriptsize [{interval}]}}" if interval else "")
            for value, interval, sign in row
        ]
        lines.append(" & ".join(text) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def latex_table(rows: list[dict], columns: tuple[str, ...] = COLUMNS) -> str:
    """The same table as :func:`markdown_table` as a LaTeX ``tabular`` (booktabs, amssymb)."""
    columns = _present(rows, columns)
    return render_latex(columns, _cells(rows, columns))


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


def write_reports(
    rows: list[dict], out: Path, *, config: dict | None = None, per_query: dict | None = None
) -> None:
    """Write results.json, results.md, results.tex and results.csv (and per_query.json when
    ``per_query`` is given) into ``out`` as one set.

    The files and ``results.manifest.json`` (their SHA-256) are replaced together
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
    legend = "\n" + LEGEND + "\n"
    if any(key.endswith("_ci_low") for row in rows for key in row):
        legend += "\n" + SIGNIFICANCE + "\n"
    files = {
        "results.json": payload,
        "results.md": header + table + legend,
        "results.csv": buffer.getvalue(),
        "results.tex": latex_table(rows),
    }
    if per_query is not None:
        files["per_query.json"] = json.dumps(per_query)
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
        blob = read_file_set(path.parent, manifest=MANIFEST, format=FORMAT, version=VERSION)[
            "results.json"
        ]
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
