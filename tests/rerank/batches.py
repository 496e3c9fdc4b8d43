"""Random candidate batches shared by the reranker tests."""

from __future__ import annotations

import numpy as np
import torch

from georag.rerank.base import CandidateBatch


def random_batch(rng: np.random.Generator, b: int, m: int, d: int, *,
                 dtype: torch.dtype = torch.float64, padded=(), unit: bool = False,
                 shuffle: bool = False) -> CandidateBatch:
    """Candidates correlated with their query; scores are their dot products.

    ``padded`` holds ``(row, n)`` pairs: row keeps only its first ``n`` slots. ``unit``
    normalizes the vectors before scoring (cosine scores); ``shuffle`` permutes the slots so
    that first-stage order is not slot order.
    """
    query = rng.normal(size=(b, d))
    cands = rng.normal(size=(b, m, d)) + 0.5 * query[:, None, :]
    scored_query = query
    if unit:
        cands /= np.linalg.norm(cands, axis=2, keepdims=True)
        scored_query = query / np.linalg.norm(query, axis=1, keepdims=True)
    scores = np.einsum("bmd,bd->bm", cands, scored_query)
    mask = np.ones((b, m), dtype=bool)
    for row, n in padded:
        mask[row, n:] = False
    perm = rng.permutation(m) if shuffle else np.arange(m)
    return CandidateBatch(
        query=torch.tensor(query, dtype=dtype),
        cands=torch.tensor(cands[:, perm], dtype=dtype),
        scores=torch.tensor(scores[:, perm], dtype=dtype),
        mask=torch.tensor(mask[:, perm]),
        query_ids=[f"q{i}" for i in range(b)],
        doc_ids=[[f"d{i}_{j}" for j in range(m)] for i in range(b)],
    )


def top_pool(batch: CandidateBatch, row: int, top_m: int) -> tuple[np.ndarray, np.ndarray]:
    """The slots of ``row``'s best ``top_m`` real candidates by score (stable order) and
    their unit-normalized embeddings, as the seeds' per-query references take them."""
    scores = batch.scores[row].numpy()
    real = np.nonzero(batch.mask[row].numpy())[0]
    pool = real[np.argsort(-scores[real], kind="stable")][:top_m]
    emb = batch.cands[row].numpy()[pool]
    return pool, emb / np.linalg.norm(emb, axis=1, keepdims=True)
