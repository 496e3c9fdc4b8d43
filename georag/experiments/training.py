"""Gradient training of a learnable method on a fold's training queries, and its settings.

:func:`fit` trains a registry method (:class:`train.learned_module.LearnedRerankerModule`,
early stopping on the validation NDCG@10 of a seeded part of the training queries) on a pool
or, for a corpus-level retriever, on a query set over the corpus. :class:`Training` holds the
settings with their defaults, written once; :func:`add_training_options` puts them (and the
folds and resamples of an experiment) on a command line.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.loggers import CSVLogger

from train.corpus_data import CorpusQueryData, QuerySet
from train.learned_data import LearnedPoolData
from train.learned_module import LearnedRerankerModule
from train.pools import Pool
from train.tune import TRIAL_ERRORS

__all__ = ["Training", "FOLDS", "RESAMPLES", "add_training_options", "fit"]

FOLDS = 5  # cross-validation folds of the data sets with one judged split
RESAMPLES = 5000  # bootstrap resamples and randomization-test sign flips


@dataclass(frozen=True)
class Training:
    """How :func:`fit` trains.

    Attributes
    ----------
    epochs : int
        Most epochs.
    patience : int
        Epochs without a better validation NDCG@10 before stopping.
    val_fraction : float
        Seeded share of the training queries held out for validation.
    batch_size : int
        Queries per step.
    loss : str
        Loss of :class:`~train.learned_module.LearnedRerankerModule` (``listwise``, ...).
    lr, map_lr : float
        Learning rates of the knobs and of the embedding map.
    seed : int
        Seeds Lightning, the validation split and everything seeded downstream.
    """

    epochs: int = 40
    patience: int = 8
    val_fraction: float = 0.2
    batch_size: int = 64
    loss: str = "listwise"
    lr: float = 0.05
    map_lr: float = 1e-3
    seed: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Training:
        """The settings from parsed options named as the fields (extra options ignored)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def add_training_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--epochs --patience --folds --val-fraction --batch-size --loss --lr --map-lr
    --resamples --seed`` (defaults: :class:`Training`, :data:`FOLDS`, :data:`RESAMPLES`)."""
    base = Training()
    parser.add_argument("--epochs", type=int, default=base.epochs)
    parser.add_argument("--patience", type=int, default=base.patience)
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument("--val-fraction", type=float, default=base.val_fraction)
    parser.add_argument("--batch-size", type=int, default=base.batch_size)
    parser.add_argument("--loss", default=base.loss)
    parser.add_argument("--lr", type=float, default=base.lr)
    parser.add_argument("--map-lr", type=float, default=base.map_lr)
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument("--seed", type=int, default=base.seed)


def fit(method: str, options: dict, train: Pool | QuerySet, training: Training, folder: Path):
    """Train ``method`` on ``train`` on the CPU.

    A training error (non-finite loss or gradient, ...) stops training as early stopping
    would, and the best validated weights before it are kept; an error before the starting
    knobs were validated is raised.

    Parameters
    ----------
    method : str
        Registry name of a learnable method.
    options : dict
        Config fields of the method (``{"embedding_map": True}``, ...).
    train : Pool or QuerySet
        The training queries (B of them: training and validation part); a query set for a
        corpus-level retriever.
    training : Training
    folder : Path
        Lightning's root folder (CSV logs, the split).

    Returns
    -------
    reranker : torch.nn.Module
        The trained method, in eval mode.
    seconds : float
        Training wall seconds.
    summary : dict
        ``val_init`` and ``val_best`` (validation NDCG@10 at the start and at the exported
        epoch), ``epochs``, ``knobs``, and ``error`` when an error stopped training.
    """
    L.seed_everything(training.seed, verbose=False)
    common = {
        "dataset": "given",
        "protocol": "holdout",
        "val_fraction": training.val_fraction,
        "seed": training.seed,
        "batch_size": training.batch_size,
    }
    if isinstance(train, QuerySet):
        data = CorpusQueryData(**common).use_queries(train)
    else:
        data = LearnedPoolData(**common).use_pool(train)
    module = LearnedRerankerModule(
        method, options, loss=training.loss, lr=training.lr, map_lr=training.map_lr
    )
    trainer = L.Trainer(
        max_epochs=training.epochs,
        accelerator="cpu",
        devices=1,
        default_root_dir=str(folder),
        logger=CSVLogger(str(folder), name="logs"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[EarlyStopping(monitor="val/ndcg@10", mode="max", patience=training.patience)],
    )
    started, error = time.perf_counter(), None
    try:
        trainer.fit(module, datamodule=data)
    except TRIAL_ERRORS as failure:  # stops training like early stopping, and is reported
        if module._best is None:  # not even the starting knobs were validated
            raise
        error = f"epoch {trainer.current_epoch}: {type(failure).__name__}: {failure}"
        print(f"  training stopped by an error at {error}", flush=True)
        module.reranker.load_state_dict(module._best[1])  # the best validated weights
    reranker = module.reranker.eval()
    summary = {
        "val_init": module.initial_ndcg,
        "val_best": module._best[0],
        "epochs": trainer.current_epoch,
        "knobs": reranker.knobs(),
    }
    if error is not None:
        summary["error"] = error
    spent = module.train_seconds if error is None else time.perf_counter() - started
    return reranker, spent, summary
