"""Graph-diffusion reranking: personalized PageRank over the candidate similarity graph.

Diffusion-aided RAG (a paper on graph-based diffusion reranking for dense-retrieval
chatbots; its text gives no title line, authors or arXiv id): take the top-50 dense
candidates, join every pair by an edge weighted with their cosine similarity (a complete
graph), run personalized PageRank with the teleport vector proportional to the dense scores
(damping 0.85, networkx semantics), and keep the top K=20 by PageRank score.

One scoring function, :func:`diffusion_scores`, whose knobs are floats or tensors: the
fixed :class:`DiffusionReranker` calls it with its config's numbers, the learnable
:class:`LearnedDiffusion` with its parameters, so that untrained it is the fixed method.
The learnable one trains

* ``damping`` (0.85) in (0, 1), through a sigmoid;
* ``edge_power`` (1): edge weights ``max(cos, 0) ** edge_power``, through exp;
* ``teleport_power`` (1): personalization ``(s - min(s, 0)) ** teleport_power``, through exp;
* ``fusion`` (0): the final score is ``PPR + fusion * first-stage score``;
* optionally a linear map of the candidate embeddings (identity at start) before the
  cosine graph.

A power is applied as ``w * exp((power - 1) log w)`` so that at ``power = 1`` the weights are
the fixed method's bit for bit. Gradients run through the personalized PageRank by implicit
differentiation (:func:`georag.geometry.diffusion.personalized_pagerank`). The discrete parts
are not trained: the graph is built on the ``top_m`` candidates by first-stage score, and
inference keeps the ``top_k`` best; training ranks all ``top_m`` (the loss sees the whole
pool, so a candidate can climb into the top k).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.diffusion import personalized_pagerank
from georag.geometry.graphs import cosine_gram
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.learned import LearnableReranker, LearningOptions
from georag.rerank.pool import pool_index, top_k_mask
from georag.rerank.registry import register
from georag.rerank.small_pool import SmallPool

__all__ = [
    "DiffusionConfig",
    "DiffusionReranker",
    "LearnedDiffusion",
    "LearnedDiffusionConfig",
    "diffusion_scores",
    "safe_power",
]

Knob = float | torch.Tensor


@dataclass(frozen=True)
class DiffusionConfig:
    """Defaults of the Diffusion-aided RAG paper (also in configs/rerank/diffusion.yaml).

    Parameters
    ----------
    top_m : int
        Candidates (best first-stage scores) that form the graph; the rest are dropped.
    top_k : int
        Candidates kept after reranking.
    damping : float
        PageRank damping (networkx ``alpha``).
    tol, max_iter :
        networkx's power-iteration stopping rule (L1 change below ``N * tol``).
    """

    top_m: int = 50
    top_k: int = 20
    damping: float = 0.85
    tol: float = 1e-6
    max_iter: int = 100

    def __post_init__(self) -> None:
        if self.top_m < 1:
            raise ValueError(f"top_m must be positive, got {self.top_m}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be positive, got {self.top_k}")
        if not 0.0 <= self.damping <= 1.0:
            raise ValueError(f"damping must lie in [0, 1], got {self.damping}")


def safe_power(x: torch.Tensor, power: Knob) -> torch.Tensor:
    """``x ** power`` for ``x >= 0`` and ``power > 0``, exact at ``power = 1`` and 0 (with
    zero gradient) at 0.

    Under autograd it is computed as ``x * exp((power - 1) * log x)`` on the positive
    entries only, so no ``log 0`` reaches the tape. Without a tape (inference) it is one
    pass: ``x`` itself at ``power = 1``, else ``x.pow(power)`` (within rounding of the
    training formula).
    """
    taped = isinstance(power, torch.Tensor) and power.requires_grad
    if not (torch.is_grad_enabled() and (x.requires_grad or taped)):
        return x if bool(power == 1) else x.pow(power)
    positive = x > 0
    log = torch.log(torch.where(positive, x, 1.0))
    return torch.where(positive, x * torch.exp((power - 1.0) * log), 0.0)


def diffusion_scores(
    batch: CandidateBatch,
    *,
    top_m: int,
    damping: Knob,
    tol: float,
    max_iter: int,
    edge_power: Knob = 1.0,
    teleport_power: Knob = 1.0,
    embed: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Personalized-PageRank scores over a complete cosine-similarity graph of the pool.

    For each query: the ``top_m`` candidates by first-stage score become the nodes; the
    edge ``(i, j)``, ``i != j``, weighs ``max(cos(c_i, c_j), 0) ** edge_power`` (negative
    similarities are clipped, so a candidate with no positive similarity is a dangling
    node, handled as networkx does); the personalization is the first-stage score shifted
    by ``min(0, min_i s_i)`` so that it is non-negative (uniform when that leaves it all
    zero), to the power ``teleport_power``. A query with one candidate scores it 1; one
    with none scores nothing.

    Parameters
    ----------
    batch : CandidateBatch
    top_m, damping, tol, max_iter
        See :class:`DiffusionConfig`; ``damping`` may be a tensor (a learned knob).
    edge_power, teleport_power : float or torch.Tensor
        Powers of the edge weights and of the personalization (1: the paper's).
    embed : callable, optional
        A map applied to the candidate embeddings (B, M, D) before the graph is built.

    Returns
    -------
    ranks : torch.Tensor, shape (B, M)
        The PageRank mass of each pooled candidate, 0 elsewhere, in the batch's dtype.
    pool : torch.Tensor, shape (B, M), bool
        The pooled candidates.
    """
    cands, scores, pool = batch.cands, batch.scores, batch.mask
    index = pool_index(batch, top_m)  # compact the pool: an (M, M) graph costs more
    if index is not None:
        cands = cands.gather(1, index.unsqueeze(2).expand(-1, -1, cands.shape[2]))
        scores, pool = scores.gather(1, index), pool.gather(1, index)
    if embed is not None:
        cands = embed(cands)
    dtype = cands.dtype
    similarity = cosine_gram(cands, pool)
    if torch.is_grad_enabled() and similarity.requires_grad:
        eye = torch.eye(pool.shape[1], dtype=torch.bool, device=pool.device)
        similarity = similarity.masked_fill(eye, 0.0).clamp_min(0.0)
    else:  # no tape: in place
        similarity.clamp_min_(0.0).diagonal(dim1=1, dim2=2).zero_()
    weights = safe_power(similarity, _as(edge_power, dtype))

    low = scores.masked_fill(~pool, torch.inf).amin(dim=1, keepdim=True).clamp(max=0.0)
    teleport = (scores - low).masked_fill(~pool, 0.0).to(dtype)
    flat = teleport.sum(dim=1, keepdim=True) == 0
    teleport = torch.where(flat, pool.to(dtype), teleport)
    teleport = safe_power(teleport, _as(teleport_power, dtype))

    options = dict(damping=_as(damping, dtype), tol=tol, max_iter=max_iter)
    rows = pool.any(dim=1)
    if bool(rows.all()):  # the common case: no query without candidates, no copies
        ranks = personalized_pagerank(weights, teleport, mask=pool, **options)
    else:
        ranks = torch.zeros_like(teleport)
        if bool(rows.any()):
            ppr = personalized_pagerank(weights[rows], teleport[rows], mask=pool[rows], **options)
            ranks = ranks.index_put((rows.nonzero().squeeze(1),), ppr)
    ranks = ranks.to(batch.scores.dtype)
    if index is not None:
        ranks = torch.zeros_like(batch.scores).scatter(1, index, ranks)
        pool = torch.zeros_like(batch.mask).scatter(1, index, pool)
    return ranks, pool


def _as(knob: Knob, dtype: torch.dtype) -> Knob:
    """A tensor knob in the computation's dtype; a float as it is."""
    return knob.to(dtype) if isinstance(knob, torch.Tensor) else knob


def diffusion_small_pool(config: DiffusionConfig) -> SmallPool:
    """Two documents or more: PageRank on them; one: the first-stage order."""
    return SmallPool(slots=1, fewest=2, rule="n >= 2: PageRank on the n documents; n = 1: fallback")


@register
class DiffusionReranker:
    """Personalized-PageRank reranker over a complete cosine-similarity graph
    (:func:`diffusion_scores` with the config's numbers); the ``top_k`` best are kept."""

    name = "diffusion"
    config_class = DiffusionConfig

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return diffusion_small_pool(self.config)

    def __init__(self, config: DiffusionConfig | None = None) -> None:
        self.config = config or DiffusionConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        cfg = self.config
        ranks, pool = diffusion_scores(
            batch, top_m=cfg.top_m, damping=cfg.damping, tol=cfg.tol, max_iter=cfg.max_iter
        )
        return RerankResult.from_scores(ranks, top_k_mask(ranks, pool, cfg.top_k))


@dataclass(frozen=True)
class LearnedDiffusionConfig(LearningOptions):
    """The fixed method's config (initial damping, graph and cut) and the learning options.

    Parameters
    ----------
    fixed : DiffusionConfig
        ``top_m``, ``top_k`` (fixed, as the paper), the initial ``damping`` and the power
        iteration; its ``max_iter`` is raised to 1000 here, room for a learned damping
        near 1 (at the paper's damping the iteration stops long before).
    edge_power, teleport_power, fusion : float
        Initial values of the other knobs (see the module docstring).
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`.
    """

    fixed: DiffusionConfig = field(default_factory=lambda: DiffusionConfig(max_iter=1000))
    edge_power: float = 1.0
    teleport_power: float = 1.0
    fusion: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.fixed.damping < 1.0:
            raise ValueError(f"damping must lie in (0, 1), got {self.fixed.damping}")
        if not (self.edge_power > 0 and self.teleport_power > 0):
            raise ValueError(
                f"edge_power and teleport_power must be positive, got "
                f"{self.edge_power}, {self.teleport_power}"
            )


@register
class LearnedDiffusion(LearnableReranker):
    """Personalized-PageRank reranker with learned damping, edge and teleport powers."""

    name = "learned_diffusion"
    config_class = LearnedDiffusionConfig
    fixed_method = "diffusion"
    search_space = {
        "fixed.damping": (0.05, 0.99, False),
        "edge_power": (0.1, 10.0, True),
        "teleport_power": (0.1, 10.0, True),
        "fusion": (1e-4, 10.0, True),
    }

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return diffusion_small_pool(self.config.fixed)

    def __init__(self, config: LearnedDiffusionConfig | None = None) -> None:
        super().__init__(config or LearnedDiffusionConfig())
        cfg = self.config
        self.damping = Interval(cfg.fixed.damping)
        self.edge_power = Positive(cfg.edge_power)
        self.teleport_power = Positive(cfg.teleport_power)
        self.fusion = Real(cfg.fusion)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        fixed = self.config.fixed
        ranks, pool = diffusion_scores(
            batch,
            top_m=fixed.top_m,
            damping=self.damping(),
            tol=fixed.tol,
            max_iter=fixed.max_iter,
            edge_power=self.edge_power(),
            teleport_power=self.teleport_power(),
            embed=self.embed,
        )
        fusion = self.fusion().to(ranks.dtype)
        return ranks + fusion * batch.scores.masked_fill(~pool, 0.0), pool

    def keep(self, scores: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
        return top_k_mask(scores, ranked, self.config.fixed.top_k)
