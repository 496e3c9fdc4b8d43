"""k-NN graphs and single-source shortest paths against numpy and scipy references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra

from georag.geometry.graphs import knn_graph, single_source_shortest_paths

DTYPES = [torch.float32, torch.float64]


def knn_reference(x: np.ndarray, k: int, mutual: bool) -> np.ndarray:
    """Per-node argsort of cosine distances; union or intersection of directed k-NN."""
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    dist = 1.0 - unit @ unit.T
    np.fill_diagonal(dist, np.inf)
    m = x.shape[0]
    directed = np.zeros((m, m), dtype=bool)
    for i in range(m):
        directed[i, np.argsort(dist[i], kind="stable")[:k]] = True
    return directed & directed.T if mutual else directed | directed.T


def scipy_sssp(lengths: np.ndarray, adjacency: np.ndarray, source: int) -> np.ndarray:
    rows, cols = np.nonzero(adjacency)
    graph = sp.csr_matrix((lengths[rows, cols], (rows, cols)), shape=lengths.shape)
    return dijkstra(graph, directed=True, indices=source)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mutual", [False, True])
def test_knn_matches_reference(dtype, mutual):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 25, 8))
    lengths, adjacency = knn_graph(torch.tensor(x, dtype=dtype), 4, mutual=mutual)
    assert lengths.dtype == dtype and adjacency.dtype == torch.bool
    for b in range(6):
        assert np.array_equal(adjacency[b].numpy(), knn_reference(x[b], 4, mutual))
        unit = x[b] / np.linalg.norm(x[b], axis=1, keepdims=True)
        ref = np.clip(1.0 - unit @ unit.T, 0, None)
        np.testing.assert_allclose(lengths[b].double().numpy(), ref, atol=1e-6)
    assert torch.equal(adjacency, adjacency.transpose(1, 2))
    assert not adjacency.diagonal(dim1=1, dim2=2).any()
    if not mutual:
        assert (adjacency.sum(2) >= 4).all()


def test_knn_mask():
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.normal(size=(3, 10, 5)))
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[0, 7:] = False  # 7 real nodes, k = 3
    mask[1, 3:] = False  # 3 real nodes <= k: complete graph on them
    x[0, 7:] = float("nan")  # padding content is ignored
    x[1, 3:] = 0.0
    _, adjacency = knn_graph(x, 3, mask=mask)
    assert not adjacency[~mask].any() and not adjacency.transpose(1, 2)[~mask].any()
    ref = knn_reference(x[0, :7].numpy(), 3, mutual=False)
    assert np.array_equal(adjacency[0, :7, :7].numpy(), ref)
    assert torch.equal(adjacency[1, :3, :3], ~torch.eye(3, dtype=torch.bool))
    ref = knn_reference(x[2].numpy(), 3, mutual=False)
    assert np.array_equal(adjacency[2].numpy(), ref)


def test_knn_bad_input():
    x = torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"k must satisfy 1 <= k < M=5, got k=5"):
        knn_graph(x, 5)
    with pytest.raises(ValueError, match="k must satisfy"):
        knn_graph(x, 0)
    with pytest.raises(ValueError, match="M >= 2"):
        knn_graph(x[:, :1], 1)
    with pytest.raises(ValueError, match=r"shape \(B, M, D\)"):
        knn_graph(x[0], 2)
    zero = x.clone()
    zero[1, 2] = 0.0
    with pytest.raises(ValueError, match="zero vectors"):
        knn_graph(zero, 2)
    nan = x.clone()
    nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        knn_graph(nan, 2)
    with pytest.raises(ValueError, match="mask"):
        knn_graph(x, 2, mask=torch.ones(2, 5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sssp_matches_dijkstra_on_knn_graphs(dtype):
    rng = np.random.default_rng(2)
    x = torch.tensor(rng.normal(size=(20, 40, 6)), dtype=dtype)
    lengths, adjacency = knn_graph(x, 3, mutual=True)  # mutual k-NN leaves some nodes unreachable
    source = torch.tensor(rng.integers(0, 40, 20))
    dist = single_source_shortest_paths(lengths, adjacency, source)
    assert dist.dtype == dtype and dist.shape == (20, 40)
    unreachable = 0
    for b in range(20):
        ref = scipy_sssp(lengths[b].double().numpy(), adjacency[b].numpy(), int(source[b]))
        got = dist[b].double().numpy()
        assert np.array_equal(np.isinf(ref), np.isinf(got))
        finite = np.isfinite(ref)
        atol = 0.0 if dtype == torch.float64 else 1e-5
        np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-12, atol=atol)
        unreachable += int((~finite).sum())
    assert unreachable > 0


@settings(max_examples=60, deadline=None)
@given(
    b=st.integers(1, 4),
    m=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
    density=st.floats(0.0, 1.0),
)
def test_hypothesis_sssp_directed(b, m, seed, density):
    rng = np.random.default_rng(seed)
    lengths = rng.random((b, m, m)) * rng.choice([1.0, 10.0], size=(b, m, m))
    adjacency = rng.random((b, m, m)) < density
    source = rng.integers(0, m, b)
    dist = single_source_shortest_paths(
        torch.tensor(lengths), torch.tensor(adjacency), torch.tensor(source)
    )
    for i in range(b):
        ref = scipy_sssp(lengths[i], adjacency[i], int(source[i]))
        np.testing.assert_allclose(dist[i].numpy(), ref, rtol=1e-12, atol=0)


def test_sssp_zero_lengths_and_source():
    lengths = torch.zeros(1, 3, 3)
    adjacency = torch.tensor([[[False, True, False], [True, False, False], [False, False, False]]])
    dist = single_source_shortest_paths(lengths, adjacency, torch.tensor([1]))
    assert dist.tolist() == [[0.0, 0.0, float("inf")]]


def test_sssp_bad_input():
    lengths = torch.rand(2, 4, 4)
    adjacency = torch.ones(2, 4, 4, dtype=torch.bool)
    source = torch.tensor([0, 3])
    with pytest.raises(ValueError, match="non-negative"):
        single_source_shortest_paths(-lengths, adjacency, source)
    with pytest.raises(ValueError, match="outside"):
        single_source_shortest_paths(lengths, adjacency, torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="source must be a long tensor"):
        single_source_shortest_paths(lengths, adjacency, source.float())
    with pytest.raises(ValueError, match="adjacency"):
        single_source_shortest_paths(lengths, adjacency.float(), source)
    with pytest.raises(ValueError, match="lengths"):
        single_source_shortest_paths(lengths[0], adjacency, source)
    # Negative lengths off the edges are never read.
    masked = lengths.masked_fill(~torch.eye(4, dtype=torch.bool), -1.0)
    dist = single_source_shortest_paths(
        masked, torch.eye(4, dtype=torch.bool).expand(2, 4, 4), source
    )
    assert dist[0, 0] == 0 and torch.isinf(dist[0, 1:]).all()


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(2, 12),
    k=st.integers(1, 11),
    mutual=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_knn_with_mask(m, k, mutual, seed):
    rng = np.random.default_rng(seed)
    k = min(k, m - 1)
    x = rng.normal(size=(2, m, 4))
    mask = rng.random((2, m)) < 0.7
    _, adjacency = knn_graph(torch.tensor(x), k, mutual=mutual, mask=torch.tensor(mask))
    for b in range(2):
        real = np.nonzero(mask[b])[0]
        expected = np.zeros((m, m), dtype=bool)
        if len(real) > 1:
            sub = knn_reference(x[b, real], min(k, len(real) - 1), mutual)
            expected[np.ix_(real, real)] = sub
        assert np.array_equal(adjacency[b].numpy(), expected)
