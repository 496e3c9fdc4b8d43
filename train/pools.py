"""First-stage candidate pools of a data set, the input of every learnable reranker.

A pool is the dense all-MiniLM-L6-v2 top-M of every judged query of one split, as one
:class:`~georag.rerank.base.CandidateBatch` (the same pool the evaluation harness builds),
with the split's qrels and the relevance gain of every candidate. Corpus embeddings come
from the shared embedding cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from georag.batch import CandidateBatch
from georag.data.beir import BeirDataset
from georag.data.datasets import load_dataset
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder

__all__ = ["Pool", "load_pool", "take", "kfold_split", "holdout_split", "CUT"]

CUT = 10  # NDCG@10: the ideal DCG of each query is kept at this depth


@dataclass(frozen=True)
class Pool:
    """A candidate pool and its relevance labels.

    Attributes
    ----------
    batch : CandidateBatch
        B judged queries, M candidates each.
    qrels : dict
        ``{query id: {doc id: gain}}`` of those queries.
    gains : torch.Tensor, shape (B, M)
        Relevance gain of each candidate (0 for unjudged, padding and negative labels).
    ideal : torch.Tensor, shape (B,)
        Ideal DCG@10 of each query over all its judged documents (in the pool or not).
    """

    batch: CandidateBatch
    qrels: dict[str, dict[str, int]]
    gains: torch.Tensor
    ideal: torch.Tensor

    @classmethod
    def from_batch(cls, batch: CandidateBatch, qrels: dict[str, dict[str, int]]) -> Pool:
        gains = torch.tensor(
            [
                [max(qrels[q].get(d, 0), 0) if d else 0 for d in row]
                for q, row in zip(batch.query_ids, batch.doc_ids, strict=True)
            ],
            dtype=torch.float32,
        )
        discount = 1.0 / np.log2(np.arange(2, CUT + 2))
        ideal = []
        for q in batch.query_ids:
            best = sorted((max(g, 0) for g in qrels[q].values()), reverse=True)[:CUT]
            ideal.append(float(np.dot(best, discount[: len(best)])))
        return cls(
            batch,
            {q: qrels[q] for q in batch.query_ids},
            gains,
            torch.tensor(ideal, dtype=torch.float64),
        )

    def subset(self, rows: list[int]) -> Pool:
        """The queries at positions ``rows`` (in that order)."""
        index = torch.as_tensor(rows, dtype=torch.long)
        batch = take(self.batch, index)
        return Pool(
            batch, {q: self.qrels[q] for q in batch.query_ids}, self.gains[index], self.ideal[index]
        )


def take(batch: CandidateBatch, rows: torch.Tensor) -> CandidateBatch:
    """The queries of ``batch`` at positions ``rows`` (a long tensor), as a new batch."""
    picked = rows.tolist()
    return CandidateBatch(
        query=batch.query[rows],
        cands=batch.cands[rows],
        scores=batch.scores[rows],
        mask=batch.mask[rows],
        query_ids=[batch.query_ids[i] for i in picked],
        doc_ids=[batch.doc_ids[i] for i in picked],
    )


def _shrink(data: BeirDataset, max_queries: int | None, max_corpus: int | None) -> BeirDataset:
    """The first ``max_queries`` queries; all their judged documents, then others in corpus
    order, up to ``max_corpus`` documents (for short runs and tests)."""
    queries = list(data.queries)[:max_queries] if max_queries else list(data.queries)
    corpus = data.corpus
    if max_corpus:
        judged = {d for q in queries for d in data.qrels[q] if d in corpus}
        others = [d for d in corpus if d not in judged][: max(max_corpus - len(judged), 0)]
        corpus = {d: corpus[d] for d in corpus if d in judged or d in set(others)}
    return BeirDataset(
        data.name,
        corpus,
        {q: data.queries[q] for q in queries},
        {q: data.qrels[q] for q in queries},
        {q: data.answers[q] for q in queries if q in data.answers},
    )


def load_pool(
    dataset: str,
    *,
    split: str = "test",
    data_dir: str | None = None,
    top_m: int = 100,
    model: str = DEFAULT_MODEL,
    cache_dir: str | os.PathLike | None = None,
    encoder: TextEncoder | None = None,
    max_queries: int | None = None,
    max_corpus: int | None = None,
) -> Pool:
    """The dense top-``top_m`` pool of every judged query of ``dataset``'s ``split``.

    Parameters
    ----------
    dataset : str
        A BEIR name/folder or a multi-hop name (see :func:`georag.data.datasets.load_dataset`).
    split : str
        Qrels split (BEIR sets only).
    data_dir : str, optional
        Defaults to ``$GEORAG_DATA``.
    top_m : int
        Candidates per query.
    model : str
        Sentence encoder of the first stage and of the candidate embeddings.
    cache_dir : path, optional
        Embedding cache (default ``$GEORAG_CACHE/embeddings``).
    encoder : TextEncoder, optional
        Reused when given (one model load for several pools).
    max_queries, max_corpus : int, optional
        Shrink the data set (short runs and tests; see :func:`_shrink`).
    """
    data = load_dataset(dataset, split=split, data_dir=data_dir)  # else $GEORAG_DATA
    if max_queries or max_corpus:
        data = _shrink(data, max_queries, max_corpus)
    encoder = encoder or TextEncoder(model, show_progress=False)
    stage = FirstStage(data, FirstStageConfig(top_m=top_m), encoder=encoder, cache_dir=cache_dir)
    ids = list(data.queries)
    batch = stage.retrieve(ids, [data.queries[q] for q in ids])
    return Pool.from_batch(batch, {q: data.qrels[q] for q in ids})


def kfold_split(num_queries: int, *, folds: int, fold: int, seed: int) -> tuple[list, list]:
    """Training and held-out rows of fold ``fold`` of a seeded k-fold split over queries.

    Returns
    -------
    train, held_out : list of int
        Sorted query positions; the held-out parts of the ``folds`` folds partition
        ``range(num_queries)``.
    """
    if folds < 2 or not 0 <= fold < folds:
        raise ValueError(f"need folds >= 2 and 0 <= fold < folds, got folds={folds}, fold={fold}")
    if num_queries < folds:
        raise ValueError(f"num_queries ({num_queries}) is smaller than folds ({folds})")
    order = np.random.default_rng(seed).permutation(num_queries)
    held = np.array_split(order, folds)[fold]
    train = np.setdiff1d(order, held)
    return sorted(train.tolist()), sorted(held.tolist())


def holdout_split(rows: list[int], *, fraction: float, seed: int) -> tuple[list, list]:
    """Seeded split of ``rows`` into training rows and a held-out ``fraction`` of them."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    order = np.random.default_rng(seed).permutation(len(rows))
    n_held = max(1, int(round(fraction * len(rows))))
    held = sorted(rows[i] for i in order[:n_held])
    return sorted(rows[i] for i in order[n_held:]), held
