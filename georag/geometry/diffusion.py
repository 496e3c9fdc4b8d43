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
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "GRADIENTS",
    "PowerIterationFailedConvergence",
    "personalized_pagerank",
    "edge_index_to_csr",
]


GRADIENTS = ("implicit", "unrolled")


class PowerIterationFailedConvergence(RuntimeError):
    """Raised when the power iteration has not converged within ``max_iter`` steps."""


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


def _needs_grad(*tensors: object) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors
    )


def _check_weights(values: torch.Tensor) -> None:
    if not values.is_floating_point():
        raise ValueError(f"weights must be floating point, got {values.dtype}")
    if not values.numel():
        return
    low, high = torch.aminmax(values)  # one pass; NaN propagates into both
    if low.isnan() or high.isinf():
        raise ValueError("weights hold non-finite values (NaN or inf)")
    if low < 0:
        raise ValueError(f"weights must be non-negative, got minimum {low.item()}")


def _normalize_personalization(p: torch.Tensor, dim: int) -> torch.Tensor:
    if not p.numel():
        raise ValueError(f"personalization is empty, shape {tuple(p.shape)}")
    low, high = torch.aminmax(p)
    if low.isnan() or high.isinf():
        raise ValueError("personalization holds non-finite values (NaN or inf)")
    if low < 0:
        raise ValueError(f"personalization must be non-negative, got minimum {low.item()}")
    total = p.sum(dim=dim, keepdim=True)
    if (total <= 0).any():
        bad = (total <= 0).flatten().nonzero().flatten().tolist()
        raise ValueError(
            f"personalization has no positive entry in vector(s) {bad[:10]}"
            f"{' ...' if len(bad) > 10 else ''}; every vector needs a positive entry"
        )
    return p / total


def _dense_ppr(
    weights: torch.Tensor,
    personalization: torch.Tensor,
    damping: float | torch.Tensor,
    tol: float,
    max_iter: int,
    mask: torch.Tensor | None,
    grad: str,
) -> torch.Tensor:
    if weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must have shape (B, N, N), got {tuple(weights.shape)}")
    b, n, _ = weights.shape
    if personalization.shape != (b, n):
        raise ValueError(
            f"personalization must have shape ({b}, {n}), got {tuple(personalization.shape)}"
        )
    _check_weights(weights.detach())
    personalization = personalization.to(weights.dtype)
    if mask is not None:
        if mask.shape != (b, n) or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape ({b}, {n}), "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        personalization = personalization.masked_fill(~mask, 0.0)
    p = _normalize_personalization(personalization, dim=1)
    keep = None if mask is None else mask.to(weights.dtype)
    if not _needs_grad(weights, p, damping):
        return _dense_solve(weights, p, float(damping), keep, tol, max_iter)[0]
    damping = torch.as_tensor(damping, dtype=weights.dtype, device=weights.device)
    if grad == "unrolled":
        return _dense_unrolled(weights, p, damping, keep, tol, max_iter)
    return _DensePageRank.apply(weights, p, damping, keep, tol, max_iter)


def _dense_structure(
    weights: torch.Tensor, keep: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse strengths, dangling indicator, start vector and graph sizes (no autograd)."""
    b, n, _ = weights.shape
    if keep is None:
        strength = weights.sum(dim=2)
        size = torch.full((b,), float(n), dtype=weights.dtype, device=weights.device)
        x = torch.full((b, n), 1.0 / n, dtype=weights.dtype, device=weights.device)
    else:
        strength = torch.bmm(weights, keep.unsqueeze(2)).squeeze(2)
        size = keep.sum(dim=1)
        x = keep / size.clamp_min(1.0).unsqueeze(1)
    inv = torch.where(strength > 0, 1.0 / strength, 0.0)
    dangling = (strength == 0).to(weights.dtype)
    if keep is not None:
        dangling = dangling * keep
    return inv, dangling, x, size


def _rounding_floor(dtype: torch.dtype) -> float:
    """The smallest L1 change (relative to the iterate's L1 norm) a solve waits for.

    Sixteen machine epsilons: a smaller change is rounding noise, and whether an iterate
    gets below it depends on the CPU's summation order (float32 at ``tol=1e-7`` stalled
    on one machine and not on another).
    """
    return 16.0 * torch.finfo(dtype).eps


def _dense_solve(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The power iteration without autograd; returns ``(x, inv, dangling)``."""
    b = weights.shape[0]
    inv, dangling, x, size = _dense_structure(weights, keep)
    # x T = (x / s) W: scaling the iterate instead of the matrix allocates no (B, N, N)
    # buffer; masked columns are left out of s and zeroed in each iterate instead.
    teleport = ((1.0 - damping) * p).unsqueeze(1)
    threshold = (size * tol).clamp_min(_rounding_floor(weights.dtype))
    done = torch.zeros(b, dtype=torch.bool, device=weights.device)
    for _ in range(max_iter):
        x_new = torch.baddbmm(teleport, (x * inv).unsqueeze(1), weights, alpha=damping)
        x_new = x_new.squeeze(1).add_(p * (x * dangling).sum(dim=1, keepdim=True), alpha=damping)
        if keep is not None:
            x_new.mul_(keep)
        err = (x_new - x).abs_().sum(dim=1)
        x = torch.where(done.unsqueeze(1), x, x_new)
        done |= err < threshold
        if bool(done.all()):
            return x, inv, dangling
    raise PowerIterationFailedConvergence(
        f"{int((~done).sum())} of {b} graphs did not converge in {max_iter} iterations"
    )


def _dense_unrolled(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: torch.Tensor,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
) -> torch.Tensor:
    """The same iteration as :func:`_dense_solve`, out of place, under autograd."""
    b = weights.shape[0]
    with torch.no_grad():
        _, dangling, x, size = _dense_structure(weights, keep)
    if keep is None:
        strength = weights.sum(dim=2)
    else:
        strength = torch.bmm(weights, keep.unsqueeze(2)).squeeze(2)
    positive = strength > 0
    inv = positive / torch.where(positive, strength, 1.0)  # no 1/0 on the autograd tape
    threshold = (size * tol).clamp_min(_rounding_floor(weights.dtype))
    done = torch.zeros(b, dtype=torch.bool, device=weights.device)
    for _ in range(max_iter):
        walk = torch.bmm((x * inv).unsqueeze(1), weights).squeeze(1)
        x_new = damping * (walk + p * (x * dangling).sum(dim=1, keepdim=True))
        x_new = x_new + (1.0 - damping) * p
        if keep is not None:
            x_new = x_new * keep
        err = (x_new - x).detach().abs().sum(dim=1)
        x = torch.where(done.unsqueeze(1), x, x_new)
        done = done | (err < threshold)
        if bool(done.all()):
            return x
    raise PowerIterationFailedConvergence(
        f"{int((~done).sum())} of {b} graphs did not converge in {max_iter} iterations"
    )


def _adjoint(
    g: torch.Tensor,
    apply_t: Callable[[torch.Tensor], torch.Tensor],
    dangling: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
    dim: int,
) -> torch.Tensor:
    """Solve ``v = g + damping * (T v + delta (p . v))`` by fixed-point iteration.

    ``apply_t(v)`` is ``T v``; vectors run along ``dim`` (1: dense rows, 0: sparse
    columns). Each vector stops at its first step whose L1 change is at most
    ``max(tol, floor) * ||g||_1``, with the floor of :func:`_rounding_floor`.
    """
    threshold = max(tol, _rounding_floor(g.dtype)) * g.abs().sum(dim=dim)
    done = torch.zeros_like(threshold, dtype=torch.bool)
    v = g if keep is None else g * keep
    for _ in range(max_iter):
        v_new = g + damping * (apply_t(v) + dangling * (p * v).sum(dim=dim, keepdim=True))
        if keep is not None:
            v_new = v_new * keep
        err = (v_new - v).abs().sum(dim=dim)
        v = torch.where(done.unsqueeze(dim), v, v_new)
        done |= err <= threshold
        if bool(done.all()):
            return v
    raise PowerIterationFailedConvergence(
        f"the adjoint of {int((~done).sum())} of {done.numel()} PageRank vectors did not "
        f"converge in {max_iter} iterations"
    )


class _DensePageRank(torch.autograd.Function):
    """Dense PPR with the implicit (adjoint) gradient; see the module docstring."""

    @staticmethod
    def forward(ctx, weights, p, damping, keep, tol, max_iter):
        x, inv, dangling = _dense_solve(weights, p, float(damping), keep, tol, max_iter)
        ctx.save_for_backward(weights, p, x, inv, dangling, damping)
        ctx.keep, ctx.tol, ctx.max_iter = keep, tol, max_iter
        return x

    @staticmethod
    def backward(ctx, g):
        weights, p, x, inv, dangling, damping = ctx.saved_tensors
        d, keep = float(damping), ctx.keep

        def apply_t(v: torch.Tensor) -> torch.Tensor:
            return inv * torch.bmm(weights, v.unsqueeze(2)).squeeze(2)

        v = _adjoint(g, apply_t, dangling, p, d, keep, ctx.tol, ctx.max_iter, dim=1)
        tv = apply_t(v)
        pv = (p * v).sum(dim=1, keepdim=True)
        xd = (x * dangling).sum(dim=1, keepdim=True)
        grad_w = grad_p = grad_d = None
        if ctx.needs_input_grad[0]:
            grad_w = (d * x * inv).unsqueeze(2) * (v.unsqueeze(1) - tv.unsqueeze(2))
            if keep is not None:
                grad_w = grad_w * keep.unsqueeze(1)
        if ctx.needs_input_grad[1]:
            grad_p = (1.0 - d) * v + d * xd * v
        if ctx.needs_input_grad[2]:
            grad_d = ((x * tv).sum() + (xd * pv).sum() - pv.sum()).to(damping.dtype)
        return grad_w, grad_p, grad_d, None, None, None


def _sparse_ppr(
    weights: torch.Tensor,
    personalization: torch.Tensor,
    damping: float | torch.Tensor,
    tol: float,
    max_iter: int,
    block_size: int | None,
    grad: str,
) -> torch.Tensor:
    if weights.dim() != 2 or weights.shape[0] != weights.shape[1]:
        raise ValueError(f"sparse weights must have shape (N, N), got {tuple(weights.shape)}")
    n = weights.shape[0]
    single = personalization.dim() == 1
    p = personalization.unsqueeze(1) if single else personalization
    if p.dim() != 2 or p.shape[0] != n:
        raise ValueError(
            f"personalization must have shape ({n}, Q) or ({n},), "
            f"got {tuple(personalization.shape)}"
        )
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    _check_weights(weights.values().detach())
    p = _normalize_personalization(p.to(weights.dtype), dim=0)
    if not _needs_grad(weights, p, damping):
        out = _sparse_solve(weights, p, float(damping), tol, max_iter, block_size)
    else:
        damping = torch.as_tensor(damping, dtype=weights.dtype, device=weights.device)
        if grad == "unrolled":
            out = _sparse_unrolled(weights, p, damping, tol, max_iter)
        else:
            out = _SparsePageRank.apply(weights, p, damping, tol, max_iter, block_size)
    return out.squeeze(1) if single else out


def _sparse_solve(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    tol: float,
    max_iter: int,
    block_size: int | None,
) -> torch.Tensor:
    transition_t, dangling = _transposed_transition(weights)
    q = p.shape[1]
    step = q if block_size is None else block_size
    blocks = [
        _sparse_power_iteration(transition_t, dangling, p[:, s : s + step], damping, tol, max_iter)
        for s in range(0, q, step)
    ]
    return torch.cat(blocks, dim=1) if len(blocks) > 1 else blocks[0]


def _csr_rows(weights: torch.Tensor) -> torch.Tensor:
    """The row of every stored entry of a CSR matrix, shape (E,)."""
    crow = weights.crow_indices()
    n = weights.shape[0]
    return torch.repeat_interleave(torch.arange(n, device=weights.device), crow[1:] - crow[:-1])


def _transposed_transition(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(D^-1 W)^T`` as CSR and the ids of the dangling nodes."""
    n = weights.shape[0]
    rows = _csr_rows(weights)
    cols = weights.col_indices()
    values = weights.values()
    ones = torch.ones(n, 1, dtype=values.dtype, device=values.device)
    strength = (weights @ ones).squeeze(1)
    inv = torch.where(strength > 0, 1.0 / strength, 0.0)
    transposed = torch.sparse_coo_tensor(
        torch.stack([cols, rows]), values * inv[rows], (n, n), check_invariants=False
    ).coalesce()
    dangling = torch.nonzero(strength == 0).flatten()
    return transposed.to_sparse_csr(), dangling


def _sparse_power_iteration(
    transition_t: torch.Tensor,
    dangling: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    tol: float,
    max_iter: int,
) -> torch.Tensor:
    """Power iteration over the columns of ``p`` (N, Q); converged columns drop out."""
    n, q = p.shape
    out = torch.empty_like(p)
    active = torch.arange(q, device=p.device)
    x = torch.full_like(p, 1.0 / n)
    teleport = (1.0 - damping) * p
    threshold = max(n * tol, _rounding_floor(p.dtype))
    for _ in range(max_iter):
        x_new = torch.addmm(teleport, transition_t, x, alpha=damping)
        if dangling.numel():
            lost = x.index_select(0, dangling).sum(dim=0, keepdim=True)
            x_new.add_(p * lost, alpha=damping)
        converged = (x_new - x).abs_().sum(dim=0) < threshold
        if bool(converged.any()):
            out[:, active[converged]] = x_new[:, converged]
            left = ~converged
            active, x_new = active[left], x_new[:, left]
            p, teleport = p[:, left], teleport[:, left]
            if active.numel() == 0:
                return out
        x = x_new
    raise PowerIterationFailedConvergence(
        f"{active.numel()} of {q} personalization vectors did not converge in {max_iter} iterations"
    )


def _sparse_unrolled(
    weights: torch.Tensor, p: torch.Tensor, damping: torch.Tensor, tol: float, max_iter: int
) -> torch.Tensor:
    """The sparse iteration under autograd, as an edge-list product (the check)."""
    n, q = p.shape
    rows, cols, values = _csr_rows(weights), weights.col_indices(), weights.values()
    strength = torch.zeros(n, dtype=values.dtype, device=values.device).index_add(0, rows, values)
    positive = strength > 0
    inv = positive / torch.where(positive, strength, 1.0)
    dangling = (~positive).to(values.dtype).unsqueeze(1)
    edge = (values * inv[rows]).unsqueeze(1)
    x = torch.full_like(p, 1.0 / n)
    done = torch.zeros(q, dtype=torch.bool, device=p.device)
    threshold = max(n * tol, _rounding_floor(p.dtype))
    for _ in range(max_iter):
        walk = torch.zeros_like(x).index_add(0, cols, edge * x[rows])
        x_new = damping * (walk + p * (x * dangling).sum(dim=0, keepdim=True))
        x_new = x_new + (1.0 - damping) * p
        err = (x_new - x).detach().abs().sum(dim=0)
        x = torch.where(done.unsqueeze(0), x, x_new)
        done = done | (err < threshold)
        if bool(done.all()):
            return x
    raise PowerIterationFailedConvergence(
        f"{int((~done).sum())} of {q} personalization vectors did not converge in "
        f"{max_iter} iterations"
    )


class _SparsePageRank(torch.autograd.Function):
    """Sparse-CSR PPR with the implicit (adjoint) gradient; see the module docstring."""

    @staticmethod
    def forward(ctx, weights, p, damping, tol, max_iter, block_size):
        x = _sparse_solve(weights, p, float(damping), tol, max_iter, block_size)
        ctx.save_for_backward(weights, p, x, damping)
        ctx.tol, ctx.max_iter = tol, max_iter
        return x

    @staticmethod
    def backward(ctx, g):
        weights, p, x, damping = ctx.saved_tensors
        d, n = float(damping), weights.shape[0]
        ones = torch.ones(n, 1, dtype=x.dtype, device=x.device)
        strength = (weights.detach() @ ones).squeeze(1)
        inv = torch.where(strength > 0, 1.0 / strength, 0.0).unsqueeze(1)
        dangling = (strength == 0).to(x.dtype).unsqueeze(1)

        def apply_t(v: torch.Tensor) -> torch.Tensor:
            return inv * (weights.detach() @ v)

        v = _adjoint(g, apply_t, dangling, p, d, None, ctx.tol, ctx.max_iter, dim=0)
        tv = apply_t(v)
        pv = (p * v).sum(dim=0, keepdim=True)
        xd = (x * dangling).sum(dim=0, keepdim=True)
        grad_w = grad_p = grad_d = None
        if ctx.needs_input_grad[0]:
            rows, cols = _csr_rows(weights), weights.col_indices()
            through = (x * tv).sum(dim=1)
            values = d * inv[rows, 0] * ((x[rows] * v[cols]).sum(dim=1) - through[rows])
            grad_w = torch.sparse_csr_tensor(
                weights.crow_indices(), cols, values, weights.shape, check_invariants=False
            )
        if ctx.needs_input_grad[1]:
            grad_p = (1.0 - d) * v + d * xd * v
        if ctx.needs_input_grad[2]:
            grad_d = ((x * tv).sum() + (xd * pv).sum() - pv.sum()).to(damping.dtype)
        return grad_w, grad_p, grad_d, None, None, None


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
