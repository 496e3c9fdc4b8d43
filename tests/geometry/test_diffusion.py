"""Personalized PageRank against networkx.pagerank and torch-geometric APPNP."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.nn import APPNP

from georag.geometry.diffusion import (
    PowerIterationFailedConvergence,
    edge_index_to_csr,
    personalized_pagerank,
)

DTYPES = [torch.float32, torch.float64]
# float64 reproduces networkx's iterates to rounding; float32 may stop one step apart.
ATOL = {torch.float32: 1e-6, torch.float64: 1e-12}


def nx_pagerank(weights: np.ndarray, personalization: np.ndarray, **kw) -> np.ndarray:
    """networkx.pagerank on the directed graph whose edge i -> j has weight W[i, j] > 0."""
    n = weights.shape[0]
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for i, j in zip(*np.nonzero(weights), strict=True):
        graph.add_edge(int(i), int(j), weight=float(weights[i, j]))
    pers = {i: float(personalization[i]) for i in range(n)}
    ranks = nx.pagerank(graph, personalization=pers, weight="weight", **kw)
    return np.array([ranks[i] for i in range(n)])


def random_graphs(rng, b, n, *, density=0.3, symmetric=True, dangling=2, zero_rows=2):
    """Random weighted graphs with isolated (dangling) nodes and sinks (zero rows only)."""
    w = rng.random((b, n, n)) * (rng.random((b, n, n)) < density)
    if symmetric:
        w = np.maximum(w, w.transpose(0, 2, 1))
    w[:, np.arange(n), np.arange(n)] = 0.0
    w[:, :dangling, :] = 0.0
    w[:, :, :dangling] = 0.0
    w[:, dangling : dangling + zero_rows, :] = 0.0  # sinks: in-edges but no out-edges
    p = rng.random((b, n)) * (rng.random((b, n)) < 0.7)
    p[:, -1] += 0.1  # at least one positive entry
    return w, p


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("damping", [0.85, 0.5])
def test_dense_matches_networkx(dtype, symmetric, damping):
    rng = np.random.default_rng(0)
    w, p = random_graphs(rng, 12, 20, symmetric=symmetric)
    out = personalized_pagerank(
        torch.tensor(w, dtype=dtype), torch.tensor(p, dtype=dtype), damping=damping
    )
    assert out.dtype == dtype and out.shape == (12, 20)
    for b in range(12):
        ref = nx_pagerank(w[b], p[b], alpha=damping)
        np.testing.assert_allclose(out[b].double().numpy(), ref, rtol=0, atol=ATOL[dtype])


def test_dense_complete_graph_like_the_reranker():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 50, 16))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    w = np.clip(x @ x.transpose(0, 2, 1), 0, None)
    w[:, np.arange(50), np.arange(50)] = 0.0
    p = rng.random((8, 50))
    out = personalized_pagerank(torch.tensor(w), torch.tensor(p))
    for b in range(8):
        np.testing.assert_allclose(out[b].numpy(), nx_pagerank(w[b], p[b]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_equals_networkx_on_induced_subgraph(dtype):
    rng = np.random.default_rng(2)
    w, p = random_graphs(rng, 6, 15, dangling=1, zero_rows=1)
    mask = rng.random((6, 15)) < 0.7
    mask[:, -1] = True
    # Garbage in the masked rows and columns must not leak into the result.
    w_dirty = np.where(mask[:, :, None] & mask[:, None, :], w, 5.0)
    out = personalized_pagerank(
        torch.tensor(w_dirty, dtype=dtype),
        torch.tensor(p, dtype=dtype),
        mask=torch.tensor(mask),
    )
    for b in range(6):
        idx = np.nonzero(mask[b])[0]
        ref = nx_pagerank(w[b][np.ix_(idx, idx)], p[b][idx])
        np.testing.assert_allclose(out[b, idx].double().numpy(), ref, rtol=0, atol=ATOL[dtype])
        assert (out[b, ~torch.tensor(mask[b])] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_equals_dense(dtype):
    rng = np.random.default_rng(3)
    w, p = random_graphs(rng, 1, 40, symmetric=False)
    w = torch.tensor(w[0], dtype=dtype)
    p = torch.tensor(rng.random((5, 40)), dtype=dtype)
    p[1, :30] = 0.0
    dense = personalized_pagerank(w.expand(5, 40, 40), p)
    sparse = personalized_pagerank(w.to_sparse_csr(), p.T.contiguous())
    assert sparse.shape == (40, 5) and sparse.dtype == dtype
    torch.testing.assert_close(
        sparse.T, dense, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-14
    )
    # the sparse product's kernel may vary with the block's width (SIMD lanes): rounding apart
    blocked = personalized_pagerank(w.to_sparse_csr(), p.T.contiguous(), block_size=2)
    torch.testing.assert_close(blocked, sparse, rtol=8 * torch.finfo(dtype).eps, atol=0)
    single = personalized_pagerank(w.to_sparse_csr(), p[3])
    assert single.shape == (40,)
    torch.testing.assert_close(
        single, sparse[:, 3], rtol=0, atol=1e-14 if dtype == torch.float64 else 1e-6
    )


def test_sparse_matches_networkx_with_dangling():
    rng = np.random.default_rng(4)
    w, _ = random_graphs(rng, 1, 60, density=0.1, dangling=3, zero_rows=3)
    p = rng.random((60, 4))
    out = personalized_pagerank(torch.tensor(w[0]).to_sparse_csr(), torch.tensor(p))
    for q in range(4):
        np.testing.assert_allclose(out[:, q].numpy(), nx_pagerank(w[0], p[:, q]), atol=1e-12)


def test_sparse_matches_appnp():
    """APPNP propagation x <- (1 - a) T^T x + a p is PPR when there are no dangling nodes."""
    n, e = 300, 2000
    g = torch.Generator().manual_seed(5)
    edge_index = torch.randint(0, n, (2, e), generator=g)
    ring = torch.stack([torch.arange(n), torch.roll(torch.arange(n), 1)])
    edge_index = torch.cat([edge_index, ring], dim=1)
    weight = torch.rand(edge_index.shape[1], generator=g, dtype=torch.float64)
    csr = edge_index_to_csr(edge_index, n, weight)
    p = torch.rand(n, 8, generator=g, dtype=torch.float64)
    ours = personalized_pagerank(csr, p, tol=1e-15, max_iter=1000)

    coo = csr.to_sparse_coo().coalesce()
    rows, cols = coo.indices()
    strength = coo.values().new_zeros(n).index_add_(0, rows, coo.values())
    transition = coo.values() / strength[rows]
    appnp = APPNP(K=400, alpha=0.15, cached=False, add_self_loops=False, normalize=False)
    theirs = appnp(p / p.sum(0), coo.indices(), transition)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
    density=st.floats(0.0, 1.0),
    damping=st.floats(0.0, 0.95),
)
def test_hypothesis_against_networkx(n, seed, density, damping):
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < density)
    p = rng.random(n) * (rng.random(n) < 0.5)
    p[rng.integers(n)] += 1e-3
    try:
        ref = nx_pagerank(w, p, alpha=damping)
    except nx.PowerIterationFailedConvergence:
        with pytest.raises(PowerIterationFailedConvergence):
            personalized_pagerank(torch.tensor(w)[None], torch.tensor(p)[None], damping=damping)
        with pytest.raises(PowerIterationFailedConvergence):
            personalized_pagerank(torch.tensor(w).to_sparse_csr(), torch.tensor(p), damping=damping)
        return
    dense = personalized_pagerank(torch.tensor(w)[None], torch.tensor(p)[None], damping=damping)
    sparse = personalized_pagerank(
        torch.tensor(w).to_sparse_csr(), torch.tensor(p), damping=damping
    )
    np.testing.assert_allclose(dense[0].numpy(), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sparse.numpy(), ref, rtol=0, atol=1e-12)


def test_deterministic():
    rng = np.random.default_rng(6)
    w, p = random_graphs(rng, 16, 30)
    w, p = torch.tensor(w, dtype=torch.float32), torch.tensor(p, dtype=torch.float32)
    assert torch.equal(personalized_pagerank(w, p), personalized_pagerank(w, p))
    csr = w[0].to_sparse_csr()
    assert torch.equal(personalized_pagerank(csr, p.T), personalized_pagerank(csr, p.T))


def test_edge_index_to_csr():
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]])
    weight = torch.tensor([1.0, 2.0, 3.0, 4.0])
    undirected = edge_index_to_csr(edge_index, 4, weight).to_dense()
    expected = torch.zeros(4, 4)
    expected[0, 1] = expected[1, 0] = 1.0
    expected[1, 2] = expected[2, 1] = 2.0
    expected[2, 0] = expected[0, 2] = 7.0  # duplicates are summed
    assert torch.equal(undirected, expected)
    directed = edge_index_to_csr(edge_index, 4, weight, undirected=False, reduce="max").to_dense()
    assert directed[2, 0] == 4.0 and directed[0, 2] == 0.0
    assert edge_index_to_csr(edge_index, 4).dtype == torch.float32
    with pytest.raises(ValueError, match="edge_index"):
        edge_index_to_csr(edge_index, 2)
    with pytest.raises(ValueError, match="non-negative"):
        edge_index_to_csr(edge_index, 4, -weight)


def test_bad_input():
    w = torch.rand(2, 4, 4)
    p = torch.rand(2, 4)
    with pytest.raises(ValueError, match="non-negative"):
        personalized_pagerank(-w, p)
    with pytest.raises(ValueError, match="non-negative"):
        personalized_pagerank(-w[0].to_sparse_csr(), p.T)
    with pytest.raises(ValueError, match="non-finite"):
        personalized_pagerank(w.masked_fill(w > 0.5, float("nan")), p)
    zero = p.clone()
    zero[1] = 0.0
    with pytest.raises(ValueError, match=r"no positive entry in vector\(s\) \[1\]"):
        personalized_pagerank(w, zero)
    with pytest.raises(ValueError, match="no positive entry"):
        personalized_pagerank(w[0].to_sparse_csr(), zero.T)
    with pytest.raises(ValueError, match="personalization must be non-negative"):
        personalized_pagerank(w, -p)
    with pytest.raises(ValueError, match=r"personalization must have shape \(2, 4\)"):
        personalized_pagerank(w, p.T)
    with pytest.raises(ValueError, match=r"weights must have shape \(B, N, N\)"):
        personalized_pagerank(w[0], p)
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(w, p, damping=1.5)
    with pytest.raises(ValueError, match="mask"):
        personalized_pagerank(w, p, mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="block_size"):
        personalized_pagerank(w, p, block_size=4)
    with pytest.raises(PowerIterationFailedConvergence, match="2 of 2 graphs"):
        personalized_pagerank(w, p, max_iter=2)
