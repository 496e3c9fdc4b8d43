"""Training and validation queries of a first-stage pool, for the learnable rerankers.

Two protocols, both over queries, fixed by a seed and written into the run (``split.json``
in the trainer's root folder):

* ``holdout`` (scifact): the training split's queries (``qrels/train.tsv``); a seeded
  ``val_fraction`` of them is held out for validation. The test split is a separate pool
  that training never sees.
* ``kfold`` (cranfield, cisi, multi-hop sets: only one judged split): the queries are cut
  into ``folds`` seeded folds; fold ``fold`` is the report fold and is never loaded for
  training or validation; ``val_fraction`` of the other folds' queries is held out for
  validation.
"""

from __future__ import annotations

import json
import os

import lightning as L
import torch
from torch.utils.data import DataLoader

from georag._io import atomic_write
from train.pools import Pool, holdout_split, kfold_split, load_pool, take

__all__ = ["PROTOCOLS", "LearnedPoolData", "split_queries", "split_rows", "write_split"]

PROTOCOLS = ("holdout", "kfold")


def split_rows(
    num_queries: int,
    *,
    protocol: str,
    val_fraction: float,
    seed: int,
    folds: int = 5,
    fold: int = 0,
) -> dict[str, list[int]]:
    """Rows of the training, validation and (kfold) report queries of a pool.

    Returns
    -------
    dict
        ``{"train": [...], "val": [...], "report": [...]}``; ``report`` is empty for
        ``holdout`` (its report set is another split).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "kfold":
        rows, report = kfold_split(num_queries, folds=folds, fold=fold, seed=seed)
    else:
        rows, report = list(range(num_queries)), []
    train, val = holdout_split(rows, fraction=val_fraction, seed=seed + 1)
    return {"train": train, "val": val, "report": report}


def split_queries(
    ids: list[str], hparams
) -> tuple[dict[str, list[str]], list[int], list[int], list[int]]:
    """Split query ``ids`` by a data module's protocol (:func:`split_rows` on its hparams).

    Returns
    -------
    tuple
        ``(split, kept, train_rows, val_rows)``: the query ids of each part; the rows of
        ``ids`` the module keeps (training, then validation; the report fold stays out); and
        the positions of the training and validation queries among those kept rows.
    """
    rows = split_rows(
        len(ids),
        protocol=hparams.protocol,
        val_fraction=hparams.val_fraction,
        seed=hparams.seed,
        folds=hparams.folds,
        fold=hparams.fold,
    )
    split = {part: [ids[r] for r in idx] for part, idx in rows.items()}
    kept = rows["train"] + rows["val"]
    n_train = len(rows["train"])
    return split, kept, list(range(n_train)), list(range(n_train, len(kept)))


def write_split(folder: str, hparams, split: dict[str, list[str]]) -> None:
    """Write ``split.json`` (the protocol, seed, folds and every query id by part) into
    ``folder``; ``hparams`` are a data module's (dataset, protocol, seed, folds, fold,
    train_split)."""
    keys = ("dataset", "protocol", "seed", "folds", "fold", "train_split")
    record = {**{k: hparams[k] for k in keys}, **split}
    atomic_write(os.path.join(folder, "split.json"), json.dumps(record, indent=1))


class LearnedPoolData(L.LightningDataModule):
    """Batches of first-stage candidates with their relevance gains.

    Parameters
    ----------
    dataset : str
        A BEIR name (scifact, cranfield, cisi) or multi-hop name.
    data_dir : str, optional
        Defaults to ``$GEORAG_DATA``.
    protocol : {"holdout", "kfold"}
        See the module docstring.
    train_split : str
        The qrels split whose queries are used (``train`` for scifact's holdout,
        ``test`` for the k-fold sets, whose only split it is).
    folds, fold : int
        k-fold protocol: number of folds and the report fold left out.
    val_fraction : float
        Share of the training queries held out for validation.
    seed : int
        Seed of the folds and of the validation split.
    top_m : int
        First-stage pool size.
    batch_size : int
        Queries per training batch.
    max_queries, max_corpus : int, optional
        Shrink the data set (short runs, tests).
    cache_dir : str, optional
        Embedding cache (default ``$GEORAG_CACHE/embeddings``).
    """

    def __init__(
        self,
        dataset: str = "scifact",
        data_dir: str | None = None,
        protocol: str = "holdout",
        train_split: str = "train",
        folds: int = 5,
        fold: int = 0,
        val_fraction: float = 0.2,
        seed: int = 0,
        top_m: int = 100,
        batch_size: int = 64,
        max_queries: int | None = None,
        max_corpus: int | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.save_hyperparameters()
        self.pool: Pool | None = None
        self._given: Pool | None = None

    def use_pool(self, pool: Pool) -> LearnedPoolData:
        """Split this already loaded pool (of ``train_split``) instead of loading one."""
        self._given = pool
        return self

    def setup(self, stage: str | None = None) -> None:
        if self.pool is not None:
            return
        hp = self.hparams
        pool = self._given or load_pool(
            hp.dataset,
            split=hp.train_split,
            data_dir=hp.data_dir,
            top_m=hp.top_m,
            cache_dir=hp.cache_dir,
            max_queries=hp.max_queries,
            max_corpus=hp.max_corpus,
        )
        self.split, kept, self.train_rows, self.val_rows = split_queries(
            list(pool.batch.query_ids), hp
        )
        self.pool = pool.subset(kept)
        if self.trainer is not None and self.trainer.is_global_zero:
            write_split(self.trainer.default_root_dir, hp, self.split)

    def _collate(self, rows: list[int]) -> dict:
        index = torch.tensor(rows, dtype=torch.long)
        return {
            "batch": take(self.pool.batch, index),
            "gains": self.pool.gains[index],
            "ideal": self.pool.ideal[index],
        }

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_rows,
            batch_size=self.hparams.batch_size,
            shuffle=True,
            collate_fn=self._collate,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_rows, batch_size=256, collate_fn=self._collate)
