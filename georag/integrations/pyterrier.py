"""PyTerrier: any georag reranker as a re-ranking transformer, a georag index as a
retrieval transformer.

``GeoragTransformer`` is a :class:`pyterrier.Transformer` over a result frame with the
columns ``qid``, ``query``, ``docno`` and ``text`` (e.g. ``bm25 >> pt.text.get_text(...) >>
GeoragTransformer(Reranker("maniscope"))``), the shape of PyTerrier's cross-encoder
rerankers. All queries of the frame go through one batched ``rank_batch`` call; the output
keeps the kept rows with the georag ``score`` and a fresh ``rank`` (0 = best), sorted by
query and rank. PyTerrier 1.x runs these frames without Java (only Terrier's own indexes need
a JVM). ``GeoragRetrieve`` maps a query frame (``qid``, ``query``) to a result frame
(``qid``, ``query``, ``docno``, ``title``, ``text``, ``score``, ``rank``), every query in one
batched :meth:`georag.Retriever.retrieve_batch` call. Needs the ``pyterrier`` extra.
"""

from __future__ import annotations

import pandas as pd
import pyterrier as pt

from georag.api import Reranker
from georag.retrievers.retriever import Retriever

__all__ = ["GeoragRetrieve", "GeoragTransformer"]

_COLUMNS = ("qid", "query", "docno", "text")


class GeoragTransformer(pt.Transformer):
    """Rerank a PyTerrier result frame with a :class:`georag.Reranker`.

    Parameters
    ----------
    reranker : georag.Reranker
    """

    def __init__(self, reranker: Reranker) -> None:
        self.reranker = reranker

    def __repr__(self) -> str:
        return f"GeoragTransformer({self.reranker!r})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in _COLUMNS if c not in inp.columns]
        if missing:
            raise ValueError(f"inp: the frame lacks column(s) {missing} (needs {list(_COLUMNS)})")
        if inp.empty:
            return inp.assign(score=[], rank=[])
        groups = list(inp.groupby("qid", sort=False))
        queries = [str(frame["query"].iloc[0]) for _, frame in groups]
        docs_lists = [
            [{"id": str(d), "text": t} for d, t in zip(frame["docno"], frame["text"])]
            for _, frame in groups
        ]
        ranked = self.reranker.rank_batch(queries, docs_lists)
        parts = []
        for (_, frame), results in zip(groups, ranked):
            kept = [r for r in results if r.kept]
            part = frame.iloc[[r.index for r in kept]].copy()
            part["score"] = [r.score for r in kept]
            part["rank"] = list(range(len(kept)))
            parts.append(part)
        return pd.concat(parts, ignore_index=True)


class GeoragRetrieve(pt.Transformer):
    """Retrieve from a georag index for a PyTerrier query frame.

    Parameters
    ----------
    retriever : georag.Retriever
    k : int
        Results per query.
    """

    def __init__(self, retriever: Retriever, k: int = 10) -> None:
        self.retriever, self.k = retriever, k

    def __repr__(self) -> str:
        return f"GeoragRetrieve({self.retriever!r}, k={self.k})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in ("qid", "query") if c not in inp.columns]
        if missing:
            raise ValueError(f"inp: the frame lacks column(s) {missing} (needs qid, query)")
        qids, queries = inp["qid"].tolist(), [str(q) for q in inp["query"]]
        found = self.retriever.retrieve_batch(queries, k=self.k) if queries else []
        rows = [
            (qid, query, d.id, d.title, d.text, d.score, rank)
            for qid, query, docs in zip(qids, queries, found)
            for rank, d in enumerate(docs)
        ]
        columns = ["qid", "query", "docno", "title", "text", "score", "rank"]
        return pd.DataFrame(rows, columns=columns)
