"""Personalized PageRank by power iteration: dense batched and sparse CSR paths.

Both paths reproduce ``networkx.pagerank(G, alpha=damping, personalization=p,
weight="weight")`` step for step (networkx's ``_pagerank_scipy``):

* ``T = D^-1 W`` is the row-normalized weight matrix (``W[i, j]`` is the weight of the
  edge ``i -> j``; an undirected graph has a symmetric ``W``);
* a node whose out-weights sum to zero is *dangling*; its mass is redistributed along
  the personalization vector ``p`` (networkx's default ``dangling=None``);
* the iterate starts uniform, ``x_0 = 1 / N``, and is updated as
  ``x <- damping * (x T + sum(x[dangling]) * p) + (1 - damping) * p``;
* iteration stops at the first step whose L1 change is below ``N * tol`` (or below 16
  machine epsilons of the dtype, whichever is larger: a smaller change is rounding noise).

Each graph (dense path) or personalization column (sparse path) is stopped at its own
first converged step, exactly as if it had been run alone, so results do not depend on
what else is in the batch.

Gradients. The scores are differentiable with respect to ``weights`` (dense, or the values
of a sparse CSR matrix), ``personalization`` and ``damping`` (a 0-d tensor). Write one step
as ``F(x) = x A + c`` with ``A = damping * (T + delta p^T)`` (``delta`` the dangling
indicator) and ``c = (1 - damping) p``; at the fixed point ``x* = c (I - A)^-1``, so for an
upstream gradient ``g`` the adjoint ``v = g (I - A)^-T`` solves ``v = g + A^T v`` by the same
power iteration (it contracts at rate ``damping``), and

* ``dL/dc = v``, ``dL/dA = x*^T v``;
* ``dL/dW[i, j] = damping * x*_i (v_j - (T v)_i) / s_i`` for a node of strength ``s_i > 0``;
* ``dL/dp = (1 - damping) v + damping (x* . delta) v`` (before the normalization of ``p``,
  which autograd differentiates);
* ``dL/d damping = x* . (T v) + (x* . delta)(p . v) - p . v``.

``grad="implicit"`` (the default) keeps no iterate in memory; ``grad="unrolled"`` runs the
loop under autograd and is the check. A dangling node (all out-weights zero) has no
gradient on its row: giving it any out-weight switches it from teleporting along ``p`` to
following that edge, a jump, so its row's gradient is defined as 0. Which nodes are dangling
is read from the weights and is not differentiated.

For one fixed graph and damping queried many times, :class:`PPRSolver` gives the same
scores exactly (no iteration) from a sparse LU factorization computed once.

The paths live in private modules: :mod:`~georag.geometry._ppr_dense`,
:mod:`~georag.geometry._ppr_sparse`, :mod:`~georag.geometry._ppr_direct` (the solver), and
what they share (checks, the stopping rule's floor, the adjoint iteration) in
:mod:`~georag.geometry._ppr_shared`.
"""

from __future__ import annotations

import torch

from georag.geometry._ppr_dense import _dense_ppr
from georag.geometry._ppr_direct import PPRSolver
from georag.geometry._ppr_shared import PowerIterationFailedConvergence, _check_weights
from georag.geometry._ppr_sparse import _sparse_ppr

__all__ = [
    "GRADIENTS",
    "PPRSolver",
    "PowerIterationFailedConvergence",
    "personalized_pagerank",
    "edge_index_to_csr",
]


GRADIENTS = ("implicit", "unrolled")


def personalized_pagerank(
    weights: torch.Tensor,
    personalization: torch.Tensor,
    *,
    damping: float | torch.Tensor = 0.85,
    tol: float = 1e-6,
    max_iter: int = 100,
    mask: torch.Tensor | None = None,
    block_size: int | None = None,
    grad: str = "implicit",
) -> torch.Tensor:
    """Personalized PageRank with networkx semantics, for many graphs or many queries.

    Two layouts are accepted, chosen by the layout of ``weights``:

    * **dense, batched**: ``weights`` of shape (B, N, N) and ``personalization`` of
      shape (B, N); one graph and one personalization vector per batch row.
    * **sparse, one graph, many queries**: ``weights`` a ``torch.sparse_csr`` matrix
      of shape (N, N) and ``personalization`` of shape (N, Q), one *column* per query
      (the layout of the SpMM ``T^T @ X``). A 1-D personalization of shape (N,) is one
      query and gives a result of shape (N,).

    Parameters
    ----------
    weights : torch.Tensor, shape (B, N, N) or sparse CSR (N, N)
        Non-negative edge weights, ``weights[..., i, j]`` for the edge ``i -> j``.
        Pass a symmetric matrix for an undirected graph. Zero means no edge; a row of
        zeros is a dangling node.
    personalization : torch.Tensor, shape (B, N), (N, Q) or (N,)
        Non-negative teleport weights; each vector is normalized to sum to one and must
        have a positive entry. Dangling mass is redistributed along it.
    damping : float or torch.Tensor
        The probability of following an edge (networkx's ``alpha``), in [0, 1]; a 0-d
        tensor to differentiate with respect to it.
    tol : float
        Convergence threshold: stop when ``||x_t - x_{t-1}||_1 < N * tol``. The implicit
        gradient's adjoint solve stops at a relative L1 change of ``tol``. Both are
        floored at 16 machine epsilons of the dtype.
    max_iter : int
        Maximum number of power-iteration steps.
    mask : torch.Tensor, shape (B, N), bool, optional
        Dense path only. Nodes that are False are removed from the graph: their edges
        and personalization are ignored (they must still be finite and non-negative),
        their score is 0, and ``N`` in the start vector
        and in the tolerance is the number of True nodes of that row, so each row equals
        networkx on the induced subgraph.
    block_size : int, optional
        Sparse path only. Run the power iteration over this many personalization
        columns at a time (all at once when None). Small blocks keep the gathered rows
        of the iterate in cache on CPU; results depend on it only by rounding (the
        sparse product's kernel may vary with the block's width).
    grad : {"implicit", "unrolled"}
        How gradients are computed when an input requires grad (see the module
        docstring): implicit differentiation of the fixed point, or autograd through the
        iterations. Ignored otherwise; both give the same scores.

    Returns
    -------
    torch.Tensor, shape (B, N), (N, Q) or (N,)
        PageRank scores; each vector sums to one (over the unmasked nodes).

    Raises
    ------
    ValueError
        On bad shapes, negative or non-finite weights, or a personalization vector that
        is negative, non-finite or all zero (networkx raises ``ZeroDivisionError``).
    PowerIterationFailedConvergence
        When some vector has not converged within ``max_iter`` steps.

    Examples
    --------
    >>> w = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    >>> personalized_pagerank(w, torch.tensor([[1.0, 0.0]]), damping=0.5)
    tensor([[0.6667, 0.3333]])
    """
    damping = _check_damping(damping)
    if grad not in GRADIENTS:
        raise ValueError(f"grad must be one of {GRADIENTS}, got {grad!r}")
    if tol <= 0.0:
        raise ValueError(f"tol must be positive, got {tol}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}")
    if weights.layout == torch.sparse_csr:
        if mask is not None:
            raise ValueError("mask is only supported for dense weights of shape (B, N, N)")
        return _sparse_ppr(weights, personalization, damping, tol, max_iter, block_size, grad)
    if weights.layout != torch.strided:
        raise ValueError(f"weights must be dense or sparse CSR, got layout {weights.layout}")
    if block_size is not None:
        raise ValueError("block_size is only supported for sparse CSR weights")
    return _dense_ppr(weights, personalization, damping, tol, max_iter, mask, grad)


def _check_damping(damping: float | torch.Tensor) -> float | torch.Tensor:
    if isinstance(damping, torch.Tensor):
        if damping.dim() != 0 or not damping.is_floating_point():
            raise ValueError(
                f"damping must be a float or a 0-d float tensor, "
                f"got shape {tuple(damping.shape)} {damping.dtype}"
            )
        value = float(damping.detach())
    else:
        value = float(damping)
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"damping must lie in [0, 1], got {value}")
    return damping if isinstance(damping, torch.Tensor) and damping.requires_grad else value


def edge_index_to_csr(
    edge_index: torch.Tensor,
    num_nodes: int,
    edge_weight: torch.Tensor | None = None,
    *,
    undirected: bool = True,
    reduce: str = "sum",
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Build the sparse CSR weight matrix that :func:`personalized_pagerank` takes.

    Parameters
    ----------
    edge_index : torch.Tensor, shape (2, E), long
        Edges ``edge_index[0] -> edge_index[1]``.
    num_nodes : int
        N, the number of nodes (isolated nodes included).
    edge_weight : torch.Tensor, shape (E,), optional
        Non-negative weights; 1 when None.
    undirected : bool
        Add the reverse of every edge (torch-geometric ``to_undirected``).
    reduce : str
        How duplicate edges are merged (torch-geometric ``coalesce``): "sum" (default,
        like networkx on a multigraph), "mean", "max", ... With ``undirected=True`` an
        edge given in both directions is a duplicate too: use "max" or "mean" when the
        input already lists both directions.
    dtype : torch.dtype, optional
        Value dtype; defaults to the dtype of ``edge_weight``, else float32.

    Returns
    -------
    torch.Tensor, sparse CSR, shape (N, N)
    """
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"edge_index holds node ids outside [0, {num_nodes})")
    if dtype is None:
        dtype = edge_weight.dtype if edge_weight is not None else torch.float32
    if edge_weight is None:
        edge_weight = torch.ones(edge_index.shape[1], dtype=dtype, device=edge_index.device)
    elif edge_weight.shape != (edge_index.shape[1],):
        raise ValueError(
            f"edge_weight must have shape ({edge_index.shape[1]},), got {tuple(edge_weight.shape)}"
        )
    _check_weights(edge_weight.to(dtype))
    # imported here: torch_geometric takes seconds to import, and only this path needs it
    from torch_geometric.utils import coalesce, to_undirected

    if undirected:
        edge_index, edge_weight = to_undirected(
            edge_index, edge_weight.to(dtype), num_nodes=num_nodes, reduce=reduce
        )
    else:
        edge_index, edge_weight = coalesce(
            edge_index, edge_weight.to(dtype), num_nodes=num_nodes, reduce=reduce
        )
    return torch.sparse_coo_tensor(
        edge_index, edge_weight, (num_nodes, num_nodes), is_coalesced=True, check_invariants=False
    ).to_sparse_csr()
