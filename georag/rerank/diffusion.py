"""Graph-diffusion reranking: personalized PageRank over the candidate similarity graph.

Seed 002 ("Diffusion-Aided RAG"): take the top-50 dense candidates, join every pair by an
edge weighted with their cosine similarity (a complete graph), run personalized PageRank
with the teleport vector proportional to the dense scores (damping 0.85, networkx
semantics), and keep the top K=20 by PageRank score.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.base import CandidateBatch, RerankResult
from georag.rerank.pipeline import top_k_mask

__all__ = ["DiffusionConfig", "DiffusionReranker", "top_m_pool", "unit_candidates"]


@dataclass(frozen=True)
class DiffusionConfig:
    """Defaults of seed 002 (also in configs/rerank/diffusion.yaml).

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


def top_m_pool(batch: CandidateBatch, top_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots of the ``top_m`` best first-stage candidates of each query.

    Parameters
    ----------
    batch : CandidateBatch
    top_m : int

    Returns
    -------
    index : torch.Tensor, shape (B, P), long
        Candidate slots, best first-stage score first, ``P = min(top_m, M)``.
    mask : torch.Tensor, shape (B, P), bool
        Whether the slot holds a real candidate.
    """
    p = min(top_m, batch.num_candidates)
    ranked = batch.scores.masked_fill(~batch.mask, -torch.inf)
    index = torch.argsort(ranked, dim=1, descending=True, stable=True)[:, :p]
    return index, batch.mask.gather(1, index)


def unit_candidates(batch: CandidateBatch, index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unit-normalized candidate embeddings at ``index``, zero at padding.

    Parameters
    ----------
    batch : CandidateBatch
    index, mask : torch.Tensor, shape (B, P)
        As returned by :func:`top_m_pool`.

    Returns
    -------
    torch.Tensor, shape (B, P, D)
    """
    d = batch.cands.shape[2]
    cands = batch.cands.gather(1, index.unsqueeze(2).expand(-1, -1, d))
    cands = cands.masked_fill(~mask.unsqueeze(2), 0.0)
    norms = cands.norm(dim=2, keepdim=True)
    if (norms.squeeze(2)[mask] == 0).any():
        raise ValueError("cands holds zero vectors; cosine similarity is undefined")
    return cands / norms.clamp_min(torch.finfo(cands.dtype).tiny)


class DiffusionReranker:
    """Personalized-PageRank reranker over a complete cosine-similarity graph.

    For each query: the ``top_m`` candidates by first-stage score become the nodes; the
    edge ``(i, j)``, ``i != j``, weighs ``max(cos(c_i, c_j), 0)`` (negative similarities are
    clipped, so a candidate with no positive similarity is a dangling node, handled as
    networkx does); the personalization is the first-stage score shifted by
    ``min(0, min_i s_i)`` so that it is non-negative (uniform when that leaves it all
    zero, i.e. when all scores are equal and non-positive). The new score is the PageRank
    mass; the ``top_k`` best are kept.

    A query with one candidate keeps it with score 1; a query with none keeps nothing.
    """

    name = "diffusion"

    def __init__(self, config: DiffusionConfig | None = None) -> None:
        self.config = config or DiffusionConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        cfg = self.config
        index, pool = top_m_pool(batch, cfg.top_m)
        unit = unit_candidates(batch, index, pool)
        weights = torch.bmm(unit, unit.transpose(1, 2)).clamp_min(0.0)
        weights = weights * ~torch.eye(weights.shape[1], dtype=torch.bool, device=weights.device)

        scores = batch.scores.gather(1, index).to(weights.dtype)
        low = scores.masked_fill(~pool, torch.inf).amin(dim=1, keepdim=True).clamp(max=0.0)
        teleport = (scores - low).masked_fill(~pool, 0.0)
        flat = teleport.sum(dim=1, keepdim=True) == 0
        teleport = torch.where(flat, pool.to(weights.dtype), teleport)

        ranks = torch.zeros_like(teleport)
        rows = pool.any(dim=1)
        if bool(rows.any()):
            ranks[rows] = personalized_pagerank(
                weights[rows],
                teleport[rows],
                damping=cfg.damping,
                tol=cfg.tol,
                max_iter=cfg.max_iter,
                mask=pool[rows],
            )
        keep_pool = top_k_mask(ranks, pool, cfg.top_k)
        out = torch.zeros_like(batch.scores).scatter(1, index, ranks.to(batch.scores.dtype))
        keep = torch.zeros_like(batch.mask).scatter(1, index, keep_pool)
        return RerankResult.from_scores(out, keep)
