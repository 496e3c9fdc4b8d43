"""A small synthetic corpus for the GAR tests: random unit embeddings with exact duplicates
(so that scores tie), ids whose string order differs from row order."""

from __future__ import annotations

import torch

from georag.batch import Corpus, QueryBatch


def synthetic_corpus(tmp_path, *, n: int = 150, d: int = 8, seed: int = 0) -> Corpus:
    """``n`` unit vectors, every tenth a copy of the one before (equal cosines)."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, d, generator=g)
    emb[10::10] = emb[9::10][: len(emb[10::10])]
    emb = emb / emb.norm(dim=1, keepdim=True)
    ids = [f"doc{int(i)}" for i in torch.randperm(10 * n, generator=g)[:n]]
    words = ["graph", "curvature", "flow", "retrieval", "dense", "lexical", "query", "corpus"]
    texts = [" ".join(words[(i * j) % len(words)] for j in range(1, 6)) for i in range(n)]
    return Corpus(ids, [""] * n, texts, emb, cache_dir=str(tmp_path))


def synthetic_queries(corpus: Corpus, *, b: int = 6, seed: int = 1) -> QueryBatch:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, corpus.embeddings.shape[1], generator=g)
    q = q / q.norm(dim=1, keepdim=True)
    return QueryBatch([f"q{i}" for i in range(b)], [f"query {i}" for i in range(b)], q)
