"""Ablation grids: one method over every combination of config values, on one shared pool.

The data set is retrieved once; each grid point reranks that same pool, so the rows differ
only by the knobs. Each row carries the knob values, the kept count per query (the paper's
n*), the metrics with 95% bootstrap intervals, the p-value against the first-stage order
(``none``, on the same pool; paired randomization test, Holm-corrected across the grid) and
the latency. ``sweep.json``, ``sweep.md``, ``sweep.tex``, ``per_query.json`` and one plot of
quality against each knob (``sweep.png``) go into ``out``.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from georag._io import atomic_write
from georag.eval.report import LEGEND, SIGNIFICANCE, environment, latex_table, markdown_table
from georag.eval.runner import eval_dataset, evaluate_methods
from georag.eval.stats import annotate
from georag.rerank.registry import is_retriever, parse_option
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder

__all__ = ["SweepConfig", "parse_grid", "run_sweep", "BASELINE"]

BASELINE = "none"
SHOWN = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


@dataclass
class SweepConfig:
    """One sweep: a data set, a first stage, a method and its grid.

    ``grid`` maps a knob to its values: ``quantile`` for a single-stage method, or
    ``stage.knob`` (``ricci.quantile``) for any stage of a ``+`` pipeline.
    """

    dataset: str
    method: str
    grid: dict[str, list]
    data_dir: str | None = None
    split: str = "test"
    first_stage: str = "dense"
    top_m: int = 100
    model: str = DEFAULT_MODEL
    out: str = "runs/sweep"
    max_queries: int | None = None
    batch_size: int = 256
    latency_samples: int = 20
    options: dict[str, dict] = field(default_factory=dict)


def _stage_key(method: str, key: str) -> tuple[str, str]:
    stages = [s.strip() for s in method.split("+")]
    stage, dot, knob = key.rpartition(".")
    if not dot:
        if len(stages) > 1:
            raise ValueError(f"--grid: {key!r} is ambiguous in {method!r}; write STAGE.{key}")
        return stages[0], key
    if stage not in stages:
        raise ValueError(f"--grid: {key!r} names stage {stage!r}, not in {method!r}")
    return stage, knob


def parse_grid(method: str, items: list[str]) -> dict[str, list]:
    """Parse ``["quantile=0.25,0.5", "exp_power=1,2"]`` into typed values per knob.

    Raises ValueError (one line, naming the knob) for a knob the method does not have, a
    value that does not fit the knob's type, a repeated knob or an empty value list.
    """
    if is_retriever(method):
        raise ValueError(f"--method: {method!r} ranks a whole corpus; sweeps rerank one pool")
    grid: dict[str, list] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--grid: expected KEY=V1,V2,..., got {item!r}")
        if key in grid:
            raise ValueError(f"--grid: {key!r} given twice")
        stage, knob = _stage_key(method, key)
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not values:
            raise ValueError(f"--grid: no values for {key!r}")
        try:
            grid[key] = [parse_option(stage, knob, v) for v in values]
        except ValueError as err:
            raise ValueError(f"--grid: {err}") from None
    if not grid:
        raise ValueError("--grid: give at least one KEY=V1,V2,...")
    return grid


def _points(config: SweepConfig) -> list[tuple[dict, dict[str, dict]]]:
    """Every grid point: ``(knob values, method options)``."""
    keys = list(config.grid)
    points = []
    for combo in itertools.product(*(config.grid[k] for k in keys)):
        options = {stage: dict(values) for stage, values in config.options.items()}
        for key, value in zip(keys, combo):
            stage, knob = _stage_key(config.method, key)
            options.setdefault(stage, {})[knob] = value
        points.append((dict(zip(keys, combo)), options))
    return points


def run_sweep(config: SweepConfig, *, encoder: TextEncoder | None = None) -> list[dict]:
    """Run the grid and write the reports (see the module doc). Returns the rows, the
    baseline first."""
    for key, values in config.grid.items():
        _stage_key(config.method, key)
        if not values:
            raise ValueError(f"--grid: no values for {key!r}")
    start = time.perf_counter()
    dataset = eval_dataset(config)
    encoder = encoder or TextEncoder(config.model, show_progress=False)
    stage = FirstStage(
        dataset,
        FirstStageConfig(first_stage=config.first_stage, top_m=config.top_m),
        encoder=encoder,
    )
    ids = list(dataset.queries)
    batch = stage.retrieve(ids, [dataset.queries[q] for q in ids], with_texts=True)
    values: dict[str, dict] = {}
    common = dict(
        dataset=dataset.name,
        batch_size=config.batch_size,
        latency_samples=config.latency_samples,
    )
    rows = evaluate_methods(batch, dataset.qrels, [BASELINE], per_query_out=values, **common)
    rows[0]["label"] = BASELINE
    for i, (knobs, options) in enumerate(_points(config)):
        label = f"{config.method}#{i}"
        found: dict[str, dict] = {}
        row = evaluate_methods(
            batch,
            dataset.qrels,
            [config.method],
            method_options=options,
            per_query_out=found,
            **common,
        )[0]
        values[label] = found[config.method]
        rows.append({**row, "label": label, **knobs})
    for row in rows:
        row["method"], row["spec"] = row.pop("label"), row["method"]
    annotate(rows, values, SHOWN, baseline=BASELINE)  # the table's metrics only
    seconds = time.perf_counter() - start
    _write(rows, values, config, seconds)
    return rows


def columns(config: SweepConfig) -> tuple[str, ...]:
    """The table's columns: the knobs, n*, the metrics, the p-value and the latency."""
    return ("method", *config.grid, "kept_mean", *SHOWN, "ndcg@10_p_value", "ms_per_query")


def _write(rows: list[dict], values: dict, config: SweepConfig, seconds: float) -> None:
    from georag.eval.plots_sweep import plot_sweep

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    cols = columns(config)
    payload = json.dumps({"config": asdict(config), "wall_s": seconds, "rows": rows}, indent=2)
    atomic_write(out / "sweep.json", payload)
    per_query = json.dumps(values)
    atomic_write(out / "per_query.json", per_query)
    header = (
        "```\n"
        + json.dumps(
            {"config": asdict(config), "wall_s": round(seconds, 1), "environment": environment()},
            indent=2,
        )
        + "\n```\n\n"
    )
    text = header + markdown_table(rows, cols) + "\n" + SIGNIFICANCE + "\n" + LEGEND + "\n"
    atomic_write(out / "sweep.md", text)
    latex = latex_table(rows, cols)
    atomic_write(out / "sweep.tex", latex)
    plot_sweep(
        rows,
        list(config.grid),
        out / "sweep.png",
        title=f"{config.method} on {config.dataset} ({rows[0]['num_queries']} queries)",
    )
