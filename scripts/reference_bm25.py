"""A plain BM25 reference: bm25s (k1=1.2, b=0.75, English stop words) + pytrec_eval, no georag.

Usage: python scripts/reference_bm25.py ../shared/data/scifact
"""

from __future__ import annotations

import sys
from pathlib import Path

import bm25s
from reference_dense import load, score


def run_bm25(folder: Path, k: int = 100) -> dict[str, float]:
    corpus, queries, qrels = load(folder)
    texts = [(d.get("title", "") + " " + d["text"]).strip() for d in corpus]
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False)
    docs, scores = retriever.retrieve(tokens, k=k, show_progress=False)
    run = {
        qid: {corpus[j]["_id"]: float(s) for j, s in zip(docs[i], scores[i])}
        for i, qid in enumerate(qids)
    }
    return score(run, qrels)


if __name__ == "__main__":
    print(run_bm25(Path(sys.argv[1])))
