"""The uncertified Sinkhorn Ricci flow compiled for the CPU, one graph after another.

:func:`georag.geometry.ricci.ricci_flow` with ``method="sinkhorn", accuracy=None`` (the
Ricci-Filtration setting) spends most of one small graph's time in per-op overhead:
about 15,000 tensor ops per 20-step flow on 21 nodes (docs/performance.md). This module
runs the same algorithm as one numba function per batch, with no tensor op in the loop,
and solves each edge's transport on the supports of its two measures only (the dense
shared-cost iteration multiplies zeros elsewhere).

Same algorithm, step for step: the largest component, GraphRicciCurvature's node
measures, Floyd-Warshall distances, the surplus split ``m_x - m_y``, the per-graph
epsilon and kernel centre of ``solvers._sinkhorn_epsilon``, scalings warm-started from
the previous step's potentials, ``v <- b / (u K)``, ``u <- a / (v K^T)``, ``kappa = 1 -
W / d``, the normalized update and the ``delta`` stop. Two things differ from the tensor
path, so the two agree where both solve tightly (tested to 1e-8), not at a loose ``tol``:

- each transport problem stops at its own first iteration whose marginal error is below
  ``tol`` (the tensor path iterates all problems of a graph until every one meets it,
  checked every 10 iterations, the cost of batching them); at the filter's ``tol=1e-3``
  the final lengths differ by up to about 0.1, the kept sets agree with
  GraphRicciCurvature's as the tensor path's do (docs/methods/ricci_filtration.md);
- every quantity is float64 (the tensor path iterates in the lengths' dtype, float32 in
  the filter); the kernel keeps the exponent range of that dtype, so both use the same
  epsilon.

A graph whose transport is not finite is reported, and :func:`ricci_flow` runs the batch
on the tensor path (which re-solves such edges exactly).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from georag.geometry.ricci.common import (
    _KERNEL_SPAN,
    _MOVING_EPS,
    _NEIGHBOUR_WEIGHT_FLOOR,
    _ZERO_DISTANCE,
    RicciFlowResult,
    _warn_missed,
)
from georag.geometry.transport import max_cost_over_epsilon

__all__ = ["applies", "flow_batch", "ricci_flow"]

#: reassociated and fused sums (vectorizable); infinities and NaN keep their meaning
_FAST = {"reassoc", "contract", "nsz", "arcp"}


def _jit(fn):
    return numba.njit(cache=True, nogil=True, fastmath=_FAST, error_model="numpy")(fn)


@_jit
def _largest_component(adj):
    """Mask of the largest connected component (ties: the one with the lowest node)."""
    n = adj.shape[0]
    label = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    best, best_size = -1, 0
    for s in range(n):
        if label[s] >= 0:
            continue
        label[s], stack[0], top, size = s, s, 1, 0
        while top:
            top -= 1
            x = stack[top]
            size += 1
            for y in range(n):
                if adj[x, y] and label[y] < 0:
                    label[y] = s
                    stack[top] = y
                    top += 1
        if size > best_size:
            best, best_size = s, size
    return label == best


@_jit
def _floyd_warshall(dist):
    """All-pairs shortest paths in place (``dist``: edge lengths, inf off the edges)."""
    n = dist.shape[0]
    through = np.empty(n)  # row k, which step k leaves as it is: a copy lets the loop
    for k in range(n):  # below vectorize (it cannot alias the row it writes)
        through[:] = dist[k]
        for p in range(n):
            dpk = dist[p, k]
            if dpk < np.inf:
                row = dist[p]
                for q in range(n):
                    row[q] = min(row[q], dpk + through[q])


@_jit
def _sinkhorn(na, nb, a, b, u, v, back, kernel, kernel_t, max_iter, tol):
    """Sinkhorn scalings of one transport problem on its supports, in place.

    ``a`` (na,) and ``b`` (nb,) are the masses, ``kernel`` (na, nb) and ``kernel_t`` its
    transpose, ``u`` (na,) the start. Alternates ``v <- b / (u K)``,
    ``u <- a / (v K^T)`` and stops at the first iteration whose row marginal error
    ``sum |u (v K^T) - a|`` is below ``tol``, or after ``max_iter``. Returns that error.
    """
    for it in range(max_iter + 1):
        for c in range(nb):
            acc = 0.0
            for r in range(na):
                acc += kernel_t[c, r] * u[r]
            v[c] = b[c] / acc
        error = 0.0
        for r in range(na):
            acc = 0.0
            for c in range(nb):
                acc += kernel[r, c] * v[c]
            back[r] = acc
            error += abs(u[r] * acc - a[r])
        if not error >= tol or it == max_iter:
            return error
        for r in range(na):
            u[r] = a[r] / back[r]
    return error


@_jit
def _curvature(w, ei, ej, adj, within3, even, kept, carried, carried_eps, warm, kappa, params):
    """Curvature of every edge at lengths ``w`` (E,), in ``kappa`` (E,).

    Returns ``(all problems met tol, every transport finite)``; updates ``carried``
    (E, N), the scalings ``u`` (0 off each support), and ``carried_eps`` (1,), their
    epsilon: the warm start of the next call.
    """
    alpha, exp_power, log_base, epsilon, tol, kernel_limit, floor = params[:7]
    max_iter, zero_distance, log_weight_floor = int(params[7]), params[8], params[9]
    move_floor = params[10]
    n, e = adj.shape[0], w.shape[0]
    lengths = np.zeros((n, n))
    dist = np.full((n, n), np.inf)
    for p in range(n):
        dist[p, p] = 0.0
    total = 0.0
    for k in range(e):
        x, y = ei[k], ej[k]
        lengths[x, y] = lengths[y, x] = w[k]
        dist[x, y] = dist[y, x] = w[k]
        total += 2.0 * w[k]
    _floyd_warshall(dist)
    # node measures: alpha at the node, 1 - alpha in proportion to base^(-w^p)
    measure = np.zeros((n, n))
    logit = np.empty(n)
    for x in range(n):
        top = -np.inf
        for v in range(n):
            if adj[x, v]:
                length = max(lengths[x, v], 0.0)
                power = length * length if exp_power == 2.0 else length**exp_power
                logit[v] = -log_base * power
                top = max(top, logit[v])
        log_total = -np.inf
        if top > -np.inf:
            mass = 0.0
            for v in range(n):
                if adj[x, v]:
                    mass += math.exp(logit[v] - top)
            log_total = top + math.log(mass)
        for v in range(n):
            if adj[x, v]:
                if log_total > log_weight_floor:
                    share = math.exp(logit[v] - log_total)
                else:
                    share = even[x, v]
                measure[x, v] = (1.0 - alpha) * share
        measure[x, x] += kept[x]
    # per-graph epsilon and kernel centre (solvers._sinkhorn_epsilon)
    mean = total / max(2 * e, 1)
    if not mean > 0:
        mean = 1.0
    widest = 0.0
    for p in range(n):
        for q in range(n):
            if within3[p, q]:
                widest = max(widest, dist[p, q])
    eps = max(epsilon * mean, widest / kernel_limit)
    center = widest / 2
    full_kernel = np.empty((n, n))
    for p in range(n):
        for q in range(n):
            full_kernel[p, q] = max(math.exp((center - dist[p, q]) / eps), floor)
    # one slot more than the supports: the surplus loop writes each node at the next slot
    rows, cols = np.empty(n + 1, np.int64), np.empty(n + 1, np.int64)
    a, b, u, v, back = np.empty(n + 1), np.empty(n + 1), np.empty(n), np.empty(n), np.empty(n)
    kernel, kernel_t = np.empty((n, n)), np.empty((n, n))
    # u = exp(f / eps): the carried scalings to the power eps_before / eps; a power
    # within rounding of 1 (the usual case: normalized flows keep eps) is skipped
    power = carried_eps[0] / eps if warm else 1.0
    if abs(power - 1.0) < 1e-12:
        power = 1.0
    carried_eps[0] = eps
    converged, finite = True, True
    for k in range(e):
        x, y = ei[k], ej[k]
        if dist[x, y] < zero_distance:
            kappa[k] = 0.0
            continue
        # the surplus m_x - m_y: the mass that leaves x's side and the mass that arrives
        # (without branches: the sign of each entry is unpredictable)
        na = nb = 0
        out_mass = in_mass = 0.0
        for q in range(n):
            s = measure[x, q] - measure[y, q]
            rows[na], a[na] = q, s
            cols[nb], b[nb] = q, -s
            na += s > 0
            nb += s < 0
            out_mass += max(s, 0.0)
            in_mass += max(-s, 0.0)
        if not min(out_mass, in_mass) > move_floor:
            kappa[k] = 1.0  # identical measures: nothing moves
            continue
        for r in range(na):
            a[r] /= out_mass
            for c in range(nb):
                kernel[r, c] = kernel_t[c, r] = full_kernel[rows[r], cols[c]]
        for c in range(nb):
            b[c] /= in_mass
        # start: the carried scalings (raised to eps_before / eps, u = exp(f / eps) for
        # the same potentials f), scaled to max u = 1 on this support; from ones where
        # they do not cover it
        top, cover = 0.0, warm
        for r in range(na):
            u[r] = carried[k, rows[r]]
            cover = cover and u[r] > 0
            top = max(top, u[r])
        cover = cover and top < np.inf
        if cover:
            for r in range(na):
                u[r] = u[r] / top if power == 1.0 else (u[r] / top) ** power
                cover = cover and u[r] > 0
        if not cover:
            u[:na] = 1.0
        error = _sinkhorn(na, nb, a, b, u, v, back, kernel, kernel_t, max_iter, tol)
        cost = 0.0
        for r in range(na):
            acc = 0.0
            for c in range(nb):
                acc += kernel[r, c] * dist[rows[r], cols[c]] * v[c]
            cost += u[r] * acc
        converged = converged and error < tol and math.isfinite(cost)
        finite = finite and math.isfinite(cost)
        carried[k, :] = 0.0
        for r in range(na):
            carried[k, rows[r]] = u[r]
        kappa[k] = 1.0 - 0.5 * (out_mass + in_mass) * cost / dist[x, y]
    return converged, finite


@_jit
def _store(lengths, kappa, w, edge_kappa, ei, ej):
    """Edge values (E,) into the symmetric (N, N) matrices."""
    for k in range(w.shape[0]):
        x, y = ei[k], ej[k]
        lengths[x, y] = lengths[y, x] = w[k]
        kappa[x, y] = kappa[y, x] = edge_kappa[k]


@_jit
def flow_batch(
    lengths,
    adjacency,
    iterations,
    step,
    normalize,
    delta,
    restrict,
    params,
    history_steps,
):
    """Flow every graph of the batch, one after another.

    Parameters
    ----------
    lengths : ndarray, shape (B, N, N), float64
    adjacency : ndarray, shape (B, N, N), bool
    iterations, step, normalize, delta, restrict
        As :func:`georag.geometry.ricci.ricci_flow`.
    params : ndarray, shape (11,), float64
        ``alpha, exp_power, log(base), epsilon, tol, kernel limit, kernel floor,
        max_iter, zero distance, log neighbour-weight floor, moving-mass floor`` (the
        limit and floor: ``widest / epsilon`` at most, and the smallest kernel entry, of
        the dtype the tensor path would iterate in; the last three as in
        :mod:`georag.geometry.ricci`).
    history_steps : int
        T + 1 to keep every step's lengths and curvature, 0 to keep none.

    Returns
    -------
    out_lengths, out_kappa : ndarray, shape (B, N, N), float64
        The final lengths and curvature on the flowed edges, 0 elsewhere.
    out_adjacency : ndarray, shape (B, N, N), bool
        The flowed edges (the largest component's when ``restrict``).
    history_lengths, history_kappa : ndarray, shape (history_steps, B, N, N), float64
        Every step's lengths and curvature (frozen after a graph stopped).
    ran : ndarray, shape (B,), int64
        Flow iterations run.
    converged : ndarray, shape (B,), bool
        Every solve met ``tol``.
    missed : ndarray, shape (B,), int64
        (step) solves that missed ``tol``.
    finite : ndarray, shape (B,), bool
        Every transport was finite (False: redo on the tensor path).
    """
    alpha = params[0]
    bsz, n = lengths.shape[0], lengths.shape[1]
    out_lengths, out_kappa = np.zeros((bsz, n, n)), np.zeros((bsz, n, n))
    out_adjacency = np.zeros((bsz, n, n), np.bool_)
    history_lengths = np.zeros((history_steps, bsz, n, n))
    history_kappa = np.zeros((history_steps, bsz, n, n))
    ran, missed = np.zeros(bsz, np.int64), np.zeros(bsz, np.int64)
    converged, finite = np.zeros(bsz, np.bool_), np.zeros(bsz, np.bool_)
    keep_history = history_steps > 0
    for g in range(bsz):
        adj = adjacency[g].copy()
        if restrict:
            core = _largest_component(adj)
            for p in range(n):
                for q in range(n):
                    adj[p, q] = adj[p, q] and core[p] and core[q]
        out_adjacency[g] = adj
        e = 0
        for p in range(n):
            for q in range(p + 1, n):
                e += adj[p, q]
        ei = np.empty(e, np.int64)
        ej = np.empty(e, np.int64)
        w = np.empty(e)
        k = 0
        for p in range(n):
            for q in range(p + 1, n):
                if adj[p, q]:
                    ei[k], ej[k], w[k] = p, q, lengths[g, p, q]
                    k += 1
        # what depends on the graph alone: even spread, kept mass, pairs within 3 hops
        even = np.zeros((n, n))
        kept = np.empty(n)
        closed = np.zeros((n, n), np.bool_)
        for p in range(n):
            degree = 0
            for q in range(n):
                degree += adj[p, q]
            for q in range(n):
                if adj[p, q]:
                    even[p, q] = 1.0 / degree
                closed[p, q] = adj[p, q] or p == q
            kept[p] = 1.0 if degree == 0 else alpha
        two = np.zeros((n, n), np.bool_)  # a real edge, then at most one more
        for p in range(n):
            for r in range(n):
                if closed[p, r]:
                    for q in range(n):
                        two[p, q] = two[p, q] or adj[r, q]
        within3 = np.zeros((n, n), np.bool_)
        for p in range(n):
            for r in range(n):
                if two[p, r]:
                    for q in range(n):
                        within3[p, q] = within3[p, q] or closed[r, q]
        carried, carried_eps = np.zeros((e, n)), np.ones(1)
        kappa = np.empty(e)
        ok, fine = _curvature(
            w, ei, ej, adj, within3, even, kept, carried, carried_eps, False, kappa, params
        )
        good, bad_steps, steps = ok, int(not ok), 0
        if keep_history:
            _store(history_lengths[0, g], history_kappa[0, g], w, kappa, ei, ej)
        active = True
        for t in range(iterations):
            if not active:
                break
            stepped = w - step * kappa * w
            if normalize:
                total = stepped.sum()
                stepped *= max(e, 1) / (total if total > 0 else max(e, 1))
            new_kappa = np.empty(e)
            ok, step_fine = _curvature(
                stepped,
                ei,
                ej,
                adj,
                within3,
                even,
                kept,
                carried,
                carried_eps,
                True,
                new_kappa,
                params,
            )
            w, kappa = stepped, new_kappa
            fine = fine and step_fine
            good = good and ok
            bad_steps += not ok
            steps += 1
            spread = (kappa.max() - kappa.min()) if e else 0.0
            active = not spread < delta
            if keep_history:
                _store(history_lengths[t + 1, g], history_kappa[t + 1, g], w, kappa, ei, ej)
        if keep_history:  # frozen after the graph stopped
            for t in range(steps + 1, history_lengths.shape[0]):
                history_lengths[t, g] = history_lengths[steps, g]
                history_kappa[t, g] = history_kappa[steps, g]
        _store(out_lengths[g], out_kappa[g], w, kappa, ei, ej)
        ran[g], converged[g], missed[g], finite[g] = steps, good, bad_steps, fine
    return (
        out_lengths,
        out_kappa,
        out_adjacency,
        history_lengths,
        history_kappa,
        ran,
        converged,
        missed,
        finite,
    )


def applies(lengths: torch.Tensor, *, method: str, accuracy: float | None, nbr_topk) -> bool:
    """Whether the compiled flow runs these options: the uncertified Sinkhorn flow
    (``method="sinkhorn", accuracy=None``, ``nbr_topk=None``) on CPU tensors."""
    return (
        method == "sinkhorn"
        and accuracy is None
        and nbr_topk is None
        and lengths.device.type == "cpu"
    )


def ricci_flow(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float,
    exp_power: float,
    base: float,
    epsilon: float,
    tol: float,
    max_iter: int,
    transport_dtype: torch.dtype | None,
    iterations: int,
    step: float,
    normalize: bool,
    delta: float,
    restrict: bool,
    history: bool,
) -> RicciFlowResult | None:
    """:func:`georag.geometry.ricci.ricci_flow`'s uncertified Sinkhorn flow by
    :func:`flow_batch`; None when a transport was not
    finite (the caller then runs the tensor path, which re-solves those edges exactly).
    The kernel's exponent range is that of the dtype the tensor path would iterate in."""
    b, n, _ = lengths.shape
    work = transport_dtype or lengths.dtype
    limit = _KERNEL_SPAN * max_cost_over_epsilon(work)
    floor = math.exp(-1.5 * max_cost_over_epsilon(work))
    params = np.array(
        [alpha, exp_power, math.log(base), epsilon, tol, limit, floor, max_iter]
        + [_ZERO_DISTANCE, math.log(_NEIGHBOUR_WEIGHT_FLOOR)]
        + [_MOVING_EPS * torch.finfo(torch.float64).eps],
        np.float64,
    )
    x, adj = lengths.detach().double().numpy(), adjacency.numpy()
    steps = iterations + 1 if history else 0
    out = flow_batch(x, adj, iterations, step, normalize, delta, restrict, params, steps)
    out_lengths, out_kappa, out_adjacency, trail_w, trail_k, ran, converged, missed, finite = out
    if not finite.all():
        return None
    _warn_missed(int(missed.sum()), int((~converged).sum()), b, tol, max_iter, depth=3)
    last = int(ran.max()) + 1 if b else 1

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values).to(lengths.dtype)

    return RicciFlowResult(
        lengths=tensor(out_lengths),
        curvature=tensor(out_kappa),
        adjacency=torch.from_numpy(out_adjacency),
        iterations=torch.from_numpy(ran),
        converged=torch.from_numpy(converged),
        exact_solves=torch.zeros(b, dtype=torch.long),
        history_lengths=tensor(trail_w[:last]) if history else None,
        history_curvature=tensor(trail_k[:last]) if history else None,
    )
