"""learned_iso trains through the shared LightningModule and logs to W&B offline."""

from __future__ import annotations

import json
from operator import attrgetter
from pathlib import Path

import pytest
import torch
from test_hyte_train import _history  # same folder (rootdir-relative import)

from georag.rerank.registry import make_method
from train.corpus_data import CorpusQueryData, load_query_set
from train.learned_module import LearnedRerankerModule


@pytest.fixture(scope="module")
def demo(embedding_cache_dir):
    from georag.data.bundled import DEMO_DIR

    return load_query_set(str(DEMO_DIR), cache_dir=embedding_cache_dir)


@pytest.mark.slow  # encodes the demo corpus (~20-50 s on a loaded CPU)
def test_query_set_gains_and_folds(demo, tmp_path):
    column = {d: i for i, d in enumerate(demo.corpus.doc_ids)}
    for row, q in enumerate(demo.batch.ids):
        relevant = {column[d] for d, g in demo.qrels[q].items() if g > 0 and d in column}
        assert set(demo.gains[row].nonzero().squeeze(1).tolist()) == relevant
    data = CorpusQueryData(protocol="kfold", fold=2).use_queries(demo)
    data.setup()
    seen = set(data.split["train"] + data.split["val"])
    assert not seen & set(data.split["report"]) and len(seen) + len(data.split["report"]) == 30
    assert set(data.queries.batch.ids) == seen  # the report fold is never loaded
    batch = next(iter(data.train_dataloader()))
    assert batch["gains"].shape == (len(batch["batch"].ids), len(demo.corpus.doc_ids))


@pytest.mark.slow  # ~40 s: a W&B offline run through the LightningCLI
def test_short_run_through_the_cli_learns_and_logs_offline(
    tmp_path, embedding_cache_dir, demo, monkeypatch
):
    from georag.data.bundled import DEMO_DIR
    from train.__main__ import main

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cli = main(
        [
            "fit",
            "--config",
            str(Path(__file__).parents[2] / "configs/train/learned_iso.yaml"),
            f"--data.init_args.dataset={DEMO_DIR}",
            f"--data.init_args.cache_dir={embedding_cache_dir}",
            "--data.init_args.batch_size=4",
            f"--model.init_args.export_path={tmp_path / 'weights.pt'}",
            "--trainer.max_epochs=6",
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
    knobs = [row["knob/prune_threshold"] for row in rows if "knob/prune_threshold" in row]
    assert knobs and knobs[-1] != 1.0  # the pruning threshold moved through the surrogate

    split = json.loads((tmp_path / "split.json").read_text())
    assert split["protocol"] == "kfold" and split["report"]
    assert not set(split["report"]) & set(split["train"] + split["val"])
    summary = json.loads((tmp_path / "weights.pt.json").read_text())
    assert summary["val_ndcg@10_best"] >= summary["val_ndcg@10_init"]
    loaded = make_method("learned_iso", {"weights": str(tmp_path / "weights.pt")})
    assert loaded.knobs() == pytest.approx(summary["knobs"])
    assert list((tmp_path / "ckpt").glob("last.ckpt"))


def test_a_nan_gradient_stops_the_step_before_the_weights_move():
    module = LearnedRerankerModule("learned_iso")
    for param in module.parameters():
        param.grad = torch.zeros_like(param)
    module.reranker.prune_threshold.raw.grad = torch.tensor(float("nan"), dtype=torch.float64)
    before = {k: v.clone() for k, v in module.state_dict().items()}

    class Trainer:  # what on_after_backward reads
        global_step = 0

    module._trainer = Trainer()
    with pytest.raises(FloatingPointError, match="prune_threshold"):
        module.on_after_backward()
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


def test_tuning_a_corpus_retriever_starts_at_the_defaults_and_never_ends_below():
    from georag.batch import Corpus, QueryBatch
    from train.corpus_data import QuerySet
    from train.tune import pool_ndcg, tune

    n, d = 40, 8
    gen = torch.Generator().manual_seed(3)
    emb = torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=1)
    ids = [f"d{i}" for i in range(n)]
    texts = [f"passage {i} mentions title{(3 * i) % n} and Big Entity{i % 4}" for i in range(n)]
    corpus = Corpus(ids, [f"Title{i}" for i in range(n)], texts, emb)
    queries = torch.nn.functional.normalize(torch.randn(8, d, generator=gen), dim=1)
    batch = QueryBatch([f"q{i}" for i in range(8)], [""] * 8, queries)
    near = (queries @ emb.T).topk(6, dim=1).indices  # relevant: among the 6 most similar
    qrels = {q: {ids[int(j)]: 1 for j in near[i, 2::2]} for i, q in enumerate(batch.ids)}
    queries_set = QuerySet.build(corpus, batch, qrels)
    options = {"dim": d, "fixed.max_nodes": 12}
    best, study = tune("learned_iso", queries_set, trials=5, options=options)
    fixed = make_method("learned_iso", options)
    assert all(study.trials[0].params[k] == attrgetter(k)(fixed.config) for k in best)
    assert study.best_value >= study.trials[0].value
    tuned = make_method("learned_iso", {**options, **best}).fit(corpus)
    assert pool_ndcg(tuned, queries_set) == pytest.approx(study.best_value)
