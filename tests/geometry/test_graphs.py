"""cosine_dissimilarity, threshold_graph and shortest_paths against numpy / scipy / networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.eval.synthetic import random_graphs
from georag.geometry.graphs import cosine_dissimilarity, shortest_paths, threshold_graph

DTYPES = (torch.float32, torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cosine_dissimilarity_matches_numpy(dtype):
    x = torch.randn(4, 9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    r = cosine_dissimilarity(x.to(dtype))
    unit = x.numpy() / np.linalg.norm(x.numpy(), axis=2, keepdims=True)
    expected = 1.0 - unit @ unit.transpose(0, 2, 1)
    np.fill_diagonal(expected[0], 0.0)
    atol = 1e-6 if dtype == torch.float32 else 1e-12
    assert r.dtype == dtype
    assert torch.equal(r, r.transpose(1, 2))
    assert (r.diagonal(dim1=1, dim2=2) == 0).all()
    assert np.allclose(r.double().numpy()[0], expected[0], atol=atol)
    assert np.allclose(
        r.double().numpy()[1:], np.clip(expected[1:], 0, 2) * (1 - np.eye(9)), atol=atol
    )


def test_cosine_dissimilarity_identical_vectors_are_exactly_zero():
    x = torch.tensor([1.0, -2.0, 0.5]).repeat(2, 7, 1)
    assert torch.equal(cosine_dissimilarity(x), torch.zeros(2, 7, 7))
    scaled = x * torch.arange(1, 8).view(1, 7, 1)
    assert cosine_dissimilarity(scaled).abs().max() < 1e-6


def test_cosine_dissimilarity_masks_padding_and_ignores_its_values():
    x = torch.randn(2, 5, 3)
    x[0, 3:] = torch.nan
    x[1, 4] = 0.0
    mask = torch.tensor([[True, True, True, False, False], [True] * 4 + [False]])
    r = cosine_dissimilarity(x, mask=mask)
    assert torch.isinf(r[0, 3, :3]).all() and torch.isinf(r[0, :3, 4]).all()
    assert (r.diagonal(dim1=1, dim2=2) == 0).all()
    assert torch.isfinite(r[1, :4, :4]).all()


@pytest.mark.parametrize("bad", ["nan", "zero", "shape"])
def test_cosine_dissimilarity_rejects_bad_input(bad):
    x = torch.randn(2, 4, 3)
    if bad == "nan":
        x[1, 2, 0] = torch.nan
        match = "non-finite"
    elif bad == "zero":
        x[0, 1] = 0.0
        match = "zero vectors"
    else:
        x = x[0]
        match = "shape"
    with pytest.raises(ValueError, match=match):
        cosine_dissimilarity(x)


def _reference_threshold(r: np.ndarray, quantile: float, force: int | None) -> np.ndarray:
    n = r.shape[0]
    off = ~np.eye(n, dtype=bool)
    tau = np.percentile(r[off], 100 * quantile)
    adjacency = (r <= tau) & off
    if force is not None:
        adjacency[force, :] = adjacency[:, force] = True
        adjacency[force, force] = False
    return adjacency


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 12),
    quantile=st.floats(0.0, 1.0),
    force=st.sampled_from([None, 0, 1]),
    seed=st.integers(0, 2**16),
    double=st.booleans(),
)
def test_threshold_graph_matches_numpy_percentile(n, quantile, force, seed, double):
    dtype = torch.float64 if double else torch.float32
    gen = torch.Generator().manual_seed(seed)
    r = cosine_dissimilarity(torch.randn(3, n, 5, generator=gen, dtype=dtype))
    adjacency = threshold_graph(r, quantile=quantile, force_node=force)
    for g in range(3):
        expected = _reference_threshold(r[g].double().numpy(), quantile, force)
        # exact ties at tau may round differently between numpy and torch; allow none else
        assert np.array_equal(adjacency[g].numpy(), expected)
    assert torch.equal(adjacency, adjacency.transpose(1, 2))


def test_threshold_graph_median_keeps_half_plus_forced_star():
    r = cosine_dissimilarity(torch.randn(8, 21, 32, generator=torch.Generator().manual_seed(3)))
    adjacency = threshold_graph(r, quantile=0.5, force_node=0)
    pairs = 21 * 20 // 2
    below = threshold_graph(r, quantile=0.5, force_node=None).sum((1, 2)) // 2
    assert (below == pairs // 2).all()  # continuous values: exactly half the pairs
    assert adjacency[:, 0, 1:].all()
    assert (adjacency.sum((1, 2)) // 2 >= below).all()


def test_threshold_graph_identical_embeddings_give_complete_graph():
    r = cosine_dissimilarity(torch.ones(2, 6, 4))
    adjacency = threshold_graph(r)
    assert torch.equal(adjacency, ~torch.eye(6, dtype=torch.bool).expand(2, 6, 6))


def test_threshold_graph_padded_nodes_are_isolated():
    x = torch.randn(2, 7, 4)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[0, 4:] = False
    adjacency = threshold_graph(cosine_dissimilarity(x, mask=mask), mask=mask)
    assert not adjacency[0, 4:].any() and not adjacency[0, :, 4:].any()
    real = threshold_graph(cosine_dissimilarity(x[:1, :4]))
    assert torch.equal(adjacency[0, :4, :4], real[0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(quantile=1.5), "quantile"),
        (dict(force_node=9), "force_node"),
        (dict(mask=torch.ones(2, 3, dtype=torch.bool)), "mask"),
    ],
)
def test_threshold_graph_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        threshold_graph(cosine_dissimilarity(torch.randn(2, 5, 3)), **kwargs)


def test_threshold_graph_rejects_asymmetric_and_tiny():
    r = torch.rand(1, 4, 4)
    with pytest.raises(ValueError, match="symmetric"):
        threshold_graph(r)
    with pytest.raises(ValueError, match="at least 2 nodes"):
        threshold_graph(torch.zeros(1, 1, 1))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 15), p=st.floats(0.0, 1.0), seed=st.integers(0, 2**16), double=st.booleans()
)
def test_shortest_paths_matches_networkx(n, p, seed, double):
    gen = np.random.default_rng(seed)
    graphs = random_graphs(gen, 3, n, density=p, low=0.1, high=3.0)
    dtype = torch.float64 if double else torch.float32
    lengths = torch.tensor(graphs[0], dtype=dtype)
    adjacency = torch.tensor(graphs[1])
    dist = shortest_paths(lengths, adjacency)
    assert dist.dtype == dtype
    for g, (w, a) in enumerate(zip(*graphs, strict=True)):
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_weighted_edges_from((i, j, w[i, j]) for i, j in zip(*np.nonzero(np.triu(a))))
        expected = np.full((n, n), np.inf)
        for src, row in nx.all_pairs_dijkstra_path_length(graph):
            for dst, value in row.items():
                expected[src, dst] = value
        np.testing.assert_allclose(dist[g].double().numpy(), expected, rtol=1e-5)


def test_shortest_paths_directed_and_unreachable():
    lengths = torch.tensor([[[0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]])
    dist = shortest_paths(lengths, lengths > 0)
    assert dist[0, 0, 2] == 5.0 and torch.isinf(dist[0, 2, 0]) and torch.isinf(dist[0, 1, 0])


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_shortest_paths_rejects_bad_lengths(value):
    lengths = torch.ones(1, 3, 3)
    lengths[0, 0, 1] = value
    with pytest.raises(ValueError, match="finite and non-negative"):
        shortest_paths(lengths, torch.ones(1, 3, 3, dtype=torch.bool))


def test_shortest_paths_rejects_bad_adjacency():
    with pytest.raises(ValueError, match="adjacency"):
        shortest_paths(torch.ones(1, 3, 3), torch.ones(1, 3, 3))
