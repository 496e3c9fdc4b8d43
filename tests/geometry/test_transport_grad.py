"""Gradients of the entropic transport cost: gradcheck (float64), implicit vs unrolled,
and the small-epsilon limit against POT's exact plan."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.transport_grad import exact_transport, shared_cost_transport, sinkhorn_cost

F64 = torch.float64
TIGHT = {"tol": 1e-14, "max_iter": 20_000}


def problems(seed: int, b: int = 2, n: int = 4, m: int = 5):
    """Logits of the marginals (softmax keeps the masses balanced) and costs in [0.1, 1.1]."""
    gen = torch.Generator().manual_seed(seed)
    xa = torch.randn(b, n, generator=gen, dtype=F64)
    xb = torch.randn(b, m, generator=gen, dtype=F64)
    cost = torch.rand(b, n, m, generator=gen, dtype=F64) + 0.1
    return xa, xb, cost


@pytest.mark.parametrize("value", ["regularized", "linear"])
@pytest.mark.parametrize("grad", ["implicit", "unrolled"])
def test_sinkhorn_gradcheck(value, grad):
    xa, xb, cost = (t.requires_grad_() for t in problems(0))
    eps = torch.tensor(0.3, dtype=F64, requires_grad=True)

    def f(xa, xb, cost, eps):
        return sinkhorn_cost(
            xa.softmax(-1), xb.softmax(-1), cost, epsilon=eps, value=value, grad=grad, **TIGHT
        )

    assert torch.autograd.gradcheck(f, (xa, xb, cost, eps))


@pytest.mark.parametrize("value", ["regularized", "linear"])
def test_implicit_gradcheck_with_zero_masses(value):
    """Zero masses stay zero (softmax of -inf); the other entries and the costs are
    differentiated."""
    xa, xb, cost = (t.requires_grad_() for t in problems(1, n=5, m=5))
    zero_a = torch.tensor([[False, True, False, False, False], [False] * 4 + [True]])

    def f(xa, xb, cost):
        a = xa.masked_fill(zero_a, -torch.inf).softmax(-1)
        return sinkhorn_cost(a, xb.softmax(-1), cost, epsilon=0.4, value=value, **TIGHT)

    assert torch.autograd.gradcheck(f, (xa, xb, cost))


@pytest.mark.parametrize("value", ["regularized", "linear"])
def test_implicit_matches_unrolled_at_convergence(value):
    xa, xb, cost = problems(2, b=3, n=5, m=6)
    upstream = torch.randn(3, dtype=F64, generator=torch.Generator().manual_seed(9))
    grads = {}
    for grad in ("implicit", "unrolled"):
        inputs = [t.clone().requires_grad_() for t in (xa, xb, cost)]
        eps = torch.tensor(0.2, dtype=F64, requires_grad=True)
        out = sinkhorn_cost(
            inputs[0].softmax(-1),
            inputs[1].softmax(-1),
            inputs[2],
            epsilon=eps,
            value=value,
            grad=grad,
            **TIGHT,
        )
        (out * upstream).sum().backward()
        grads[grad] = [t.grad for t in (*inputs, eps)]
    for implicit, unrolled in zip(grads["implicit"], grads["unrolled"]):
        assert (implicit - unrolled).abs().max() < 1e-5


def test_cost_gradient_is_exact_plan_at_small_epsilon():
    """d OT_eps / d C is the entropic plan, which tends to POT's emd plan as eps -> 0."""
    gen = np.random.default_rng(3)
    for _ in range(5):
        n, m = gen.integers(3, 7, size=2)
        a, b = gen.dirichlet(np.ones(n)), gen.dirichlet(np.ones(m))
        cost = gen.random((n, m))
        reference = ot.emd(a, b, cost)
        c = torch.tensor(cost, requires_grad=True)
        sinkhorn_cost(
            torch.tensor(a), torch.tensor(b), c, epsilon=1e-3, tol=1e-12, max_iter=200_000
        ).backward()
        assert np.abs(c.grad.numpy() - reference).max() < 1e-3
        assert (
            torch.autograd.grad(exact_transport(torch.tensor(a), torch.tensor(b), c), c)[0]
            .sub(torch.tensor(reference))
            .abs()
            .max()
            < 1e-12
        )


def test_marginal_gradients_approach_exact_duals_at_small_epsilon():
    """d/da, d/db (centred) tend to POT's emd dual potentials (centred) as eps -> 0: the
    linear value's within 1e-3 at eps = 1e-3 (observed <= 1e-7), the regularized value's
    within 3e-3 (its potentials carry an O(eps log) entropic shift; observed <= 2.3e-3)."""
    gen = np.random.default_rng(3)
    for _ in range(3):
        n, m = gen.integers(3, 7, size=2)
        a, b = gen.dirichlet(np.ones(n)), gen.dirichlet(np.ones(m))
        cost = gen.random((n, m))
        _, log = ot.emd(a, b, cost, log=True)
        u, v = log["u"] - log["u"].mean(), log["v"] - log["v"].mean()
        for value, bound in (("linear", 1e-3), ("regularized", 3e-3)):
            ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
            out = sinkhorn_cost(
                ta, tb, torch.tensor(cost), epsilon=1e-3, value=value, tol=1e-12, max_iter=200_000
            )
            g_a, g_b = torch.autograd.grad(out, (ta, tb))
            assert np.abs(g_a.numpy() - u).max() < bound
            assert np.abs(g_b.numpy() - v).max() < bound


def _shared(a, b, cost, **options):
    """shared_cost_transport of one problem per group."""
    eps = torch.full((a.shape[0],), 0.2, dtype=F64)
    center = torch.full((a.shape[0],), 0.5, dtype=F64)
    out = shared_cost_transport(
        a.unsqueeze(1), b.unsqueeze(1), cost, epsilon=eps, center=center, **options
    )
    return out[0].squeeze(1)


SOLVERS = {
    "regularized": lambda a, b, c: sinkhorn_cost(a, b, c, epsilon=0.2, **TIGHT),
    "linear": lambda a, b, c: sinkhorn_cost(a, b, c, epsilon=0.2, value="linear", **TIGHT),
    "shared": lambda a, b, c: _shared(a, b, c, tol=1e-13, max_iter=20_000),
    "exact": exact_transport,
}


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("side", ["a", "b"])
def test_gradient_at_a_zero_mass_is_the_one_sided_derivative(solver, side):
    """Moving mass t from a supported entry onto a zero one: d value / dt at t = 0+ (forward
    difference) equals the gradient along that move, for both marginals (ricci.grad needs
    this where a node's surplus crosses zero)."""
    fn = SOLVERS[solver]
    gen = np.random.default_rng(5)
    for _ in range(3):
        a, b = gen.dirichlet(np.ones(5)), gen.dirichlet(np.ones(6))
        x = a if side == "a" else b
        x[1] = 0.0
        x /= x.sum()
        cost = torch.tensor(gen.random((1, 5, 6)))
        move = np.zeros_like(x)
        move[1], move[0] = 1.0, -1.0
        ta, tb = (
            torch.tensor(a[None], requires_grad=True),
            torch.tensor(b[None], requires_grad=True),
        )
        g_a, g_b = torch.autograd.grad(fn(ta, tb, cost).sum(), (ta, tb))
        analytic = float(((g_a if side == "a" else g_b)[0] * torch.tensor(move)).sum())
        t = 1e-7 if solver == "exact" else 1e-6
        moved = (a + t * move, b) if side == "a" else (a, b + t * move)
        with torch.no_grad():
            base = fn(torch.tensor(a[None]), torch.tensor(b[None]), cost)
            step = fn(torch.tensor(moved[0][None]), torch.tensor(moved[1][None]), cost)
        assert abs(float(step - base) / t - analytic) < 1e-4 * max(1.0, abs(analytic))


def test_shared_cost_implicit_matches_unrolled_at_convergence():
    """The kernel-domain solver ricci.grad uses: its implicit gradients (a, b, cost,
    epsilon) equal autograd through the log-domain loop within 1e-5."""
    gen = torch.Generator().manual_seed(11)
    bsz, e, n, m = 2, 3, 5, 4
    xa, xb = (
        torch.randn(bsz, e, n, generator=gen, dtype=F64),
        torch.randn(bsz, e, m, generator=gen, dtype=F64),
    )
    cost = torch.rand(bsz, n, m, generator=gen, dtype=F64) + 0.1
    upstream = torch.randn(bsz, e, generator=gen, dtype=F64)
    grads = {}
    for mode in ("implicit", "unrolled"):
        inputs = [t.clone().requires_grad_() for t in (xa, xb, cost)]
        eps = torch.tensor([0.2, 0.3], dtype=F64, requires_grad=True)
        a, b = inputs[0].softmax(-1), inputs[1].softmax(-1)
        if mode == "implicit":
            out, _, ok = shared_cost_transport(
                a,
                b,
                inputs[2],
                epsilon=eps,
                center=eps.detach() * 0 + 0.6,
                tol=1e-13,
                max_iter=20_000,
            )
            assert ok.all()
        else:
            out = sinkhorn_cost(
                a,
                b,
                inputs[2].unsqueeze(1),
                epsilon=eps.unsqueeze(1),
                value="linear",
                grad="unrolled",
                **TIGHT,
            )
        (out * upstream).sum().backward()
        grads[mode] = [t.grad for t in (*inputs, eps)]
    for implicit, unrolled in zip(grads["implicit"], grads["unrolled"]):
        assert (implicit - unrolled).abs().max() < 1e-5


def test_exact_transport_value_and_gradcheck():
    xa, xb, cost = (t.requires_grad_() for t in problems(4))
    value = exact_transport(xa.softmax(-1), xb.softmax(-1), cost)
    for k in range(2):
        expected = ot.emd2(
            xa[k].softmax(-1).detach().numpy(),
            xb[k].softmax(-1).detach().numpy(),
            cost[k].detach().numpy(),
        )
        assert abs(float(value[k].detach()) - expected) < 1e-12
    assert torch.autograd.gradcheck(
        lambda xa, xb, cost: exact_transport(xa.softmax(-1), xb.softmax(-1), cost), (xa, xb, cost)
    )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 6),
    m=st.integers(2, 6),
    eps=st.floats(0.05, 2.0),
    scale=st.sampled_from([1e-2, 1.0, 30.0]),
    value=st.sampled_from(["regularized", "linear"]),
)
def test_hypothesis_implicit_matches_unrolled(seed, n, m, eps, scale, value):
    gen = torch.Generator().manual_seed(seed)
    a = torch.rand(n, generator=gen, dtype=F64) + 1e-3
    b = torch.rand(m, generator=gen, dtype=F64) + 1e-3
    cost = torch.rand(n, m, generator=gen, dtype=F64) * scale
    e = eps * scale
    grads = []
    for grad in ("implicit", "unrolled"):
        c = cost.clone().requires_grad_()
        out = sinkhorn_cost(
            a / a.sum(),
            b / b.sum(),
            c,
            epsilon=e,
            value=value,
            grad=grad,
            tol=1e-13,
            max_iter=50_000,
        )
        grads.append(torch.autograd.grad(out, c)[0])
    assert torch.isfinite(grads[0]).all()
    assert (grads[0] - grads[1]).abs().max() < 1e-5 * max(1.0, float(grads[1].abs().max()))


def test_bad_options_name_the_argument():
    a = torch.full((3,), 1 / 3, dtype=F64)
    cost = torch.rand(3, 3, dtype=F64)
    with pytest.raises(ValueError, match="value"):
        sinkhorn_cost(a, a, cost, epsilon=0.1, value="sharp")
    with pytest.raises(ValueError, match="grad"):
        sinkhorn_cost(a, a, cost, epsilon=0.1, grad="envelope")
    with pytest.raises(ValueError, match="positive masses"):
        sinkhorn_cost(
            torch.tensor([0.5, 0.5, 0.0], dtype=F64), a, cost, epsilon=0.1, grad="unrolled"
        )


@pytest.mark.parametrize("value", ["regularized", "linear"])
def test_nearly_decoupled_blocks_stay_finite(value):
    """Costs of 40 epsilon between two blocks: the plan nearly falls apart (a near-singular
    adjoint system). The cost gradient stays finite and equals the unrolled one; the
    potentials' offset between the blocks is ill-determined there, so the marginals'
    gradient is only compared for finiteness."""
    a = torch.tensor([0.3, 0.2, 0.1, 0.4], dtype=F64)
    b = torch.tensor([0.25, 0.25, 0.1, 0.4], dtype=F64)
    cost = torch.rand(4, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    cost[:2, 2:] += 40
    cost[2:, :2] += 40
    grads = []
    for grad in ("implicit", "unrolled"):
        c, m = cost.clone().requires_grad_(), a.clone().requires_grad_()
        out = sinkhorn_cost(m, b, c, epsilon=1.0, value=value, grad=grad, **TIGHT)
        grads.append(torch.autograd.grad(out, (c, m)))
    assert torch.isfinite(grads[0][1]).all()
    assert (grads[0][0] - grads[1][0]).abs().max() < 1e-8


@pytest.mark.parametrize("seed", range(20))
def test_linear_adjoint_of_a_plan_of_stars_stays_bounded(seed):
    """Found in learned_ricci training (cranfield, float32): a plan in two blocks whose rows
    each send almost all their mass to one column (stars; one block at mass 1e-23). The
    Schur complement is 0 up to rounding; a cutoff relative to its largest eigenvalue
    kept a noise eigenvalue and returned potentials of 2e23 (here up to 6e9, seed 19).
    With y a free gauge per block, x is each row's mean cost to its column: bounded by the
    costs."""
    from georag.geometry.transport_grad import _linear_adjoint

    g = torch.Generator().manual_seed(seed)
    star = torch.tensor([0, 0, 0, 2, 2, 2])
    cost = torch.rand(6, 4, generator=g, dtype=torch.float64) + 1.0
    cost[torch.arange(6), star] = 0.1 * torch.rand(6, generator=g, dtype=torch.float64)
    # scalings as a float32 Sinkhorn leaves them, the first block's at 1e-23
    u = torch.randn(6, generator=g, dtype=torch.float64).exp().float().double()
    v = torch.randn(4, generator=g, dtype=torch.float64).exp().float().double()
    u[:3] *= 1e-23
    plan = u[:, None] * (-cost / 0.02).exp() * v[None, :]
    plan = (plan / plan[3:].sum())[None]
    x, y = _linear_adjoint(plan, cost[None], precision=torch.float32)
    assert torch.isfinite(x).all() and torch.isfinite(y).all()
    assert x.abs().max() <= cost.max() and y.abs().max() < 1e-3
