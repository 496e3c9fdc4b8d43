"""GraphRicciCurvature-compatible Ollivier-Ricci curvature, flow and communities.

``from georag.integrations.grc import OllivierRicci`` in place of
``from GraphRicciCurvature.OllivierRicci import OllivierRicci`` (version 0.6.1): the same
constructor, methods, graph attributes and numbers, computed by georag's batched
kernels (:mod:`georag.geometry.ricci`) over a networkx graph, on ``device`` when given.

Methods map onto georag's solvers:

- ``"OTD"`` -> ``method="exact"`` (POT's network simplex per edge, as GRC);
- ``"OTDSinkhornMix"`` (GRC's default) -> ``method="auto"``: exact where both
  neighbourhoods have at most 2000 nodes (GRC's threshold), Sinkhorn beyond;
- ``"Sinkhorn"`` -> certified Sinkhorn, every curvature within ``accuracy`` (default
  5e-3) of the exact one. GRC's own "Sinkhorn" returns the entropic cost at a fixed
  regularization 0.1, whose error is not bounded; these numbers are closer to "OTD";
- ``"ATD"`` -> ``method="average"`` (average transportation distance).

On a ``device`` other than the CPU, "OTD" and "OTDSinkhornMix" run
``method="batched"`` (the certified batched interior point, on the device) at
:data:`DEVICE_ACCURACY` instead of the host's network simplex.

Large graphs: an undirected graph with at least ``sparse_min_nodes`` nodes (default
:data:`SPARSE_MIN_NODES`) gets its curvature (``compute_ricci_curvature``,
``compute_ricci_curvature_edges``) from
:func:`georag.geometry.ricci.sparse.sparse_ollivier_ricci`, which needs no N x N matrix:
exact on a CPU ``device`` (the same numbers as the dense exact path, to 1e-9), the
certified batched interior point on any other device (every curvature within 1e-6 of
exact; within ``accuracy`` for method "Sinkhorn"). It is taken for "OTD",
"OTDSinkhornMix" and "Sinkhorn" when ``nbr_topk`` is at least the largest degree (the
sparse path spreads over every neighbour); ``sparse_min_nodes=None`` keeps the dense path
always. Flows stay on the dense path.

Options it cannot honour raise ``ValueError``: a multigraph; a flow on a directed graph
(GRC fails there too: ``nx.is_connected`` is undefined for directed graphs); edge
weights missing on some edges only, or negative/non-finite. ``proc``, ``chunksize``,
``cache_maxsize`` and ``shortest_path`` only steer how GRC spreads its per-edge work and
do not change its numbers; they are accepted and have no effect (everything is
batched). ``compute_ricci_flow`` recomputes the curvature of the current weights where
GRC reuses a stored ``ricciCurvature`` (the same numbers for the exact methods).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import networkx as nx
import numpy as np
import torch

from georag.geometry.ricci import ollivier_ricci, ricci_flow
from georag.geometry.ricci.sparse import sparse_ollivier_ricci

__all__ = ["OllivierRicci", "METHODS", "SPARSE_MIN_NODES", "DEVICE_ACCURACY"]

#: GraphRicciCurvature's method names and the georag solver each one runs.
METHODS = {"OTD": "exact", "OTDSinkhornMix": "auto", "Sinkhorn": "sinkhorn", "ATD": "average"}
#: Undirected graphs from this many nodes take the sparse curvature path. Measured on
#: k = 5 nearest-neighbour graphs of random points (1 CPU thread, loaded machine): at 200
#: nodes the two paths cost about the same (0.16 s dense, 0.13 s sparse), at 400 the
#: sparse one is 2x faster and at 800 8x (4.1 s vs 0.5 s); the dense path's all-pairs
#: distances grow as N^3.
SPARSE_MIN_NODES = 300
#: On a device other than the CPU, "OTD" and "OTDSinkhornMix" run the dense path's
#: certified batched interior point (``method="batched"``) at this curvature accuracy:
#: exact-grade, so that flows follow the exact trajectory (a 20-step flow stays within
#: 1e-6 of the network simplex's, tests/geometry/test_ricci.py).
DEVICE_ACCURACY = 1e-9
_VERBOSE = ("INFO", "TRACE", "DEBUG", "ERROR")
_SHORTEST_PATH = ("all_pairs", "pairwise")


def _identity_surgery(graph: nx.Graph, *args: object, **kwargs: object) -> nx.Graph:
    return graph


class OllivierRicci:
    """Ollivier-Ricci curvature of every edge and node of a networkx graph (GRC API).

    Parameters
    ----------
    G : networkx.Graph or networkx.DiGraph
        Copied; edges without the ``weight`` attribute (on every edge) get weight 1,
        self loops are removed.
    weight : str
        Edge attribute holding the lengths (and receiving the flow's weights).
    alpha, exp_power, base, nbr_topk
        Node measures: ``alpha`` stays, the rest goes to the ``nbr_topk`` neighbours of
        largest ``base ** (-w ** exp_power)`` in proportion to it.
    method : {"OTD", "OTDSinkhornMix", "Sinkhorn", "ATD"}
        See the module docstring.
    proc, chunksize, shortest_path, cache_maxsize
        Accepted for compatibility; no effect on the numbers or the work.
    verbose : {"INFO", "TRACE", "DEBUG", "ERROR"}
        Accepted for compatibility (georag logs nothing here).
    device : str or torch.device, optional
        Where the tensors live; off the CPU, "OTD" and "OTDSinkhornMix" solve on it
        (``method="batched"``, see the module docstring).
    accuracy : float
        Curvature error bound of method "Sinkhorn".
    sparse_min_nodes : int or None
        Undirected graphs with at least this many nodes get their curvature from the
        sparse path (see the module docstring); None: never.
    """

    def __init__(
        self,
        G: nx.Graph,
        weight: str = "weight",
        alpha: float = 0.5,
        method: str = "OTDSinkhornMix",
        base: float = math.e,
        exp_power: float = 2,
        proc: int | None = None,
        chunksize: int | None = None,
        shortest_path: str = "all_pairs",
        cache_maxsize: int | None = 1000000,
        nbr_topk: int = 3000,
        verbose: str = "ERROR",
        *,
        device: str | torch.device | None = None,
        accuracy: float = 5e-3,
        sparse_min_nodes: int | None = SPARSE_MIN_NODES,
    ) -> None:
        if G.is_multigraph():
            raise ValueError(
                "G must not be a multigraph (GraphRicciCurvature reads one weight per node pair)"
            )
        if method not in METHODS:
            raise ValueError(f"method must be one of {tuple(METHODS)}, got {method!r}")
        if shortest_path not in _SHORTEST_PATH:
            raise ValueError(
                f"shortest_path must be one of {_SHORTEST_PATH}, got {shortest_path!r}"
            )
        if sparse_min_nodes is not None and sparse_min_nodes < 1:
            raise ValueError(f"sparse_min_nodes must be >= 1 or None, got {sparse_min_nodes}")
        self.sparse_min_nodes = sparse_min_nodes
        self.set_verbose(verbose)
        self.G = G.copy()
        self.weight, self.alpha, self.method = weight, alpha, method
        self.base, self.exp_power, self.nbr_topk = base, exp_power, nbr_topk
        self.proc, self.chunksize, self.shortest_path = proc, chunksize, shortest_path
        self.cache_maxsize, self.device, self.accuracy = cache_maxsize, device, accuracy
        self.G.remove_edges_from(list(nx.selfloop_edges(self.G)))
        weights = nx.get_edge_attributes(self.G, weight)
        if not weights:
            nx.set_edge_attributes(self.G, 1.0, weight)
        elif len(weights) != self.G.number_of_edges():
            missing = next(e for e in self.G.edges() if e not in weights)
            raise ValueError(
                f"edge weight {weight!r} is missing on edge {missing} (it must be "
                "on every edge or on none)"
            )
        for edge, value in nx.get_edge_attributes(self.G, weight).items():
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"edge weight {weight!r} must be finite and non-negative, "
                    f"got {value!r} on edge {edge}"
                )

    def set_verbose(self, verbose: str) -> None:
        """Check the verbose level (kept for GRC compatibility; nothing is logged)."""
        if verbose not in _VERBOSE:
            raise ValueError(f"verbose must be one of {_VERBOSE}, got {verbose!r}")
        self.verbose = verbose

    # ------------------------------------------------------------------ tensors

    def _tensors(self, graph: nx.Graph) -> tuple[list, torch.Tensor, torch.Tensor]:
        nodes = list(graph.nodes())
        index = {v: k for k, v in enumerate(nodes)}
        n = len(nodes)
        lengths = np.zeros((1, n, n))
        adjacency = np.zeros((1, n, n), dtype=bool)
        for x, y, value in graph.edges(data=self.weight):
            a, b = index[x], index[y]
            lengths[0, a, b], adjacency[0, a, b] = float(value), True
            if not graph.is_directed():
                lengths[0, b, a], adjacency[0, b, a] = float(value), True
        return (
            nodes,
            torch.tensor(lengths, device=self.device),
            torch.tensor(adjacency, device=self.device),
        )

    def _options(self) -> dict:
        method, accuracy = METHODS[self.method], self.accuracy
        if method in ("exact", "auto") and torch.device(self.device or "cpu").type != "cpu":
            # the network simplex runs on the host: on a device, the batched interior point
            method, accuracy = "batched", DEVICE_ACCURACY
        return dict(
            alpha=self.alpha,
            exp_power=float(self.exp_power),
            base=self.base,
            nbr_topk=self.nbr_topk,
            method=method,
            accuracy=accuracy,
        )

    # ------------------------------------------------------------------ curvature

    def compute_ricci_curvature_edges(
        self, edge_list: Iterable[tuple] | None = None
    ) -> dict[tuple, float]:
        """Curvature of the edges in ``edge_list`` (every edge when empty or None).

        Returns
        -------
        dict
            ``{(u, v): curvature}`` keyed as the edges were given.
        """
        edges = list(edge_list) if edge_list else list(self.G.edges())
        for u, v in edges:
            if not self.G.has_edge(u, v):
                raise ValueError(f"edge_list holds ({u!r}, {v!r}), which is not an edge of G")
        if self._sparse():
            return self._sparse_curvature(edges)
        nodes, lengths, adjacency = self._tensors(self.G)
        index = {v: k for k, v in enumerate(nodes)}
        directed = self.G.is_directed()
        mask = torch.zeros_like(adjacency)
        for u, v in edges:
            mask[0, index[u], index[v]] = True
        kappa = (
            ollivier_ricci(
                lengths, adjacency, directed=directed, edge_mask=mask, **self._options()
            )[0]
            .cpu()
            .numpy()
        )
        return {(u, v): float(kappa[index[u], index[v]]) for u, v in edges}

    def _sparse(self) -> bool:
        """Whether the curvature takes the sparse path (see the module docstring)."""
        graph = self.G
        return (
            self.sparse_min_nodes is not None
            and graph.number_of_nodes() >= self.sparse_min_nodes
            and not graph.is_directed()
            and self.method != "ATD"
            and self.nbr_topk >= max((d for _, d in graph.degree()), default=0)
        )

    def _sparse_curvature(self, edges: list[tuple]) -> dict[tuple, float]:
        nodes = list(self.G.nodes())
        index = {v: k for k, v in enumerate(nodes)}
        pairs = [(index[x], index[y], float(w)) for x, y, w in self.G.edges(data=self.weight)]
        edge_index = torch.tensor([[x for x, _, _ in pairs], [y for _, y, _ in pairs]])
        lengths = torch.tensor([w for _, _, w in pairs], dtype=torch.float64)
        kappa = sparse_ollivier_ricci(
            edge_index.reshape(2, -1).to(self.device),
            lengths.to(self.device),
            len(nodes),
            alpha=self.alpha,
            exp_power=float(self.exp_power),
            base=self.base,
            accuracy=self.accuracy if self.method == "Sinkhorn" else 1e-6,
        ).tolist()
        at = {}
        for k, (x, y, _) in enumerate(pairs):
            at[x, y] = at[y, x] = kappa[k]
        return {(u, v): at[index[u], index[v]] for u, v in edges}

    def compute_ricci_curvature(self) -> nx.Graph:
        """Edge attribute "ricciCurvature" on every edge; node attribute "ricciCurvature"
        the sum over ``G.neighbors(n)`` divided by ``G.degree(n)`` (GRC's definition: the
        mean of the incident edges when undirected). Returns ``self.G``."""
        nx.set_edge_attributes(self.G, self.compute_ricci_curvature_edges(), "ricciCurvature")
        _node_curvature(self.G)
        return self.G

    # ------------------------------------------------------------------ flow

    def compute_ricci_flow(
        self,
        iterations: int = 10,
        step: float = 1,
        delta: float = 1e-4,
        surgery: tuple[Callable, int] = (_identity_surgery, 100),
    ) -> nx.Graph:
        """Normalized Ricci flow as GRC runs it; ``weight`` becomes the flow metric.

        Restricted to the largest connected component; ``original_RC`` keeps the first
        curvature; ``surgery = (function, every)`` calls ``function(G, weight)`` after
        flow iteration ``i`` whenever ``i != 0 and i % every == 0`` (GRC's rule), and the
        flow goes on over the new graph (every component of it). Returns ``self.G``.
        """
        if self.G.is_directed():
            raise ValueError(
                "compute_ricci_flow needs an undirected G (GraphRicciCurvature "
                "0.6.1 cannot flow directed graphs either)"
            )
        if self.method == "ATD":
            raise ValueError(
                "method 'ATD' cannot drive a flow here; use OTD, OTDSinkhornMix or Sinkhorn"
            )
        surgery_fn, every = surgery
        if every < 1:
            raise ValueError(f"surgery's period must be >= 1, got {every}")
        if self.G.number_of_edges() and not nx.is_connected(self.G):
            core = max(nx.connected_components(self.G), key=len)
            self.G = nx.Graph(self.G.subgraph(core))
        if not nx.get_edge_attributes(self.G, "original_RC"):
            self.compute_ricci_curvature()
            nx.set_edge_attributes(
                self.G, nx.get_edge_attributes(self.G, "ricciCurvature"), "original_RC"
            )
        done = 0
        while self.G.number_of_edges():
            # the next surgery follows iteration i (0-based): i != 0 and i % every == 0
            cut = next(i for i in range(max(done, 1), done + every + 1) if i % every == 0)
            chunk = min(iterations, cut + 1) - done
            nodes, lengths, adjacency = self._tensors(self.G)
            flow = ricci_flow(
                lengths,
                adjacency,
                iterations=max(chunk, 0),
                step=step,
                delta=delta,
                restrict=False,
                **self._options(),
            )
            self._write_flow(nodes, flow)
            done += int(flow.iterations[0])
            kappa = flow.curvature[0][flow.adjacency[0]]
            stopped = int(flow.iterations[0]) < chunk or (
                chunk > 0 and float(kappa.max() - kappa.min()) < delta
            )
            if stopped:
                break
            if done == cut + 1:
                self.G = surgery_fn(self.G, self.weight)
            if done >= iterations:
                break
        return self.G

    def _write_flow(self, nodes: list, flow: object) -> None:
        index = {v: k for k, v in enumerate(nodes)}
        w = flow.lengths[0].cpu().numpy()
        kappa = flow.curvature[0].cpu().numpy()
        for x, y, data in self.G.edges(data=True):
            a, b = index[x], index[y]
            data[self.weight] = float(w[a, b])
            data["ricciCurvature"] = float(kappa[a, b])
        _node_curvature(self.G)

    # ------------------------------------------------------------------ communities

    def ricci_community(
        self, cutoff_step: float = 0.025, drop_threshold: float = 0.01
    ) -> tuple[float, dict]:
        """The last (usually best) ``(cutoff, clustering)`` of
        :meth:`ricci_community_all_possible_clusterings`."""
        clusterings = self.ricci_community_all_possible_clusterings(
            cutoff_step=cutoff_step, drop_threshold=drop_threshold
        )
        if not clusterings:
            raise ValueError("no clustering found (no modularity drop along the cutoffs)")
        return clusterings[-1]

    def ricci_community_all_possible_clusterings(
        self, cutoff_step: float = 0.025, drop_threshold: float = 0.01
    ) -> list[tuple[float, dict]]:
        """Cut the flowed graph at decreasing weight cutoffs and return the component
        clusterings at the cutoffs where the modularity drops (GRC's rule); runs
        :meth:`compute_ricci_flow` first when no flow ran yet."""
        if not nx.get_edge_attributes(self.G, "original_RC"):
            self.compute_ricci_flow()
        cuts = _modularity_cutoffs(self.G, self.weight, cutoff_step, drop_threshold)
        if not cuts:
            raise ValueError("no cutoff found (no modularity drop along the cutoffs)")
        graph, out = self.G.copy(), []
        for cut in cuts[::-1]:
            graph = _cut(graph, cut, self.weight)
            out.append(
                (cut, {c: k for k, comp in enumerate(nx.connected_components(graph)) for c in comp})
            )
        return out


def _node_curvature(graph: nx.Graph) -> None:
    for node in graph.nodes():
        degree = graph.degree(node)
        if degree:
            total = sum(
                graph[node][nbr].get("ricciCurvature", 0.0) for nbr in graph.neighbors(node)
            )
            graph.nodes[node]["ricciCurvature"] = total / degree


def _cut(graph: nx.Graph, cutoff: float, weight: str) -> nx.Graph:
    out = graph.copy()
    out.remove_edges_from([(x, y) for x, y, w in graph.edges(data=weight) if w > cutoff])
    return out


def _modularity(graph: nx.Graph, weight: str) -> float:
    communities = list(nx.connected_components(graph))
    return nx.community.modularity(graph, communities, weight=weight)


def _modularity_cutoffs(
    graph: nx.Graph, weight: str, cutoff_step: float, drop_threshold: float
) -> list[float]:
    """GRC's ``get_rf_metric_cutoff``: cutoffs from the largest weight down to 1 where the
    modularity of the component clustering drops by more than ``drop_threshold``."""
    maxw = max(w for _, _, w in graph.edges(data=weight))
    cutoffs = np.arange(maxw, 1, -cutoff_step)
    modularity, cut = [], graph
    for cutoff in cutoffs:
        cut = _cut(cut, cutoff, weight)
        modularity.append(_modularity(cut, weight))
    good, last = [], modularity[-1] if modularity else 0.0
    for k in range(len(modularity) - 1, 0, -1):
        now = modularity[k]
        if last > now > 1e-4 and abs(last - now) / last > drop_threshold:
            good.append(float(cutoffs[k + 1]))
        last = now
    return good
