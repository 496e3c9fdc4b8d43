"""Experiment tracking in Weights & Biases: offline by default, online when WANDB_MODE says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

from georag.eval.report import COLUMNS

__all__ = ["log_to_wandb", "log_sweep_to_wandb", "per_query_rows", "ricci_details"]


def _init(config: dict, out: Path, name: str, project: str):
    import wandb

    (out / "wandb").mkdir(parents=True, exist_ok=True)
    return wandb.init(
        project=project,
        config=config,
        mode=os.environ.get("WANDB_MODE", "offline"),
        dir=str(out),
        name=name,
        reinit="finish_previous",
    )


def ricci_details(config: dict, out: Path, *, query: int = 0) -> tuple[dict, Path | None]:
    """Re-run the Ricci-Filtration stage of the evaluation's pool for the record.

    Returns ``{query_id: final query-edge lengths of its pooled candidates}`` and the flow
    plot (paper Fig. 3) of query number ``query`` (``out / "flow.png"``), or ``({}, None)``
    when no method of ``config`` starts with ``ricci``.
    """
    import torch

    from georag.eval.plots_ricci import plot_flow
    from georag.eval.runner import EvalConfig, eval_dataset, eval_first_stage
    from georag.rerank.registry import make_method

    if not any(m.split("+")[0].strip() == "ricci" for m in config.get("methods", [])):
        return {}, None
    eval_config = EvalConfig.from_dict(config)
    dataset = eval_dataset(eval_config)
    stage = eval_first_stage(eval_config, dataset)
    ids = list(dataset.queries)
    batch = stage.retrieve(ids, [dataset.queries[q] for q in ids])
    ricci = make_method("ricci", eval_config.resolved_options().get("ricci"))
    lengths = ricci.filtrate(batch).query_lengths
    finite = {
        qid: [round(v, 4) for v in row.tolist() if v == v]
        for qid, row in zip(batch.query_ids, lengths)
    }
    one = ricci.filtrate(batch.slice(query, query + 1), history=True)
    slots = one.slots[0].tolist()
    qid = batch.query_ids[query]
    relevant = torch.tensor([batch.doc_ids[query][s] in dataset.qrels[qid] for s in slots])
    history = one.flow.history_lengths[:, 0, 0, 1 : 1 + len(slots)]
    png = plot_flow(
        history.numpy(),
        out / "flow.png",
        eta=ricci.config.eta,
        relevant=relevant.numpy(),
        title=f"Ricci flow, query {qid}",
    )
    return finite, png


def per_query_rows(rows: list[dict], per_query: dict, lengths: dict) -> tuple[list, list]:
    """Columns and data of the per-query table: data set, method, query id, kept count,
    every metric, and the final Ricci query-edge lengths for methods starting with ricci."""
    metrics = [k for k in next(iter(per_query.values())) if k != "kept"]
    columns = ["dataset", "method", "query_id", "kept", *metrics, "ricci_query_lengths"]
    data = []
    for row in rows:
        values = per_query[row["method"]]
        ricci = row["method"].split("+")[0] == "ricci"
        for qid in values[metrics[0]]:
            data.append(
                [
                    row["dataset"],
                    row["method"],
                    qid,
                    values["kept"].get(qid),
                    *[values[m][qid] for m in metrics],
                    json.dumps(lengths.get(qid, [])) if ricci else "",
                ]
            )
    return columns, data


def log_to_wandb(rows: list[dict], config: dict, out: Path, *, project: str = "georag") -> Path:
    """Log one evaluation as a W&B run: its config, per-method metrics, the results table,
    a per-query table (from ``out / "per_query.json"``) and, for Ricci-Filtration, the flow
    plot of the first query as an image.

    Parameters
    ----------
    rows : list of dict
        The rows of ``results.json``.
    config : dict
        The evaluation config.
    out : Path
        The run is written under ``out / "wandb"``.

    Returns
    -------
    Path
        The W&B run folder.
    """
    import wandb

    per_query_path = out / "per_query.json"
    per_query = json.loads(per_query_path.read_text()) if per_query_path.is_file() else None
    lengths, flow_png = ricci_details(config, out)
    run = _init(config, out, f"eval-{config.get('dataset', 'run')}", project)
    try:
        for row in rows:
            prefix = f"{row['dataset']}/{row['method']}"
            run.summary.update(
                {
                    f"{prefix}/{key}": value
                    for key, value in row.items()
                    if isinstance(value, (int, float)) and value is not None
                }
            )
        columns = [c for c in COLUMNS if any(c in row for row in rows)]
        run.log(
            {
                "results": wandb.Table(
                    columns=columns, data=[[row.get(c) for c in columns] for row in rows]
                )
            }
        )
        if per_query is not None:
            columns, data = per_query_rows(rows, per_query, lengths)
            run.log({"per_query": wandb.Table(columns=columns, data=data)})
        if flow_png is not None:
            run.log({"ricci_flow": wandb.Image(str(flow_png))})
        folder = Path(run.dir).parent
    finally:
        run.finish()
        wandb.teardown()  # leave no process-wide W&B state behind for later runs
    return folder


def log_sweep_to_wandb(
    rows: list[dict], config: dict, out: Path, *, project: str = "georag"
) -> Path:
    """Log one sweep (its config, the table of grid points and ``out / "sweep.png"``)."""
    import wandb

    from georag.eval.sweep import SHOWN, SweepConfig, columns

    cols = list(columns(SweepConfig(**config)))
    cols += [f"{m}_ci_{side}" for m in SHOWN for side in ("low", "high")]
    run = _init(config, out, f"sweep-{config['method']}-{config['dataset']}", project)
    try:
        run.log(
            {
                "sweep": wandb.Table(
                    columns=cols, data=[[row.get(c) for c in cols] for row in rows]
                ),
                "sweep_plot": wandb.Image(str(out / "sweep.png")),
            }
        )
        folder = Path(run.dir).parent
    finally:
        run.finish()
        wandb.teardown()
    return folder
