"""Phrase-graph PPR: a residual multi-hop signal over the learned map's scores, a corpus retriever.

In the spirit of HippoRAG 2 ("From RAG to Memory: Non-Parametric Continual Learning for
Large Language Models"), personalized PageRank runs over the passage-phrase graph of the
corpus (:mod:`georag.retrieval.phrase_graph`, phrases found without a language model),
seeded from both kinds of node:

* passages: the ``num_sources`` best passages by the base score (the learned map's cosine,
  :class:`~georag.rerank.learned_map.LearnedMap`, over the whole corpus), each with its
  score (floored at 1e-6), together ``passage_weight`` of the teleport mass (HippoRAG 2
  weighs its passage nodes 0.05);
* phrases: the graph's phrases among the query's own word n-grams, each with its node
  specificity ``1 / df``, the rest of the mass (all of it goes to the passages when the
  query has none).

The PPR mass of each passage node, divided by the query's largest, is a feature in [0, 1]
that enters the score as a residual of the base score, never replacing it (Diaz,
"Regularizing ad hoc retrieval scores"):

    ``final = base + weight * ppr / max(ppr)``

with ``weight`` 0 by default, so that an unset weight gives exactly the base ranking; the
weight (and the seeding knobs) are tuned on training queries only. Every corpus row is
scored, so passages outside the base top 100 can enter (pool expansion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from georag.batch import Corpus, QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.learned_map import LearnedMap, LearnedMapConfig
from georag.rerank.registry import register
from georag.retrieval.entity_graph import EntityGraph
from georag.retrieval.phrase_graph import (
    PhraseGraph,
    PhraseGraphConfig,
    build_phrase_graph,
    corpus_fingerprint,
    load_phrase_graph,
    query_phrase_weights,
)
from georag.retrievers.base import ScoredRetriever
from georag.retrievers.entity import EntityGraphOptions, entity_graph_for

__all__ = [
    "PhrasePPRConfig",
    "PhrasePPR",
    "learned_map",
    "map_scores",
    "mapped_corpus",
    "phrase_ppr_feature",
    "residual_scores",
    "teleport",
]


@dataclass(frozen=True)
class PhrasePPRConfig:
    """Phrase-graph PPR settings.

    Attributes
    ----------
    weight : float
        ``w`` of ``base + w * ppr / max(ppr)``; 0 returns the base scores exactly.
    num_sources : int
        Passage seeds: the best passages by the base score.
    passage_weight : float
        Share of the teleport mass on the passage seeds, in (0, 1] (1: no phrase seeds).
    damping : float
        PPR's probability of following an edge (HippoRAG's 0.5).
    tol, max_iter, block_size
        The sparse power iteration (:func:`georag.geometry.diffusion.personalized_pagerank`).
    map : str, optional
        A ``learned_map`` weights file: the base score is its cosine over the corpus; none:
        the raw cosine.
    graph : str, optional
        A saved :class:`~georag.retrieval.phrase_graph.PhraseGraph` of the corpus (checked
        against it); none: built from the fields below (cached under the corpus' cache).
    extractor, max_words, max_df, phrases_per_passage, knn, knn_weight
        :class:`~georag.retrieval.phrase_graph.PhraseGraphConfig`.
    entities : str, optional
        Run on the entity-passage graph (:mod:`georag.retrieval.entity_graph`) of these
        comma-separated extractors instead (``"title"``, ``"title,spacy"``; its other
        settings at :class:`~georag.retrievers.entity.EntityGraphOptions`' defaults): a
        query's phrase seeds are the phrases it mentions, each with its specificity.
    """

    weight: float = 0.0
    num_sources: int = 5
    passage_weight: float = 0.05
    damping: float = 0.5
    tol: float = 1e-6
    max_iter: int = 200
    block_size: int | None = 64
    map: str | None = None
    graph: str | None = None
    extractor: str = PhraseGraphConfig.extractor
    max_words: int = PhraseGraphConfig.max_words
    max_df: float = PhraseGraphConfig.max_df
    phrases_per_passage: int = PhraseGraphConfig.phrases_per_passage
    knn: int = PhraseGraphConfig.knn
    knn_weight: float = PhraseGraphConfig.knn_weight
    entities: str | None = None

    def __post_init__(self) -> None:
        self.graph_config()  # its own checks
        if self.entities is not None:
            EntityGraphOptions(extractors=self.entities)  # its own checks
        if not math.isfinite(self.weight):
            raise ValueError(f"weight must be finite, got {self.weight}")
        if self.num_sources < 1:
            raise ValueError(f"num_sources must be at least 1, got {self.num_sources}")
        if not 0.0 < self.passage_weight <= 1.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need passage_weight in (0, 1] and damping in [0, 1), got "
                f"{self.passage_weight}, {self.damping}"
            )

    def feature_options(self, passage_weight: float | None = None) -> dict:
        """The keyword arguments of :func:`phrase_ppr_feature` of these settings (seeds,
        passage weight, damping, solver); ``passage_weight`` replaces the configured one."""
        return {
            "num_sources": self.num_sources,
            "passage_weight": self.passage_weight if passage_weight is None else passage_weight,
            "damping": self.damping,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "block_size": self.block_size,
        }

    def graph_config(self) -> PhraseGraphConfig:
        """The :class:`PhraseGraphConfig` of these settings."""
        return PhraseGraphConfig(
            **{f.name: getattr(self, f.name) for f in fields(PhraseGraphConfig)}
        )


def learned_map(weights: str | None) -> LearnedMap | None:
    """The ``learned_map`` saved at ``weights`` (None without a file)."""
    return None if weights is None else LearnedMap(LearnedMapConfig(weights=weights))


def mapped_corpus(model: LearnedMap | None, embeddings: torch.Tensor) -> torch.Tensor | None:
    """The unit-norm images (N, D) of passage embeddings under the map (None without one)."""
    if model is None:
        return None
    with torch.no_grad():
        d = model.embed(embeddings)
        return d / d.norm(dim=1, keepdim=True).clamp_min(1e-12)


def map_scores(
    model: LearnedMap | None,
    query: torch.Tensor,
    embeddings: torch.Tensor,
    mapped: torch.Tensor | None = None,
) -> torch.Tensor:
    """The learned map's score of every corpus row, as :class:`LearnedMap` scores a pool:
    ``cos(W q, W d) + fusion * <q, d>``; the raw cosine ``<q, d>`` without a model.

    Parameters
    ----------
    model : LearnedMap or None
    query : torch.Tensor, shape (B, D)
        Unit-norm query embeddings.
    embeddings : torch.Tensor, shape (N, D)
        Unit-norm passage embeddings.
    mapped : torch.Tensor, shape (N, D), optional
        :func:`mapped_corpus` of ``embeddings`` (computed when None).

    Returns
    -------
    torch.Tensor, shape (B, N)
    """
    raw = query.to(embeddings.dtype) @ embeddings.T
    if model is None:
        return raw
    mapped = mapped_corpus(model, embeddings) if mapped is None else mapped
    with torch.no_grad():
        q = model.embed(query.to(embeddings.dtype))
        norm = q.norm(dim=1, keepdim=True)
        if (norm == 0).any():
            raise ValueError("query holds zero vectors; cosine similarity is undefined")
        return (q @ mapped.T) / norm + model.fusion().to(raw.dtype) * raw


def teleport(
    passage_scores: torch.Tensor,
    phrase_weights: torch.Tensor,
    *,
    num_sources: int,
    passage_weight: float,
) -> torch.Tensor:
    """The PPR personalization of each query over the N + P graph nodes.

    Parameters
    ----------
    passage_scores : torch.Tensor, shape (B, N)
        Base scores; the ``num_sources`` best of each row are the passage seeds.
    phrase_weights : torch.Tensor, shape (B, P)
        Non-negative phrase seed weights (:func:`query_phrase_weights`).
    num_sources : int
    passage_weight : float
        Share of the mass on the passage seeds, in (0, 1]; all of it for a row without
        phrase weight.

    Returns
    -------
    torch.Tensor, shape (N + P, B)
        Columns summing to one (the layout of the sparse PPR).
    """
    b, n = passage_scores.shape
    if phrase_weights.dim() != 2 or phrase_weights.shape[0] != b:
        raise ValueError(
            f"phrase_weights must have shape ({b}, P), got {tuple(phrase_weights.shape)}"
        )
    dtype = passage_scores.dtype
    top, seeds = passage_scores.topk(min(num_sources, n), dim=1)
    passages = torch.zeros_like(passage_scores).scatter_(1, seeds, top.clamp_min(1e-6))
    passages = passages / passages.sum(dim=1, keepdim=True)
    phrases = phrase_weights.to(dtype)
    total = phrases.sum(dim=1, keepdim=True)
    has = total > 0
    phrases = torch.where(has, phrases / torch.where(has, total, 1.0), 0.0)
    share = torch.where(has, passage_weight, 1.0).to(dtype)
    return torch.cat([share * passages, (1 - share) * phrases], dim=1).T.contiguous()


def phrase_ppr_feature(
    weights: torch.Tensor,
    passage_scores: torch.Tensor,
    phrase_weights: torch.Tensor,
    *,
    num_sources: int,
    passage_weight: float,
    damping: float,
    tol: float = 1e-6,
    max_iter: int = 200,
    block_size: int | None = None,
) -> torch.Tensor:
    """PPR mass of every passage over the passage-phrase graph, over the query's largest.

    Parameters
    ----------
    weights : torch.Tensor, sparse CSR (N + P, N + P)
        :meth:`PhraseGraph.to_csr`.
    passage_scores : torch.Tensor, shape (B, N)
    phrase_weights : torch.Tensor, shape (B, P)
    num_sources, passage_weight
        As :func:`teleport`.
    damping, tol, max_iter, block_size
        As :func:`georag.geometry.diffusion.personalized_pagerank`.

    Returns
    -------
    torch.Tensor, shape (B, N)
        In [0, 1], 1 at each query's passage of largest mass.
    """
    b, n = passage_scores.shape
    if weights.shape != (n + phrase_weights.shape[-1],) * 2:
        raise ValueError(
            f"weights must have shape ({n} + P, {n} + P) for P = {phrase_weights.shape[-1]}, "
            f"got {tuple(weights.shape)}"
        )
    p = teleport(
        passage_scores, phrase_weights, num_sources=num_sources, passage_weight=passage_weight
    )
    ppr = personalized_pagerank(
        weights.to(p.dtype),
        p,
        damping=damping,
        tol=tol,
        max_iter=max_iter,
        block_size=block_size,
    )[:n].T
    return ppr / ppr.amax(dim=1, keepdim=True).clamp_min(torch.finfo(ppr.dtype).tiny)


def residual_scores(
    base: torch.Tensor, feature: torch.Tensor, weight: float | torch.Tensor
) -> torch.Tensor:
    """``base + weight * feature``, both of shape (B, N); ``base`` itself when weight is 0."""
    if isinstance(weight, float | int) and weight == 0:
        return base
    return base + weight * feature


@register
class PhrasePPR(ScoredRetriever):
    """Learned-map scores plus a residual of phrase-graph PPR, over a whole corpus.

    ``PhrasePPR(config).fit(corpus)`` builds (or loads) the corpus' phrase graph and maps
    its embeddings; :meth:`retrieve` ranks every corpus row. See the module docstring.

    Parameters
    ----------
    config : PhrasePPRConfig, optional
    """

    name = "phrase_ppr"
    config_class = PhrasePPRConfig

    def __init__(self, config: PhrasePPRConfig | None = None) -> None:
        super().__init__(config)
        self.map = learned_map(self.config.map)

    def fit(self, corpus: Corpus) -> PhrasePPR:
        """Index ``corpus``: its phrase graph (``config.graph``, checked, or built and cached
        under ``corpus.cache_dir/graphs``), or its entity-passage graph (``entities``)."""
        if self.config.entities is not None:
            options = EntityGraphOptions(extractors=self.config.entities)
            return self.fit_graph(
                corpus.embeddings, entity_graph_for(corpus, options), doc_ids=corpus.doc_ids
            )
        fingerprint = corpus_fingerprint(corpus.doc_ids, corpus.titles, corpus.texts)
        if self.config.graph is not None:
            graph = load_phrase_graph(self.config.graph, fingerprint=fingerprint)
        else:
            cache = None if corpus.cache_dir is None else Path(corpus.cache_dir) / "graphs"
            graph = build_phrase_graph(
                corpus.doc_ids,
                corpus.titles,
                corpus.texts,
                corpus.embeddings,
                config=self.config.graph_config(),
                cache_dir=cache,
            )
        return self.fit_graph(corpus.embeddings, graph, doc_ids=corpus.doc_ids)

    def fit_graph(
        self, embeddings: torch.Tensor, graph: PhraseGraph | EntityGraph, *, doc_ids: list[str]
    ) -> PhrasePPR:
        """Index a corpus given as unit-norm embeddings (N, D) and its phrase graph (or its
        entity-passage graph)."""
        if embeddings.dim() != 2 or embeddings.shape[0] != graph.num_passages:
            raise ValueError(
                f"graph: has {graph.num_passages} passages, embeddings have shape "
                f"{tuple(embeddings.shape)}"
            )
        if len(doc_ids) != graph.num_passages:
            raise ValueError(f"doc_ids has {len(doc_ids)} ids for {graph.num_passages} passages")
        self.embeddings, self.graph, self.doc_ids = embeddings, graph, list(doc_ids)
        self.csr = graph.to_csr(embeddings.dtype)
        self.mapped = mapped_corpus(self.map, embeddings)
        return self

    def base_scores(self, queries: QueryBatch) -> torch.Tensor:
        """The learned map's (or the raw) cosine of every corpus row, shape (B, N)."""
        self._check_fitted()
        if queries.embeddings.shape[1] != self.embeddings.shape[1]:
            raise ValueError(
                f"queries: embeddings of width {queries.embeddings.shape[1]}, the corpus' "
                f"are {self.embeddings.shape[1]}"
            )
        return map_scores(self.map, queries.embeddings, self.embeddings, self.mapped)

    def feature(self, queries: QueryBatch, base: torch.Tensor) -> torch.Tensor:
        """:func:`phrase_ppr_feature` of ``queries`` seeded from ``base`` (B, N)."""
        if isinstance(self.graph, EntityGraph):
            phrases = self.graph.mentions(queries.texts) * self.graph.specificity()
        else:
            phrases = query_phrase_weights(queries.texts, self.graph)
        return phrase_ppr_feature(
            self.csr, base, phrases.to(base.dtype), **self.config.feature_options()
        )

    def scores(self, queries: QueryBatch) -> torch.Tensor:
        """``base + weight * feature`` of every corpus row, shape (B, N) (no PPR at weight 0)."""
        base = self.base_scores(queries)
        if self.config.weight == 0:
            return base
        return residual_scores(base, self.feature(queries, base), self.config.weight)
