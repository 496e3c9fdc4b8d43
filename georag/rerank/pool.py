"""Candidate-pool helpers shared by the pool rerankers: which slots a method ranks, which
it keeps.

Every helper reads the first-stage scores of a :class:`~georag.batch.CandidateBatch`
and breaks ties by slot order (stable sorts), so its result is deterministic.
"""

from __future__ import annotations

import torch

from georag.batch import CandidateBatch

__all__ = ["best_slots", "pool_index", "top_k_mask", "top_m_mask"]


def best_slots(batch: CandidateBatch, top_m: int) -> torch.Tensor:
    """The slots of the ``W = min(top_m, M)`` best candidates by first-stage score, best
    first (padded slots rank last).

    Returns
    -------
    torch.Tensor, shape (B, W), long
    """
    ranked = batch.scores.masked_fill(~batch.mask, -torch.inf)
    return torch.argsort(ranked, dim=1, descending=True, stable=True)[:, :top_m]


def top_m_mask(batch: CandidateBatch, top_m: int) -> torch.Tensor:
    """The ``top_m`` best real candidates of each query by first-stage score.

    Parameters
    ----------
    batch : CandidateBatch
    top_m : int

    Returns
    -------
    torch.Tensor, shape (B, M), bool
    """
    if top_m >= batch.num_candidates:
        return batch.mask.clone()
    return torch.zeros_like(batch.mask).scatter(1, best_slots(batch, top_m), True) & batch.mask


def pool_index(batch: CandidateBatch, top_m: int) -> torch.Tensor | None:
    """The slots of the ``top_m`` pool in slot order (a compact graph's node order), or None
    when the pool is the whole batch (nothing to compact).

    Returns
    -------
    torch.Tensor, shape (B, top_m), long, or None
    """
    if top_m >= batch.num_candidates:
        return None
    return best_slots(batch, top_m).sort(dim=1).values


def top_k_mask(scores: torch.Tensor, keep: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` best kept candidates of each row.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
    keep : torch.Tensor, shape (B, M), bool

    Returns
    -------
    torch.Tensor, shape (B, M), bool
    """
    if k <= 0:
        raise ValueError(f"top_k must be positive, got {k}")
    k = min(k, scores.shape[1])
    order = scores.masked_fill(~keep, float("-inf")).topk(k, dim=1).indices
    mask = torch.zeros_like(keep)
    mask.scatter_(1, order, True)
    return mask & keep
