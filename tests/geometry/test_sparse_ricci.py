"""Sparse (corpus-scale) curvature: the exact path against the dense exact curvature, the
batched path against the exact one."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.ricci import ollivier_ricci
from georag.geometry.ricci.sparse import sparse_ollivier_ricci


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


def pieces_graph(seed: int, sizes: list[int], isolated: int, density: float, low: float):
    """Random components of the given sizes (each a path plus random chords), isolated
    nodes between them, lengths log-uniform in [10**low, 1e3]; returns (edge_index,
    lengths float64, num_nodes)."""
    gen = np.random.default_rng(seed)
    edges, offset = [], isolated
    for size in sizes:
        nodes = offset + gen.permutation(size)
        edges += list(zip(nodes[:-1], nodes[1:]))
        upper = np.argwhere(np.triu(gen.random((size, size)) < density, 2))
        edges += [(nodes[i], nodes[j]) for i, j in upper]
        offset += size + isolated
    pairs = np.unique(np.sort(np.array(edges, dtype=np.int64), axis=1), axis=0)
    flip = gen.random(len(pairs)) < 0.5
    edge_index = torch.tensor(np.where(flip[:, None], pairs[:, ::-1], pairs).T.copy())
    lengths = torch.tensor(10.0 ** gen.uniform(low, 3.0, len(pairs)))
    return edge_index, lengths, offset


def dense_exact(edge_index: torch.Tensor, lengths: torch.Tensor, n: int) -> torch.Tensor:
    """Each edge's curvature by the dense exact path (Floyd-Warshall, POT), float64."""
    adjacency = torch.zeros(1, n, n, dtype=torch.bool)
    dense_lengths = torch.zeros(1, n, n, dtype=torch.float64)
    adjacency[0, edge_index[0], edge_index[1]] = adjacency[0, edge_index[1], edge_index[0]] = True
    dense_lengths[0, edge_index[0], edge_index[1]] = lengths
    dense_lengths[0, edge_index[1], edge_index[0]] = lengths
    dense = ollivier_ricci(dense_lengths, adjacency, method="exact")[0]
    return dense[edge_index[0], edge_index[1]]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    sizes=st.lists(st.integers(2, 12), min_size=1, max_size=3),
    isolated=st.integers(0, 2),
    density=st.floats(0.0, 0.6),
    low=st.sampled_from([-12.0, -3.0, 0.0]),
    p=st.sampled_from([0.0, 1.0, 2.0]),
    alpha=st.sampled_from([0.0, 0.5, 1.0]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    distances=st.sampled_from(["scipy", "torch"]),
)
def test_batched_equals_exact_within_accuracy(
    seed, sizes, isolated, density, low, p, alpha, dtype, distances
):
    edge_index, lengths, n = pieces_graph(seed, sizes, isolated, density, low)
    lengths = lengths.to(dtype)
    options = dict(alpha=alpha, exp_power=p, chunk=5)
    exact = sparse_ollivier_ricci(edge_index, lengths, n, method="exact", **options)
    batched = sparse_ollivier_ricci(
        edge_index, lengths, n, method="batched", distances=distances, **options
    )
    assert batched.dtype == dtype and torch.isfinite(batched).all()
    # the certificate bounds the error by `accuracy`; the rest is rounding of kappa itself
    # (|kappa| reaches 1e10 when d(x, y) = 1e-7 meets neighbours at 1e3)
    rtol = 1e-6 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(batched.double(), exact.double(), rtol=rtol, atol=2e-6)


def test_batched_matches_dense_at_its_accuracy_and_auto_is_exact_on_cpu(caplog):
    edge_index, lengths, n = pieces_graph(7, [30, 20], 2, 0.2, -1.0)
    reference = dense_exact(edge_index, lengths, n)
    with caplog.at_level(logging.INFO, logger="georag.geometry.ricci.sparse"):
        auto = sparse_ollivier_ricci(edge_index, lengths, n)
        assert "batched transport" not in caplog.text
        for accuracy in (1e-3, 1e-8):
            got = sparse_ollivier_ricci(
                edge_index, lengths, n, method="batched", accuracy=accuracy, batch_elements=400
            )
            assert (got - reference).abs().max() <= accuracy
    assert "batched transport" in caplog.text
    torch.testing.assert_close(auto, reference, atol=1e-9, rtol=0)
    swept = sparse_ollivier_ricci(edge_index, lengths, n, method="exact", distances="torch")
    torch.testing.assert_close(swept, reference, atol=1e-9, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batched_matches_cpu_exact():
    edge_index, lengths, n = pieces_graph(11, [40, 25, 3], 1, 0.15, -3.0)
    for dtype in (torch.float64, torch.float32):
        exact = sparse_ollivier_ricci(edge_index, lengths.to(dtype), n, method="exact")
        got = sparse_ollivier_ricci(  # auto: batched on CUDA
            edge_index.cuda(), lengths.to("cuda", dtype), n, distances="torch"
        )
        assert got.device.type == "cuda" and got.dtype == dtype
        rtol = 1e-6 if dtype == torch.float32 else 1e-12
        np.testing.assert_allclose(got.double().cpu(), exact.double(), rtol=rtol, atol=2e-6)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"method": "sinkhorn"}, "method"),
        ({"accuracy": 0.0}, "accuracy"),
        ({"batch_elements": 0}, "batch_elements"),
        ({"chunk": 0}, "chunk"),
        ({"distances": "networkx"}, "distances"),
        ({"pairs_per_pass": 0}, "pairs_per_pass"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises(ValueError, match=match):
        sparse_ollivier_ricci(torch.tensor([[0], [1]]), torch.ones(1), 2, **options)


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


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    m=st.integers(1, 30),
    n=st.integers(1, 30),
    decades=st.sampled_from([0.0, 6.0, 12.0]),
    ties=st.booleans(),
)
def test_compiled_simplex_equals_pot(seed, m, n, decades, ties):
    """The compiled transportation simplex against POT's network simplex, on masses and
    costs over many decades and on tied (degenerate) costs and masses."""
    from georag.geometry.ricci._sparse_simplex import _transport_all
    from georag.geometry.transport import emd_many

    gen = np.random.default_rng(seed)
    problems = []
    for _ in range(4):
        a = 10.0 ** gen.uniform(-decades, 0.0, m)
        b = 10.0 ** gen.uniform(-decades, 0.0, n)
        cost = 10.0 ** gen.uniform(-decades, 3.0, (m, n))
        if ties:  # equal masses and a few distinct costs: many degenerate pivots
            a, b, cost = np.ones(m), np.ones(n), gen.integers(0, 3, (m, n)).astype(float)
        problems.append((a / a.sum(), b / b.sum(), cost))
    src = np.cumsum([0] + [m] * 4)
    dst = np.cumsum([0] + [n] * 4)
    pair = np.cumsum([0] + [m * n] * 4)
    got = _transport_all(
        src,
        dst,
        pair,
        np.concatenate([p[0] for p in problems]),
        np.concatenate([p[1] for p in problems]),
        np.concatenate([p[2].ravel() for p in problems]),
    )
    want = emd_many(iter(problems))
    # Masses over 12 decades and costs over 15: both simplex codes round their flows at the
    # scale of the largest mass, so a problem whose cost is 1e-3 of its largest entries can
    # differ in the 8th digit. The absolute bound is the curvature's (1e-9 per edge).
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    m=st.integers(1, 12),
    n=st.integers(1, 12),
    zeros=st.floats(0.0, 0.9),
    ties=st.booleans(),
)
def test_compiled_simplex_on_zero_masses_equals_pot(seed, m, n, zeros, ties):
    """Masses that are zero in many rows and columns (degenerate starts and pivots of zero
    flow), single rows and columns and tied costs: the compiled simplex, whose pricing
    visits the rows a block at a time, against ``ot.emd2``."""
    import ot

    from georag.geometry.ricci._sparse_simplex import _transport_all

    gen = np.random.default_rng(seed)
    problems = []
    for _ in range(4):
        a, b = gen.random(m) * (gen.random(m) >= zeros), gen.random(n) * (gen.random(n) >= zeros)
        a[gen.integers(m)] += 1.0  # at least one mass on each side
        b[gen.integers(n)] += 1.0
        cost = gen.integers(0, 3, (m, n)).astype(float) if ties else gen.random((m, n))
        problems.append((a / a.sum(), b / b.sum(), cost))
    got = _transport_all(
        np.arange(0, 4 * m + 1, m),
        np.arange(0, 4 * n + 1, n),
        np.arange(0, 4 * m * n + 1, m * n),
        np.concatenate([p[0] for p in problems]),
        np.concatenate([p[1] for p in problems]),
        np.concatenate([p[2].ravel() for p in problems]),
    )
    want = [ot.emd2(a, b, cost) for a, b, cost in problems]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    sizes=st.lists(st.integers(2, 15), min_size=1, max_size=3),
    isolated=st.integers(0, 3),
    density=st.floats(0.0, 0.6),
    low=st.sampled_from([-12.0, -3.0, 0.0]),
)
def test_compiled_path_equals_dense_pot(seed, sizes, isolated, density, low):
    """Bounded compiled searches (over several passes) and the compiled simplex give the
    curvature of the dense exact path (Floyd-Warshall, POT's network simplex) per edge
    within 1e-9, and scipy's whole-graph Dijkstra gives the same distances (float64)."""
    edge_index, lengths, n = pieces_graph(seed, sizes, isolated, density, low)
    reference = dense_exact(edge_index, lengths, n)
    compiled = sparse_ollivier_ricci(edge_index, lengths, n, pairs_per_pass=7)
    scipy = sparse_ollivier_ricci(edge_index, lengths, n, distances="scipy", chunk=4, method="pot")
    np.testing.assert_allclose(compiled, reference, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(scipy, compiled, rtol=1e-9, atol=1e-9)


def test_a_subset_of_edges_gives_the_same_bits():
    edge_index, lengths, n = pieces_graph(3, [25, 12, 2], 2, 0.3, -3.0)
    whole = sparse_ollivier_ricci(edge_index, lengths, n)
    subset = torch.randperm(edge_index.shape[1], generator=torch.Generator().manual_seed(0))[:20]
    part = sparse_ollivier_ricci(edge_index, lengths, n, subset=subset, pairs_per_pass=50)
    assert torch.equal(part, whole[subset])
    with pytest.raises(ValueError, match="subset"):
        sparse_ollivier_ricci(edge_index, lengths, n, subset=torch.tensor([10**6]))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), isolated=st.integers(0, 4), ties=st.booleans())
def test_searches_that_stop_at_a_long_arc_equal_whole_graph_dijkstra(seed, isolated, ties):
    """k-NN-like components with hubs (every node's arcs scanned shortest first, the scan
    cut at the first arc past the bound), isolated nodes between them: the compiled path
    equals scipy's whole-graph Dijkstra with POT's network simplex within 1e-9 (float64),
    on lengths over three decades or on a few tied lengths."""
    gen = np.random.default_rng(seed)
    edges, offset = [], isolated
    for size in (30, 12, 5):
        points = gen.standard_normal((size, 3))
        near = np.argsort(((points[:, None] - points[None]) ** 2).sum(-1), axis=1)[:, 1:4]
        hub = gen.integers(size)
        edges += [(offset + i, offset + j) for i in range(size) for j in near[i]]
        edges += [(offset + hub, offset + j) for j in range(size) if j != hub]
        offset += size + isolated
    pairs = np.unique(np.sort(np.array(edges, dtype=np.int64), axis=1), axis=0)
    edge_index = torch.tensor(pairs.T.copy())
    if ties:
        lengths = torch.tensor(gen.integers(1, 4, len(pairs)).astype(np.float64))
    else:
        lengths = torch.tensor(10.0 ** gen.uniform(-2.0, 1.0, len(pairs)))
    compiled = sparse_ollivier_ricci(edge_index, lengths, offset, pairs_per_pass=40)
    reference = sparse_ollivier_ricci(
        edge_index, lengths, offset, distances="scipy", method="pot", chunk=5
    )
    assert compiled.dtype == torch.float64
    np.testing.assert_allclose(compiled, reference, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(compiled, dense_exact(edge_index, lengths, offset), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    share=st.sampled_from([0.0, 0.3, 0.5, 0.6, 1.0]),
    lengths_kind=st.sampled_from(["decades", "ties", "zeros"]),
    slack=st.sampled_from([1.0, 1.5]),
)
def test_meeting_searches_equal_dijkstra_at_tight_reaches(seed, share, lengths_kind, slack):
    """The cost cells of searches that meet in the middle against scipy's whole-graph
    Dijkstra, float64, on random graphs with several components and isolated nodes,
    lengths over 12 decades, small tied integers or with zero lengths; problems of 1-6
    sources x 1-6 targets within a component, each node's reach the largest distance it is
    asked (tight: a shortest path then ends exactly at the edges of the two balls)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components, dijkstra

    from georag.geometry.ricci._sparse_search import _meeting_cells

    edge_index, _, n = pieces_graph(seed, [14, 6, 3], 2, 0.25, -9.0)
    gen = np.random.default_rng(seed)
    m = edge_index.shape[1]
    w = {
        "decades": 10.0 ** gen.uniform(-9.0, 3.0, m),
        "ties": gen.integers(1, 4, m).astype(np.float64),
        "zeros": np.where(gen.random(m) < 0.3, 0.0, gen.uniform(0.5, 2.0, m)),
    }[lengths_kind]
    x, y = edge_index.numpy()
    tail, head, arc_w = np.concatenate([x, y]), np.concatenate([y, x]), np.concatenate([w, w])
    order = np.lexsort((head, arc_w, tail))
    tail, head, arc_w = tail[order], head[order], arc_w[order]
    start = np.concatenate([[0], np.cumsum(np.bincount(tail, minlength=n))])
    graph = sp.csr_matrix((arc_w + 1e-300, (tail, head)), shape=(n, n))
    exact = dijkstra(graph, directed=False)
    exact[exact < 1e-200] = 0.0  # the offset only keeps zero-length arcs in the matrix
    _, label = connected_components(graph, directed=False)
    sources, targets = [], []
    for _ in range(40):
        members = np.flatnonzero(label == label[gen.integers(n)])
        sources.append(gen.choice(members, gen.integers(1, min(6, len(members)) + 1), False))
        targets.append(gen.choice(members, gen.integers(1, min(6, len(members)) + 1), False))
    src = np.concatenate([[0], np.cumsum([len(a) for a in sources])])
    dst = np.concatenate([[0], np.cumsum([len(b) for b in targets])])
    want = np.concatenate([exact[np.ix_(a, b)].ravel() for a, b in zip(sources, targets)])
    reach = np.zeros(n)
    for a, b in zip(sources, targets):
        np.maximum.at(reach, a, exact[np.ix_(a, b)].max(1))
        np.maximum.at(reach, b, exact[np.ix_(a, b)].max(0))
    src_node, dst_node = np.concatenate(sources), np.concatenate(targets)
    gap = np.array([exact[np.ix_(a, b)].max() for a, b in zip(sources, targets)])
    no_hop = np.zeros(len(src_node)), np.zeros(len(dst_node))
    got, over = _meeting_cells(
        start, head, arc_w, slack * reach, share, src, dst, src_node, dst_node, *no_hop, gap
    )
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    assert over == 0
    # a bound below a distance is counted
    _, over = _meeting_cells(
        start, head, arc_w, slack * reach, share, src, dst, src_node, dst_node, *no_hop, gap / 2
    )
    assert over == int((want > gap.repeat(np.diff(src) * np.diff(dst)) / 2 * (1 + 1e-9)).sum())
