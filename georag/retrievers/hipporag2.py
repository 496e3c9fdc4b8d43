"""HippoRAG 2's retrieval over the entity-passage graph, with its language-model parts replaced.

HippoRAG 2 ("From RAG to Memory: Non-Parametric Continual Learning for Large Language
Models"; OSU-NLP-Group/HippoRAG, main branch of July 2026: ``src/hipporag/HippoRAG.py`` = ``H``,
``src/hipporag/utils/config_utils.py`` = ``C``) runs personalized PageRank over a graph of
phrase and passage nodes. Here the graph is :mod:`georag.retrieval.entity_graph` (phrases
from titles, n-grams or spaCy instead of OpenIE triples) and, per query:

1. **phrase seeds**: HippoRAG 2 scores the query against its facts (min-max normalized,
   H:1459-1461), keeps the top ``linking_top_k = 5`` after an LLM filter (C, H:1683-1699)
   and gives each phrase of a kept fact the fact's score divided by the number of passages
   holding the phrase (H:1598-1608). Without facts, the query is linked to phrases directly
   (:func:`~georag.retrievers.entity.link_scores`: min-max normalized cosine to the phrase
   embeddings, 1 for a phrase the query mentions word for word); the ``link_top_k`` best
   phrases are kept, each weighted by its link score divided by its document frequency
   (HippoRAG's node specificity);
2. **passage seeds**: every passage gets its min-max normalized dense score times
   ``passage_weight = 0.05`` (``passage_node_weight``, C; H:1626-1633);
3. the reset vector is the sum of both (H:1638), and PPR runs with damping 0.5 (C:192-195)
   over the undirected weighted graph, as igraph's ``personalized_pagerank(...,
   implementation='prpack')`` (H:1736-1743; a dangling node restarts along the reset
   vector there as here);
4. passages are ranked by their PPR mass (H:1745-1747), or by the fusion of it with dense
   and BM25 scores (:class:`~georag.retrievers.entity.EntityGraphOptions`);
5. a query that links to no phrase (a graph without phrases) is ranked by its dense score,
   HippoRAG 2's fallback when no fact survives (H:467-469).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.registry import register
from georag.retrieval.entity_graph import EntityGraph
from georag.retrievers.entity import (
    EntityGraphOptions,
    EntityGraphRetriever,
    fused_scores,
    link_scores,
)
from georag.retrievers.lexical import minmax
from georag.retrievers.phrase_ppr import learned_map, map_scores, mapped_corpus

__all__ = ["HippoRAG2", "HippoRAG2Config", "hipporag2_reset"]


@dataclass(frozen=True)
class HippoRAG2Config(EntityGraphOptions):
    """HippoRAG 2's retrieval settings (each default from its code, cited in the module
    docstring) and the graph's (:class:`~georag.retrievers.entity.EntityGraphOptions`).

    Attributes
    ----------
    passage_weight : float
        Factor of the passages' min-max normalized dense scores in the reset vector
        (``passage_node_weight``).
    damping : float
        PPR's probability of following an edge.
    tol, max_iter, block_size
        The sparse power iteration (:func:`georag.geometry.diffusion.personalized_pagerank`);
        ``tol`` is tight enough for the scores to match prpack's within 1e-8.
    map : str, optional
        A ``learned_map`` weights file: its score replaces the dense cosine (the passage
        seeds and the fusion's base; the phrases are linked by the raw cosine).
    """

    fusion: str = "dense+bm25"  # the training files' choice (docs/methods/entity_graph.md)
    fusion_weight: float = 20.0  # the training files' choice, of 5 and 20
    passage_weight: float = 0.05
    damping: float = 0.5
    tol: float = 1e-12
    max_iter: int = 1000
    block_size: int | None = 64
    map: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.passage_weight >= 0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need passage_weight >= 0 and damping in [0, 1), got "
                f"{self.passage_weight}, {self.damping}"
            )


def hipporag2_reset(
    dense: torch.Tensor,
    links: torch.Tensor,
    specificity: torch.Tensor,
    *,
    passage_weight: float,
) -> torch.Tensor:
    """HippoRAG 2's reset vector of each query over the N + P graph nodes (not normalized).

    Parameters
    ----------
    dense : torch.Tensor, shape (B, N)
        Dense scores of the passages.
    links : torch.Tensor, shape (B, P)
        Link scores of the phrases (0 for the phrases not linked).
    specificity : torch.Tensor, shape (P,)
        ``1 / df`` of each phrase.
    passage_weight : float

    Returns
    -------
    torch.Tensor, shape (B, N + P)
        ``passage_weight * minmax(dense)`` on the passages, ``links * specificity`` on the
        phrases.
    """
    phrases = links * specificity.to(links.dtype)
    return torch.cat([passage_weight * minmax(dense), phrases], dim=1)


@register
class HippoRAG2(EntityGraphRetriever):
    """HippoRAG 2's PPR retrieval over the entity-passage graph, without a language model.

    ``HippoRAG2(config).fit(corpus)`` builds (or loads) the corpus' entity-passage graph;
    :meth:`retrieve` ranks every passage. See the module docstring.

    Parameters
    ----------
    config : HippoRAG2Config, optional
    """

    name = "hipporag2"
    config_class = HippoRAG2Config

    def __init__(self, config: HippoRAG2Config | None = None) -> None:
        super().__init__(config)
        self.map = learned_map(self.config.map)

    def index(self, graph: EntityGraph) -> None:
        """The map's image of the passages and each phrase's specificity."""
        self.mapped = mapped_corpus(self.map, self.embeddings)
        self.specificity = graph.specificity().to(self.embeddings.dtype)

    def dense_scores(self, queries: QueryBatch) -> torch.Tensor:
        """Cosine of every passage to each query (the learned map's score with ``map``),
        shape (B, N)."""
        self._check_fitted()
        self.check_width(queries)
        return map_scores(self.map, queries.embeddings, self.embeddings, self.mapped)

    def reset(self, queries: QueryBatch, dense: torch.Tensor) -> torch.Tensor:
        """The reset vectors (B, N + P) of ``queries`` (:func:`hipporag2_reset`)."""
        links = link_scores(
            queries.embeddings.to(dense.dtype),
            queries.texts,
            self.graph,
            top_k=self.config.link_top_k,
            linking=self.config.linking,
        )
        return hipporag2_reset(
            dense, links, self.specificity, passage_weight=self.config.passage_weight
        )

    def ppr(self, reset: torch.Tensor) -> torch.Tensor:
        """PPR mass of every node for each reset vector (B, N + P) -> (B, N + P)."""
        cfg = self.config
        return personalized_pagerank(
            self.csr,
            reset.T.contiguous(),
            damping=cfg.damping,
            tol=cfg.tol,
            max_iter=cfg.max_iter,
            block_size=cfg.block_size,
        ).T

    def scores(self, queries: QueryBatch) -> torch.Tensor:
        """The final score of every passage, shape (B, N)."""
        dense = self.dense_scores(queries)
        n = dense.shape[1]
        reset = self.reset(queries, dense)
        linked = (reset[:, n:] > 0).any(dim=1)
        if not bool(linked.any()):
            return dense  # nothing links: HippoRAG 2's dense fallback
        # a row without links is answered densely below; its PPR only needs a valid reset
        reset = torch.where(linked[:, None], reset, torch.ones_like(reset))
        graph = self.ppr(reset)[:, :n]
        final = fused_scores(graph, dense, queries.texts, self.bm25, self.config)
        # a query that links to nothing is ranked by its dense score, as HippoRAG 2 does
        return torch.where(linked[:, None], final, dense)
