"""Graph-diffusion reranking: personalized PageRank over the candidate similarity graph.

Diffusion-aided RAG (a paper on graph-based diffusion reranking for dense-retrieval
chatbots; its text gives no title line, authors or arXiv id): take the top-50 dense
candidates, join every pair by an edge weighted with their cosine similarity (a complete
graph), run personalized PageRank with the teleport vector proportional to the dense scores
(damping 0.85, networkx semantics), and keep the top K=20 by PageRank score.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.diffusion import personalized_pagerank
from georag.geometry.graphs import cosine_gram
from georag.rerank.pipeline import top_k_mask

__all__ = ["DiffusionConfig", "DiffusionReranker", "top_m_mask"]


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


def top_m_mask(batch: CandidateBatch, top_m: int) -> torch.Tensor:
    """The ``top_m`` best real candidates of each query by first-stage score.

    Ties are broken by slot order (a stable sort), so the result is deterministic.

    Parameters
    ----------
    batch : CandidateBatch
    top_m : int

    Returns
    -------
    torch.Tensor, shape (B, M), bool
    """
    if top_m >= batch.num_candidates:
        return batch.mask.clone()
    ranked = batch.scores.masked_fill(~batch.mask, -torch.inf)
    order = torch.argsort(ranked, dim=1, descending=True, stable=True)[:, :top_m]
    return torch.zeros_like(batch.mask).scatter(1, order, True) & batch.mask


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
        cands, scores, pool, index = batch.cands, batch.scores, batch.mask, None
        if cfg.top_m < batch.num_candidates:  # compact the pool: an (M, M) graph costs more
            ranked = scores.masked_fill(~pool, -torch.inf)
            best = torch.argsort(ranked, dim=1, descending=True, stable=True)[:, : cfg.top_m]
            index = best.sort(dim=1).values  # slot order: the graph's node order
            cands = cands.gather(1, index.unsqueeze(2).expand(-1, -1, cands.shape[2]))
            scores, pool = scores.gather(1, index), pool.gather(1, index)
        weights = cosine_gram(cands, pool).clamp_min_(0.0)
        weights.diagonal(dim1=1, dim2=2).zero_()

        low = scores.masked_fill(~pool, torch.inf).amin(dim=1, keepdim=True).clamp(max=0.0)
        teleport = (scores - low).masked_fill(~pool, 0.0).to(weights.dtype)
        flat = teleport.sum(dim=1, keepdim=True) == 0
        teleport = torch.where(flat, pool.to(weights.dtype), teleport)

        rows = pool.any(dim=1)
        options = dict(damping=cfg.damping, tol=cfg.tol, max_iter=cfg.max_iter)
        if bool(rows.all()):  # the common case: no query without candidates, no copies
            ranks = personalized_pagerank(weights, teleport, mask=pool, **options)
        else:
            ranks = torch.zeros_like(teleport)
            if bool(rows.any()):
                ranks[rows] = personalized_pagerank(
                    weights[rows], teleport[rows], mask=pool[rows], **options
                )
        keep = top_k_mask(ranks, pool, cfg.top_k)
        ranks = ranks.to(batch.scores.dtype)
        if index is not None:
            ranks = torch.zeros_like(batch.scores).scatter(1, index, ranks)
            keep = torch.zeros_like(batch.mask).scatter(1, index, keep)
        return RerankResult.from_scores(ranks, keep)
