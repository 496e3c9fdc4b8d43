r"""Lorentz (hyperboloid) and Poincare-ball helpers, and Outward Einstein Midpoint pooling.

Pure batched tensor math in the style of ``geoopt/manifolds/lorentz/math.py``: every
function takes keyword-only options, works on any leading batch shape, and follows the
device and dtype of its inputs (float32 by default, float64 accepted).

Conventions: the hyperboloid of curvature :math:`-1/K` is

.. math::

    \mathbb{H}^d_K = \{p = (t, x) \in \mathbb{R}^{1,d} :
        \langle p, p\rangle_{\mathcal{L}} = -K,\ t > 0\},

with the time coordinate first. This is ``geoopt.Lorentz(k=K)``. Every function takes the
curvature parameter ``k`` (:math:`K > 0`, a float or a tensor that broadcasts) and, where it
reads coordinates, ``dim``, the coordinate dimension (the last one by default). The Poincare
maps go to ``geoopt.PoincareBall(c=1/K)``, the ball of radius :math:`\sqrt{K}`, and are
isometries.

Domains are clamped (``arcosh`` arguments to ``>= 1``, ball radii to ``< sqrt(K)``) so that
points at or near the boundary give finite values and finite gradients.
"""

from __future__ import annotations

import torch

__all__ = [
    "hybrid_scores",
    "lorentz_inner",
    "lorentz_gram",
    "lorentz_distance",
    "add_time",
    "rescale_to_hyperboloid",
    "radial_coordinate",
    "lorentz_to_poincare",
    "poincare_to_lorentz",
    "oem_pool",
]

# Relative distance kept from the Poincare ball boundary (geoopt uses the same values).
_BALL_EPS = {torch.float32: 4e-3, torch.float64: 1e-5}


def _check_k(k: float | torch.Tensor) -> None:
    if isinstance(k, torch.Tensor):
        if not bool((k > 0).all()):
            raise ValueError(f"k must be positive, got {k}")
    elif not k > 0:
        raise ValueError(f"k must be positive, got {k}")


def _sqrt_k(k: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(k, dtype=like.dtype, device=like.device).sqrt()


def _arcosh(z: torch.Tensor) -> torch.Tensor:
    """``arcosh`` clamped to its domain, with a finite derivative at 1."""
    eps = torch.finfo(z.dtype).eps
    z = z.clamp_min(1.0)
    return torch.log(z + torch.sqrt((z * z - 1.0).clamp_min(eps)))


def lorentz_inner(
    x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, dim: int = -1
) -> torch.Tensor:
    r"""Minkowski inner product (broadcasting, like ``geoopt.manifolds.lorentz.math.inner``).

    .. math::

        \langle x, y\rangle_{\mathcal{L}} = -x_0 y_0 + \sum_{i=1}^d x_i y_i

    Parameters
    ----------
    x, y : torch.Tensor, shape (..., d+1)
        Points (or ambient vectors), time coordinate first; broadcastable.
    keepdim : bool
        Keep the reduced dimension.
    dim : int
        The coordinate dimension.

    Returns
    -------
    torch.Tensor, shape (...)
        The inner products.
    """
    xy = x * y
    d = xy.size(dim) - 1
    out = xy.narrow(dim, 1, d).sum(dim=dim, keepdim=True) - xy.narrow(dim, 0, 1)
    return out if keepdim else out.squeeze(dim)


def lorentz_gram(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""All-pairs Minkowski inner products, one matrix product per batch.

    Parameters
    ----------
    x : torch.Tensor, shape (..., N, d+1)
    y : torch.Tensor, shape (..., M, d+1)

    Returns
    -------
    torch.Tensor, shape (..., N, M)
        ``out[..., i, j] = <x[..., i, :], y[..., j, :]>_L``.
    """
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(
            f"x and y must share the last dimension, got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    flipped = torch.cat((-x[..., :1], x[..., 1:]), dim=-1)
    return flipped @ y.transpose(-1, -2)


def lorentz_distance(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    k: float | torch.Tensor = 1.0,
    keepdim: bool = False,
    dim: int = -1,
) -> torch.Tensor:
    r"""Geodesic distance on the hyperboloid (paper eq. 6).

    .. math::

        d_{\mathcal{L}}(x, y) =
            \sqrt{K}\,\operatorname{arcosh}\left(-\langle x, y\rangle_{\mathcal{L}} / K\right)

    Parameters
    ----------
    x, y : torch.Tensor, shape (..., d+1)
        Points on :math:`\mathbb{H}^d_K`; broadcastable.
    keepdim : bool
        Keep the reduced dimension.
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (...)
        Distances; the ``arcosh`` argument is clamped to ``>= 1``.
    """
    _check_k(k)
    z = -lorentz_inner(x, y, keepdim=keepdim, dim=dim) / k
    return _sqrt_k(k, z) * _arcosh(z)


def add_time(x: torch.Tensor, *, k: float | torch.Tensor = 1.0, dim: int = -1) -> torch.Tensor:
    r"""Lift spatial coordinates onto the hyperboloid (paper eq. 5 and 8).

    .. math::

        p = (\sqrt{\|x\|^2 + K},\ x)

    Parameters
    ----------
    x : torch.Tensor, shape (..., d)
        Spatial coordinates.
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (..., d+1)
        Points on :math:`\mathbb{H}^d_K`, time coordinate first.
    """
    _check_k(k)
    t = torch.sqrt((x * x).sum(dim=dim, keepdim=True) + k)
    return torch.cat((t, x), dim=dim)


def rescale_to_hyperboloid(
    p: torch.Tensor, *, k: float | torch.Tensor = 1.0, dim: int = -1
) -> torch.Tensor:
    r"""Radially rescale a future-timelike ambient vector onto the hyperboloid (paper eq. 2).

    .. math::

        \Pi(p) = \sqrt{K / -\langle p, p\rangle_{\mathcal{L}}}\; p

    The spatial part is rescaled and the time coordinate is recomputed from it, so the
    result satisfies :math:`\langle p, p\rangle_{\mathcal{L}} = -K` to rounding even for far
    points. ``-<p, p>`` is clamped to ``>= K``, its exact lower bound for any convex
    combination of hyperboloid points, which keeps near-degenerate inputs finite.

    Parameters
    ----------
    p : torch.Tensor, shape (..., d+1)
        Ambient vectors with :math:`p_0 > \|p_{1:}\|` (e.g. weighted means of points).
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (..., d+1)
        :math:`\Pi(p)`, on :math:`\mathbb{H}^d_K`.
    """
    _check_k(k)
    norm2 = (-lorentz_inner(p, p, keepdim=True, dim=dim)).clamp_min(k)
    d = p.size(dim) - 1
    return add_time(p.narrow(dim, 1, d) * torch.sqrt(k / norm2), k=k, dim=dim)


def radial_coordinate(
    p: torch.Tensor, *, k: float | torch.Tensor = 1.0, dim: int = -1
) -> torch.Tensor:
    r"""Radial coordinate :math:`r = \operatorname{arcosh}(t / \sqrt{K})` (paper, Table 3).

    The geodesic distance to the origin :math:`(\sqrt{K}, 0)` is :math:`\sqrt{K}\,r`.

    Parameters
    ----------
    p : torch.Tensor, shape (..., d+1)
        Points on :math:`\mathbb{H}^d_K`, time coordinate first.
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (...)
        :math:`r` of each point.
    """
    _check_k(k)
    t = p.narrow(dim, 0, 1).squeeze(dim)
    return _arcosh(t / _sqrt_k(k, t))


def lorentz_to_poincare(
    p: torch.Tensor, *, k: float | torch.Tensor = 1.0, dim: int = -1
) -> torch.Tensor:
    r"""Isometry from :math:`\mathbb{H}^d_K` to the Poincare ball of radius :math:`\sqrt{K}`.

    .. math::

        y = \sqrt{K}\, x / (t + \sqrt{K})

    The image lives in ``geoopt.PoincareBall(c=1/K)``.

    Parameters
    ----------
    p : torch.Tensor, shape (..., d+1)
        Points on the hyperboloid, time coordinate first.
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (..., d)
        The same points in the ball.
    """
    _check_k(k)
    sk = _sqrt_k(k, p)
    d = p.size(dim) - 1
    return sk * p.narrow(dim, 1, d) / (p.narrow(dim, 0, 1) + sk)


def poincare_to_lorentz(
    y: torch.Tensor, *, k: float | torch.Tensor = 1.0, dim: int = -1
) -> torch.Tensor:
    r"""Isometry from the Poincare ball of radius :math:`\sqrt{K}` to :math:`\mathbb{H}^d_K`.

    .. math::

        x = \frac{2K\,y}{K - \|y\|^2}, \qquad t = \sqrt{\|x\|^2 + K}

    Points at or beyond the boundary are first pulled inside to radius
    :math:`\sqrt{K}(1 - \epsilon)` (``eps`` 4e-3 in float32, 1e-5 in float64, as in geoopt).

    Parameters
    ----------
    y : torch.Tensor, shape (..., d)
        Points of ``geoopt.PoincareBall(c=1/K)``.
    k, dim
        Curvature and coordinate dimension, as in the module's conventions.

    Returns
    -------
    torch.Tensor, shape (..., d+1)
        The same points on :math:`\mathbb{H}^d_K`, time coordinate first.
    """
    _check_k(k)
    sk = _sqrt_k(k, y)
    max_norm = sk * (1.0 - _BALL_EPS.get(y.dtype, 4e-3))
    norm = y.norm(dim=dim, keepdim=True).clamp_min(torch.finfo(y.dtype).tiny)
    y = torch.where(norm > max_norm, y / norm * max_norm, y)
    y2 = (y * y).sum(dim=dim, keepdim=True)
    return add_time(2.0 * sk * sk * y / (sk * sk - y2), k=k, dim=dim)


def oem_pool(
    points: torch.Tensor,
    mask: torch.Tensor,
    *,
    k: float | torch.Tensor = 1.0,
    power: float = 1.0,
) -> torch.Tensor:
    r"""Outward Einstein Midpoint of padded sets of hyperboloid points (paper eq. 1-2).

    Each point gets the weight :math:`\gamma_i\, t_i^{P}` in the Klein chart, where
    :math:`\gamma_i = t_i / \sqrt{K}` is its Lorentz factor; mapped back to the hyperboloid
    this is the radial rescaling (eq. 2) of

    .. math::

        \tilde p = \frac{\sum_i t_i^{P} p_i}{\sum_i t_i^{P}},
        \qquad p_{\mathrm{OEM}} =
            \sqrt{K / -\langle\tilde p, \tilde p\rangle_{\mathcal{L}}}\ \tilde p .

    With ``power=0`` this is exactly the projected Einstein midpoint; as ``power`` grows the
    point with the largest time coordinate dominates (max pooling). The weights are computed
    in log space, so large ``power`` or far points do not overflow.

    Parameters
    ----------
    points : torch.Tensor, shape (B, T, d+1)
        Token points on :math:`\mathbb{H}^d_K`, time coordinate first, padded to T.
    mask : torch.Tensor, shape (B, T), bool
        True for real tokens. Every set needs at least one; padded entries are ignored.
    k : float or torch.Tensor
        Curvature parameter :math:`K > 0`.
    power : float
        The outward exponent :math:`P \ge 0`.

    Returns
    -------
    torch.Tensor, shape (B, d+1)
        One pooled point per set, on :math:`\mathbb{H}^d_K`.
    """
    if points.dim() != 3:
        raise ValueError(f"points must have shape (B, T, d+1), got {tuple(points.shape)}")
    if mask.shape != points.shape[:2] or mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor of shape {tuple(points.shape[:2])}, "
            f"got {mask.dtype} {tuple(mask.shape)}"
        )
    if not power >= 0:
        raise ValueError(f"power must be >= 0, got {power}")
    _check_k(k)
    empty = ~mask.any(dim=1)
    if bool(empty.any()):
        rows = empty.nonzero().flatten().tolist()
        raise ValueError(f"mask selects no point in set(s) {rows[:10]}; each set needs one")
    log_t = torch.log(points[..., 0].clamp_min(torch.finfo(points.dtype).tiny))
    logits = (power * log_t).masked_fill(~mask, -torch.inf)
    weights = torch.softmax(logits, dim=1)  # t_i^P / sum_j t_j^P over real tokens
    points = points.masked_fill(~mask.unsqueeze(-1), 0.0)  # padding may hold anything
    mean = (weights.unsqueeze(-1) * points).sum(dim=1)
    return rescale_to_hyperboloid(mean, k=k)


def hybrid_scores(
    bm25: torch.Tensor,
    query: torch.Tensor,
    cands: torch.Tensor,
    mask: torch.Tensor,
    *,
    alpha: float,
    offset: float = 2.0,
) -> torch.Tensor:
    r"""Hybrid score of every candidate (paper eq. 10-12).

    Parameters
    ----------
    bm25 : torch.Tensor, shape (B, M)
        First-stage (BM25) scores.
    query : torch.Tensor, shape (B, d+1)
        Query points on the hyperboloid.
    cands : torch.Tensor, shape (B, M, d+1)
        Candidate points.
    mask : torch.Tensor, shape (B, M), bool
        Real candidates. Padded ones score ``-inf``.
    alpha : float
        Weight of the normalized BM25 score.
    offset : float
        Shift inside the sigmoid.

    Returns
    -------
    torch.Tensor, shape (B, M)
        ``alpha * bm25 / max(bm25) + (1 - alpha) * sigmoid(<p_d, p_q>_L + offset)``; a query
        whose best BM25 score is not positive gets 0 for the lexical part.
    """
    if query.dim() != 2 or cands.dim() != 3 or cands.shape[::2] != query.shape:
        raise ValueError(
            f"query (B, d+1) and cands (B, M, d+1) disagree: {tuple(query.shape)}, "
            f"{tuple(cands.shape)}"
        )
    if bm25.shape != cands.shape[:2] or mask.shape != bm25.shape:
        raise ValueError(
            f"bm25 {tuple(bm25.shape)} and mask {tuple(mask.shape)} must have shape "
            f"{tuple(cands.shape[:2])}"
        )
    best = bm25.masked_fill(~mask, -torch.inf).amax(dim=1, keepdim=True)
    lexical = torch.where(best > 0, bm25 / best.clamp_min(torch.finfo(bm25.dtype).tiny), 0.0)
    lorentz = torch.sigmoid(lorentz_gram(query.unsqueeze(1), cands).squeeze(1) + offset)
    scores = alpha * lexical + (1.0 - alpha) * lorentz.to(lexical.dtype)
    return scores.masked_fill(~mask, -torch.inf)
