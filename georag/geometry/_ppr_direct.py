"""Personalized PageRank on one fixed graph by a sparse LU factorization, reused by every
query (see :class:`PPRSolver`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import splu

from georag.geometry._ppr_shared import _check_weights, _normalize_personalization

__all__ = ["PPRSolver"]


class PPRSolver:
    """Personalized PageRank of one graph and damping, solved exactly for any query.

    The scores are those of :func:`~georag.geometry.diffusion.personalized_pagerank`
    (networkx's ``pagerank`` and igraph's ``personalized_pagerank(...,
    implementation='prpack')``: a dangling node restarts along the personalization
    vector), without its iteration: with ``T = D^-1 W`` the row-normalized weights, ``u``
    the indicator of the dangling nodes and ``p`` a personalization vector, the scores
    are the fixed point of

        ``x = d T^T x + d (u . x) p + (1 - d) p``.

    The constructor factors ``A = I - d T^T`` once (SuperLU through
    :func:`scipy.sparse.linalg.splu`, float64, COLAMD ordering); :meth:`solve` then costs
    two sparse triangular solves of all the queries at once (``torch.triangular_solve`` on
    the factors as CSR tensors, faster than SuperLU's own solve). The rank-one dangling
    term ``d p u^T`` is taken care of by the Sherman-Morrison formula: with ``A y = p``,
    ``x = (1 - d) y / (1 - d u . y)``. The columns of ``A`` sum to ``1 - d`` except those
    of the dangling nodes, which sum to 1, so ``1 - d u . y = (1 - d) sum(y)`` and the
    formula is the normalization ``x = y / sum(y)``, which is how it is computed.

    ``A`` is an M-matrix whose columns are strictly diagonally dominant for ``d < 1``: it
    is nonsingular, its factorization is stable and ``y >= 0``. At ``d = 1`` the
    fixed point need not be unique (a closed component without personalization mass),
    so ``damping`` must be below 1.

    The factors live on the CPU. A personalization on another device (CUDA) is copied to
    the CPU and its scores back to its device; for many queries on a GPU the power
    iteration of :func:`~georag.geometry.diffusion.personalized_pagerank` runs there. The
    scores carry no gradient: differentiate through ``personalized_pagerank``.

    Parameters
    ----------
    weights : torch.Tensor, sparse CSR, shape (N, N)
        Non-negative edge weights, ``weights[i, j]`` for the edge ``i -> j`` (symmetric for
        an undirected graph); a row of zeros is a dangling node. Any floating dtype, on
        any device; it is factored in float64.
    damping : float
        The probability of following an edge, in [0, 1).

    Attributes
    ----------
    num_nodes : int
        N.
    damping : float
    dtype : torch.dtype
        The dtype of ``weights``: the scores' dtype for a personalization that is not
        floating point.
    fill : int
        Stored entries of the LU factors (the memory and the cost of one solve).

    Examples
    --------
    >>> w = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse_csr()
    >>> PPRSolver(w, damping=0.5).solve(torch.tensor([1.0, 0.0]))
    tensor([0.6667, 0.3333])
    """

    def __init__(self, weights: torch.Tensor, damping: float = 0.85) -> None:
        if not isinstance(weights, torch.Tensor) or weights.layout != torch.sparse_csr:
            raise ValueError("weights must be a torch.sparse_csr tensor of shape (N, N)")
        if weights.dim() != 2 or weights.shape[0] != weights.shape[1] or not weights.shape[0]:
            raise ValueError(f"weights must have shape (N, N), N > 0, got {tuple(weights.shape)}")
        values = weights.values().detach()
        _check_weights(values)
        if isinstance(damping, torch.Tensor):
            damping = float(damping.detach()) if damping.dim() == 0 else float("nan")
        if not 0.0 <= damping < 1.0:  # also rejects NaN
            raise ValueError(f"damping must lie in [0, 1), got {damping}")
        self.num_nodes, self.damping, self.dtype = weights.shape[0], float(damping), values.dtype
        lu = splu(_system(weights, self.damping))  # COLAMD: the fastest solves measured
        # splu gives Pr A Pc = L U: A y = p is L U z = Pr p, then y = Pc z
        self._lower, self._upper = _torch_csr(lu.L), _torch_csr(lu.U)
        self._row_order = torch.from_numpy(np.argsort(lu.perm_r))
        self._col_order = torch.from_numpy(lu.perm_c.astype(np.int64))
        self.fill = lu.L.nnz + lu.U.nnz

    def solve(self, personalization: torch.Tensor) -> torch.Tensor:
        """The PageRank scores of one or many personalization vectors.

        Parameters
        ----------
        personalization : torch.Tensor, shape (N,) or (N, Q)
            Non-negative teleport weights, one column per query; each vector is normalized
            to sum to one and needs a positive entry.

        Returns
        -------
        torch.Tensor, shape (N,) or (N, Q)
            Scores summing to one per vector, on the device of ``personalization`` and in
            its dtype (``dtype`` when it is not floating point).

        Raises
        ------
        ValueError
            On a bad shape, a vector that is negative, non-finite or all zero, or a
            personalization that requires grad.
        """
        p = personalization
        if not isinstance(p, torch.Tensor) or p.dim() not in (1, 2) or p.shape[0] != self.num_nodes:
            shape = tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
            raise ValueError(
                f"personalization must have shape ({self.num_nodes},) or "
                f"({self.num_nodes}, Q), got {shape}"
            )
        if p.requires_grad and torch.is_grad_enabled():
            raise ValueError(
                "personalization requires grad; PPRSolver has no gradient "
                "(use personalized_pagerank)"
            )
        dtype = p.dtype if p.is_floating_point() else self.dtype
        rhs = p.to("cpu", torch.float64).reshape(self.num_nodes, -1).contiguous()
        rhs = _normalize_personalization(rhs, dim=0).index_select(0, self._row_order)
        z = torch.triangular_solve(rhs, self._lower, upper=False).solution
        y = torch.triangular_solve(z, self._upper, upper=True).solution
        y = y.contiguous().index_select(0, self._col_order)
        return (y / y.sum(dim=0)).reshape(p.shape).to(p.device, dtype)


def _torch_csr(matrix: sp.spmatrix) -> torch.Tensor:
    """A SciPy sparse matrix as a float64 torch CSR tensor."""
    m = matrix.tocsr()
    return torch.sparse_csr_tensor(
        torch.from_numpy(m.indptr.astype(np.int64)),
        torch.from_numpy(m.indices.astype(np.int64)),
        torch.from_numpy(m.data.astype(np.float64)),
        m.shape,
        check_invariants=False,
    )


def _system(weights: torch.Tensor, damping: float) -> sp.csc_matrix:
    """``A = I - damping * (D^-1 W)^T`` in CSC, float64, as ``splu`` takes it."""
    n = weights.shape[0]
    crow = weights.crow_indices().cpu().numpy()
    cols = weights.col_indices().cpu().numpy()
    values = weights.values().detach().cpu().to(torch.float64).numpy()
    w = sp.csr_matrix((values, cols, crow), shape=(n, n))
    w.sum_duplicates()
    w.eliminate_zeros()
    strength = np.asarray(w.sum(axis=1)).ravel()
    rows = np.repeat(np.arange(n), np.diff(w.indptr))
    transition = sp.csr_matrix((w.data / strength[rows], w.indices, w.indptr), shape=(n, n))
    # the transpose of a CSR matrix is its CSC transpose at no cost
    return (sp.identity(n, format="csr") - damping * transition).T.tocsc()
