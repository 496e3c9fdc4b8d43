"""Time georag.Reranker.rank_batch on the 300 scifact test queries, against a loop of rank().

Each query's documents are its dense top-10 (all-MiniLM-L6-v2, faiss flat) as texts. The
reranker's cache is seeded with the corpus embeddings the first stage already holds, so the
first rank_batch call encodes only the 300 queries (cold queries); the later calls read the
content-hash cache for everything (warm), so they time the batched method alone. The loop
calls rank() once per query on the same warm cache. Medians over ``--repeats`` runs; the
exact set-up, the torch threads and the load average are printed::

    OMP_NUM_THREADS=1 python scripts/bench_api.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import georag
from georag.data.beir import load_beir
from georag.retrieval.candidates import FirstStage, FirstStageConfig


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("GEORAG_DATA", "../shared/data"))
    parser.add_argument("--methods", nargs="+", default=["maniscope", "ricci"])
    parser.add_argument("--docs", type=int, default=10, help="documents per query")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")

    data = load_beir("scifact", data_dir=args.data_dir, download=False)
    stage = FirstStage(data, FirstStageConfig(top_m=args.docs))
    qids = list(data.queries)
    queries = [data.queries[q] for q in qids]
    pool = stage.retrieve(qids, queries, with_texts=True)
    docs_lists = [
        [{"id": d, "text": t} for d, t in zip(ids, texts)]
        for ids, texts in zip(pool.doc_ids, pool.cand_texts)
    ]
    print(f"scifact test: {len(queries)} queries x {args.docs} abstracts (dense top-{args.docs})")
    print(
        "\n| method | rank_batch s, encoding the queries | warm rank_batch s "
        "| warm loop of rank() s | loop / batch |"
    )
    print("|---|---:|---:|---:|---:|")
    for method in args.methods:
        reranker = georag.Reranker(method, encoder=stage.encoder)
        reranker.cache.add(stage.units.texts, stage.embeddings)
        start = time.perf_counter()
        reranker.rank_batch(queries, docs_lists)
        cold = time.perf_counter() - start
        warm = _median_s(lambda r=reranker: r.rank_batch(queries, docs_lists), args.repeats)
        loop = _median_s(
            lambda r=reranker: [r.rank(q, d) for q, d in zip(queries, docs_lists)], args.repeats
        )
        print(f"| {method} | {cold:.2f} | {warm:.3f} | {loop:.3f} | {loop / warm:.1f}x |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
