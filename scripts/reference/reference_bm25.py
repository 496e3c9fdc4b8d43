"""A plain BM25 reference: bm25s (k1=1.2, b=0.75, English stop words) + pytrec_eval, no georag.

Usage:
    python scripts/reference/reference_bm25.py ../shared/data/scifact  (or: scifact --data-dir DIR)

What it computes uses no georag; only its command line is the harness's.
"""

from __future__ import annotations

from pathlib import Path

import bm25s
from reference_dense import dataset_folder, load, score


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


def main() -> None:
    from georag.perf.bench import bench_parser, start

    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("dataset", help="BEIR folder, or its name under --data-dir")
    args = parser.parse_args()
    bench = start(args, config={"BM25": "bm25s k1=1.2 b=0.75, English stop words"}, device="cpu")
    scores = run_bm25(dataset_folder(args))
    print(scores)
    bench.finish(scores)


if __name__ == "__main__":
    main()
