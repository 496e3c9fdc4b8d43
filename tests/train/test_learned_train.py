"""Training learnable rerankers: losses, NDCG, splits, the NaN guard, and a short W&B run."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hyte_train import _history  # same folder (rootdir-relative import)

from georag.batch import RerankResult
from georag.config import config_value
from georag.eval.metrics import per_query
from georag.eval.synthetic import random_batch
from georag.rerank.registry import make_method
from train.learned_data import LearnedPoolData, split_rows
from train.learned_module import LearnedRerankerModule
from train.losses import ndcg_at_k, ranking_loss
from train.pools import Pool


def labelled_pool(seed: int, b: int = 6, m: int = 20, d: int = 8) -> Pool:
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, b, m, d, padded=[(1, 12)], unit=True, shuffle=True)
    qrels = {}
    for q, row in zip(batch.query_ids, batch.doc_ids, strict=True):
        real = [doc for doc in row if doc]
        picked = rng.choice(len(real), size=3, replace=False)
        qrels[q] = {real[i]: int(rng.integers(1, 3)) for i in picked}
        qrels[q][f"unretrieved-{q}"] = 1  # judged but not in the pool: counts in the ideal
    return Pool.from_batch(batch, qrels)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_ndcg_equals_pytrec_eval(seed):
    pool = labelled_pool(seed)
    scores = torch.randn(pool.batch.scores.shape, generator=torch.Generator().manual_seed(seed))
    keep = pool.batch.mask & (torch.rand(scores.shape) < 0.9)
    result = RerankResult.from_scores(scores, keep)
    reference = per_query(result.to_run(pool.batch), pool.qrels, ["ndcg@10"])["ndcg@10"]
    ours = ndcg_at_k(result.scores, keep, pool.gains, pool.ideal)
    expected = torch.tensor([reference[q] for q in pool.batch.query_ids], dtype=torch.float64)
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=0)


def test_losses_prefer_the_relevant_order():
    gains = torch.tensor([[0.0, 2.0, 1.0, 0.0]])
    ranked = torch.tensor([[True, True, True, False]])
    good = torch.tensor([[0.0, 3.0, 2.0, 99.0]])  # the unranked slot's value is ignored
    bad = torch.tensor([[3.0, 0.0, 1.0, -99.0]])
    for kind in ("listwise", "approx_ndcg"):
        assert ranking_loss(good, ranked, gains, kind=kind) < ranking_loss(
            bad, ranked, gains, kind=kind
        )
    # approximate NDCG approaches 1 - NDCG as the sigmoid sharpens
    loss = ranking_loss(good, ranked, gains, kind="approx_ndcg", smoothing=1e-3)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)
    empty = ranking_loss(good.requires_grad_(), ranked, torch.zeros_like(gains))
    empty.backward()
    assert empty == 0 and torch.equal(good.grad, torch.zeros_like(good))
    with pytest.raises(ValueError, match="loss"):
        ranking_loss(good, ranked, gains, kind="pairwise")


def test_splits_are_seeded_disjoint_and_cover():
    parts = [split_rows(53, protocol="kfold", val_fraction=0.2, seed=3, fold=f) for f in range(5)]
    reports = sorted(r for p in parts for r in p["report"])
    assert reports == list(range(53))
    for p in parts:
        assert not set(p["report"]) & (set(p["train"]) | set(p["val"]))
        assert not set(p["train"]) & set(p["val"])
        assert len(p["train"]) + len(p["val"]) + len(p["report"]) == 53
    assert parts[0] == split_rows(53, protocol="kfold", val_fraction=0.2, seed=3, fold=0)
    assert parts[0] != split_rows(53, protocol="kfold", val_fraction=0.2, seed=4, fold=0)
    holdout = split_rows(40, protocol="holdout", val_fraction=0.25, seed=0)
    assert holdout["report"] == [] and len(holdout["val"]) == 10
    with pytest.raises(ValueError, match="protocol"):
        split_rows(10, protocol="random", val_fraction=0.2, seed=0)


def _fit(module, pool, tmp_path, epochs=2):
    data = LearnedPoolData(dataset="given", batch_size=4, val_fraction=0.34).use_pool(pool)
    trainer = L.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        num_sanity_val_steps=0,
    )
    trainer.fit(module, datamodule=data)
    return trainer


def test_nan_gradient_raises_before_the_weights_move(tmp_path):
    module = LearnedRerankerModule("learned_maniscope", {"dim": 8, "fixed.k": 3})
    before = {k: v.clone() for k, v in module.state_dict().items()}
    module.reranker.alpha.raw.register_hook(lambda grad: grad * float("nan"))
    with pytest.raises(FloatingPointError, match="non-finite gradient in 'reranker.alpha.raw'"):
        _fit(module, labelled_pool(0), tmp_path)
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_bad_module_arguments():
    with pytest.raises(ValueError, match="not a learnable reranker"):
        LearnedRerankerModule("maniscope")
    with pytest.raises(ValueError, match="loss"):
        LearnedRerankerModule("learned_maniscope", loss="hinge")


@pytest.mark.slow
def test_short_run_through_the_cli_learns_and_logs_offline(tmp_path, data_dir, monkeypatch):
    from train.__main__ import main

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    epochs = 6
    cli = main(
        [
            "fit",
            "--config",
            str(Path(__file__).parents[2] / "configs/train/learned_diffusion.yaml"),
            f"--data.init_args.data_dir={data_dir}",
            "--data.init_args.dataset=cranfield",
            "--data.init_args.protocol=kfold",
            "--data.init_args.train_split=test",
            "--data.init_args.max_queries=15",
            "--data.init_args.max_corpus=40",
            f"--data.init_args.cache_dir={tmp_path / 'cache'}",
            "--data.init_args.batch_size=4",
            f"--model.init_args.export_path={tmp_path / 'weights.pt'}",
            f"--trainer.max_epochs={epochs}",
            f"--trainer.default_root_dir={tmp_path}",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
            f"--trainer.callbacks.init_args.dirpath={tmp_path / 'ckpt'}",
            "--trainer.log_every_n_steps=1",
            "--trainer.enable_progress_bar=true",
        ]
    )
    assert cli.trainer.global_step > 0
    cli.trainer.logger.experiment.finish()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "expected one offline W&B run directory"
    rows, _ = _history(runs[0])
    losses = [row["train/loss_epoch"] for row in rows if "train/loss_epoch" in row]
    assert len(losses) == cli.trainer.current_epoch and losses[-1] < losses[0], losses
    assert sum("val/ndcg@10" in row for row in rows) == cli.trainer.current_epoch
    assert any("val/ndcg@10_init" in row for row in rows)
    assert any("knob/damping" in row for row in rows)

    split = json.loads((tmp_path / "split.json").read_text())
    assert split["protocol"] == "kfold" and split["seed"] == 0 and split["report"]
    assert not set(split["report"]) & set(split["train"] + split["val"])
    summary = json.loads((tmp_path / "weights.pt.json").read_text())
    assert summary["val_ndcg@10_best"] >= summary["val_ndcg@10_init"]
    loaded = make_method("learned_diffusion", {"weights": str(tmp_path / "weights.pt")})
    assert loaded.knobs() == pytest.approx(summary["knobs"])
    assert list((tmp_path / "ckpt").glob("last.ckpt"))


@pytest.mark.parametrize("method", ["learned_diffusion", "learned_maniscope"])
def test_tuning_starts_at_the_paper_defaults_and_never_ends_below(method):
    from train.tune import pool_ndcg, tune

    pool = labelled_pool(5, b=8, m=20)
    options = {"dim": 8, "fixed.k": 3} if method == "learned_maniscope" else {"dim": 8}
    best, study = tune(method, pool, trials=6, options=options)
    first = study.trials[0]
    fixed = make_method(method, options)
    assert first.params["fusion"] == 1e-4 and all(
        first.params[k] == config_value(fixed.config, k) for k in first.params if k != "fusion"
    )
    assert study.best_value >= first.value
    tuned = make_method(method, {**options, **best})
    assert pool_ndcg(tuned, pool) == pytest.approx(study.best_value)
    with pytest.raises(ValueError, match="not a learnable reranker"):
        tune("diffusion", pool)


def test_a_failed_trial_is_counted_and_the_search_goes_on(monkeypatch):
    import train.tune as tuning

    pool = labelled_pool(5, b=8, m=20)
    calls = []
    real = tuning.pool_ndcg

    def sometimes_fails(reranker, pool):
        calls.append(1)
        if len(calls) in (2, 4):
            raise ValueError("lengths must be finite and non-negative on every edge")
        if len(calls) == 5:
            return float("nan")
        return real(reranker, pool)

    monkeypatch.setattr(tuning, "pool_ndcg", sometimes_fails)
    best, study = tuning.tune("learned_diffusion", pool, trials=6, options={"dim": 8})
    assert len(study.trials) == 6 and tuning.failed_trials(study) == 3
    assert set(best) == set(study.trials[0].params)
    monkeypatch.setattr(tuning, "pool_ndcg", lambda reranker, pool: float("nan"))
    with pytest.raises(ValueError, match="trials: all 3 trials"):
        tuning.tune("learned_diffusion", pool, trials=3, options={"dim": 8})
