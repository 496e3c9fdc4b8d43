"""Learnable ISO-RAG: Cheeger-pruned local PageRank with trained knobs, a corpus retriever.

The fixed method (:class:`~georag.retrievers.iso.IsoRag`, ISO-RAG, isoperimetric control
of graph-based RAG) fixes its numbers by hand. Here the continuous ones are parameters,
initialised at :class:`~georag.retrievers.iso.IsoRagConfig`'s defaults and kept valid by
their parameterisation (:mod:`georag.models.knobs`):

* ``damping`` (0.5) in (0, 1), through a sigmoid: PPR's probability of following an edge;
* ``lam`` (0.9) in (0, 1), through a sigmoid: the learned fusion with the first-stage
  score, ``lam * PPR / max(PPR) + (1 - lam) * cosine``;
* ``prune_threshold`` (1.0, ``eta``) > 0, through exp: edges whose pruning score
  ``|log h_u - log h_v|`` exceeds it are removed;
* ``topo_weight`` (0.5) > 0, through exp: the weight of a topological edge (with
  ``topological=True``; it shapes the local graph's weights, strengths and so the
  Cheeger ratios);
* optionally a learned linear map of the embeddings (identity at start), shared by query
  and passages: the cosine that picks the sources and the local graph, weights the sources'
  teleport and enters the fusion is taken between the mapped, re-normalised vectors.

Discrete parts and what each path uses:

* the sources (top-``num_sources`` cosine), the local node set (sources + graph neighbours, at
  most ``max_nodes``), the corpus graph's topology and semantic weights, the sweep order
  of the local Cheeger ratio, and the volumes (hyperbolic radii of the original
  embeddings) are recomputed on every call and not differentiated;
* the pruning, a hard threshold, trains through the smooth surrogate
  ``w * sigmoid((eta - score) / prune_temperature)`` (every edge stays, down-weighted by
  how far its score is past ``eta``; a gate below the dtype's eps counts as 0, so that no
  subnormal weight reaches PageRank);
* inference (eval mode: :meth:`LearnedIso.retrieve`, :meth:`LearnedIso.search`, calling
  the module) runs the hard rule through :class:`IsoRag` itself with the current knob
  values, so an untrained ``learned_iso`` gives exactly IsoRag's scores and the same speed.

Training scores every node of each query's local graph (scattered into the corpus
columns; nodes outside it are not ranked); PageRank is differentiated implicitly
(:func:`georag.geometry.diffusion.personalized_pagerank`), the Cheeger ratios through
their minimizing sweep set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from georag.batch import QueryBatch
from georag.models.knobs import EmbeddingMap, Interval, Positive
from georag.rerank.learned import LearningOptions
from georag.rerank.registry import register
from georag.retrieval.passage_graph import local_candidate_graph
from georag.retrievers.iso import IsoRag, IsoRagConfig, iso_scores
from georag.retrievers.learned import LearnedRetriever

__all__ = ["LearnedIsoConfig", "LearnedIso", "soft_prune"]

KNOBS = ("damping", "lam", "prune_threshold", "topo_weight")


@dataclass(frozen=True)
class LearnedIsoConfig(LearningOptions):
    """The fixed method's config (its knobs: the initial values) and the learning settings.

    Parameters
    ----------
    fixed : IsoRagConfig
        ``num_sources``, ``max_nodes``, ``topological``, ``volume``, ``sweep_size``,
        ``tol`` and ``head`` (fixed, not trained) and the initial ``damping``, ``lam``,
        ``prune_threshold`` and ``topo_weight`` (see the module docstring; strictly inside
        their domains: ``lam`` and ``damping`` in (0, 1), the others finite and > 0). Its
        ``max_iter`` is raised to 1000 here, room for a learned damping near 1 (where
        IsoRag converges it stops at the same step, so the scores agree).
    prune_temperature : float
        ``t`` of the training surrogate ``sigmoid((eta - score) / t)`` of the pruning.
    top_k : int
        Passages kept when the module is called on a :class:`QueryBatch` (the training
        module's validation); :meth:`LearnedIso.retrieve` takes its own ``top_k``.
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`.
    """

    fixed: IsoRagConfig = field(default_factory=lambda: IsoRagConfig(max_iter=1000))
    prune_temperature: float = 0.1
    top_k: int = 10

    def __post_init__(self) -> None:
        for name in ("damping", "lam"):
            if not 0.0 < getattr(self.fixed, name) < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {getattr(self.fixed, name)}")
        for name in ("prune_threshold", "topo_weight"):
            value = getattr(self.fixed, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and positive, got {value}")
        if not (self.prune_temperature > 0 and math.isfinite(self.prune_temperature)):
            raise ValueError(
                f"prune_temperature must be finite and positive, got {self.prune_temperature}"
            )
        if self.top_k < 1 or self.dim < 1:
            raise ValueError(f"top_k and dim must be positive, got {self.top_k}, {self.dim}")


@register
class LearnedIso(LearnedRetriever):
    """ISO-RAG with learned damping, fusion, pruning threshold and topological weight.

    A corpus-level retriever (``fit(corpus)``, ``retrieve(queries, top_k=...)``) that is
    also an :class:`torch.nn.Module`: :meth:`score` is the differentiable training path
    on a :class:`~georag.batch.QueryBatch`; see the module docstring.
    """

    name = "learned_iso"
    config_class = LearnedIsoConfig
    fixed_method = "iso"
    fixed_class = IsoRag
    search_space = {
        "fixed.damping": (0.05, 0.95, False),
        "fixed.lam": (0.05, 0.99, False),
        "fixed.prune_threshold": (0.05, 5.0, True),
        "fixed.topo_weight": (0.05, 2.0, True),
    }

    def __init__(self, config: LearnedIsoConfig | None = None) -> None:
        super().__init__(config or LearnedIsoConfig())
        cfg = self.config
        self.damping = Interval(cfg.fixed.damping)
        self.lam = Interval(cfg.fixed.lam)
        self.prune_threshold = Positive(cfg.fixed.prune_threshold)
        self.topo_weight = Positive(cfg.fixed.topo_weight)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    # --- the corpus ---------------------------------------------------------------------

    def _index(self, fixed: IsoRag) -> LearnedIso:
        """Take the corpus of ``fixed``, which checked it and computed the volumes once."""
        self.embeddings, self.doc_ids, self.volume = fixed.embeddings, fixed.doc_ids, fixed.volume
        self.graph, self.radius = fixed.graph, fixed.radius
        # every edge the local graph may hold, numbered from 1 in the values of one CSR
        # matrix, so that a local graph's weights can be gathered differentiably
        pattern = (
            self.graph.edge_weight(topo_weight=1.0, topological=self.config.fixed.topological) > 0
        )
        number = torch.arange(1, pattern.numel() + 1, dtype=torch.float64)
        self._edge_numbers = self.graph.to_csr(torch.where(pattern, number, 0.0))
        self._fixed = None
        return self

    # --- inference: IsoRag with the current knobs -----------------------------------------

    def _mapped(self, x: torch.Tensor) -> torch.Tensor:
        """Unit-norm images of ``x`` (..., D) under the map (``x`` itself without one)."""
        if self.embed is None:
            return x
        y = self.embed(x)
        return y / y.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def _fixed_key(self) -> tuple:
        """The knob values and the parameters' versions (the map's weights too)."""
        return (tuple(self.knobs()[k] for k in KNOBS), tuple(p._version for p in self.parameters()))

    def _build_fixed(self) -> IsoRag:
        """:class:`IsoRag` at the current knob values and mapped embeddings, fitted on this
        corpus (the hard pruning rule)."""
        iso = IsoRag(replace(self.config.fixed, **self.knobs()))
        return iso.fit_graph(
            self._mapped(self.embeddings), self.graph, self.radius, doc_ids=self.doc_ids
        )

    def inference_queries(self, queries: QueryBatch) -> QueryBatch:
        """The mapped queries (``queries`` without a map)."""
        if self.embed is None:
            return queries
        with torch.no_grad():
            return QueryBatch(queries.ids, queries.texts, self._mapped(queries.embeddings))

    def search(self, query: torch.Tensor, *, top_k: int = 10):
        """:meth:`IsoRag.search` at the current knobs, for query embeddings (B, D)."""
        with torch.no_grad():
            return self.fixed().search(self._mapped(query), top_k=top_k)

    # --- training: the differentiable path ------------------------------------------------

    def score(self, batch: QueryBatch, *, hard: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable scores of every local-graph node, in the corpus columns.

        Parameters
        ----------
        batch : QueryBatch
            B unit-norm query embeddings.
        hard : bool
            Prune by the hard rule instead of the surrogate (the inference computation
            under autograd; tests).

        Returns
        -------
        scores : torch.Tensor, shape (B, N)
            ``lam * PPR / max(PPR) + (1 - lam) * cosine`` on each query's local nodes.
        ranked : torch.Tensor, shape (B, N), bool
            The local nodes.
        """
        self._check_fitted()
        cfg = self.config.fixed
        query = batch.embeddings.to(self.embeddings.dtype)
        if query.dim() != 2 or query.shape[1] != self.embeddings.shape[1]:
            raise ValueError(
                f"queries must have shape (B, {self.embeddings.shape[1]}), got {tuple(query.shape)}"
            )
        dtype = self.embeddings.dtype
        similarity = self._mapped(query) @ self._mapped(self.embeddings).T
        sources = similarity.detach().topk(cfg.num_sources, dim=1).indices
        nodes, mask, number = local_candidate_graph(
            self._edge_numbers, similarity.detach(), sources, max_nodes=cfg.max_nodes
        )
        # in the embeddings' dtype (IsoRag sums in the graph's float32, then casts: the same
        # operations for float32 embeddings, a float32 rounding apart for float64 ones)
        edge = self.graph.semantic.to(dtype)
        if cfg.topological:
            edge = edge + self.topo_weight().to(dtype) * self.graph.topological.to(dtype)
        index = number.long()
        weights = torch.where(index > 0, edge[(index - 1).clamp_min(0)], 0.0)
        strength = self.graph.strength(edge)
        eta = self.prune_threshold().to(dtype)
        local = iso_scores(
            weights,
            similarity.gather(1, nodes),
            torch.where(mask, self.volume[nodes], 1.0),
            torch.where(mask, strength[nodes], 0.0),
            mask,
            num_sources=cfg.num_sources,
            sweep_size=cfg.sweep_size,
            prune=partial(_hard_prune, eta)
            if hard
            else partial(soft_prune, eta, temperature=self.config.prune_temperature),
            damping=self.damping().to(dtype),
            lam=self.lam().to(dtype),
            tol=cfg.tol,
            max_iter=cfg.max_iter,
        ).final
        rows = torch.arange(nodes.shape[0], device=nodes.device)[:, None].expand_as(nodes)
        at = (rows[mask], nodes[mask])
        scores = similarity.new_zeros(similarity.shape).index_put(at, local[mask])
        ranked = torch.zeros_like(similarity, dtype=torch.bool).index_put(
            at, torch.ones_like(local[mask], dtype=torch.bool)
        )
        return scores, ranked


def soft_prune(
    eta: torch.Tensor, weights: torch.Tensor, scores: torch.Tensor, *, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The training surrogate of ISO-RAG's pruning: every edge down-weighted by
    ``sigmoid((eta - score) / temperature)``.

    Parameters
    ----------
    eta : torch.Tensor, 0-dim
        The pruning threshold.
    weights, scores : torch.Tensor, shape (B, M, M)

    Returns
    -------
    pruned : torch.Tensor, shape (B, M, M)
    removed : torch.Tensor, shape (B, M, M), bool
        The edges whose gate is 0.
    """
    gate = torch.sigmoid((eta - scores) / temperature)
    # a gate below eps is 0: an edge scaled that far down is below rounding anyway,
    # and one scaled to a subnormal weight stalls PageRank's row normalization
    gate = torch.where(gate > torch.finfo(weights.dtype).eps, gate, 0.0)
    return weights * gate, gate == 0


def _hard_prune(
    eta: torch.Tensor, weights: torch.Tensor, scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """IsoRag's hard rule at a tensor threshold (edges scoring above ``eta`` go)."""
    removed = (weights > 0) & (scores > eta.detach())
    return weights.masked_fill(removed, 0.0), removed
