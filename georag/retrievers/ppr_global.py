"""Whole-graph personalized PageRank over the corpus passage graph: the HippoRAG-style
baseline of ISO-RAG (the same source passages, no local graph, no pruning, damping 0.5)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.registry import register
from georag.retrieval.passage_graph import PassageGraph
from georag.retrievers.base import (
    EmbeddingRetriever,
    IsoRagOutput,
    _check_corpus,
    _check_query,
    _row_ids,
    _sources,
    _topk,
)

__all__ = ["GlobalPPR", "GlobalPPRConfig"]


@dataclass(frozen=True)
class GlobalPPRConfig:
    """Whole-graph PPR (the HippoRAG-style baseline of ISO-RAG's harness).

    Attributes
    ----------
    num_sources : int
        s, as in ISO-RAG.
    damping : float
        HippoRAG's 0.5.
    lam : float
        1 ranks by PPR alone (HippoRAG); otherwise ``lam * PPR / max + (1 - lam) * cosine``.
    topo_weight : float
        Weight of topological edges, as in ISO-RAG.
    tol, max_iter
        Power iteration (sparse CSR path of the diffusion module).
    """

    num_sources: int = 3
    damping: float = 0.5
    lam: float = 1.0
    topo_weight: float = 0.5
    tol: float = 1e-6
    max_iter: int = 200

    def __post_init__(self) -> None:
        if self.num_sources < 1:
            raise ValueError(f"num_sources must be at least 1, got {self.num_sources}")
        if not 0.0 <= self.lam <= 1.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need lam in [0, 1] and damping in [0, 1), got {self.lam}, {self.damping}"
            )
        if self.topo_weight < 0:
            raise ValueError(f"topo_weight must be >= 0, got {self.topo_weight}")


@register
class GlobalPPR(EmbeddingRetriever):
    """HippoRAG-style baseline: PPR from the same sources over the whole, unpruned graph.

    Parameters
    ----------
    config : GlobalPPRConfig, optional
    """

    name = "ppr_global"
    config_class = GlobalPPRConfig

    def fit_graph(
        self, embeddings: torch.Tensor, graph: PassageGraph, *, doc_ids: list[str] | None = None
    ) -> GlobalPPR:
        """Index a corpus given as embeddings (N, D) and its passage graph."""
        _check_corpus(embeddings, graph)
        self.embeddings = embeddings
        self.doc_ids = _row_ids(doc_ids, graph.num_nodes)
        weight = graph.edge_weight(topo_weight=self.config.topo_weight)
        self.csr = graph.to_csr(weight.to(embeddings.dtype))
        self.num_edges = int(self.csr.values().numel()) // 2
        return self

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query; see :meth:`IsoRag.search`."""
        self._check_fitted()
        _check_query(query, self.embeddings)
        cfg = self.config
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        sources = _sources(similarity, cfg.num_sources)
        p = torch.zeros_like(similarity).scatter_(
            1, sources, similarity.gather(1, sources).clamp_min(1e-6)
        )
        ppr = personalized_pagerank(
            self.csr, p.T.contiguous(), damping=cfg.damping, tol=cfg.tol, max_iter=cfg.max_iter
        ).T
        if cfg.lam < 1.0:
            ppr = cfg.lam * ppr / ppr.amax(dim=1, keepdim=True) + (1 - cfg.lam) * similarity
        rows = torch.arange(similarity.shape[1]).expand_as(similarity)
        best, indices = _topk(ppr, rows, top_k)
        b = query.shape[0]
        return IsoRagOutput(
            best,
            indices,
            torch.full((b,), self.num_edges),
            torch.zeros(b, dtype=torch.long),
            torch.full((b,), similarity.shape[1]),
        )
