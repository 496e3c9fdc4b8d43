"""Fusion of two ranked lists per query: linear (min-max normalized) or reciprocal rank."""

from __future__ import annotations

import torch

__all__ = ["fuse"]


def _minmax(scores: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    low = scores.masked_fill(~valid, float("inf")).amin(dim=1, keepdim=True)
    high = scores.masked_fill(~valid, float("-inf")).amax(dim=1, keepdim=True)
    span = (high - low).clamp_min(1e-12)
    return ((scores - low) / span).masked_fill(~valid, 0.0)


def fuse(
    first: tuple[torch.Tensor, torch.Tensor],
    second: tuple[torch.Tensor, torch.Tensor],
    *,
    num_docs: int,
    top_m: int,
    method: str = "rrf",
    alpha: float = 0.5,
    rrf_k: int = 60,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse two top-k lists into one top-``top_m`` list.

    Parameters
    ----------
    first, second : (scores, indices), each of shape (B, k)
        Ranked lists (descending scores); index -1 marks a missing hit.
    num_docs : int
        Corpus size N (indices are in [0, N)).
    method : {"rrf", "linear"}
        ``rrf``: sum of 1 / (rrf_k + rank), rank from 1. ``linear``: ``alpha`` times the
        first list's min-max normalized score plus ``1 - alpha`` times the second's; a
        document missing from a list gets 0 there.

    Returns
    -------
    scores : torch.Tensor, shape (B, m)
    indices : torch.Tensor, shape (B, m)
        ``m = min(top_m, N)``; -1 where fewer documents were retrieved.
    """
    if method not in ("rrf", "linear"):
        raise ValueError(f"method must be 'rrf' or 'linear', got {method!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    batch = first[0].shape[0]
    if second[0].shape[0] != batch:
        raise ValueError(f"the two lists hold {batch} and {second[0].shape[0]} queries")
    fused = torch.zeros(batch, num_docs + 1, dtype=torch.float32)  # column N collects -1 hits
    present = torch.zeros(batch, num_docs + 1, dtype=torch.bool)
    for (scores, indices), weight in ((first, alpha), (second, 1.0 - alpha)):
        valid = indices >= 0
        columns = torch.where(valid, indices, torch.full_like(indices, num_docs))
        if method == "rrf":
            ranks = torch.arange(1, indices.shape[1] + 1, dtype=torch.float32).expand_as(scores)
            contribution = (1.0 / (rrf_k + ranks)).masked_fill(~valid, 0.0)
        else:
            contribution = weight * _minmax(scores.float(), valid & torch.isfinite(scores))
        fused.scatter_add_(1, columns, contribution)
        present.scatter_(1, columns, valid)
    fused, present = fused[:, :num_docs], present[:, :num_docs]
    m = min(top_m, num_docs)
    top_scores, top_indices = fused.masked_fill(~present, float("-inf")).topk(m, dim=1)
    top_indices = top_indices.masked_fill(torch.isinf(top_scores), -1)
    return top_scores, top_indices
