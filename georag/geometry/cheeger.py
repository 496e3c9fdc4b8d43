"""Local Cheeger (isoperimetric) ratios by a sweep, and Cheeger pruning of edges.

For a weighted undirected graph ``W`` and a positive node volume ``mu``, the
isoperimetric ratio of a node set ``S`` is

.. math:: h(S) = \\frac{\\mathrm{cut}(S)}{\\mathrm{vol}(S)}, \\qquad
          \\mathrm{cut}(S) = \\sum_{u \\in S} s_u - \\sum_{u, w \\in S} W_{uw}, \\qquad
          \\mathrm{vol}(S) = \\sum_{u \\in S} \\mu_u,

where ``s_u`` is the strength (total edge weight) of ``u``: its row sum of ``W`` by
default, or the strength in an enclosing graph when ``W`` is a subgraph of it (the cut
then counts the edges that leave the subgraph too). The *local* Cheeger ratio of a node
``v`` is the minimum of ``h`` over the sweep sets ``S_1 = {v}``, ``S_k = S_{k-1} + {the
k-th neighbour of v}``, neighbours taken by decreasing edge weight to ``v`` (ties: lower
index first), ``k <= sweep_size``. A generic hub (small volume, large boundary) has a
large ratio; a specific, well-enclosed node a small one.

The pruning score of an edge ``(u, v)`` is ``|log(h_u + eps) - log(h_v + eps)|``; edges
whose score exceeds a threshold join structurally very different nodes (hub to periphery)
and are removed.

Everything is batched over graphs: ``weights`` is (B, N, N), padded nodes are masked.
"""

from __future__ import annotations

import torch

__all__ = ["sweep_order", "local_cheeger_ratio", "pruning_scores", "prune_edges"]


def _check_graph(weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must have shape (B, N, N), got {tuple(weights.shape)}")
    if not weights.is_floating_point():
        raise ValueError(f"weights must be floating point, got {weights.dtype}")
    b, n, _ = weights.shape
    if mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=weights.device)
    if mask.shape != (b, n) or mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor of shape ({b}, {n}), got {mask.dtype} {tuple(mask.shape)}"
        )
    return mask


def _clean(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Zero the diagonal and every edge that touches a masked node."""
    if not torch.isfinite(weights).all():
        raise ValueError("weights hold non-finite values (NaN or inf)")
    if (weights < 0).any():
        raise ValueError(f"weights must be non-negative, got minimum {weights.min().item()}")
    if not torch.equal(weights, weights.transpose(1, 2)):
        raise ValueError("weights must be symmetric (an undirected graph)")
    n = weights.shape[1]
    keep = mask[:, :, None] & mask[:, None, :]
    keep &= ~torch.eye(n, dtype=torch.bool, device=weights.device)
    return weights.masked_fill(~keep, 0.0)


def sweep_order(
    weights: torch.Tensor, *, sweep_size: int, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sweep of every node: itself, then its neighbours by decreasing edge weight.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, N, N)
        Symmetric non-negative weights; zero means no edge; the diagonal is ignored.
    sweep_size : int
        K, the largest sweep set.
    mask : torch.Tensor, shape (B, N), bool, optional
        False for padded nodes.

    Returns
    -------
    order : torch.Tensor, shape (B, N, K), long
        ``order[b, v, k]`` is the (k+1)-th node of v's sweep (``order[b, v, 0] = v``).
    valid : torch.Tensor, shape (B, N, K), bool
        False past the end of v's neighbourhood (and for masked v); valid entries come first.
    """
    if sweep_size < 1:
        raise ValueError(f"sweep_size must be at least 1, got {sweep_size}")
    mask = _check_graph(weights, mask)
    return _sweep_order(_clean(weights, mask), mask, sweep_size)


def _sweep_order(
    w: torch.Tensor, mask: torch.Tensor, sweep_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sweep_order` on cleaned weights (no checks)."""
    n = w.shape[1]
    key = w.masked_fill(w <= 0, -torch.inf)
    key.diagonal(dim1=1, dim2=2).fill_(torch.inf)
    k = min(sweep_size, n)
    value, order = torch.sort(key, dim=2, descending=True, stable=True)
    value, order = value[:, :, :k], order[:, :, :k]
    valid = (value > -torch.inf) & mask[:, :, None]
    if k < sweep_size:
        pad = sweep_size - k
        order = torch.cat([order, order.new_zeros(*order.shape[:2], pad)], dim=2)
        valid = torch.cat([valid, valid.new_zeros(*valid.shape[:2], pad)], dim=2)
    return order, valid


def local_cheeger_ratio(
    weights: torch.Tensor,
    volume: torch.Tensor,
    *,
    sweep_size: int,
    strength: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local Cheeger ratio of every node: the minimum of cut/volume over its sweep sets.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, N, N)
        Symmetric non-negative edge weights (zero: no edge; diagonal ignored).
    volume : torch.Tensor, shape (B, N)
        Positive volume of each node (``mu``); e.g. the degree (classic Cheeger) or a
        geometric proxy such as the hyperbolic radius.
    sweep_size : int
        K, the largest sweep set (the node and its K - 1 heaviest neighbours).
    strength : torch.Tensor, shape (B, N), optional
        Strength of each node in the enclosing graph, at least its row sum in ``weights``;
        defaults to the row sum (the graph is all there is).
    mask : torch.Tensor, shape (B, N), bool, optional
        False for padded nodes; their ratio is 0.

    Returns
    -------
    ratio : torch.Tensor, shape (B, N)
        ``min_k cut(S_k) / vol(S_k)``.
    best_size : torch.Tensor, shape (B, N), long
        The size k of the minimizing sweep set (the smallest when tied); 0 for masked nodes.
    """
    mask = _check_graph(weights, mask)
    if volume.shape != mask.shape:
        raise ValueError(f"volume must have shape {tuple(mask.shape)}, got {tuple(volume.shape)}")
    if not torch.isfinite(volume[mask]).all() or (volume[mask] <= 0).any():
        raise ValueError("volume must be finite and positive on every unmasked node")
    w = _clean(weights, mask)
    row_sum = w.sum(dim=2)
    if strength is None:
        strength = row_sum
    elif strength.shape != mask.shape:
        raise ValueError(
            f"strength must have shape {tuple(mask.shape)}, got {tuple(strength.shape)}"
        )
    elif (strength < row_sum * (1 - 1e-5) - 1e-6)[mask].any():
        raise ValueError("strength must be at least each node's row sum of weights")
    if sweep_size < 1:
        raise ValueError(f"sweep_size must be at least 1, got {sweep_size}")
    order, valid = _sweep_order(w, mask, sweep_size)
    b, n, k = order.shape
    batch = torch.arange(b, device=w.device)[:, None, None]
    # sub[b, v, i, j] = W[b, order[b,v,i], order[b,v,j]]: the sweep's induced subgraph
    sub = w[batch[..., None], order[..., :, None], order[..., None, :]]
    both = valid[..., :, None] & valid[..., None, :]
    internal = sub.masked_fill(~both, 0.0).cumsum(dim=3).cumsum(dim=2)
    internal = internal.diagonal(dim1=2, dim2=3)  # sum over S_k x S_k, (B, N, K)
    gathered_strength = strength.to(w.dtype)[batch, order].masked_fill(~valid, 0.0)
    gathered_volume = volume.to(w.dtype)[batch, order].masked_fill(~valid, 0.0)
    cut = (gathered_strength.cumsum(dim=2) - internal).clamp_min(0.0)
    vol = gathered_volume.cumsum(dim=2)
    ratio_k = torch.where(valid, cut / vol.masked_fill(~valid, 1.0), torch.inf)
    ratio, best = ratio_k.min(dim=2)
    ratio = torch.where(mask, ratio, 0.0)
    best_size = torch.where(mask, best + 1, 0)
    return ratio, best_size


def pruning_scores(
    weights: torch.Tensor,
    ratio: torch.Tensor,
    *,
    eps: float = 1e-6,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Structural difference of the two ends of every edge.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, N, N)
        Symmetric non-negative edge weights.
    ratio : torch.Tensor, shape (B, N)
        Local Cheeger ratios (:func:`local_cheeger_ratio`).
    eps : float
        Added to the ratios before the log.
    mask : torch.Tensor, shape (B, N), bool, optional

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        ``|log(h_u + eps) - log(h_v + eps)|`` on edges, 0 elsewhere (and on the diagonal).
    """
    mask = _check_graph(weights, mask)
    if ratio.shape != mask.shape:
        raise ValueError(f"ratio must have shape {tuple(mask.shape)}, got {tuple(ratio.shape)}")
    if eps <= 0:
        raise ValueError(f"eps must be positive, got {eps}")
    w = _clean(weights, mask)
    log_ratio = torch.log(ratio.to(w.dtype) + eps)
    score = (log_ratio[:, :, None] - log_ratio[:, None, :]).abs()
    return torch.where(w > 0, score, 0.0)


def prune_edges(
    weights: torch.Tensor, scores: torch.Tensor, *, threshold: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove every edge whose pruning score exceeds ``threshold``.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, N, N)
    scores : torch.Tensor, shape (B, N, N)
        Symmetric pruning scores (:func:`pruning_scores`).
    threshold : float
        Edges with ``score > threshold`` go; ``inf`` keeps every edge.

    Returns
    -------
    pruned : torch.Tensor, shape (B, N, N)
        ``weights`` with the removed edges set to 0.
    removed : torch.Tensor, shape (B, N, N), bool
        The removed edges (both directions).
    """
    if scores.shape != weights.shape:
        raise ValueError(
            f"scores must have shape {tuple(weights.shape)}, got {tuple(scores.shape)}"
        )
    if threshold != threshold or threshold < 0:
        raise ValueError(f"threshold must be non-negative, got {threshold}")
    removed = (weights > 0) & (scores > threshold)
    return weights.masked_fill(removed, 0.0), removed
