"""Learnable graph diffusion: seed 002's personalized-PageRank reranker with trained knobs.

The fixed method (:class:`~georag.rerank.diffusion.DiffusionReranker`, "Diffusion-Aided
RAG") fixes every number by hand. Here they are parameters, initialised at its defaults:

* ``damping`` (0.85) in (0, 1), through a sigmoid;
* ``edge_power`` (1): edge weights ``max(cos, 0) ** edge_power``, through exp;
* ``teleport_power`` (1): personalization ``(s - min(s, 0)) ** teleport_power``, through exp;
* ``fusion`` (0): the final score is ``PPR + fusion * first-stage score``;
* optionally a learned linear map of the candidate embeddings (identity at start) before
  the cosine graph.

A power is applied as ``w * exp((power - 1) log w)`` so that at ``power = 1`` the weights are
the fixed method's bit for bit. Gradients run through the personalized PageRank by implicit
differentiation (:func:`georag.geometry.diffusion.personalized_pagerank`).

Discrete parts are kept as in the fixed method and not trained: the graph is built on the
``top_m`` candidates by first-stage score, and inference keeps the ``top_k`` best; training
ranks all ``top_m`` (the loss sees the whole pool, so a candidate can climb into the top k).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.geometry.graphs import cosine_gram
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.diffusion import top_m_mask
from georag.rerank.learned import LearnableReranker
from georag.rerank.pipeline import top_k_mask

__all__ = ["LearnedDiffusionConfig", "LearnedDiffusion", "safe_power"]


@dataclass(frozen=True)
class LearnedDiffusionConfig:
    """Initial knobs (seed 002's defaults) and fixed settings.

    Parameters
    ----------
    top_m, top_k : int
        Graph size and candidates kept at inference (fixed, as the paper).
    damping, edge_power, teleport_power, fusion : float
        Initial values of the knobs (see the module docstring).
    embedding_map : bool
        Learn a linear map of the candidate embeddings (identity at start).
    dim : int
        Embedding width D (for the map).
    tol, max_iter :
        Power iteration; the loose ``max_iter`` leaves room for a learned damping near 1.
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    top_m: int = 50
    top_k: int = 20
    damping: float = 0.85
    edge_power: float = 1.0
    teleport_power: float = 1.0
    fusion: float = 0.0
    embedding_map: bool = False
    dim: int = 384
    tol: float = 1e-6
    max_iter: int = 1000
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.top_m < 1 or self.top_k < 1:
            raise ValueError(f"top_m and top_k must be positive, got {self.top_m}, {self.top_k}")
        if not 0.0 < self.damping < 1.0:
            raise ValueError(f"damping must lie in (0, 1), got {self.damping}")
        if not (self.edge_power > 0 and self.teleport_power > 0):
            raise ValueError(
                f"edge_power and teleport_power must be positive, got "
                f"{self.edge_power}, {self.teleport_power}"
            )


def safe_power(x: torch.Tensor, power: torch.Tensor) -> torch.Tensor:
    """``x ** power`` for ``x >= 0`` and ``power > 0``, exact at ``power = 1`` and 0 (with
    zero gradient) at 0.

    Under autograd it is computed as ``x * exp((power - 1) * log x)`` on the positive
    entries only, so no ``log 0`` reaches the tape. Without a tape (inference) it is one
    pass: ``x`` itself at ``power = 1``, else ``x.pow(power)`` (within rounding of the
    training formula).
    """
    if not (torch.is_grad_enabled() and (x.requires_grad or power.requires_grad)):
        return x if bool(power == 1) else x.pow(power)
    positive = x > 0
    log = torch.log(torch.where(positive, x, 1.0))
    return torch.where(positive, x * torch.exp((power - 1.0) * log), 0.0)


class LearnedDiffusion(LearnableReranker):
    """Personalized-PageRank reranker with learned damping, edge and teleport powers."""

    name = "learned_diffusion"
    config_class = LearnedDiffusionConfig
    fixed_method = "diffusion"
    search_space = {
        "damping": (0.05, 0.99, False),
        "edge_power": (0.1, 10.0, True),
        "teleport_power": (0.1, 10.0, True),
        "fusion": (1e-4, 10.0, True),
    }

    def __init__(self, config: LearnedDiffusionConfig | None = None) -> None:
        super().__init__(config or LearnedDiffusionConfig())
        cfg = self.config
        self.damping = Interval(cfg.damping)
        self.edge_power = Positive(cfg.edge_power)
        self.teleport_power = Positive(cfg.teleport_power)
        self.fusion = Real(cfg.fusion)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        pool = top_m_mask(batch, cfg.top_m)
        index = None
        cands, scores = batch.cands, batch.scores
        if cfg.top_m < batch.num_candidates:  # compact the pool, as the fixed method
            index = torch.argsort(pool.to(torch.uint8), dim=1, descending=True, stable=True)
            index = index[:, : cfg.top_m]
            cands = cands.gather(1, index.unsqueeze(2).expand(-1, -1, cands.shape[2]))
            scores, pool = scores.gather(1, index), pool.gather(1, index)
        if self.embed is not None:
            cands = self.embed(cands)
        dtype = cands.dtype
        similarity = cosine_gram(cands, pool)
        if torch.is_grad_enabled() and similarity.requires_grad:
            eye = torch.eye(pool.shape[1], dtype=torch.bool, device=pool.device)
            similarity = similarity.masked_fill(eye, 0.0).clamp_min(0.0)
        else:  # no tape: in place, as the fixed method
            similarity.clamp_min_(0.0).diagonal(dim1=1, dim2=2).zero_()
        weights = safe_power(similarity, self.edge_power().to(dtype))

        low = scores.masked_fill(~pool, torch.inf).amin(dim=1, keepdim=True).clamp(max=0.0)
        teleport = (scores - low).masked_fill(~pool, 0.0).to(dtype)
        flat = teleport.sum(dim=1, keepdim=True) == 0
        teleport = torch.where(flat, pool.to(dtype), teleport)
        teleport = safe_power(teleport, self.teleport_power().to(dtype))

        options = dict(damping=self.damping().to(dtype), tol=cfg.tol, max_iter=cfg.max_iter)
        rows = pool.any(dim=1)
        if bool(rows.all()):  # the common case: no query without candidates, no copies
            ranks = personalized_pagerank(weights, teleport, mask=pool, **options)
        else:
            ranks = torch.zeros_like(teleport)
            if bool(rows.any()):
                ppr = personalized_pagerank(
                    weights[rows], teleport[rows], mask=pool[rows], **options
                )
                ranks = ranks.index_put((rows.nonzero().squeeze(1),), ppr)
        final = ranks + self.fusion().to(dtype) * scores.to(dtype)
        final = final.to(batch.scores.dtype)
        if index is not None:
            final = torch.zeros_like(batch.scores).scatter(1, index, final)
            pool = torch.zeros_like(batch.mask).scatter(1, index, pool)
        return final, pool

    def keep(self, scores: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
        return top_k_mask(scores, ranked, self.config.top_k)
