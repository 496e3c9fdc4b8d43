"""A short CPU run of the Poincare head through the LightningCLI entry, W&B offline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from test_hyte_train import _history  # same folder (rootdir-relative import)

from georag.models.poincare import PoincareHead


@pytest.mark.slow
def test_short_cpu_run_learns_stays_in_the_ball_and_logs_offline(tmp_path, data_dir, monkeypatch):
    from train.__main__ import main

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cli = main(
        [
            "fit",
            "--config",
            str(Path(__file__).parents[2] / "configs/train/iso_rag.yaml"),
            f"--data.init_args.data_dir={data_dir}",
            "--data.init_args.max_questions=12",
            f"--data.init_args.cache_dir={tmp_path / 'cache'}",
            "--data.init_args.batch_size=8",
            "--data.init_args.val_fraction=0.25",
            f"--model.init_args.export_path={tmp_path / 'head.pt'}",
            "--trainer.max_epochs=6",
            f"--trainer.default_root_dir={tmp_path}",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
            f"--trainer.callbacks.init_args.dirpath={tmp_path / 'ckpt'}",
            "--trainer.enable_progress_bar=false",
        ]
    )
    assert cli.trainer.global_step > 0
    cli.trainer.logger.experiment.finish()  # flush the offline run before reading it
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "expected one offline W&B run directory"
    for _ in range(60):  # the offline writer may still be flushing under load
        rows, _ = _history(runs[0])
        losses = [row["train/loss_epoch"] for row in rows if "train/loss_epoch" in row]
        if len(losses) == 6:
            break
        time.sleep(1.0)
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.1, losses
    norms = [row["train/max_norm"] for row in rows if "train/max_norm" in row]
    assert norms and all(n < 1.0 for n in norms)
    assert any("val/recall@5" in row for row in rows)

    head = PoincareHead.load(tmp_path / "head.pt")
    data = cli.datamodule
    with torch.no_grad():
        points = head(data.corpus)
    assert (points.norm(dim=1) < 1.0).all()
    assert list((tmp_path / "ckpt").glob("last.ckpt"))
