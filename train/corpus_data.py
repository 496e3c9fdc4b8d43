"""Judged queries over a whole corpus, for the corpus-level learnable retrievers.

``learned_iso`` ranks corpus rows, not a first-stage pool: its training batches hold the
queries (a :class:`~georag.batch.QueryBatch`) and the relevance gain of every corpus row
for each of them. The corpus (embeddings from the shared embedding cache, as the
evaluation harness builds it) is what the retriever is fitted on. The splits are those of
:mod:`train.learned_data` (``holdout`` or seeded ``kfold`` over queries, the report fold
never loaded), written to ``split.json`` in the trainer's root folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from georag.batch import Corpus, QueryBatch
from georag.data.datasets import load_dataset
from georag.resources import DEFAULT_MODEL, default_cache_dir
from georag.retrieval.candidates import FirstStage, FirstStageConfig, query_batch, stage_corpus
from georag.retrieval.encoder import TextEncoder
from train.learned_data import PROTOCOLS, split_queries, write_split
from train.pools import CUT, _shrink

__all__ = ["QuerySet", "load_query_set", "CorpusQueryData"]


@dataclass(frozen=True)
class QuerySet:
    """Judged queries of one data set and the corpus they are asked against.

    Attributes
    ----------
    corpus : Corpus
        N passages.
    batch : QueryBatch
        B queries.
    qrels : dict
        ``{query id: {doc id: gain}}`` of those queries.
    gains : torch.Tensor, shape (B, N)
        Relevance gain of each corpus row (0 for unjudged and negative labels).
    ideal : torch.Tensor, shape (B,)
        Ideal DCG@10 of each query over its judged documents.
    """

    corpus: Corpus
    batch: QueryBatch
    qrels: dict[str, dict[str, int]]
    gains: torch.Tensor
    ideal: torch.Tensor

    @classmethod
    def build(cls, corpus: Corpus, batch: QueryBatch, qrels: dict[str, dict[str, int]]) -> QuerySet:
        column = {d: i for i, d in enumerate(corpus.doc_ids)}
        gains = torch.zeros(batch.batch_size, len(corpus.doc_ids))
        discount = 1.0 / np.log2(np.arange(2, CUT + 2))
        ideal = []
        for row, q in enumerate(batch.ids):
            for doc, gain in qrels[q].items():
                if doc in column and gain > 0:
                    gains[row, column[doc]] = float(gain)
            best = sorted((max(g, 0) for g in qrels[q].values()), reverse=True)[:CUT]
            ideal.append(float(np.dot(best, discount[: len(best)])))
        return cls(
            corpus, batch, {q: qrels[q] for q in batch.ids}, gains, torch.tensor(ideal).double()
        )

    def subset(self, rows: list[int]) -> QuerySet:
        """The queries at positions ``rows`` (in that order), same corpus."""
        index = torch.as_tensor(rows, dtype=torch.long)
        batch = QueryBatch(
            [self.batch.ids[i] for i in rows],
            [self.batch.texts[i] for i in rows],
            self.batch.embeddings[index],
        )
        return QuerySet(
            self.corpus,
            batch,
            {q: self.qrels[q] for q in batch.ids},
            self.gains[index],
            self.ideal[index],
        )


def load_query_set(
    dataset: str,
    *,
    split: str = "test",
    data_dir: str | None = None,
    model: str = DEFAULT_MODEL,
    cache_dir: str | os.PathLike | None = None,
    encoder: TextEncoder | None = None,
    max_queries: int | None = None,
    max_corpus: int | None = None,
) -> QuerySet:
    """Every judged query of ``dataset``'s ``split`` against its whole corpus.

    Parameters
    ----------
    dataset : str
        A multi-hop name (``hotpotqa_dev500``, ``musique_qa100``) or a BEIR name/folder.
    split : str
        Qrels split (BEIR sets only).
    data_dir : str, optional
        Defaults to ``$GEORAG_DATA``.
    model : str
        Sentence encoder of corpus and queries.
    cache_dir : path, optional
        Cache root (default ``$GEORAG_CACHE``): ``embeddings/`` and ``graphs/`` below it.
    encoder : TextEncoder, optional
        Reused when given.
    max_queries, max_corpus : int, optional
        Shrink the data set (short runs and tests; see :func:`train.pools.load_pool`).
    """
    data = load_dataset(dataset, split=split, data_dir=data_dir)  # else $GEORAG_DATA
    if max_queries or max_corpus:
        data = _shrink(data, max_queries, max_corpus)
    cache = default_cache_dir() if cache_dir is None else cache_dir
    encoder = encoder or TextEncoder(model, show_progress=False)
    stage = FirstStage(
        data,
        FirstStageConfig(first_stage="dense", top_m=10),
        encoder=encoder,
        cache_dir=os.path.join(cache, "embeddings"),
    )
    corpus = stage_corpus(data, stage, cache_dir=cache)
    queries = query_batch(data, encoder, cache_dir=os.path.join(cache, "embeddings"))
    return QuerySet.build(corpus, queries, data.qrels)


class CorpusQueryData(L.LightningDataModule):
    """Batches of queries with the gains of every corpus row; the corpus to fit on.

    Parameters are those of :class:`train.learned_data.LearnedPoolData` without the pool
    size: ``dataset``, ``data_dir``, ``protocol``, ``train_split``, ``folds``, ``fold``,
    ``val_fraction``, ``seed``, ``batch_size``, ``max_queries``, ``max_corpus`` and
    ``cache_dir`` (the cache root, default ``$GEORAG_CACHE``).
    """

    def __init__(
        self,
        dataset: str = "hotpotqa_dev500",
        data_dir: str | None = None,
        protocol: str = "kfold",
        train_split: str = "test",
        folds: int = 5,
        fold: int = 0,
        val_fraction: float = 0.2,
        seed: int = 0,
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
        self.queries: QuerySet | None = None
        self._given: QuerySet | None = None

    def use_queries(self, queries: QuerySet) -> CorpusQueryData:
        """Split these already loaded queries (of ``train_split``) instead of loading them."""
        self._given = queries
        return self

    @property
    def corpus(self) -> Corpus:
        """The corpus the retriever is fitted on (after :meth:`setup`)."""
        if self.queries is None:
            raise ValueError("corpus: call setup() first")
        return self.queries.corpus

    def setup(self, stage: str | None = None) -> None:
        if self.queries is not None:
            return
        hp = self.hparams
        queries = self._given or load_query_set(
            hp.dataset,
            split=hp.train_split,
            data_dir=hp.data_dir,
            cache_dir=hp.cache_dir,
            max_queries=hp.max_queries,
            max_corpus=hp.max_corpus,
        )
        self.split, kept, self.train_rows, self.val_rows = split_queries(
            list(queries.batch.ids), hp
        )
        self.queries = queries.subset(kept)
        if self.trainer is not None and self.trainer.is_global_zero:
            write_split(self.trainer.default_root_dir, hp, self.split)

    def _collate(self, rows: list[int]) -> dict:
        index = torch.tensor(rows, dtype=torch.long)
        q = self.queries
        return {
            "batch": QueryBatch(
                [q.batch.ids[i] for i in rows],
                [q.batch.texts[i] for i in rows],
                q.batch.embeddings[index],
            ),
            "gains": q.gains[index],
            "ideal": q.ideal[index],
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
