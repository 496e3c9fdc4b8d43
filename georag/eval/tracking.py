"""Experiment tracking in Weights & Biases: offline by default, online when WANDB_MODE says so."""

from __future__ import annotations

import os
from pathlib import Path

from georag.eval.report import COLUMNS

__all__ = ["log_to_wandb"]


def log_to_wandb(rows: list[dict], config: dict, out: Path, *, project: str = "georag") -> Path:
    """Log one evaluation (its config, per-method metrics and the results table) as a W&B run.

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

    mode = os.environ.get("WANDB_MODE", "offline")
    (out / "wandb").mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=project,
        config=config,
        mode=mode,
        dir=str(out),
        name=f"eval-{config.get('dataset', 'run')}",
        reinit="finish_previous",
    )
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
        folder = Path(run.dir).parent
    finally:
        run.finish()
        wandb.teardown()  # leave no process-wide W&B state behind for later runs
    return folder
