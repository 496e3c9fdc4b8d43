"""Time georag.Reranker.rank_batch on the 300 scifact test queries, against a loop of rank().

Each query's documents are its dense top-10 (all-MiniLM-L6-v2, faiss flat) as texts. The
reranker's cache is seeded with the corpus embeddings the first stage already holds, so the
first rank_batch call encodes only the 300 queries (cold queries); the later calls read the
content-hash cache for everything (warm), so they time the batched method alone. The loop
calls rank() once per query on the same warm cache. Medians over ``--repeats`` runs; the
exact set-up, the torch threads and the load average are printed::

    OMP_NUM_THREADS=1 python scripts/bench/bench_api.py --data-dir ../shared/data
"""

from __future__ import annotations

import georag
from georag.data.beir import load_beir
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument("--methods", nargs="+", default=["maniscope", "ricci"])
    parser.add_argument("--docs", type=int, default=10, help="documents per query")
    args = parser.parse_args()
    bench = start(args, config={"data": f"scifact test, dense top-{args.docs}"})

    data = load_beir("scifact", data_dir=args.data_dir, download=False)
    encoder = TextEncoder(device=bench.device)
    stage = FirstStage(data, FirstStageConfig(top_m=args.docs), encoder=encoder)
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
    results = {}
    for method in args.methods:
        reranker = georag.Reranker(method, encoder=stage.encoder)
        reranker.cache.add(stage.units.texts, stage.embeddings)
        _, cold = timed(lambda r=reranker: r.rank_batch(queries, docs_lists))
        warm = bench.time(
            lambda i, r=reranker: r.rank_batch(queries, docs_lists), repeats=args.repeats, warmup=0
        )
        loop = bench.time(
            lambda i, r=reranker: [r.rank(q, d) for q, d in zip(queries, docs_lists)],
            repeats=args.repeats,
            warmup=0,
        )
        warm_s, loop_s = warm.median / 1e3, loop.median / 1e3
        results[method] = {"cold_s": cold, "warm": warm.as_dict(), "loop": loop.as_dict()}
        print(f"| {method} | {cold:.2f} | {warm_s:.3f} | {loop_s:.3f} | {loop_s / warm_s:.1f}x |")
    bench.finish(results)


if __name__ == "__main__":
    main()
