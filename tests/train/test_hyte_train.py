"""A short CPU training run of HyTE-H through the LightningCLI entry, logged to W&B offline."""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

import pytest
import torch

from georag.models.hyte import HyTEEncoder


def _wandb_records(path: Path):
    """Records of a ``.wandb`` file (LevelDB-style log of protobuf ``Record`` messages)."""
    from wandb.proto import wandb_internal_pb2 as pb

    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # block trailer
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        data, pos = raw[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        buf = data if kind in (1, 2) else buf + data  # FULL / FIRST, then MIDDLE / LAST
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(buf)
            yield record


def _history(run_dir: Path, *, wait_s: float = 60.0) -> tuple[list[dict], set[str]]:
    """History rows and config keys, once the run's exit record is on disk."""
    deadline = time.monotonic() + wait_s
    while True:
        rows, config, finished = [], set(), False
        for record in _wandb_records(next(run_dir.glob("run-*.wandb"))):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                rows.append(
                    {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.history.item
                    }
                )
            elif kind == "config":
                config |= {item.key for item in record.config.update}
            finished |= kind == "exit"
        if finished or time.monotonic() > deadline:  # the W&B service writes asynchronously
            return rows, config
        time.sleep(0.5)


def _args(tmp_path: Path, data_dir: Path, epochs: int) -> list[str]:
    return [
        "fit",
        "--config",
        str(Path(__file__).parents[2] / "configs/train/hyte_h.yaml"),
        f"--data.init_args.data_dir={data_dir}",
        "--data.init_args.max_pairs=160",
        "--data.init_args.max_corpus=400",
        "--data.init_args.batch_size=20",
        "--data.init_args.max_tokens=128",
        "--model.init_args.max_tokens=128",
        "--model.init_args.learn_curvature=true",
        f"--model.init_args.export_path={tmp_path / 'projection.pt'}",
        f"--trainer.max_epochs={epochs}",
        f"--trainer.default_root_dir={tmp_path}",
        f"--trainer.logger.init_args.save_dir={tmp_path}",
        f"--trainer.callbacks.init_args.dirpath={tmp_path / 'ckpt'}",
        "--trainer.enable_progress_bar=true",
    ]


@pytest.mark.slow
def test_short_cpu_run_learns_and_logs_to_wandb_offline(tmp_path, data_dir, monkeypatch):
    import wandb

    from train.__main__ import main

    monkeypatch.setattr(sys, "argv", ["train"])  # arguments come from args=, not pytest's
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    cli = main(_args(tmp_path, data_dir, epochs=2))
    assert cli.trainer.global_step == 2 * (160 // 20)
    wandb.finish()  # flush the run (a CLI process does this at exit)

    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "expected one offline W&B run directory"
    rows, config = _history(runs[0])
    losses = [row["train/loss_epoch"] for row in rows if "train/loss_epoch" in row]
    ndcg = [row["val/ndcg@10"] for row in rows if "val/ndcg@10" in row]
    assert len(losses) == 2 and len(ndcg) == 2, rows
    assert losses[1] < losses[0] - 0.05, losses  # the loss falls
    assert all(0.0 <= v <= 1.0 for v in ndcg)
    assert any("train/loss_step" in row for row in rows)
    assert any("train/k" in row for row in rows)  # learnable curvature is logged
    assert any("train/temperature" in row for row in rows)
    assert {"temperature", "lr", "batch_size", "hard_negatives"} <= config

    # the exported projection loads and differs from the untrained one
    trained = HyTEEncoder.from_pretrained(weights=tmp_path / "projection.pt")
    untrained = HyTEEncoder.from_pretrained(max_tokens=128)
    assert trained.projection.fingerprint() != untrained.projection.fingerprint()
    assert trained.projection.log_k.requires_grad

    # resume from the last checkpoint for one more epoch
    last = tmp_path / "ckpt" / "last.ckpt"
    assert last.is_file()
    state = torch.load(last, map_location="cpu", weights_only=False)
    assert set(state["state_dict"]) == {
        "projection.w1.weight",
        "projection.w2.weight",
        "projection.log_k",
        "log_scale",
    }
    resumed = main(_args(tmp_path, data_dir, epochs=3) + [f"--ckpt_path={last}"])
    wandb.finish()
    assert resumed.trainer.global_step == 3 * (160 // 20)
    assert resumed.trainer.current_epoch == 3


def test_data_module_rejects_bad_settings():
    from train.hyte_data import HyTEDataModule

    with pytest.raises(ValueError, match="batch_size"):
        HyTEDataModule(batch_size=1)
    with pytest.raises(ValueError, match="hard_negatives"):
        HyTEDataModule(hard_negatives=-1)
