"""Sparse (corpus-scale) curvature against the dense exact curvature and POT/networkx."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.ricci import ollivier_ricci
from georag.geometry.sparse_ricci import sparse_ollivier_ricci


def dense_to_edges(lengths: np.ndarray, adjacency: np.ndarray):
    rows, cols = np.nonzero(np.triu(adjacency, 1))
    flip = np.random.default_rng(0).random(len(rows)) < 0.5  # either orientation
    edge_index = torch.tensor(np.stack([np.where(flip, cols, rows), np.where(flip, rows, cols)]))
    return edge_index, torch.tensor(lengths[rows, cols])


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(2, 16),
    density=st.floats(0.05, 0.9),
    scale=st.sampled_from([1e-12, 1e-3, 1.0, 1e3]),
    p=st.sampled_from([0.0, 1.0, 2.0]),
    alpha=st.sampled_from([0.0, 0.5]),
)
def test_sparse_equals_dense_exact(seed, n, density, scale, p, alpha):
    gen = np.random.default_rng(seed)
    upper = np.triu(gen.random((n, n)) < density, 1)
    adjacency = upper | upper.T
    w = np.triu(scale * gen.uniform(0.0, 2.0, (n, n)), 1)  # zeros possible, many pieces
    lengths = np.where(adjacency, w + w.T, 0.0)
    dense = ollivier_ricci(
        torch.tensor(lengths)[None],
        torch.tensor(adjacency)[None],
        method="exact",
        alpha=alpha,
        exp_power=p,
    )[0].numpy()
    edge_index, edge_lengths = dense_to_edges(lengths, adjacency)
    got = sparse_ollivier_ricci(edge_index, edge_lengths, n + 2, alpha=alpha, exp_power=p, chunk=3)
    assert torch.isfinite(got).all()
    np.testing.assert_allclose(got.numpy(), dense[edge_index[0], edge_index[1]], atol=1e-9)


def test_sparse_on_a_bigger_graph_matches_dense_and_keeps_dtype():
    gen = np.random.default_rng(1)
    n = 120
    upper = np.triu(gen.random((n, n)) < 0.04, 1)
    adjacency = upper | upper.T
    w = np.triu(gen.uniform(0.1, 2.0, (n, n)), 1)
    lengths = np.where(adjacency, w + w.T, 0.0)
    dense = ollivier_ricci(
        torch.tensor(lengths)[None], torch.tensor(adjacency)[None], method="exact"
    )[0].numpy()
    edge_index, edge_lengths = dense_to_edges(lengths, adjacency)
    got = sparse_ollivier_ricci(edge_index, edge_lengths.float(), n, chunk=17)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.double().numpy(), dense[edge_index[0], edge_index[1]], atol=1e-5)


@pytest.mark.parametrize(
    "edge_index, lengths, match",
    [
        (torch.tensor([[0, 1], [1, 0]]), torch.ones(2), "once"),
        (torch.tensor([[0], [0]]), torch.ones(1), "self loops"),
        (torch.tensor([[0], [5]]), torch.ones(1), "node ids"),
        (torch.tensor([[0], [1]]), torch.tensor([-1.0]), "non-negative"),
        (torch.tensor([[0], [1]]), torch.ones(2), "shape"),
        (torch.tensor([[0.0], [1.0]]), torch.ones(1), "long"),
    ],
)
def test_bad_edges_are_rejected(edge_index, lengths, match):
    with pytest.raises(ValueError, match=match):
        sparse_ollivier_ricci(edge_index, lengths, 3)
