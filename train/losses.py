"""Listwise ranking losses over candidate pools, and NDCG@k as a tensor.

Scores are standardized over each query's ranked candidates before the loss (the ranking
does not depend on their scale, so neither does the loss), then divided by a temperature.

* listwise softmax cross-entropy (ListNet's top-one form, "Learning to Rank: From Pairwise
  Approach to Listwise Approach"): the target distribution is the gains normalized over
  the query;
* approximate NDCG ("A General Approximation Framework for Direct Optimization of
  Information Retrieval Measures", Qin, Liu and Li): each rank replaced by
  ``1 + sum_j sigmoid((s_j - s_i) / t)``; the loss is ``1 - approxNDCG``.

Queries without a relevant candidate in the pool carry no signal and are left out.
"""

from __future__ import annotations

import torch

__all__ = ["LOSSES", "ranking_loss", "ndcg_at_k", "standardize"]

LOSSES = ("listwise", "approx_ndcg")


def standardize(scores: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
    """Per-query zero mean, unit variance over the ranked candidates; 0 elsewhere."""
    count = ranked.sum(dim=1, keepdim=True).clamp_min(1)
    s = torch.where(ranked, scores, 0.0)
    mean = s.sum(dim=1, keepdim=True) / count
    centred = torch.where(ranked, scores - mean, 0.0)
    std = (centred.square().sum(dim=1, keepdim=True) / count).sqrt()
    return centred / (std + 1e-6)


def ranking_loss(
    scores: torch.Tensor,
    ranked: torch.Tensor,
    gains: torch.Tensor,
    *,
    kind: str = "listwise",
    temperature: torch.Tensor | float = 1.0,
    smoothing: float = 0.1,
) -> torch.Tensor:
    """Mean loss over the queries that have a relevant ranked candidate.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
        Reranker scores (any value where ``ranked`` is False).
    ranked : torch.Tensor, shape (B, M), bool
    gains : torch.Tensor, shape (B, M)
        Non-negative relevance gains.
    kind : {"listwise", "approx_ndcg"}
    temperature : float or 0-d tensor
        Divides the standardized scores.
    smoothing : float
        Sigmoid temperature of the approximate ranks (approx_ndcg).

    Returns
    -------
    torch.Tensor, 0-d
        0 (with a gradient of 0) when no query has a relevant candidate.
    """
    if kind not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    gains = torch.where(ranked, gains.to(scores.dtype), 0.0)
    useful = gains.sum(dim=1) > 0
    logits = standardize(scores, ranked) / temperature
    if kind == "listwise":
        logp = torch.log_softmax(logits.masked_fill(~ranked, -torch.inf), dim=1)
        target = gains / gains.sum(dim=1, keepdim=True).clamp_min(1e-12)
        per_query = -torch.where(ranked, target * logp, 0.0).sum(dim=1)
    else:
        diff = (logits.unsqueeze(1) - logits.unsqueeze(2)) / smoothing  # [b, i, j] = s_j - s_i
        pair = ranked.unsqueeze(1) & ranked.unsqueeze(2)
        pair = pair & ~torch.eye(ranked.shape[1], dtype=torch.bool, device=ranked.device)
        rank = 1.0 + torch.where(pair, torch.sigmoid(diff), 0.0).sum(dim=2)
        dcg = (gains / torch.log2(1.0 + rank)).sum(dim=1)
        ideal_gains = gains.sort(dim=1, descending=True).values
        positions = torch.arange(2, ranked.shape[1] + 2, device=ranked.device, dtype=scores.dtype)
        ideal = (ideal_gains / torch.log2(positions)).sum(dim=1)
        per_query = 1.0 - dcg / ideal.clamp_min(1e-12)
    return torch.where(useful, per_query, 0.0).sum() / useful.sum().clamp_min(1)


def ndcg_at_k(
    scores: torch.Tensor, keep: torch.Tensor, gains: torch.Tensor, ideal: torch.Tensor, k: int = 10
) -> torch.Tensor:
    """NDCG@k of each query as pytrec_eval computes it (linear gains, log2 discount).

    Candidates are ranked by score (ties: slot order, as
    :meth:`~georag.rerank.base.RerankResult.to_run`); only kept ones count.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
    keep : torch.Tensor, shape (B, M), bool
    gains : torch.Tensor, shape (B, M)
    ideal : torch.Tensor, shape (B,)
        Ideal DCG@k over all judged documents of each query.
    k : int

    Returns
    -------
    torch.Tensor, shape (B,)
        0 for a query with no judged relevant document.
    """
    order = torch.argsort(
        scores.masked_fill(~keep, -torch.inf), dim=1, descending=True, stable=True
    )[:, :k]
    top = torch.where(keep.gather(1, order), gains.gather(1, order).to(torch.float64), 0.0)
    discount = 1.0 / torch.log2(torch.arange(2, top.shape[1] + 2, dtype=torch.float64))
    dcg = (top * discount.to(top.device)).sum(dim=1)
    ideal = ideal.to(dcg)
    return torch.where(ideal > 0, dcg / ideal.clamp_min(1e-12), 0.0)
