"""Learnable Maniscope: seed 001's geodesic k-NN reranker with trained knobs.

The fixed method (:class:`~georag.rerank.maniscope.Maniscope`) scores
``alpha * cos(q, c) + (1 - alpha) / (1 + d)`` with ``d`` the shortest-path length from the
top-1 candidate over a k-NN graph of cosine-distance edges. Learned here, initialised at
its defaults:

* ``alpha`` (0.5) in (0, 1), through a sigmoid;
* ``length_scale`` (1) > 0, through exp: the geodesic term is ``1 / (1 + d / length_scale)``;
* ``fusion`` (0): plus ``fusion * first-stage score``;
* optionally a learned linear map of query and candidate embeddings (identity at start),
  shared by the cosine term and the graph's edge lengths.

Gradients reach the edge lengths (and through them the map) along one shortest-path tree
(:func:`georag.geometry.graphs.single_source_shortest_paths`). The discrete parts are not
trained and are the same at training and inference: which k neighbours each candidate
links to (recomputed from the current embeddings at each call) and the anchor (best
first-stage score).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch
from georag.geometry.graphs import knn_graph, single_source_shortest_paths
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.diffusion import top_m_mask
from georag.rerank.learned import LearnableReranker

__all__ = ["LearnedManiscopeConfig", "LearnedManiscope"]


@dataclass(frozen=True)
class LearnedManiscopeConfig:
    """Initial knobs (seed 001's defaults) and fixed settings.

    Parameters
    ----------
    k, top_m, mutual :
        The k-NN graph, as :class:`~georag.rerank.maniscope.ManiscopeConfig` (fixed).
    alpha, length_scale, fusion : float
        Initial values of the knobs (see the module docstring).
    embedding_map : bool
        Learn a linear map of the embeddings (identity at start).
    dim : int
        Embedding width D (for the map).
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    k: int = 5
    top_m: int = 100
    mutual: bool = False
    alpha: float = 0.5
    length_scale: float = 1.0
    fusion: float = 0.0
    embedding_map: bool = False
    dim: int = 384
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.k < 1 or self.top_m < 2:
            raise ValueError(f"need k >= 1 and top_m >= 2, got k={self.k}, top_m={self.top_m}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        if not self.length_scale > 0:
            raise ValueError(f"length_scale must be positive, got {self.length_scale}")


class LearnedManiscope(LearnableReranker):
    """Geodesic k-NN reranker with a learned mixing weight, length scale and map."""

    name = "learned_maniscope"
    config_class = LearnedManiscopeConfig
    fixed_method = "maniscope"
    search_space = {
        "alpha": (0.01, 0.99, False),
        "length_scale": (0.01, 10.0, True),
        "fusion": (1e-4, 10.0, True),
    }

    def __init__(self, config: LearnedManiscopeConfig | None = None) -> None:
        super().__init__(config or LearnedManiscopeConfig())
        cfg = self.config
        self.alpha = Interval(cfg.alpha)
        self.length_scale = Positive(cfg.length_scale)
        self.fusion = Real(cfg.fusion)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        width = min(cfg.top_m, batch.num_candidates)
        if cfg.k >= width:
            raise ValueError(
                f"k={cfg.k} needs at least k + 1 = {cfg.k + 1} candidate slots, got M={width}"
            )
        query, cands = batch.query, batch.cands
        if self.embed is not None:
            query, cands = self.embed(query), self.embed(cands)
        dtype = cands.dtype
        pool = top_m_mask(batch, cfg.top_m)
        lengths, adjacency = knn_graph(cands, cfg.k, mutual=cfg.mutual, mask=pool)
        anchor = batch.scores.masked_fill(~pool, -torch.inf).argmax(dim=1)
        dist = single_source_shortest_paths(lengths, adjacency, anchor)
        reached = torch.isfinite(dist)
        scale = self.length_scale().to(dtype)
        sim_geo = torch.where(reached, 1.0 / (1.0 + torch.where(reached, dist, 0.0) / scale), 0.0)

        qnorm = query.norm(dim=1)
        if (qnorm == 0).any():
            raise ValueError("query holds zero vectors; cosine similarity is undefined")
        dots = torch.bmm(cands, query.unsqueeze(2)).squeeze(2)
        cos = dots / (torch.where(batch.mask, cands.norm(dim=2), 1.0) * qnorm.unsqueeze(1))
        alpha = self.alpha().to(dtype)
        scores = alpha * cos + (1.0 - alpha) * sim_geo
        scores = scores + self.fusion().to(dtype) * batch.scores.to(dtype)
        return scores, pool
