"""ISO-RAG: Cheeger-pruned local personalized PageRank over a passage graph.

Paper: ISO-RAG, isoperimetric (local Cheeger-ratio) control of graph-based RAG for multi-hop
QA (read in a Japanese summary that names no title line, authors or arXiv id).

For a batch of B queries, all at once:

1. sources: the top-``num_sources`` passages by cosine similarity;
2. the local candidate graph: sources plus their neighbours in the corpus passage graph
   (semantic k-NN and topological edges), at most ``max_nodes`` nodes (sources first, then
   neighbours by cosine to the query), padded to (B, M, M);
3. a volume proxy per node: its hyperbolic radius in the Poincare ball (fixed projection
   or the trained :class:`~georag.models.poincare.PoincareHead`), computed once per corpus;
4. the local Cheeger ratio of each node (sweep over its heaviest neighbours; the cut counts
   the edges that leave the local graph too) and the pruning score of each edge,
   ``|log h_u - log h_v|``; edges scoring above ``prune_threshold`` (hub to periphery
   shortcuts) are removed;
5. deterministic personalized PageRank by power iteration from the sources on the pruned
   local graph (networkx semantics, :func:`georag.geometry.diffusion.personalized_pagerank`);
6. the final score ``lam * PPR / max(PPR) + (1 - lam) * cosine``; the top-k local nodes
   are returned.

The baselines of the same harness are :class:`~georag.retrievers.dense.DenseRetriever` and
:class:`~georag.retrievers.ppr_global.GlobalPPR` (HippoRAG-style PPR over the unpruned
whole-corpus graph, damping 0.5).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from georag.batch import Corpus
from georag.geometry.cheeger import local_cheeger_ratio, prune_edges, pruning_scores
from georag.geometry.diffusion import personalized_pagerank
from georag.models.poincare import PoincareHead, fixed_projection
from georag.rerank.registry import register
from georag.retrieval.passage_graph import PassageGraph, corpus_graph, local_candidate_graph
from georag.retrievers.base import (
    EmbeddingRetriever,
    IsoRagOutput,
    _check_corpus,
    _check_query,
    _row_ids,
    _sources,
    _topk,
)

__all__ = [
    "IsoRag",
    "IsoRagConfig",
    "IsoRagTrace",
    "IsoScores",
    "fixed_radius",
    "head_radius",
    "iso_scores",
    "random_prune",
]

VOLUMES = ("radius", "degree")


@dataclass(frozen=True)
class IsoRagConfig:
    """ISO-RAG settings. The paper's summary fixes none of the numbers; see
    docs/methods/iso_rag.md.

    Attributes
    ----------
    num_sources : int
        s, source passages per query (top-s by cosine).
    max_nodes : int
        M, the largest local candidate graph (sources + neighbours by cosine to the query).
    topological : bool
        Use topological edges (False: the "without topological edges" ablation).
    topo_weight : float
        Weight of a topological edge (added to the cosine of a semantic edge).
    volume : {"radius", "degree"}
        Node volume in the Cheeger ratio: the hyperbolic radius (ISO-RAG) or the corpus
        degree (classic Cheeger; ablation).
    sweep_size : int
        Largest sweep set of the local Cheeger ratio.
    prune_threshold : float
        Edges whose pruning score exceeds this are removed; ``inf`` disables pruning.
    damping : float
        PPR damping (probability of following an edge), HippoRAG's 0.5.
    lam : float
        Weight of the (max-normalized) PPR score against the cosine similarity.
    tol, max_iter
        Power-iteration convergence (networkx semantics).
    head : str, optional
        A trained :class:`~georag.models.poincare.PoincareHead` (its ``save`` file) giving
        the radii; ``None`` uses the fixed projection (:func:`fixed_radius`).
    """

    num_sources: int = 3
    max_nodes: int = 64
    topological: bool = True
    topo_weight: float = 0.5
    volume: str = "radius"
    sweep_size: int = 8
    prune_threshold: float = 1.0
    damping: float = 0.5
    lam: float = 0.9
    tol: float = 1e-6
    max_iter: int = 200
    head: str | None = None

    def __post_init__(self) -> None:
        if self.num_sources < 1:
            raise ValueError(f"num_sources must be at least 1, got {self.num_sources}")
        if self.max_nodes < self.num_sources:
            raise ValueError(
                f"max_nodes ({self.max_nodes}) must be >= num_sources ({self.num_sources})"
            )
        if self.volume not in VOLUMES:
            raise ValueError(f"volume must be one of {VOLUMES}, got {self.volume!r}")
        if not 0.0 <= self.lam <= 1.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need lam in [0, 1] and damping in [0, 1), got {self.lam}, {self.damping}"
            )
        if math.isnan(self.prune_threshold) or self.prune_threshold < 0:
            raise ValueError(f"prune_threshold must be >= 0, got {self.prune_threshold}")
        if self.topo_weight < 0 or self.sweep_size < 1:
            raise ValueError(
                f"need topo_weight >= 0 and sweep_size >= 1, got "
                f"{self.topo_weight}, {self.sweep_size}"
            )


@dataclass(frozen=True)
class IsoScores:
    """What :func:`iso_scores` computes on the local graphs; local slots, sources first.

    Attributes
    ----------
    ratio : torch.Tensor, shape (B, M)
        Local Cheeger ratios.
    scores : torch.Tensor, shape (B, M, M)
        Pruning scores.
    pruned : torch.Tensor, shape (B, M, M)
        The local graph after pruning.
    removed : torch.Tensor, shape (B, M, M), bool
    personalization : torch.Tensor, shape (B, M)
        Source weights (their cosine, clamped to >= 1e-6), 0 elsewhere.
    ppr : torch.Tensor, shape (B, M)
        PageRank on the pruned graph.
    similarity : torch.Tensor, shape (B, M)
        Cosine to the query.
    final : torch.Tensor, shape (B, M)
        ``lam * ppr / max(ppr) + (1 - lam) * similarity``; ``-inf`` on padding.
    """

    ratio: torch.Tensor
    scores: torch.Tensor
    pruned: torch.Tensor
    removed: torch.Tensor
    personalization: torch.Tensor
    ppr: torch.Tensor
    similarity: torch.Tensor
    final: torch.Tensor


@dataclass(frozen=True)
class IsoRagTrace(IsoScores):
    """Intermediates of :meth:`IsoRag.trace`: the local graphs and the :class:`IsoScores`
    on them; local slots, sources first.

    Attributes
    ----------
    nodes : torch.Tensor, shape (B, M), long
        Corpus rows of the local nodes (0 on padding).
    mask : torch.Tensor, shape (B, M), bool
    weights : torch.Tensor, shape (B, M, M)
        The local graph before pruning.
    """

    nodes: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor


def iso_scores(
    weights: torch.Tensor,
    similarity: torch.Tensor,
    volume: torch.Tensor,
    strength: torch.Tensor,
    mask: torch.Tensor,
    *,
    num_sources: int,
    sweep_size: int,
    prune: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    damping: float | torch.Tensor,
    lam: float | torch.Tensor,
    tol: float,
    max_iter: int,
) -> IsoScores:
    """ISO-RAG's scores on a batch of local candidate graphs (steps 4 to 6 of the module
    docstring): the one computation of :class:`IsoRag` and of its learnable twin
    (:class:`~georag.retrievers.learned_iso.LearnedIso`), whose knobs may be tensors.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, M, M)
        Symmetric local graphs (0 off the edges and on padding).
    similarity : torch.Tensor, shape (B, M)
        Cosine of each local node to its query.
    volume, strength : torch.Tensor, shape (B, M)
        Each node's volume proxy (1 on padding) and corpus strength (0 on padding).
    mask : torch.Tensor, shape (B, M), bool
        Real local nodes; the first ``num_sources`` slots are the sources.
    num_sources, sweep_size : int
        As :class:`IsoRagConfig`.
    prune : callable
        ``prune(weights, scores) -> (pruned, removed)``: the hard rule
        (:meth:`IsoRag.prune`) or a differentiable surrogate of it.
    damping, lam : float or torch.Tensor
        PPR damping and the fusion weight (0-dim tensors carry gradients).
    tol, max_iter
        Power-iteration convergence (networkx semantics).

    Returns
    -------
    IsoScores
        ``final`` is ``lam * ppr / max(ppr) + (1 - lam) * similarity``, ``-inf`` on padding.
    """
    ratio, _ = local_cheeger_ratio(
        weights, volume, sweep_size=sweep_size, strength=strength, mask=mask
    )
    scores = pruning_scores(weights, ratio, mask=mask)
    pruned, removed = prune(weights, scores)
    s = num_sources  # sources occupy the first s local slots
    personalization = torch.cat(
        [similarity[:, :s].clamp_min(1e-6), torch.zeros_like(similarity[:, s:])], dim=1
    )
    # an edgeless (fully pruned) graph is all dangling nodes: PPR = personalization
    ppr = personalized_pagerank(
        pruned, personalization, damping=damping, tol=tol, max_iter=max_iter, mask=mask
    )
    top = ppr / ppr.amax(dim=1, keepdim=True)
    final = (lam * top + (1 - lam) * similarity).masked_fill(~mask, -torch.inf)
    return IsoScores(ratio, scores, pruned, removed, personalization, ppr, similarity, final)


def random_prune(
    weights: torch.Tensor, removed: torch.Tensor, *, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The random-pruning ablation: as many edges as ``removed`` holds, chosen uniformly at
    random among each graph's edges.

    Parameters
    ----------
    weights : torch.Tensor, shape (B, M, M)
        Symmetric local graphs.
    removed : torch.Tensor, shape (B, M, M), bool
        The edges a rule removed (symmetric); only their number per graph counts.
    seed : int

    Returns
    -------
    pruned : torch.Tensor, shape (B, M, M)
    picked : torch.Tensor, shape (B, M, M), bool
    """
    count = removed.sum(dim=(1, 2)) // 2
    upper = torch.triu(weights > 0, diagonal=1)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand(weights.shape, generator=generator, dtype=weights.dtype)
    rank = noise.masked_fill(~upper, -1.0).flatten(1).argsort(dim=1, descending=True)
    rank = rank.argsort(dim=1).view_as(weights)
    pick = (rank < count[:, None, None]) & upper
    pick = pick | pick.transpose(1, 2)
    return weights.masked_fill(pick, 0.0), pick


def head_radius(corpus: Corpus, head: str | None) -> torch.Tensor | None:
    """Radius (N,) of each passage under the trained Poincare head saved at ``head``; None
    without a head (the fixed projection's radius is then used)."""
    if head is None:
        return None
    with torch.no_grad():
        radius = PoincareHead.load(head).radius(corpus.embeddings.float()).clamp_min(1e-6)
    return radius.to(corpus.embeddings.dtype)


def fixed_radius(embeddings: torch.Tensor) -> torch.Tensor:
    """Hyperbolic radius (c = 1) of the fixed Poincare projection of each embedding, (N,)."""
    import geoopt

    return geoopt.PoincareBall(c=1.0).dist0(fixed_projection(embeddings)).clamp_min(1e-6)


@register
class IsoRag(EmbeddingRetriever):
    """ISO-RAG retrieval over a corpus passage graph, batched over queries.

    ``IsoRag(config).fit(corpus)`` builds the corpus passage graph and the fixed Poincare
    radius of each passage; :meth:`fit_graph` takes a graph and radii of your own (e.g. a
    trained :class:`~georag.models.poincare.PoincareHead`).

    Parameters
    ----------
    config : IsoRagConfig, optional
    """

    name = "iso"
    config_class = IsoRagConfig

    def fit(self, corpus: Corpus) -> IsoRag:
        """Index ``corpus``: its passage graph (cached) and the radius of each passage."""
        radius = head_radius(corpus, self.config.head)
        return self.fit_graph(
            corpus.embeddings, corpus_graph(corpus), radius, doc_ids=corpus.doc_ids
        )

    def fit_graph(
        self,
        embeddings: torch.Tensor,
        graph: PassageGraph,
        radius: torch.Tensor | None = None,
        *,
        doc_ids: list[str] | None = None,
    ) -> IsoRag:
        """Index a corpus given as embeddings and its passage graph.

        Parameters
        ----------
        embeddings : torch.Tensor, shape (N, D)
            Unit-norm passage embeddings (cosine = inner product).
        graph : PassageGraph
            The corpus passage graph.
        radius : torch.Tensor, shape (N,), optional
            Hyperbolic radius of each passage in the Poincare ball (the volume proxy);
            default: :func:`fixed_radius` of the embeddings.
        doc_ids : list of str, length N, optional
            Row ids for :meth:`retrieve` (default ``"0"``, ``"1"``, ...).
        """
        _check_corpus(embeddings, graph)
        radius = fixed_radius(embeddings) if radius is None else radius
        if (
            radius.shape != (graph.num_nodes,)
            or not torch.isfinite(radius).all()
            or (radius <= 0).any()
        ):
            raise ValueError(
                f"radius must be finite, positive, of shape ({graph.num_nodes},); "
                f"got shape {tuple(radius.shape)}"
            )
        self.embeddings, self.graph, self.radius = embeddings, graph, radius
        self.doc_ids = _row_ids(doc_ids, graph.num_nodes)
        weight = graph.edge_weight(
            topo_weight=self.config.topo_weight, topological=self.config.topological
        )
        self.csr = graph.to_csr(weight.to(embeddings.dtype))
        self.strength = graph.strength(weight.to(embeddings.dtype))
        if self.config.volume == "radius":
            self.volume = radius.to(embeddings.dtype)
        else:
            self.volume = graph.degree(weight).to(embeddings.dtype).clamp_min(1.0)
        return self

    def trace(self, query: torch.Tensor) -> IsoRagTrace:
        """Every intermediate of the retrieval (local graphs, ratios, pruning, PPR, scores).

        Parameters
        ----------
        query : torch.Tensor, shape (B, D)
            Unit-norm query embeddings.
        """
        self._check_fitted()
        _check_query(query, self.embeddings)
        cfg = self.config
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        sources = _sources(similarity, cfg.num_sources)
        nodes, mask, weights = local_candidate_graph(
            self.csr, similarity, sources, max_nodes=cfg.max_nodes
        )
        volume = torch.where(mask, self.volume[nodes], 1.0)
        strength = torch.where(mask, self.strength[nodes], 0.0)
        local = iso_scores(
            weights,
            similarity.gather(1, nodes),
            volume,
            strength,
            mask,
            num_sources=cfg.num_sources,
            sweep_size=cfg.sweep_size,
            prune=self.prune,
            damping=cfg.damping,
            lam=cfg.lam,
            tol=cfg.tol,
            max_iter=cfg.max_iter,
        )
        return IsoRagTrace(**vars(local), nodes=nodes, mask=mask, weights=weights)

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query, with the local graphs' sizes.

        Parameters
        ----------
        query : torch.Tensor, shape (B, D)
            Unit-norm query embeddings.
        top_k : int
            Passages returned per query (at most the local graph's size).
        """
        if top_k < 1:
            raise ValueError(f"top_k must be positive, got {top_k}")
        t = self.trace(query)
        best, indices = _topk(t.final, t.nodes, top_k)
        return IsoRagOutput(
            best,
            indices,
            (t.weights > 0).sum(dim=(1, 2)) // 2,
            t.removed.sum(dim=(1, 2)) // 2,
            t.mask.sum(dim=1),
        )

    def prune(
        self, weights: torch.Tensor, scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Remove the edges whose score exceeds ``prune_threshold`` (``inf``: none).

        Subclasses may override it (ablations).

        Parameters
        ----------
        weights, scores : torch.Tensor, shape (B, M, M)

        Returns
        -------
        pruned : torch.Tensor, shape (B, M, M)
        removed : torch.Tensor, shape (B, M, M), bool
        """
        return prune_edges(weights, scores, threshold=self.config.prune_threshold)
