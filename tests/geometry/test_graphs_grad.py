"""Gradients of k-NN graph lengths and single-source shortest paths (fixed topology)."""

from __future__ import annotations

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.graphs import knn_graph, single_source_shortest_paths


def random_graph(seed: int, b: int = 3, m: int = 7, density: float = 0.5):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.rand(b, m, m, generator=gen, dtype=torch.float64) + 0.05
    lengths = (lengths + lengths.transpose(1, 2)) / 2
    adjacency = torch.rand(b, m, m, generator=gen) < density
    adjacency = (adjacency | adjacency.transpose(1, 2)) & ~torch.eye(m, dtype=torch.bool)
    adjacency[:, m - 1, :] = adjacency[:, :, m - 1] = False  # an isolated node
    return lengths, adjacency


def finite(d: torch.Tensor) -> torch.Tensor:
    return d.masked_fill(~torch.isfinite(d), 0.0)


def test_shortest_paths_gradcheck():
    lengths, adjacency = random_graph(0)
    adjacency[0, :, :3] = adjacency[0, :3, :] = False  # several components
    source = torch.tensor([0, 1, 2])
    lengths.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: finite(single_source_shortest_paths(x, adjacency, source)), (lengths,)
    )


def test_gradient_is_the_path_indicator():
    # path graph 0 - 1 - 2 plus a long shortcut 0 - 2
    lengths = torch.tensor(
        [[[0.0, 1.0, 5.0], [1.0, 0.0, 1.0], [5.0, 1.0, 0.0]]], requires_grad=True
    )
    adjacency = lengths.detach() > 0
    dist = single_source_shortest_paths(lengths, adjacency, torch.tensor([0]))
    dist[0, 2].backward()
    expected = torch.zeros(1, 3, 3)
    expected[0, 0, 1] = expected[0, 1, 2] = 1.0
    assert torch.equal(lengths.grad, expected)


def test_zero_length_cycles_and_ties_give_one_path():
    lengths = torch.zeros(1, 4, 4, dtype=torch.float64, requires_grad=True)
    adjacency = ~torch.eye(4, dtype=torch.bool).unsqueeze(0)
    dist = single_source_shortest_paths(lengths, adjacency, torch.tensor([0]))
    dist.sum().backward()
    assert torch.equal(dist.detach(), torch.zeros(1, 4, dtype=torch.float64))
    # every node reached straight from the source (fewest edges), nothing else
    assert lengths.grad[0, 0, 1:].tolist() == [1.0, 1.0, 1.0]
    assert lengths.grad.sum() == 3


@settings(max_examples=15, deadline=None)
@given(m=st.integers(2, 8), seed=st.integers(0, 10_000), density=st.floats(0.0, 1.0))
def test_hypothesis_gradient_against_networkx_path(m, seed, density):
    lengths, adjacency = random_graph(seed, b=1, m=m, density=density)
    lengths.requires_grad_()
    dist = single_source_shortest_paths(lengths, adjacency, torch.tensor([0]))
    graph = nx.Graph()
    graph.add_nodes_from(range(m))
    for i, j in adjacency[0].nonzero().tolist():
        graph.add_edge(i, j, weight=float(lengths[0, i, j]))
    reference = nx.single_source_dijkstra_path_length(graph, 0)
    for target in range(m):
        if target not in reference:
            assert dist[0, target] == torch.inf
            continue
        (grad,) = torch.autograd.grad(dist[0, target], lengths, retain_graph=True)
        # the gradient is a path from 0 to target whose length is the distance
        assert float((grad * lengths).sum()) == pytest.approx(reference[target], abs=1e-12)
        assert float(dist[0, target]) == pytest.approx(reference[target], abs=1e-12)


def test_knn_lengths_gradcheck_and_values():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 6:] = False
    source = torch.tensor([0, 1])

    def f(x):
        lengths, adjacency = knn_graph(x, 3, mask=mask)
        return finite(single_source_shortest_paths(lengths, adjacency, source))

    assert torch.autograd.gradcheck(f, (x,))
    with torch.no_grad():
        plain_lengths, plain_adjacency = knn_graph(x, 3, mask=mask)
    lengths, adjacency = knn_graph(x, 3, mask=mask)
    assert torch.equal(adjacency, plain_adjacency)
    assert torch.equal(lengths.detach(), plain_lengths)


def test_knn_padding_rows_get_no_nan_gradient():
    x = torch.randn(1, 6, 4, requires_grad=True)
    mask = torch.tensor([[True, True, True, True, False, False]])
    with torch.no_grad():
        x[0, 4:] = 0.0  # zero padding rows: their norm is 0
    lengths, adjacency = knn_graph(x, 2, mask=mask)
    finite(single_source_shortest_paths(lengths, adjacency, torch.tensor([0]))).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert x.grad[0, 4:].abs().max() == 0
