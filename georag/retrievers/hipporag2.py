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
   ``passage_node_weight = 0.05`` (C; H:1626-1633);
3. the reset vector is the sum of both (H:1638; ``teleport="hipporag2"``) or, with
   ``teleport="share"``, the phrase seeds and the passage seeds each normalized to sum 1 and
   mixed as ``(1 - passage_node_weight) : passage_node_weight`` (HippoRAG 2's sum gives the
   passages most of the mass on a large corpus, since every passage holds a seed), and PPR
   runs with damping 0.5 (C:192-195)
   over the undirected weighted graph, as igraph's ``personalized_pagerank(...,
   implementation='prpack')`` (H:1736-1743; a dangling node restarts along the reset
   vector there as here);
4. passages are ranked by their PPR mass (H:1745-1747), or by the fusion of it with dense
   and BM25 scores (:class:`~georag.retrievers.entity.EntityGraphOptions`), optionally
   followed by a query-aware second hop over linked passage pairs
   (:mod:`~georag.retrievers.second_hop`);
5. a query that links to no phrase (a graph without phrases) is ranked by its dense score,
   HippoRAG 2's fallback when no fact survives (H:467-469).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from georag.batch import QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.registry import register
from georag.retrieval.entity_graph import EntityGraph
from georag.retrieval.extractors import title_name
from georag.retrievers.entity import (
    EntityGraphOptions,
    EntityGraphRetriever,
    fused_scores,
    fusion_base,
    link_scores,
)
from georag.retrievers.lexical import minmax
from georag.retrievers.phrase_ppr import learned_map, map_scores, mapped_corpus
from georag.retrievers.second_hop import LINKS, pair_scores, passage_links

__all__ = ["TELEPORTS", "HippoRAG2", "HippoRAG2Config", "hipporag2_reset", "hipporag2_scores"]

TELEPORTS = ("hipporag2", "share")
SECOND_HOPS = ("none", "pairs")


@dataclass(frozen=True)
class HippoRAG2Config(EntityGraphOptions):
    """HippoRAG 2's retrieval settings (each default from its code, cited in the module
    docstring) and the graph's (:class:`~georag.retrievers.entity.EntityGraphOptions`).

    Attributes
    ----------
    teleport : {"hipporag2", "share"}
        HippoRAG 2's reset vector, or the mass-share one (module docstring, step 3).
    passage_node_weight : float
        Factor of the passages' min-max normalized dense scores in the reset vector
        (``"hipporag2"``), or the passages' share of its mass (``"share"``, in [0, 1]).
    specificity_power : float
        A phrase seed weighs ``link score * specificity ** specificity_power`` (1:
        HippoRAG's ``1 / df``; 0: no hub discount).
    second_hop : {"none", "pairs"}
        The query-aware second hop (:func:`~georag.retrievers.second_hop.pair_scores`).
    hop_beam, hop_bonus, hop_links, hop_max_df
        Its beam, a link's worth, the kind of link and the most passages of a linking
        phrase (:func:`~georag.retrievers.second_hop.passage_links`).
    damping : float
        PPR's probability of following an edge.
    tol, max_iter, block_size
        The sparse power iteration (:func:`georag.geometry.diffusion.personalized_pagerank`);
        ``tol`` is tight enough for the scores to match prpack's within 1e-8.
    map : str, optional
        A ``learned_map`` weights file: its score replaces the dense cosine (the passage
        seeds and the fusion's base; the phrases are linked by the raw cosine).
    synonym_scale : float
        Factor of the synonym edges' weights (1: the cosine, HippoRAG 2's weight, H:1017).
    """

    fusion: str = "dense+bm25"  # the training files' choice (docs/methods/entity_graph.md)
    fusion_weight: float = 20.0  # the training files' choice, of 5 and 20
    teleport: str = "hipporag2"
    passage_node_weight: float = 0.05  # HippoRAG 2: passage_node_weight (C:91-94)
    specificity_power: float = 1.0  # HippoRAG: node specificity 1 / df
    second_hop: str = "none"
    hop_beam: int = 10
    hop_bonus: float = 0.5
    hop_links: str = "title"
    hop_max_df: int | None = None
    damping: float = 0.5
    tol: float = 1e-12
    max_iter: int = 1000
    block_size: int | None = 64
    map: str | None = None
    synonym_scale: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.synonym_scale >= 0 and math.isfinite(self.synonym_scale)):
            raise ValueError(f"synonym_scale must be finite and >= 0, got {self.synonym_scale}")
        if not self.passage_node_weight >= 0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need passage_node_weight >= 0 and damping in [0, 1), got "
                f"{self.passage_node_weight}, {self.damping}"
            )
        for name, value, known in (
            ("teleport", self.teleport, TELEPORTS),
            ("second_hop", self.second_hop, SECOND_HOPS),
            ("hop_links", self.hop_links, LINKS),
        ):
            if value not in known:
                raise ValueError(f"{name} must be one of {known}, got {value!r}")
        if self.teleport == "share" and not self.passage_node_weight <= 1.0:
            raise ValueError(
                f"passage_node_weight: the passages' share must lie in [0, 1], got "
                f"{self.passage_node_weight}"
            )
        checks = (
            ("specificity_power", math.isfinite(self.specificity_power)),
            ("hop_beam", self.hop_beam >= 1),
            ("hop_bonus", math.isfinite(self.hop_bonus) and self.hop_bonus >= 0),
            ("hop_max_df", self.hop_max_df is None or self.hop_max_df >= 1),
        )
        for name, ok in checks:
            if not ok:
                raise ValueError(f"{name}: invalid value {getattr(self, name)!r}")


def hipporag2_reset(
    dense: torch.Tensor,
    links: torch.Tensor,
    specificity: torch.Tensor,
    *,
    passage_node_weight: float | torch.Tensor,
    teleport: str = "hipporag2",
) -> torch.Tensor:
    """The reset vector of each query over the N + P graph nodes (not normalized).

    Parameters
    ----------
    dense : torch.Tensor, shape (B, N)
        Dense scores of the passages.
    links : torch.Tensor, shape (B, P)
        Link scores of the phrases (0 for the phrases not linked).
    specificity : torch.Tensor, shape (P,)
        The phrases' seed factor (``1 / df``, or a power of it).
    passage_node_weight : float or torch.Tensor
    teleport : {"hipporag2", "share"}

    Returns
    -------
    torch.Tensor, shape (B, N + P)
        ``"hipporag2"``: ``passage_node_weight * minmax(dense)`` on the passages,
        ``links * specificity`` on the phrases; ``"share"``: each part divided by its sum,
        then weighted ``passage_node_weight`` (passages) and ``1 - passage_node_weight``.
    """
    phrases = links * specificity.to(links.dtype)
    passages = minmax(dense)
    if teleport == "share":
        tiny = torch.finfo(dense.dtype).tiny
        phrases = (1 - passage_node_weight) * phrases / phrases.sum(1, keepdim=True).clamp_min(tiny)
        passages = passages / passages.sum(1, keepdim=True).clamp_min(tiny)
    elif teleport != "hipporag2":
        raise ValueError(f"teleport must be one of {TELEPORTS}, got {teleport!r}")
    return torch.cat([passage_node_weight * passages, phrases], dim=1)


def hipporag2_scores(
    weights: torch.Tensor,
    dense: torch.Tensor,
    links: torch.Tensor,
    specificity: torch.Tensor,
    base: torch.Tensor | None,
    *,
    passage_node_weight: float | torch.Tensor,
    teleport: str,
    damping: float | torch.Tensor,
    fusion_weight: float | torch.Tensor,
    tol: float,
    max_iter: int,
    block_size: int | None,
) -> torch.Tensor:
    """HippoRAG 2's score of every passage (steps 2 to 5 of the module docstring): the one
    computation of :class:`HippoRAG2` and of its learnable twin, whose knobs (and edge
    weights) may be tensors.

    Parameters
    ----------
    weights : torch.Tensor, sparse CSR (N + P, N + P)
        The graph's symmetric weight matrix.
    dense : torch.Tensor, shape (B, N)
        Dense scores of the passages.
    links : torch.Tensor, shape (B, P)
        Link scores of the phrases (0 for the phrases not linked).
    specificity : torch.Tensor, shape (P,)
    base : torch.Tensor, shape (B, N), or None
        The fusion's base (:func:`~georag.retrievers.entity.fusion_base`); None ranks by PPR.
    passage_node_weight, damping, fusion_weight : float or torch.Tensor
    teleport : {"hipporag2", "share"}
    tol, max_iter, block_size
        The sparse power iteration.

    Returns
    -------
    torch.Tensor, shape (B, N)
        ``base + fusion_weight * PPR / max(PPR)`` (PPR alone without a base); ``dense`` for a
        query linked to no phrase.
    """
    n = dense.shape[1]
    linked = (links > 0).any(dim=1)
    if not bool(linked.any()):
        return dense  # nothing links: HippoRAG 2's dense fallback
    reset = hipporag2_reset(
        dense, links, specificity, passage_node_weight=passage_node_weight, teleport=teleport
    )
    # a row without links is answered densely below; its PPR only needs a valid reset
    reset = torch.where(linked[:, None], reset, torch.ones_like(reset))
    ppr = personalized_pagerank(
        weights,
        reset.T.contiguous(),
        damping=damping,
        tol=tol,
        max_iter=max_iter,
        block_size=block_size,
    ).T[:, :n]
    final = fused_scores(ppr, base, fusion_weight)
    return torch.where(linked[:, None], final, dense)


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

    def weight_matrix(self, graph: EntityGraph) -> torch.Tensor:
        """The graph's weights with the synonym edges scaled by ``synonym_scale``."""
        return graph.to_csr(self.embeddings.dtype, synonym_scale=self.config.synonym_scale)

    def index(self, graph: EntityGraph) -> None:
        """The map's image of the passages, each phrase's seed factor and, for the second
        hop, the passage links."""
        cfg = self.config
        self.mapped = mapped_corpus(self.map, self.embeddings)
        specificity = graph.specificity().double() ** cfg.specificity_power
        self.specificity = specificity.to(self.embeddings.dtype)
        self.passage_links = None
        if cfg.second_hop == "pairs":
            homes = title_homes(graph) if cfg.hop_links == "title" else None
            self.passage_links = passage_links(
                graph, homes, kind=cfg.hop_links, max_df=cfg.hop_max_df
            )

    def dense_scores(self, queries: QueryBatch) -> torch.Tensor:
        """Cosine of every passage to each query (the learned map's score with ``map``),
        shape (B, N)."""
        self._check_fitted()
        self.check_width(queries)
        return map_scores(self.map, queries.embeddings, self.embeddings, self.mapped)

    def links(self, queries: QueryBatch) -> torch.Tensor:
        """The link scores (B, P) of ``queries`` (:func:`~georag.retrievers.entity.link_scores`)."""
        return link_scores(
            queries.embeddings.to(self.embeddings.dtype),
            queries.texts,
            self.graph,
            top_k=self.config.link_top_k,
            linking=self.config.linking,
        )

    def reset(self, queries: QueryBatch, dense: torch.Tensor) -> torch.Tensor:
        """The reset vectors (B, N + P) of ``queries`` (:func:`hipporag2_reset`)."""
        cfg = self.config
        return hipporag2_reset(
            dense,
            self.links(queries),
            self.specificity,
            passage_node_weight=cfg.passage_node_weight,
            teleport=cfg.teleport,
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
        """The final score of every passage, shape (B, N) (:func:`hipporag2_scores`, then
        the second hop's :func:`~georag.retrievers.second_hop.pair_scores` when on)."""
        scores = self.first_hop(queries)
        if self.passage_links is None:
            return scores
        cfg = self.config
        return pair_scores(scores, self.passage_links, beam=cfg.hop_beam, bonus=cfg.hop_bonus)

    def first_hop(self, queries: QueryBatch) -> torch.Tensor:
        """The score of every passage before the second hop, shape (B, N)."""
        cfg = self.config
        dense = self.dense_scores(queries)
        return hipporag2_scores(
            self.csr,
            dense,
            self.links(queries),
            self.specificity,
            fusion_base(dense, queries.texts, self.bm25, cfg.fusion),
            passage_node_weight=cfg.passage_node_weight,
            teleport=cfg.teleport,
            damping=cfg.damping,
            fusion_weight=cfg.fusion_weight,
            tol=cfg.tol,
            max_iter=cfg.max_iter,
            block_size=cfg.block_size,
        )


def title_homes(graph: EntityGraph) -> list[int]:
    """The passage whose own title each phrase of ``graph`` is (-1: none; of namesakes
    merged into one phrase, the first), length P."""
    vocabulary = graph.vocabulary()
    homes = [-1] * len(graph.phrases)
    form = graph.config.title_form
    for row, title in enumerate(graph.passages()[1]):
        j = vocabulary.get(title_name(title, form))
        if j is not None and homes[j] < 0:
            homes[j] = row
    return homes
