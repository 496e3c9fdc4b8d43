"""Ollivier-Ricci curvature and Ricci flow against GraphRicciCurvature 0.6.1 and POT.

The peer runs in its own environment (``make peers`` builds ``.venv-peers``) through
``scripts/reference/ricci_reference.py``; those tests carry ``@pytest.mark.peers`` and skip when
the environment is absent. POT's ``emd2`` over networkx shortest paths is the exact
reference in the main environment.
"""

from __future__ import annotations

import functools
import math
import subprocess
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import ot
import pytest
import torch
from graph_cases import adversarial_graphs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from georag.geometry.ricci import (
    SINKHORN_ACCURACY,
    RicciConvergenceWarning,
    largest_component,
    node_measures,
    ollivier_ricci,
    ricci_flow,
)

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PEER_RUNNER = ROOT / "scripts" / "reference" / "ricci_reference.py"
DTYPES = (torch.float32, torch.float64)


def run_peer(
    lengths: np.ndarray, adjacency: np.ndarray, tmp_path: Path, *, mode: str, **options: object
) -> dict[str, np.ndarray]:
    """GraphRicciCurvature 0.6.1 on a batch of graphs, in the peers environment."""
    if not PEER_PYTHON.exists():
        pytest.skip(".venv-peers is absent (run `make peers`)")
    inp, out = tmp_path / "graphs.npz", tmp_path / "reference.npz"
    np.savez(inp, lengths=lengths, adjacency=adjacency)
    args = [str(PEER_PYTHON), str(PEER_RUNNER), str(inp), str(out), "--mode", mode]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    subprocess.run(args, check=True, capture_output=True, timeout=600)
    return dict(np.load(out))


def random_graphs(
    seed: int, batch: int, n: int, *, weighted: bool, density: tuple[float, float] = (0.15, 0.8)
) -> tuple[np.ndarray, np.ndarray]:
    """Erdos-Renyi graphs with varied density (often disconnected at low density)."""
    gen = np.random.default_rng(seed)
    lengths = np.zeros((batch, n, n))
    adjacency = np.zeros((batch, n, n), dtype=bool)
    for g in range(batch):
        upper = np.triu(gen.random((n, n)) < gen.uniform(*density), 1)
        adjacency[g] = upper | upper.T
        w = np.triu(gen.uniform(0.5, 2.0, (n, n)), 1)
        lengths[g] = np.where(adjacency[g], w + w.T if weighted else 1.0, 0.0)
    return lengths, adjacency


def exact_curvature(
    lengths: np.ndarray, adjacency: np.ndarray, alpha: float = 0.5, exp_power: float = 2.0
) -> np.ndarray:
    """Independent per-edge reference: networkx shortest paths + POT emd2."""
    out = np.zeros_like(lengths)
    for g in range(lengths.shape[0]):
        graph = nx.Graph()
        graph.add_nodes_from(range(lengths.shape[1]))
        rows, cols = np.nonzero(np.triu(adjacency[g], 1))
        graph.add_weighted_edges_from((r, c, lengths[g, r, c]) for r, c in zip(rows, cols))
        dist = dict(nx.all_pairs_dijkstra_path_length(graph))

        def measure(x: int, graph: nx.Graph = graph) -> tuple[list[int], np.ndarray]:
            nbrs = list(graph.neighbors(x))
            if not nbrs:
                return [x], np.ones(1)
            w = np.array([math.exp(-(graph[x][v]["weight"] ** exp_power)) for v in nbrs])
            share = w / w.sum() if w.sum() > 1e-7 else np.full(len(nbrs), 1 / len(nbrs))
            return nbrs + [x], np.append((1 - alpha) * share, alpha)

        for x, y in zip(rows, cols):
            sx, mx = measure(x)
            sy, my = measure(y)
            cost = np.array([[dist[i][j] for j in sy] for i in sx])
            d = dist[x][y]
            out[g, x, y] = out[g, y, x] = 0.0 if d < 1e-7 else 1 - ot.emd2(mx, my, cost) / d
    return out


def g_ab(a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paper's G(a, b): K_{b+1} whose vertices are glued to b+1 copies of K_{a+1}.

    Returns unit lengths, adjacency and a mask of the inter-community edges.
    """
    n = (b + 1) * (a + 1)
    adjacency = np.zeros((n, n), dtype=bool)
    inter = np.zeros((n, n), dtype=bool)
    hubs = [c * (a + 1) for c in range(b + 1)]
    for c in range(b + 1):
        block = slice(c * (a + 1), (c + 1) * (a + 1))
        adjacency[block, block] = True
    for p in hubs:
        for q in hubs:
            inter[p, q] = p != q
    adjacency |= inter
    np.fill_diagonal(adjacency, False)
    return adjacency.astype(float), adjacency, inter


# ---------------------------------------------------------------- node measures


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 12),
    seed=st.integers(0, 2**16),
    alpha=st.floats(0.0, 1.0),
    exp_power=st.sampled_from([0.0, 1.0, 2.0, 5.0]),
    double=st.booleans(),
)
def test_node_measures_follow_graphriccicurvature(n, seed, alpha, exp_power, double):
    lengths, adjacency = random_graphs(seed, 2, n, weighted=True, density=(0.0, 1.0))
    lengths = lengths * np.random.default_rng(seed).choice([1.0, 3.0])  # 3: sums < 1e-7
    dtype = torch.float64 if double else torch.float32
    got = node_measures(
        torch.tensor(lengths, dtype=dtype),
        torch.tensor(adjacency),
        alpha=alpha,
        exp_power=exp_power,
    )
    assert got.dtype == dtype
    for g in range(2):
        for x in range(n):
            nbrs = np.flatnonzero(adjacency[g, x])
            expected = np.zeros(n)
            if len(nbrs) == 0:
                expected[x] = 1.0
            else:
                w = np.exp(-(lengths[g, x, nbrs] ** exp_power))
                share = w / w.sum() if w.sum() > 1e-7 else np.full(len(nbrs), 1 / len(nbrs))
                expected[nbrs] = (1 - alpha) * share
                expected[x] = alpha
            np.testing.assert_allclose(got[g, x].double().numpy(), expected, atol=1e-6)


# ---------------------------------------------------------------- exact curvature


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_exact_curvature_matches_pot_reference(dtype, weighted):
    lengths, adjacency = random_graphs(1, 4, 9, weighted=weighted)
    got = ollivier_ricci(
        torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency), method="exact"
    )
    assert got.dtype == dtype
    atol = 1e-6 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(got.double().numpy(), exact_curvature(lengths, adjacency), atol=atol)


@pytest.mark.peers
def test_exact_curvature_matches_graphriccicurvature(tmp_path):
    batches = [random_graphs(2, 2, n, weighted=w) for n in (5, 13, 41) for w in (False, True)]
    for lengths, adjacency in batches:
        ref = run_peer(lengths, adjacency, tmp_path, mode="curvature")
        got = ollivier_ricci(torch.tensor(lengths), torch.tensor(adjacency), method="exact")
        np.testing.assert_allclose(got.numpy(), ref["curvature"], atol=1e-6)


# ---------------------------------------------------------------- Sinkhorn curvature


@functools.cache
def sinkhorn_case(n: int, weighted: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random graphs with their exact curvature (POT over networkx shortest paths)."""
    lengths, adjacency = random_graphs(3 + n, 2 if n == 41 else 4, n, weighted=weighted)
    return lengths, adjacency, exact_curvature(lengths, adjacency)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [5, 13, 21, pytest.param(41, marks=pytest.mark.slow)])
def test_default_and_certified_sinkhorn_match_exact(dtype, weighted, n):
    lengths, adjacency, exact = sinkhorn_case(n, weighted)
    default = ollivier_ricci(torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency))
    assert np.abs(default.double().numpy() - exact).max() < 1e-6 * (
        1 + 1e3 * (dtype == torch.float32)
    )
    got = ollivier_ricci(
        torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency), method="sinkhorn"
    )
    assert np.abs(got.double().numpy() - exact).max() < 5e-3 + 1e-6


@pytest.mark.parametrize(
    "weighted, n",
    [
        (True, 5),
        (True, 13),
        (False, 13),
        pytest.param(True, 21, marks=pytest.mark.slow),
        pytest.param(False, 41, marks=pytest.mark.slow),
    ],
)
def test_sinkhorn_accuracy_setting_within_its_accuracy(weighted, n):
    lengths, adjacency, exact = sinkhorn_case(n, weighted)
    got = ollivier_ricci(
        torch.tensor(lengths, dtype=torch.float32), torch.tensor(adjacency), **SINKHORN_ACCURACY
    )
    # float32 output: rounding of the returned value on top of the certified bound
    assert np.abs(got.double().numpy() - exact).max() < SINKHORN_ACCURACY["accuracy"] + 1e-6


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(3, 12),
    seed=st.integers(0, 2**16),
    weighted=st.booleans(),
    double=st.booleans(),
    alpha=st.sampled_from([0.0, 0.5, 0.9]),
    exp_power=st.sampled_from([0.0, 1.0, 2.0]),
)
def test_certified_sinkhorn_within_accuracy_property(n, seed, weighted, double, alpha, exp_power):
    lengths, adjacency = random_graphs(seed, 1, n, weighted=weighted)
    exact = exact_curvature(lengths, adjacency, alpha=alpha, exp_power=exp_power)
    dtype = torch.float64 if double else torch.float32
    got = ollivier_ricci(
        torch.tensor(lengths, dtype=dtype),
        torch.tensor(adjacency),
        alpha=alpha,
        exp_power=exp_power,
        method="sinkhorn",
    )
    assert got.dtype == dtype
    assert np.abs(got.double().numpy() - exact).max() < 5e-3 + 1e-6


def test_curvature_is_symmetric_and_zero_off_edges():
    lengths, adjacency = random_graphs(6, 2, 10, weighted=True)
    kappa = ollivier_ricci(torch.tensor(lengths), torch.tensor(adjacency))
    assert torch.equal(kappa, kappa.transpose(1, 2))
    assert (kappa[~torch.tensor(adjacency)] == 0).all()


def test_complete_graph_curvature_closed_form():
    # K_n, unit lengths, alpha = 1/2: the measure is uniform on the neighbours, and the
    # optimal plan moves (1/2 - 1/(2(n-1))) of mass one hop: kappa = 1/2 + 1/(2(n-1)).
    n = 6
    adjacency = ~torch.eye(n, dtype=torch.bool).unsqueeze(0)
    kappa = ollivier_ricci(adjacency.double(), adjacency, method="exact")
    expected = 1 - (0.5 - 0.5 / (n - 1))
    assert torch.allclose(
        kappa[adjacency], torch.full((n * (n - 1),), expected, dtype=torch.float64)
    )


# ---------------------------------------------------------------- flow


def _adjacency(n: int, edges: list[tuple[int, int]]) -> torch.Tensor:
    adjacency = torch.zeros(1, n, n, dtype=torch.bool)
    for x, y in edges:
        adjacency[0, x, y] = adjacency[0, y, x] = True
    return adjacency


def test_largest_component_breaks_ties_like_networkx():
    one = _adjacency(7, [(1, 2), (3, 4), (5, 6), (4, 6)])
    assert largest_component(one)[0].tolist() == [False] * 3 + [True] * 4
    tie = _adjacency(7, [(4, 5), (5, 6), (0, 1), (1, 2)])  # {0,1,2} and {4,5,6}
    assert largest_component(tie)[0].tolist() == [True] * 3 + [False] * 4
    graph = nx.Graph(tie[0].numpy())
    assert max(nx.connected_components(graph), key=len) == {0, 1, 2}


@pytest.mark.parametrize("dtype", DTYPES)
def test_flow_normalizes_to_mean_one_and_drops_small_components(dtype):
    lengths, adjacency = random_graphs(7, 4, 12, weighted=True, density=(0.1, 0.3))
    res = ricci_flow(torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency), iterations=3)
    assert res.lengths.dtype == dtype
    core = largest_component(torch.tensor(adjacency))
    for g in range(4):
        edges = res.adjacency[g]
        assert torch.equal(edges, torch.tensor(adjacency[g]) & core[g][:, None] & core[g])
        if edges.any():
            assert abs(float(res.lengths[g][edges].mean()) - 1.0) < 1e-5
        assert (res.lengths[g][~edges] == 0).all()


def test_flow_stops_when_curvature_is_flat():
    # every edge of a complete graph has the same curvature: stop after one step
    adjacency = ~torch.eye(5, dtype=torch.bool).unsqueeze(0)
    res = ricci_flow(adjacency.double(), adjacency, iterations=20, method="exact")
    assert res.iterations.tolist() == [1]
    assert torch.allclose(res.lengths[adjacency], torch.ones(20, dtype=torch.float64))


def test_flow_history_has_every_step():
    lengths, adjacency = random_graphs(8, 2, 8, weighted=False, density=(0.5, 0.9))
    res = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), iterations=4, history=True)
    assert res.history_lengths.shape == (5, 2, 8, 8)
    assert torch.equal(res.history_lengths[-1], res.lengths)
    assert torch.equal(res.history_curvature[-1], res.curvature)


def test_isolated_padding_nodes_never_flow():
    lengths, adjacency = random_graphs(9, 3, 10, weighted=False, density=(0.6, 0.9))
    adjacency[:, 7:, :] = adjacency[:, :, 7:] = False
    lengths[~adjacency] = 0.0
    res = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), iterations=2)
    assert not res.adjacency[:, 7:].any() and (res.lengths[:, 7:] == 0).all()
    assert (res.curvature[:, 7:] == 0).all()


@pytest.mark.parametrize("method", ["exact", "sinkhorn"])
def test_g_ab_intra_edges_shrink_faster_than_inter_edges(method):
    # Theorem 3.1 (alpha = 0, p = 0) on G(5, 3); Proposition 3.2's practical (1/2, 2) too
    lengths, adjacency, inter = g_ab(5, 3)
    intra = adjacency & ~inter
    for alpha, power in ((0.0, 0.0), (0.5, 2.0)):
        res = ricci_flow(
            torch.tensor(lengths)[None],
            torch.tensor(adjacency)[None],
            iterations=10,
            alpha=alpha,
            exp_power=power,
            method=method,
            history=True,
        )
        w = res.history_lengths[:, 0].numpy()
        ratio = w[:, intra].mean(1) / w[:, inter].mean(1)
        assert ratio[-1] < 0.5 * ratio[0], (alpha, power, ratio)
        assert w[-1][intra].max() < w[-1][inter].min()


@pytest.mark.peers
def test_exact_flow_matches_graphriccicurvature(tmp_path):
    lengths, adjacency = random_graphs(10, 6, 9, weighted=True, density=(0.2, 0.7))
    ref = run_peer(lengths, adjacency, tmp_path, mode="flow", iterations=5)
    res = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), iterations=5, method="exact")
    assert np.array_equal(res.adjacency.numpy(), ref["adjacency"])
    np.testing.assert_allclose(res.lengths.numpy(), ref["lengths"], atol=1e-6)
    np.testing.assert_allclose(res.curvature.numpy(), ref["curvature"], atol=1e-6)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda lengths, adj: (lengths, adj.float()), "bool tensor"),
        (lambda lengths, adj: (lengths, adj & torch.triu(adj)), "symmetric"),
        (lambda lengths, adj: (lengths, adj | torch.eye(6, dtype=torch.bool)), "diagonal"),
        (lambda lengths, adj: (-lengths, adj), "non-negative"),
        (lambda lengths, adj: (lengths.masked_fill(adj, math.nan), adj), "finite"),
        (lambda lengths, adj: (lengths[0], adj[0]), "shape"),
    ],
)
def test_bad_graphs_are_rejected(change, match):
    adjacency = ~torch.eye(6, dtype=torch.bool).expand(2, 6, 6).clone()
    lengths, adjacency = change(adjacency.float(), adjacency)
    for fn in (ollivier_ricci, ricci_flow):
        with pytest.raises(ValueError, match=match):
            fn(lengths, adjacency)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=1.5), "alpha"),
        (dict(exp_power=-1.0), "exp_power"),
        (dict(method="cvxpy"), "method"),
    ],
)
def test_bad_options_are_rejected(kwargs, match):
    adjacency = ~torch.eye(4, dtype=torch.bool).unsqueeze(0)
    with pytest.raises(ValueError, match=match):
        ollivier_ricci(adjacency.float(), adjacency, **kwargs)


# ---------------------------------------------------------------- robustness


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(4, 14),
    pieces=st.integers(1, 3),
    isolated=st.integers(0, 2),
    zero_share=st.sampled_from([0.0, 0.3]),
    double=st.booleans(),
    method=st.sampled_from(["auto", "sinkhorn", "batched"]),
)
# an edge of curvature -5.5e5 (a near-zero length beside long ones): float32 output rounds it
# by ~0.03, so the bound is relative to each value's size as well
@example(seed=160, n=12, pieces=1, isolated=0, zero_share=0.0, double=False, method="auto")
def test_no_nan_on_components_isolated_nodes_and_extreme_lengths(
    seed, n, pieces, isolated, zero_share, double, method
):
    lengths, adjacency = adversarial_graphs(
        seed, n, pieces=pieces, isolated=isolated, zero_share=zero_share
    )
    dtype = torch.float64 if double else torch.float32
    lt, at = torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency)
    kappa = ollivier_ricci(lt, at, method=method)
    assert torch.isfinite(kappa).all() and kappa.dtype == dtype
    exact = exact_curvature(lengths.astype(dtype_np(dtype)).astype(np.float64), adjacency)
    rounding = np.finfo(dtype_np(dtype)).eps * np.abs(exact)  # of the returned dtype
    assert (np.abs(kappa.double().numpy() - exact) < 5e-3 + 1e-5 + 4 * rounding).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # certified solves never warn
        flow = ricci_flow(lt, at, iterations=4, method=method, history=True)
    assert torch.isfinite(flow.history_curvature).all()
    assert torch.isfinite(flow.history_lengths).all() and flow.converged.all()


def dtype_np(dtype: torch.dtype) -> type:
    return np.float64 if dtype == torch.float64 else np.float32


def karate_two_components() -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted karate club (interaction counts) with 5% of its edges dropped: two
    components. ``SINKHORN_ACCURACY`` flows on it gave NaN curvature at iteration 4."""
    graph = nx.karate_club_graph()
    lengths = np.zeros((1, 34, 34))
    for x, y, data in graph.edges(data=True):
        lengths[0, x, y] = lengths[0, y, x] = data["weight"]
    drop = np.triu(np.random.default_rng(0).random((34, 34)) < 0.05, 1)
    adjacency = (lengths > 0) & ~(drop | drop.T)
    assert nx.number_connected_components(nx.Graph(adjacency[0])) == 2
    return torch.tensor(np.where(adjacency, lengths, 0.0)), torch.tensor(adjacency)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param(SINKHORN_ACCURACY, marks=pytest.mark.slow),
        {"method": "sinkhorn"},
        {"method": "sinkhorn", "accuracy": None},
        {"method": "batched"},
    ],
)
def test_flow_on_two_components_stays_finite(kwargs):
    lengths, adjacency = karate_two_components()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RicciConvergenceWarning)
        res = ricci_flow(lengths, adjacency, iterations=8, history=True, **kwargs)
    assert torch.isfinite(res.history_curvature).all()
    assert torch.isfinite(res.history_lengths).all()
    exact = ricci_flow(lengths, adjacency, iterations=8, method="exact", history=True)
    if kwargs.get("accuracy", 5e-3) is not None:
        # every step's curvature is within accuracy of the exact curvature of its lengths
        for step in range(9):
            cold = ollivier_ricci(res.history_lengths[step], res.adjacency, method="exact")
            error = (res.history_curvature[step] - cold).abs().max()
            assert error <= kwargs.get("accuracy", 5e-3) + 1e-9
        assert res.converged.all()
    assert (res.history_lengths[1] - exact.history_lengths[1]).abs().max() < 5e-2


def test_uncertified_flow_warns_once_and_reports_not_converged():
    lengths, adjacency = random_graphs(11, 3, 12, weighted=True, density=(0.5, 0.9))
    options = dict(method="sinkhorn", accuracy=None, max_iter=1, tol=1e-12, iterations=3)
    with pytest.warns(RicciConvergenceWarning) as record:
        res = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), **options)
    assert len(record) == 1 and not res.converged.any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loose = ricci_flow(
            torch.tensor(lengths), torch.tensor(adjacency), **{**options, "tol": 10.0}
        )
        certified = ricci_flow(
            torch.tensor(lengths), torch.tensor(adjacency), **{**options, "accuracy": 1e-3}
        )
    assert loose.converged.all() and certified.converged.all()


def test_exact_flow_tracks_exact_curvature_and_auto_is_exact():
    lengths, adjacency = random_graphs(12, 2, 15, weighted=True)
    auto = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), iterations=6)
    exact = ricci_flow(torch.tensor(lengths), torch.tensor(adjacency), iterations=6, method="exact")
    assert torch.equal(auto.lengths, exact.lengths) and auto.exact_solves.sum() > 0


def test_edge_mask_computes_a_subset():
    lengths, adjacency = random_graphs(13, 2, 10, weighted=True, density=(0.5, 0.8))
    lt, at = torch.tensor(lengths), torch.tensor(adjacency)
    full = ollivier_ricci(lt, at)
    mask = torch.triu(at) & (torch.rand(at.shape, generator=torch.Generator().manual_seed(0)) < 0.4)
    part = ollivier_ricci(lt, at, edge_mask=mask)
    chosen = mask | mask.transpose(1, 2)
    assert torch.equal(part[chosen], full[chosen]) and (part[~chosen] == 0).all()


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(4, 12),
    pieces=st.integers(1, 3),
    isolated=st.integers(0, 2),
    zero_share=st.sampled_from([0.0, 0.3]),
    double=st.booleans(),
)
def test_batched_curvature_is_exact_grade(seed, n, pieces, isolated, zero_share, double):
    """The interior point at accuracy 1e-9 against POT's network simplex, on graphs with
    several components, isolated nodes and lengths from 1e-17 to 1e3."""
    lengths, adjacency = adversarial_graphs(
        seed, n, pieces=pieces, isolated=isolated, zero_share=zero_share
    )
    dtype = torch.float64 if double else torch.float32
    lt = torch.tensor(lengths, dtype=dtype)
    got = ollivier_ricci(lt, torch.tensor(adjacency), method="batched", accuracy=1e-9)
    exact = ollivier_ricci(lt, torch.tensor(adjacency), method="exact")
    assert torch.isfinite(got).all() and got.dtype == dtype
    rounding = torch.finfo(dtype).eps * exact.double().abs()  # of the returned dtype
    assert ((got.double() - exact.double()).abs() <= 1e-9 + 4 * rounding).all()


def test_batched_flow_follows_the_exact_trajectory():
    """Per-step errors grow through the lengths; at 1e-9 per step the batched flow stays
    within 1e-6 of the exact one over 20 steps (two components, weighted lengths)."""
    lengths, adjacency = karate_two_components()
    exact = ricci_flow(lengths, adjacency, iterations=20, method="exact", history=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # certified solves never warn
        got = ricci_flow(
            lengths, adjacency, iterations=20, method="batched", accuracy=1e-9, history=True
        )
    assert got.converged.all()
    assert (got.history_curvature - exact.history_curvature).abs().max() < 1e-6
    assert (got.history_lengths - exact.history_lengths).abs().max() < 1e-6


@pytest.mark.slow
def test_sinkhorn_accuracy_flow_follows_the_exact_trajectory():
    """The accuracy setting within 1e-3 of the exact flow at every one of 40 steps."""
    lengths, adjacency = karate_two_components()
    exact = ricci_flow(lengths, adjacency, iterations=40, method="exact", history=True)
    got = ricci_flow(lengths, adjacency, iterations=40, history=True, **SINKHORN_ACCURACY)
    steps = min(len(got.history_curvature), len(exact.history_curvature))
    error = (got.history_curvature[:steps] - exact.history_curvature[:steps]).abs().max()
    assert error < 1e-3 and len(got.history_curvature) == len(exact.history_curvature)


def test_batched_needs_an_accuracy_and_has_no_gradient():
    lengths, adjacency = random_graphs(3, 1, 6, weighted=True)
    lt, at = torch.tensor(lengths), torch.tensor(adjacency)
    with pytest.raises(ValueError, match="accuracy must be positive with method='batched'"):
        ollivier_ricci(lt, at, method="batched", accuracy=None)
    with pytest.raises(ValueError, match="accuracy must be positive with method='batched'"):
        ricci_flow(lt, at, method="batched", accuracy=None)
    with pytest.raises(ValueError, match="for gradients"):
        ollivier_ricci(lt.requires_grad_(), at, method="batched")
