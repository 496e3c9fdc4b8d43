"""Random inputs shared by the tests and the benchmark scripts.

Candidate batches correlated with their query, unit vectors clustered around a centre,
and Erdos-Renyi graphs with weighted or unit lengths: one definition each, imported by
tests/ and scripts/ alike, so that a benchmark times the inputs the tests check.
"""

from __future__ import annotations

import numpy as np
import torch

from georag.batch import CandidateBatch

__all__ = ["random_batch", "top_pool", "unit_rows", "clustered_unit_rows", "random_graphs"]


def random_batch(
    rng: np.random.Generator,
    b: int,
    m: int,
    d: int,
    *,
    dtype: torch.dtype = torch.float64,
    padded=(),
    unit: bool = False,
    shuffle: bool = False,
) -> CandidateBatch:
    """Candidates correlated with their query; scores are their dot products.

    Parameters
    ----------
    rng : numpy.random.Generator
    b, m, d : int
        Queries, candidate slots per query, embedding dimension.
    dtype : torch.dtype
    padded : iterable of (row, n)
        Row ``row`` keeps only its first ``n`` slots.
    unit : bool
        Normalize the vectors before scoring (cosine scores).
    shuffle : bool
        Permute the slots, so that first-stage order is not slot order.

    Returns
    -------
    CandidateBatch
        With ids ``q{i}`` and ``d{i}_{j}``.
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
    their unit-normalized embeddings, as the papers' per-query references take them."""
    scores = batch.scores[row].detach().cpu().numpy()
    real = np.nonzero(batch.mask[row].cpu().numpy())[0]
    pool = real[np.argsort(-scores[real], kind="stable")][:top_m]
    emb = batch.cands[row].detach().cpu().numpy()[pool]
    return pool, emb / np.linalg.norm(emb, axis=1, keepdims=True)


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float32 vectors along the last axis, scaled to unit length."""
    x = rng.normal(size=shape).astype(np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def clustered_unit_rows(
    rng: np.random.Generator, b: int, n: int, d: int, *, spread: float = 0.6
) -> np.ndarray:
    """``b`` groups of ``n`` unit vectors around a random centre each, shape (b, n, d).

    ``spread`` weighs the per-vector noise against the shared centre (0 gives ``n``
    copies of the centre); the cosine similarities within a group are mostly positive, as
    those of a first-stage candidate pool.
    """
    x = unit_rows(rng, (b, 1, d)) + spread * unit_rows(rng, (b, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def random_graphs(
    rng: np.random.Generator,
    b: int,
    n: int,
    *,
    density: float | tuple[float, float] = (0.15, 0.8),
    weighted: bool = True,
    low: float = 0.5,
    high: float = 2.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Erdos-Renyi graphs (often disconnected at low density, isolated nodes included).

    Parameters
    ----------
    rng : numpy.random.Generator
    b, n : int
        Graphs and nodes per graph.
    density : float or (float, float)
        Edge probability, or the range each graph draws its own from.
    weighted : bool
        Lengths uniform in ``[low, high)``; otherwise every edge has length 1.

    Returns
    -------
    lengths : numpy.ndarray, shape (b, n, n), float64
        Symmetric, 0 off the edges and on the diagonal.
    adjacency : numpy.ndarray, shape (b, n, n), bool
        Symmetric, no self loops.
    """
    lengths = np.zeros((b, n, n))
    adjacency = np.zeros((b, n, n), dtype=bool)
    for g in range(b):
        # before the density: the order of scripts/reference/ricci_*accuracy
        draws = rng.random((n, n))
        p = rng.uniform(*density) if isinstance(density, tuple) else density
        upper = np.triu(draws < p, 1)
        adjacency[g] = upper | upper.T
        w = np.triu(rng.uniform(low, high, (n, n)), 1)
        lengths[g] = np.where(adjacency[g], w + w.T if weighted else 1.0, 0.0)
    return lengths, adjacency
