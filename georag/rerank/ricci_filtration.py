"""Ricci-Filtration: drop candidates that the normalized Ricci flow pushes away.

Paper: *Ricci-Filtration: Boosting Retrieval-Augmented Generation Reranker to Query-Answer
Tasks by Discrete Ricci Flow*, Tian Qin and Wei-Min Huang, arXiv:2606.15482.

For each query the query and its top-20 candidates are the nodes of a graph; two nodes
are joined when their cosine dissimilarity ``1 - cos`` is at most the 50th percentile
of the graph's off-diagonal dissimilarities, and every query edge is forced. All edges
start at unit length; M = 20 iterations of the normalized discrete Ricci flow
(``alpha = 0.5``, ``p = 2``, see :func:`georag.geometry.ricci.ricci_flow`) follow, and
the surgery keeps the candidates whose final query-edge length is at most ``eta = 1``
(the mean edge length). The survivors go to a second stage; compose with
:class:`~georag.rerank.pipeline.RerankPipeline` (``[RicciFiltration(), stage]``), which
rescores the kept set only, as the paper's pipeline does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.graphs import cosine_dissimilarity, threshold_graph
from georag.geometry.ricci import (
    CURVATURE_METHODS,
    FLOW_BACKENDS,
    RicciConvergenceWarning,
    RicciFlowResult,
    ricci_flow,
)

__all__ = ["RicciFiltrationConfig", "RicciFiltration", "RicciFiltrationOutput", "query_graphs"]


@dataclass(frozen=True)
class RicciFiltrationConfig:
    """Defaults of the Ricci-Filtration paper, sections 3.1-3.2 and 4.2.3
    (also configs/rerank/ricci_filtration.yaml).

    Parameters
    ----------
    top_m : int
        Candidates (best first-stage scores) that join the query in the graph (k = 20).
    quantile : float
        Edge threshold tau: this quantile of the off-diagonal dissimilarities (50%).
    iterations : int
        Ricci-flow iterations M (20).
    step : float
        Flow step size (1, GraphRicciCurvature's default).
    alpha, exp_power : float
        Node measures (alpha = 0.5, p = 2).
    eta : float
        Surgery threshold on the final normalized query-edge length (1).
    eta_atol : float
        Slack on ``eta`` so that rounding does not split ties at exactly ``eta`` (a flat
        graph keeps every length at 1).
    method : {"sinkhorn", "exact"}
        Transport solver of the curvature.
    epsilon, max_iter, tol : float, int, float
        Sinkhorn settings, see :func:`georag.geometry.ricci.ricci_flow`.
    backend : {"auto", "tensor", "compiled"}
        Flow implementation, see :func:`georag.geometry.ricci.ricci_flow`: "auto" runs
        the compiled CPU flow on CPU tensors (about 3 ms per query at B=1, one thread;
        docs/performance.md) and batched tensor ops elsewhere.
    """

    top_m: int = 20
    quantile: float = 0.5
    iterations: int = 20
    step: float = 1.0
    alpha: float = 0.5
    exp_power: float = 2.0
    eta: float = 1.0
    eta_atol: float = 1e-5
    method: str = "sinkhorn"
    epsilon: float = 0.1
    max_iter: int = 50
    tol: float = 1e-3
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.top_m < 2:
            raise ValueError(f"top_m must be at least 2, got {self.top_m}")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"quantile must lie in [0, 1], got {self.quantile}")
        if self.iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {self.iterations}")
        if self.eta <= 0 or self.eta_atol < 0:
            raise ValueError(
                f"eta must be positive and eta_atol >= 0, got {self.eta}, {self.eta_atol}"
            )
        if self.method not in CURVATURE_METHODS:
            raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {self.method!r}")
        if self.backend not in FLOW_BACKENDS:
            raise ValueError(f"backend must be one of {FLOW_BACKENDS}, got {self.backend!r}")

    def flow_options(self) -> dict:
        """The keyword arguments of :func:`~georag.geometry.ricci.ricci_flow` that run the
        filter's flow: the flow and Sinkhorn fields, uncertified (``accuracy=None``, the
        speed setting)."""
        return dict(
            iterations=self.iterations,
            step=self.step,
            alpha=self.alpha,
            exp_power=self.exp_power,
            method=self.method,
            epsilon=self.epsilon,
            max_iter=self.max_iter,
            tol=self.tol,
            accuracy=None,
            backend=self.backend,
        )


@dataclass(frozen=True)
class RicciFiltrationOutput:
    """The flow behind one call, in the batch's candidate slots.

    Attributes
    ----------
    query_lengths : torch.Tensor, shape (B, M)
        Final normalized query-edge length of each pooled candidate; ``nan`` elsewhere.
    keep : torch.Tensor, shape (B, M), bool
        Kept candidates.
    slots : torch.Tensor, shape (B, W), long
        Batch slot of graph node ``1 + w`` (node 0 is the query).
    flow : RicciFlowResult
        The flow over the (B, 1 + W, 1 + W) graphs, with its history when asked.
    """

    query_lengths: torch.Tensor
    keep: torch.Tensor
    slots: torch.Tensor
    flow: RicciFlowResult


def query_graphs(
    batch: CandidateBatch, *, top_m: int = 20, quantile: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's graphs: query (node 0) and its ``top_m`` candidates, percentile edges.

    Parameters
    ----------
    batch : CandidateBatch
    top_m, quantile
        See :class:`RicciFiltrationConfig`.

    Returns
    -------
    adjacency : torch.Tensor, shape (B, 1 + W, 1 + W), bool
        ``W = min(top_m, M)``; nodes of padded slots are isolated, and node 0 (the
        query) is joined to every real candidate.
    slots : torch.Tensor, shape (B, W), long
        Batch slot of node ``1 + w``: the candidates by decreasing first-stage score.
    """
    if batch.num_candidates < 2:
        raise ValueError(
            f"Ricci-Filtration needs at least 2 candidate slots (M >= 2), "
            f"got M={batch.num_candidates}"
        )
    width = min(top_m, batch.num_candidates)
    ranked = batch.scores.masked_fill(~batch.mask, -torch.inf)
    slots = torch.argsort(ranked, dim=1, descending=True, stable=True)[:, :width]
    pooled = torch.gather(batch.mask, 1, slots)
    index = slots.unsqueeze(2).expand(-1, -1, batch.cands.shape[2])
    nodes = torch.cat([batch.query.unsqueeze(1), torch.gather(batch.cands, 1, index)], dim=1)
    node_mask = torch.cat([torch.ones_like(pooled[:, :1]), pooled], dim=1)
    r = cosine_dissimilarity(nodes, mask=node_mask)
    return threshold_graph(r, quantile=quantile, force_node=0, mask=node_mask), slots


class RicciFiltration:
    """Ricci-flow filter: keeps the candidates near the query after the flow.

    Scores are the first-stage scores of the kept candidates (``-inf`` elsewhere), so on
    its own it is the first-stage order restricted to the survivors.

    Behaviour at the edges (tested):

    - candidates outside the ``top_m`` pool and padded slots are never kept; padded
      nodes are isolated in the graph;
    - a query with fewer than two real candidates (a graph of under 3 nodes) has nothing
      to separate: its candidates are all kept;
    - identical embeddings (all dissimilarities equal) give the complete graph, whose
      curvature is flat: the flow stops with every length 1 and every candidate is kept;
    - zero embedding vectors raise ``ValueError`` (cosine is undefined); NaN ones are
      rejected by :class:`~georag.batch.CandidateBatch`.

    Raises
    ------
    ValueError
        When the batch holds fewer than 2 candidate slots (M < 2).
    """

    name = "ricci"

    def __init__(self, config: RicciFiltrationConfig | None = None) -> None:
        self.config = config or RicciFiltrationConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        out = self.filtrate(batch)
        return RerankResult.from_scores(batch.scores.clone(), out.keep)

    def filtrate(self, batch: CandidateBatch, *, history: bool = False) -> RicciFiltrationOutput:
        """Run the graph construction, flow and surgery; return the details."""
        cfg = self.config
        adjacency, slots = query_graphs(batch, top_m=cfg.top_m, quantile=cfg.quantile)
        pooled = adjacency[:, 0, 1:]
        with warnings.catch_warnings():  # uncertified Sinkhorn on purpose: the speed setting
            warnings.simplefilter("ignore", RicciConvergenceWarning)
            flow = ricci_flow(
                adjacency.to(batch.cands.dtype),
                adjacency,
                history=history,
                **cfg.flow_options(),
            )

        query_edges = flow.lengths[:, 0, 1:]
        kept = pooled & flow.adjacency[:, 0, 1:] & (query_edges <= cfg.eta + cfg.eta_atol)
        too_small = pooled.sum(1, keepdim=True) < 2
        kept = torch.where(too_small, pooled, kept)

        keep = torch.zeros_like(batch.mask).scatter(1, slots, kept)
        lengths = torch.full(
            batch.scores.shape, torch.nan, dtype=query_edges.dtype, device=query_edges.device
        )
        lengths = lengths.scatter(1, slots, query_edges.masked_fill(~pooled, torch.nan))
        return RicciFiltrationOutput(query_lengths=lengths, keep=keep, slots=slots, flow=flow)
