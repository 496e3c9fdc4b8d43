"""ISO-RAG on the entity-passage graph, as its document describes it.

ISO-RAG (isoperimetric, local Cheeger-ratio control of graph-based RAG; see
docs/methods/iso_rag.md) speaks of generic hub *entities* near the centre of the Poincare ball
joined to specific *fact* nodes at its periphery, and prunes the edges between the two before
PPR. On the passage-only graph of :mod:`~georag.retrievers.iso` there are no hubs to cut;
here the graph is :mod:`georag.retrieval.entity_graph` (passage and phrase nodes), and for a
batch of queries, all at once:

1. seeds: the top ``iso.num_sources`` passages by cosine and the ``link_top_k`` phrases of
   :func:`~georag.retrievers.entity.link_scores` (embedding and exact-mention linking);
2. the local candidate graph: the seeds and their neighbours within ``hops`` hops of the
   graph (passage-phrase edges, the topological ones, and synonym edges, the semantic
   ones), at most ``iso.max_nodes`` nodes, chosen by cosine to the query;
3. the node embeddings (passages and phrases, one encoder) mapped into the Poincare ball by
   the fixed projection; a node's hyperbolic radius is its volume proxy (``iso.volume =
   "degree"``: its degree, the classic Cheeger ablation);
4. the local Cheeger ratio of every node and the pruning of edges whose ends differ by more
   than ``iso.prune_threshold`` in log ratio (hub-to-fact edges);
5. PPR from the seeds on the pruned local graph and ISO-RAG's fusion
   ``lam * PPR / max + (1 - lam) * cosine`` (:func:`~georag.retrievers.iso.iso_scores`,
   the one computation of every ISO-RAG retriever);
6. passages only are ranked (phrase nodes are dropped), optionally fused with the dense
   and BM25 scores of every passage (:class:`~georag.retrievers.entity.EntityGraphOptions`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from georag.batch import QueryBatch
from georag.geometry.cheeger import prune_edges
from georag.rerank.registry import register
from georag.retrieval.entity_graph import EntityGraph
from georag.retrieval.passage_graph import local_candidate_graph
from georag.retrievers.entity import (
    EntityGraphOptions,
    EntityGraphRetriever,
    fused_scores,
    fusion_base,
    link_scores,
)
from georag.retrievers.iso import IsoRagConfig, fixed_radius, iso_scores, random_prune

__all__ = ["IsoEntity", "IsoEntityConfig"]

PRUNING = ("cheeger", "random")


@dataclass(frozen=True)
class IsoEntityConfig(EntityGraphOptions):
    """ISO-RAG on the entity-passage graph.

    Attributes
    ----------
    iso : IsoRagConfig
        ISO-RAG's knobs (``num_sources`` passage seeds, ``max_nodes``, ``volume``,
        ``sweep_size``, ``prune_threshold``, ``damping``, ``lam``, ``tol``, ``max_iter``;
        ``topological``, ``topo_weight`` and ``head`` are the passage graph's and unused).
    hops : int
        Depth of the local candidate graph (2 reaches a passage through a phrase).
    pruning : {"cheeger", "random"}
        ISO-RAG's rule, or the ablation that removes as many local edges at random.
    seed : int
        Seed of the random pruning.
    """

    iso: IsoRagConfig = field(default_factory=IsoRagConfig)
    hops: int = 2
    pruning: str = "cheeger"
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hops < 1:
            raise ValueError(f"hops must be at least 1, got {self.hops}")
        if self.pruning not in PRUNING:
            raise ValueError(f"pruning must be one of {PRUNING}, got {self.pruning!r}")


@register
class IsoEntity(EntityGraphRetriever):
    """ISO-RAG over the entity-passage graph, batched over queries (module docstring).

    Parameters
    ----------
    config : IsoEntityConfig, optional
    """

    name = "iso_entity"
    config_class = IsoEntityConfig

    def index(self, graph: EntityGraph) -> None:
        """Every node's embedding (passages, then phrases), strength and volume."""
        if graph.phrase_embeddings is None:
            raise ValueError("graph: iso_entity needs the graph's phrase embeddings")
        phrases = torch.as_tensor(graph.phrase_embeddings).to(self.embeddings.dtype)
        self.nodes = torch.cat([self.embeddings, phrases])
        ones = torch.ones(self.nodes.shape[0], 1, dtype=self.embeddings.dtype)
        self.strength = (self.csr @ ones).squeeze(1)
        if self.config.iso.volume == "radius":
            self.volume = fixed_radius(self.nodes).to(self.embeddings.dtype)
        else:
            degree = self.csr.crow_indices().diff().to(self.embeddings.dtype)
            self.volume = degree.clamp_min(1.0)

    def scores(
        self,
        queries: QueryBatch,
        *,
        prune: Callable | None = None,
        damping: float | torch.Tensor | None = None,
        lam: float | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The final score of every passage, shape (B, N) (``-inf`` outside the local
        graphs unless fused with dense scores).

        ``prune``, ``damping`` and ``lam`` replace :meth:`prune` and the config's numbers
        (tensors for the learnable twin, :mod:`~georag.retrievers.learned_iso_entity`).
        """
        self._check_fitted()
        cfg, iso = self.config, self.config.iso
        self.check_width(queries)
        query = queries.embeddings.to(self.embeddings.dtype)
        n = self.graph.num_passages
        similarity = query @ self.nodes.T
        dense = similarity[:, :n]
        links = link_scores(
            query, queries.texts, self.graph, top_k=cfg.link_top_k, linking=cfg.linking
        )
        passages = dense.topk(min(iso.num_sources, n), dim=1).indices
        phrases = links.topk(min(cfg.link_top_k, links.shape[1]), dim=1).indices + n
        sources = torch.cat([passages, phrases], dim=1)
        nodes, mask, weights = local_candidate_graph(
            self.csr, similarity, sources, max_nodes=iso.max_nodes, hops=cfg.hops
        )
        local = iso_scores(
            weights,
            similarity.gather(1, nodes),
            torch.where(mask, self.volume[nodes], 1.0),
            torch.where(mask, self.strength[nodes], 0.0),
            mask,
            num_sources=sources.shape[1],
            sweep_size=iso.sweep_size,
            prune=self.prune if prune is None else prune,
            damping=iso.damping if damping is None else damping,
            lam=iso.lam if lam is None else lam,
            tol=iso.tol,
            max_iter=iso.max_iter,
        ).final
        local = local.masked_fill(nodes >= n, -torch.inf)  # phrase nodes are not ranked
        # padded slots hold node 0 with -inf: the largest value per node is its own
        graph = torch.full_like(similarity, -torch.inf).scatter_reduce(
            1, nodes, local, reduce="amax"
        )[:, :n]
        if cfg.fusion == "none":
            return graph
        # outside its local graph a passage has no graph score: 0 in the fusion
        base = fusion_base(dense, queries.texts, self.bm25, cfg.fusion)
        return fused_scores(graph.clamp_min(0.0), base, cfg.fusion_weight)

    def prune(
        self, weights: torch.Tensor, scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """ISO-RAG's rule (:func:`~georag.geometry.cheeger.prune_edges` at
        ``iso.prune_threshold``), or as many edges at random (``pruning="random"``)."""
        pruned, removed = prune_edges(weights, scores, threshold=self.config.iso.prune_threshold)
        if self.config.pruning == "cheeger":
            return pruned, removed
        return random_prune(weights, removed, seed=self.config.seed)
