"""Maniscope: geodesic reranking on a k-NN graph of the candidates.

*Maniscope: Reranker Optimization via Geodesic Distances on k-NN Manifolds* (read in a
Portuguese summary that names no authors or arXiv id): build a k-NN graph (k=5, cosine-
distance edge lengths) over the top-M candidates, take shortest-path (geodesic) distances
``d`` from the top-1 candidate, and score ``alpha * cos(q, c) + (1 - alpha) / (1 + d)`` with
``alpha = 0.5``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.graphs import knn_graph, single_source_shortest_paths
from georag.rerank.diffusion import top_m_mask

__all__ = ["ManiscopeConfig", "Maniscope"]


@dataclass(frozen=True)
class ManiscopeConfig:
    """Defaults of the Maniscope paper (also in configs/rerank/maniscope.yaml).

    Parameters
    ----------
    k : int
        Neighbours per candidate in the k-NN graph (edges join i and j when either is
        among the other's k nearest).
    alpha : float
        Weight of the global cosine similarity; ``1 - alpha`` weighs the geodesic one.
    top_m : int
        Candidates (best first-stage scores) that are reranked; the rest are dropped.
    mutual : bool
        Use mutual k-NN edges instead (not the seed's choice).
    """

    k: int = 5
    alpha: float = 0.5
    top_m: int = 100
    mutual: bool = False

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be positive, got {self.k}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {self.alpha}")
        if self.top_m < 2:
            raise ValueError(f"top_m must be at least 2, got {self.top_m}")


class Maniscope:
    """Geodesic k-NN-manifold reranker.

    For each query: the ``top_m`` candidates by first-stage score form a k-NN graph with
    cosine-distance edge lengths; the anchor is the candidate with the best first-stage
    score; ``d`` is the shortest-path length from the anchor (the anchor itself has
    ``d = 0``); ``sim_geo = 1 / (1 + d)``, which is 0 where the anchor cannot be
    reached; the score is ``alpha * cos(q, c) + (1 - alpha) * sim_geo``. Every pooled
    candidate is kept.

    A query with ``n <= k`` real candidates gets the complete graph on them (see
    :func:`~georag.geometry.graphs.knn_graph`); one with a single candidate scores it
    ``alpha * cos(q, c) + 1 - alpha``; one with none keeps nothing.

    Raises
    ------
    ValueError
        When the pool width ``min(top_m, M)`` is below 2 or not above ``k`` (the graph
        needs ``k + 1`` candidate slots), or an embedding is zero.
    """

    name = "maniscope"

    def __init__(self, config: ManiscopeConfig | None = None) -> None:
        self.config = config or ManiscopeConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        cfg = self.config
        width = min(cfg.top_m, batch.num_candidates)
        if width < 2:
            raise ValueError(f"Maniscope needs at least 2 candidate slots (M >= 2), got M={width}")
        if cfg.k >= width:
            raise ValueError(
                f"k={cfg.k} needs at least k + 1 = {cfg.k + 1} candidate slots, "
                f"got M={width}; lower k or widen the pool"
            )
        pool = top_m_mask(batch, cfg.top_m)  # node order is irrelevant: no gather needed
        lengths, adjacency = knn_graph(batch.cands, cfg.k, mutual=cfg.mutual, mask=pool)
        anchor = batch.scores.masked_fill(~pool, -torch.inf).argmax(dim=1)
        sim_geo = 1.0 / (1.0 + single_source_shortest_paths(lengths, adjacency, anchor))

        qnorm = batch.query.norm(dim=1)
        if (qnorm == 0).any():
            raise ValueError("query holds zero vectors; cosine similarity is undefined")
        dots = torch.bmm(batch.cands, batch.query.unsqueeze(2)).squeeze(2)
        cos = dots / (batch.cands.norm(dim=2) * qnorm.unsqueeze(1))
        scores = cfg.alpha * cos + (1.0 - cfg.alpha) * sim_geo
        return RerankResult.from_scores(scores, pool)
