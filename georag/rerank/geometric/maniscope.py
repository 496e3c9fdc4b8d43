"""Maniscope: geodesic reranking on a k-NN graph of the candidates.

*Maniscope: Reranker Optimization via Geodesic Distances on k-NN Manifolds* (read in a
Portuguese summary that names no authors or arXiv id): build a k-NN graph (k=5, cosine-
distance edge lengths) over the top-M candidates, take shortest-path (geodesic) distances
``d`` from the top-1 candidate, and score ``alpha * cos(q, c) + (1 - alpha) / (1 + d)`` with
``alpha = 0.5``.

One scoring function, :func:`maniscope_scores`, whose knobs are floats or tensors: the
fixed :class:`Maniscope` calls it with its config's numbers, the learnable
:class:`LearnedManiscope` with its parameters, so that untrained it is the fixed method.
The learnable one trains

* ``alpha`` (0.5) in (0, 1), through a sigmoid;
* ``length_scale`` (1) > 0, through exp: the geodesic term is ``1 / (1 + d / length_scale)``;
* ``fusion`` (0): plus ``fusion * first-stage score``;
* optionally a linear map of query and candidate embeddings (identity at start), shared by
  the cosine term and the graph's edge lengths.

Gradients reach the edge lengths (and through them the map) along one shortest-path tree
(:func:`georag.geometry.graphs.single_source_shortest_paths`). The discrete parts are not
trained and are the same at training and inference: which k neighbours each candidate
links to (recomputed from the current embeddings at each call) and the anchor (best
first-stage score).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.graphs import knn_graph, single_source_shortest_paths
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.learned import LearnableReranker, LearningOptions
from georag.rerank.pool import top_m_mask
from georag.rerank.registry import register
from georag.rerank.small_pool import SmallPool

__all__ = [
    "LearnedManiscope",
    "LearnedManiscopeConfig",
    "Maniscope",
    "ManiscopeConfig",
    "maniscope_scores",
]

Knob = float | torch.Tensor


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
        Use mutual k-NN edges instead (not the paper's choice).
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


def maniscope_scores(
    batch: CandidateBatch,
    *,
    k: int,
    alpha: Knob,
    top_m: int,
    mutual: bool = False,
    length_scale: Knob = 1.0,
    embed: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Geodesic k-NN-manifold scores of the pooled candidates.

    For each query: the ``top_m`` candidates by first-stage score form a k-NN graph with
    cosine-distance edge lengths; the anchor is the candidate with the best first-stage
    score; ``d`` is the shortest-path length from the anchor (the anchor itself has
    ``d = 0``); ``sim_geo = 1 / (1 + d / length_scale)``, which is 0 where the anchor
    cannot be reached; the score is ``alpha * cos(q, c) + (1 - alpha) * sim_geo``.

    A query with ``n <= k`` real candidates gets the complete graph on them (see
    :func:`~georag.geometry.graphs.knn_graph`); one with a single candidate scores it
    ``alpha * cos(q, c) + 1 - alpha``; one with none scores nothing.

    Parameters
    ----------
    batch : CandidateBatch
    k, alpha, top_m, mutual
        See :class:`ManiscopeConfig`; ``alpha`` may be a tensor (a learned knob).
    length_scale : float or torch.Tensor
        Unit of the geodesic distance (1: the paper's).
    embed : callable, optional
        A map applied to the query (B, D) and candidate (B, M, D) embeddings first.

    Returns
    -------
    scores : torch.Tensor, shape (B, M)
        Finite on the pool (any value elsewhere).
    pool : torch.Tensor, shape (B, M), bool

    Raises
    ------
    ValueError
        When the pool width ``min(top_m, M)`` is below 2 or not above ``k`` (the graph
        needs ``k + 1`` candidate slots), or a query embedding is zero.
    """
    width = min(top_m, batch.num_candidates)
    if width < 2:
        raise ValueError(f"Maniscope needs at least 2 candidate slots (M >= 2), got M={width}")
    if k >= width:
        raise ValueError(
            f"k={k} needs at least k + 1 = {k + 1} candidate slots, "
            f"got M={width}; lower k or widen the pool"
        )
    query, cands = batch.query, batch.cands
    if embed is not None:
        query, cands = embed(query), embed(cands)
    dtype = cands.dtype
    pool = top_m_mask(batch, top_m)  # node order is irrelevant: no gather needed
    lengths, adjacency = knn_graph(cands, k, mutual=mutual, mask=pool)
    anchor = batch.scores.masked_fill(~pool, -torch.inf).argmax(dim=1)
    dist = single_source_shortest_paths(lengths, adjacency, anchor)
    reached = torch.isfinite(dist)
    dist = torch.where(reached, dist, 0.0)  # no inf on the tape
    if isinstance(length_scale, torch.Tensor):
        dist = dist / length_scale.to(dtype)
    elif length_scale != 1.0:
        dist = dist / length_scale
    sim_geo = torch.where(reached, 1.0 / (1.0 + dist), 0.0)

    qnorm = query.norm(dim=1)
    if (qnorm == 0).any():
        raise ValueError("query holds zero vectors; cosine similarity is undefined")
    dots = torch.bmm(cands, query.unsqueeze(2)).squeeze(2)
    cos = dots / (torch.where(batch.mask, cands.norm(dim=2), 1.0) * qnorm.unsqueeze(1))
    if isinstance(alpha, torch.Tensor):
        alpha = alpha.to(dtype)
    return alpha * cos + (1.0 - alpha) * sim_geo, pool


def maniscope_small_pool(config: ManiscopeConfig) -> SmallPool:
    """A short list gets the complete graph on its n <= k documents (k capped at n - 1);
    a single document, the first-stage order."""
    return SmallPool(
        slots=max(2, config.k + 1),
        fewest=2,
        rule=f"n <= k={config.k}: the complete graph on the n documents (k capped at n - 1); "
        "n = 1: first-stage order (fallback)",
    )


@register
class Maniscope:
    """Geodesic k-NN-manifold reranker (:func:`maniscope_scores` with the config's
    numbers); every pooled candidate is kept."""

    name = "maniscope"
    config_class = ManiscopeConfig

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return maniscope_small_pool(self.config)

    def __init__(self, config: ManiscopeConfig | None = None) -> None:
        self.config = config or ManiscopeConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        scores, pool = maniscope_scores(batch, **asdict(self.config))
        return RerankResult.from_scores(scores, pool)


@dataclass(frozen=True)
class LearnedManiscopeConfig(LearningOptions):
    """The fixed method's config (graph, pool, initial ``alpha``) and the learning options.

    Parameters
    ----------
    fixed : ManiscopeConfig
        ``k``, ``top_m``, ``mutual`` (fixed) and the initial ``alpha``.
    length_scale, fusion : float
        Initial values of the other knobs (see the module docstring).
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`.
    """

    fixed: ManiscopeConfig = field(default_factory=ManiscopeConfig)
    length_scale: float = 1.0
    fusion: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.fixed.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {self.fixed.alpha}")
        if not self.length_scale > 0:
            raise ValueError(f"length_scale must be positive, got {self.length_scale}")


@register
class LearnedManiscope(LearnableReranker):
    """Geodesic k-NN reranker with a learned mixing weight, length scale and map."""

    name = "learned_maniscope"
    config_class = LearnedManiscopeConfig
    fixed_method = "maniscope"
    search_space = {
        "fixed.alpha": (0.01, 0.99, False),
        "length_scale": (0.01, 10.0, True),
        "fusion": (1e-4, 10.0, True),
    }

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return maniscope_small_pool(self.config.fixed)

    def __init__(self, config: LearnedManiscopeConfig | None = None) -> None:
        super().__init__(config or LearnedManiscopeConfig())
        cfg = self.config
        self.alpha = Interval(cfg.fixed.alpha)
        self.length_scale = Positive(cfg.length_scale)
        self.fusion = Real(cfg.fusion)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        scores, pool = maniscope_scores(
            batch,
            **{**asdict(self.config.fixed), "alpha": self.alpha()},
            length_scale=self.length_scale(),
            embed=self.embed,
        )
        return scores + self.fusion().to(scores.dtype) * batch.scores.to(scores.dtype), pool
