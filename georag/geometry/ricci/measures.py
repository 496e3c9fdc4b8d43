"""GraphRicciCurvature's node measures and the transport problem they set on each edge."""

from __future__ import annotations

import math

import torch

from georag.geometry.ricci.common import (
    _MOVING_EPS,
    _NEIGHBOUR_WEIGHT_FLOOR,
    _check_graph,
    _check_measure_options,
)


def node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
    nbr_topk: int | None = None,
) -> torch.Tensor:
    """Lazy random-walk measures ``m_x`` of every node.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative symmetric edge lengths (read where ``adjacency``).
    adjacency : torch.Tensor, shape (B, N, N), bool
        Symmetric edge mask, no self loops.
    alpha : float
        Mass kept at the node, in [0, 1].
    exp_power : float
        ``p`` in ``base ** (-w ** p)``; 0 spreads evenly.
    base : float
        Base of the neighbour weights (positive; GraphRicciCurvature's ``base``).
    nbr_topk : int, optional
        Spread only over the ``nbr_topk`` neighbours of largest weight (ties to the
        larger node index, as GraphRicciCurvature's heap keeps them); None: all.

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Row ``x`` is ``m_x``; rows sum to 1.

    Examples
    --------
    >>> adjacency = torch.tensor([[[False, True, True], [True, False, False],
    ...                            [True, False, False]]])
    >>> lengths = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]])
    >>> node_measures(lengths, adjacency)[0, 0]
    tensor([0.5000, 0.4763, 0.0237])
    """
    _check_graph(lengths, adjacency)
    _check_measure_options(alpha, exp_power, base, nbr_topk)
    return _node_measures(
        lengths, adjacency, alpha=alpha, exp_power=exp_power, base=base, nbr_topk=nbr_topk
    )


class _Measures:
    """What the node measures need that depends on the adjacency alone (built once per
    flow, reused at every step): the mask off the edges, the even spread, the mass kept at
    each node on the diagonal, and the largest degree."""

    def __init__(self, adjacency: torch.Tensor, alpha: float, dtype: torch.dtype) -> None:
        n = adjacency.shape[1]
        degree = adjacency.sum(2, keepdim=True)
        self.off = ~adjacency
        self.even = adjacency.to(dtype) / degree.clamp_min(1)
        eye = torch.eye(n, dtype=dtype, device=adjacency.device)
        isolated = degree == 0
        keep = torch.where(isolated, 1.0, torch.full_like(degree, alpha, dtype=dtype))
        self.kept = keep * eye
        self.max_degree = int(degree.max()) if degree.numel() else 0


def _node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float,
    exp_power: float,
    base: float = math.e,
    nbr_topk: int | None = None,
    plan: _Measures | None = None,
) -> torch.Tensor:
    n = lengths.shape[1]
    if plan is None:
        plan = _Measures(adjacency, alpha, lengths.dtype)
    logits = (-math.log(base) * lengths.clamp_min(0.0).pow(exp_power)).masked_fill(
        plan.off, -math.inf
    )
    if nbr_topk is not None and n and nbr_topk < plan.max_degree:
        # the nbr_topk largest weights, ties to the larger index: sort the reversed
        # columns stably by decreasing weight
        reverse = torch.arange(n - 1, -1, -1, device=lengths.device)
        order = torch.argsort(logits[..., reverse], dim=2, descending=True, stable=True)
        top = reverse[order[..., :nbr_topk]]
        adjacency = adjacency & torch.zeros_like(adjacency).scatter(2, top, True)
        plan = _Measures(adjacency, alpha, lengths.dtype)
        logits = logits.masked_fill(plan.off, -math.inf)
    log_total = torch.logsumexp(logits, dim=2, keepdim=True)
    proportional = (logits - log_total).exp()
    spread = torch.where(log_total > math.log(_NEIGHBOUR_WEIGHT_FLOOR), proportional, plan.even)
    # an isolated node's row is off the edges everywhere: no spread, all its mass kept
    return spread.masked_fill_(plan.off, 0.0).mul_(1.0 - alpha).add_(plan.kept)


def _split_surplus(
    surplus: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The transport problem of each edge from ``surplus = m_x - m_y``.

    Only the mass that must move counts: ``W(m_x, m_y) = W(s+, s-)`` for a cost that obeys
    the triangle inequality (shortest paths do), and the shared mass would otherwise leak
    under an entropic blur. Each problem is solved at unit mass.

    ``s+ = (|s| + s) / 2`` and ``s- = (|s| - s) / 2`` are the clamps' values exactly, but
    where the measures tie (``s = 0``, common at unit lengths) each side gets half the
    gradient: the mean of the two one-sided derivatives, what a central difference measures.

    Parameters
    ----------
    surplus : torch.Tensor, shape (B, E, N)
    mask : torch.Tensor, shape (B, E), bool
        Edges that may move mass (real edges of positive length).

    Returns
    -------
    source, target : torch.Tensor, shape (B, E, N)
        ``s+`` and ``s-`` at unit mass where mass moves; a point mass on node 0 elsewhere.
    mass : torch.Tensor, shape (B, E)
        The moving mass (the mean of the two sides' totals).
    moving : torch.Tensor, shape (B, E), bool
        ``mask`` and both totals above rounding (64 machine epsilons); elsewhere the
        measures are identical and nothing moves.
    """
    size = surplus.abs()
    source, target = (size + surplus) / 2, (size - surplus) / 2
    out_mass, in_mass = source.sum(-1, keepdim=True), target.sum(-1, keepdim=True)
    moving = torch.minimum(out_mass, in_mass) > _MOVING_EPS * torch.finfo(surplus.dtype).eps
    moving = moving & mask.unsqueeze(-1)
    point = torch.zeros_like(source[:1, :1])
    point[..., 0] = 1.0
    source = torch.where(moving, source / torch.where(moving, out_mass, 1.0), point)
    target = torch.where(moving, target / torch.where(moving, in_mass, 1.0), point)
    return source, target, ((out_mass + in_mass) / 2).squeeze(-1), moving.squeeze(-1)
