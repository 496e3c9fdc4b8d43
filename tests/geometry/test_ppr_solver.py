"""PPRSolver against igraph's prpack, the power iteration and a dense solve of the fixed point."""

from __future__ import annotations

import igraph
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.diffusion import PPRSolver, personalized_pagerank

DAMPINGS = st.sampled_from([0.0, 1e-6, 0.15, 0.5, 0.85, 0.99]) | st.floats(0.0, 0.99)


def adversarial(seed: int, n: int, *, directed: bool, loops: bool) -> np.ndarray:
    """Weights W[i, j] of a graph with several components, isolated (dangling) nodes,
    sinks (directed), exact zeros and weights log-uniform in [1e-12, 1e6]."""
    gen = np.random.default_rng(seed)
    labels = gen.integers(0, gen.integers(1, 4), n)
    edges = (gen.random((n, n)) < gen.uniform(0.1, 0.8)) & (labels[:, None] == labels[None, :])
    w = np.where(edges, 10.0 ** gen.uniform(-12, 6, (n, n)), 0.0)
    w[gen.random((n, n)) < 0.1] = 0.0
    if not loops:
        np.fill_diagonal(w, 0.0)
    if not directed:
        w = np.triu(w) + np.triu(w, 1).T
    isolated = gen.random(n) < 0.2
    w[isolated, :] = 0.0
    w[:, isolated] = 0.0
    if directed:
        w[gen.random(n) < 0.2, :] = 0.0  # sinks: in-edges, no out-edges
    return w


def personalizations(seed: int, n: int, q: int, kind: str) -> np.ndarray:
    gen = np.random.default_rng(seed + 1)
    if kind == "one node":
        p = np.zeros((n, q))
        p[gen.integers(0, n, q), np.arange(q)] = gen.uniform(0.1, 10.0, q)
        return p
    p = gen.random((n, q)) * (gen.random((n, q)) < 0.5)
    p[gen.integers(0, n, q), np.arange(q)] += 1.0
    return p


def prpack(w: np.ndarray, p: np.ndarray, damping: float, directed: bool) -> np.ndarray:
    n = w.shape[0]
    rows, cols = np.nonzero(w if directed else np.triu(w))
    graph = igraph.Graph(n=n, edges=list(zip(rows.tolist(), cols.tolist())), directed=directed)
    graph.es["weight"] = w[rows, cols].tolist()
    return np.stack(
        [
            graph.personalized_pagerank(
                damping=damping,
                directed=directed,
                weights="weight",
                reset=p[:, j].tolist(),
                implementation="prpack",
            )
            for j in range(p.shape[1])
        ],
        axis=1,
    )


def dense_fixed_point(w: np.ndarray, p: np.ndarray, damping: float) -> np.ndarray:
    """Solve ``(I - d T^T - d p u^T) x = (1 - d) p`` densely, the dangling term included."""
    n = w.shape[0]
    strength = w.sum(axis=1)
    t = np.divide(w, strength[:, None], out=np.zeros_like(w), where=strength[:, None] > 0)
    u = (strength == 0).astype(float)
    p = p / p.sum(axis=0)
    out = np.empty_like(p)
    for j in range(p.shape[1]):
        a = np.eye(n) - damping * t.T - damping * np.outer(p[:, j], u)
        out[:, j] = np.linalg.solve(a, (1.0 - damping) * p[:, j])
    return out


def csr(w: np.ndarray, dtype=torch.float64) -> torch.Tensor:
    return torch.tensor(w, dtype=dtype).to_sparse_csr()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 30),
    q=st.integers(1, 4),
    damping=DAMPINGS,
    directed=st.booleans(),
    kind=st.sampled_from(["spread", "one node"]),
)
def test_matches_prpack(seed, n, q, damping, directed, kind):
    w = adversarial(seed, n, directed=directed, loops=False)  # prpack counts loops twice
    p = personalizations(seed, n, q, kind)
    out = PPRSolver(csr(w), damping).solve(torch.tensor(p))
    assert out.shape == (n, q) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), prpack(w, p, damping, directed), rtol=0, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 30),
    damping=DAMPINGS,
    directed=st.booleans(),
    kind=st.sampled_from(["spread", "one node"]),
)
def test_matches_power_iteration(seed, n, damping, directed, kind):
    w = adversarial(seed, n, directed=directed, loops=True)
    p = torch.tensor(personalizations(seed, n, 3, kind))
    ref = personalized_pagerank(csr(w), p, damping=damping, tol=1e-14, max_iter=10_000)
    out = PPRSolver(csr(w), damping).solve(p)
    # the iteration stops at an L1 change below n * tol: its error is at most that over 1 - d
    atol = n * 1e-14 / (1.0 - damping) + 1e-15
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=atol)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 30),
    damping=st.sampled_from([0.999, 0.9999, 1.0 - 1e-7]) | st.floats(0.99, 0.9999),
    directed=st.booleans(),
)
def test_damping_near_one_matches_dense_solve(seed, n, damping, directed):
    w = adversarial(seed, n, directed=directed, loops=True)
    p = personalizations(seed, n, 2, "spread")
    out = PPRSolver(csr(w), damping).solve(torch.tensor(p))
    np.testing.assert_allclose(out.numpy(), dense_fixed_point(w, p, damping), rtol=0, atol=1e-8)
    np.testing.assert_allclose(out.sum(dim=0).numpy(), 1.0, rtol=0, atol=1e-12)


def test_one_vector_and_columns_agree():
    w = adversarial(3, 200, directed=True, loops=True)
    p = torch.tensor(personalizations(3, 200, 64, "spread"))
    solver = PPRSolver(csr(w), 0.85)
    batch = solver.solve(p)
    single = torch.stack([solver.solve(p[:, j]) for j in range(64)], dim=1)
    assert single.shape == batch.shape == (200, 64)
    np.testing.assert_allclose(single.numpy(), batch.numpy(), rtol=0, atol=1e-15)


def test_larger_graph_matches_power_iteration():
    gen = np.random.default_rng(4)
    n, e = 3000, 20_000
    rows, cols = gen.integers(0, n, e), gen.integers(0, n, e)
    w = np.zeros((n, n))
    w[rows, cols] = gen.random(e)
    w = w + w.T
    p = torch.tensor(personalizations(4, n, 8, "spread"))
    ref = personalized_pagerank(csr(w), p, damping=0.5, tol=1e-15, max_iter=1000)
    np.testing.assert_allclose(
        PPRSolver(csr(w), 0.5).solve(p).numpy(), ref.numpy(), rtol=0, atol=1e-14
    )


def test_dtypes():
    w = adversarial(5, 25, directed=False, loops=True)
    p = personalizations(5, 25, 3, "spread")
    exact = PPRSolver(csr(w), 0.85).solve(torch.tensor(p))
    solver32 = PPRSolver(csr(w, torch.float32), 0.85)
    assert solver32.dtype == torch.float32
    out = solver32.solve(torch.tensor(p, dtype=torch.float32))
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.double().numpy(), exact.numpy(), rtol=0, atol=1e-6)
    assert solver32.solve(torch.tensor(p)).dtype == torch.float64
    counts = solver32.solve(torch.tensor(p > 0.5, dtype=torch.int64))
    assert counts.dtype == torch.float32


def test_docstring_example():
    w = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse_csr()
    out = PPRSolver(w, damping=0.5).solve(torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(out, torch.tensor([2.0 / 3.0, 1.0 / 3.0]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_personalization():
    w = adversarial(6, 40, directed=True, loops=True)
    p = torch.tensor(personalizations(6, 40, 5, "spread"))
    solver = PPRSolver(csr(w).cuda(), 0.85)
    out = solver.solve(p.cuda())
    assert out.device.type == "cuda"
    np.testing.assert_allclose(out.cpu().numpy(), solver.solve(p).numpy(), rtol=0, atol=0)


def test_bad_input():
    w = csr(np.array([[0.0, 1.0], [1.0, 0.0]]))
    bad_solvers = {
        "weights must be a torch.sparse_csr": (w.to_dense(), 0.5),
        "weights must have shape": (torch.zeros(2, 3).to_sparse_csr(), 0.5),
        "weights must be non-negative": (csr(np.array([[0.0, -1.0], [1.0, 0.0]])), 0.5),
        "weights hold non-finite": (csr(np.array([[0.0, np.nan], [1.0, 0.0]])), 0.5),
        "damping must lie in [0, 1)": (w, 1.0),
    }
    for message, (weights, damping) in bad_solvers.items():
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
            PPRSolver(weights, damping)
    for damping in (-0.1, float("nan"), torch.tensor([0.5])):
        with pytest.raises(ValueError, match="damping"):
            PPRSolver(w, damping)
    solver = PPRSolver(w, torch.tensor(0.5))
    bad_vectors = {
        "personalization must have shape": torch.ones(3),
        "personalization must be non-negative": torch.tensor([1.0, -1.0]),
        "personalization holds non-finite": torch.tensor([1.0, np.inf]),
        "personalization has no positive entry": torch.zeros(2, 2),
        "personalization requires grad": torch.ones(2, requires_grad=True),
    }
    for message, p in bad_vectors.items():
        with pytest.raises(ValueError, match=message) as info:
            solver.solve(p)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="personalization must have shape"):
        solver.solve(torch.ones(2, 2, 2))
