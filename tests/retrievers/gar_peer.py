"""pyterrier-adaptive as the peer of georag's GAR: the same graph, scorer and pools.

Shared by the parity tests; imports pyterrier and pyterrier_adaptive (skip before importing
this module when they are absent).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt
import pyterrier_adaptive
import torch
from npids import Lookup

from georag.batch import CandidateBatch


def export_graph(neighbours: np.ndarray, doc_ids: list[str], folder: Path):
    """georag's (N, k) neighbours as pyterrier-adaptive's ``NpTopKCorpusGraph`` (its on-disk
    format: ``docnos.npids``, ``edges.u32.np``, ``weights.f16.np``, ``pt_meta.json``)."""
    folder.mkdir(parents=True)
    Lookup.build(doc_ids, folder / "docnos.npids")
    np.asarray(neighbours, dtype=np.uint32).tofile(folder / "edges.u32.np")
    np.zeros(neighbours.shape, dtype=np.float16).tofile(folder / "weights.f16.np")
    meta = {"type": "corpus_graph", "format": "np_topk", "doc_count": len(doc_ids)}
    (folder / "pt_meta.json").write_text(json.dumps({**meta, "k": int(neighbours.shape[1])}))
    return pyterrier_adaptive.NpTopKCorpusGraph(folder)


class GeoragScorer(pt.Transformer):
    """A deterministic pointwise pt scorer: the georag pool reranker ``scorer`` on each
    batch, the candidates' embeddings taken from the corpus and their first-stage score
    the cosine with the query (what georag's GAR gives its scorer)."""

    def __init__(self, scorer, embeddings: torch.Tensor, doc_ids: list[str], queries: dict):
        self.scorer, self.embeddings, self.queries = scorer, embeddings, queries
        self.row = {d: i for i, d in enumerate(doc_ids)}

    def transform(self, df: pd.DataFrame) -> pd.DataFrame:
        out = []
        for qid, group in df.groupby("qid", sort=False):
            rows = torch.tensor([self.row[d] for d in group.docno])
            query = self.queries[qid].unsqueeze(0)
            cands = self.embeddings[rows].unsqueeze(0)
            batch = CandidateBatch(
                query=query,
                cands=cands,
                scores=(cands * query.unsqueeze(1)).sum(-1),
                mask=torch.ones(1, len(rows), dtype=torch.bool),
                query_ids=[qid],
                doc_ids=[list(group.docno)],
            )
            with torch.no_grad():
                scores = self.scorer(batch).scores[0]
            out.append(group.assign(score=scores.double().numpy()))
        return pd.concat(out) if out else df


def peer_rankings(pool: CandidateBatch, graph, scorer: GeoragScorer, *, budget, batch_size):
    """pyterrier_adaptive.GAR over ``pool``: ``{query id: [doc ids, best first]}`` and
    ``{query id: [iteration of each]}``."""
    mask = pool.mask.tolist()
    rows = [
        (q, d, float(s))
        for q, ids, scores, real in zip(pool.query_ids, pool.doc_ids, pool.scores.tolist(), mask)
        for d, s, r in zip(ids, scores, real)
        if r
    ]
    frame = pd.DataFrame(rows, columns=["qid", "docno", "score"])
    frame["query"] = frame["qid"]
    frame["rank"] = frame.groupby("qid").cumcount()
    gar = pyterrier_adaptive.GAR(scorer, graph, num_results=budget, batch_size=batch_size)
    result = gar(frame)
    ranked = {q: list(g.docno) for q, g in result.groupby("qid", sort=False)}
    iterations = {q: list(g.iteration) for q, g in result.groupby("qid", sort=False)}
    return ranked, iterations
