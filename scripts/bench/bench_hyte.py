"""HyTE-H speed on SciFact: hybrid search vs bm25s alone, index build and load time.

Usage:
    python scripts/bench/bench_hyte.py --data-dir ../shared/data \
        [--weights runs/hyte_h/projection.pt] [--threads 1] [--out runs/bench_hyte.json]

Measures, in one process and side by side:
  * index build (chunk, encode, BM25, write) and load (memory map, checksums, BM25 state);
  * B=1 latency (median over the test queries, each searched alone) of the hybrid
    (HyTE-H encode + BM25 top-50 + Lorentz re-scoring), of its BM25 stage alone, of
    georag's BM25Index.search (bm25s) and of raw ``bm25s.BM25.retrieve`` on pre-tokenized
    queries;
  * batched throughput (all queries in one call, repeated) of the same three.
Goals: <= 2 ms/query at B=1, >= 5000 queries/s batched, load < 50 ms.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from georag.data.beir import load_beir
from georag.models.hyte import HyTEEncoder
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.rerank.hyte import build_index
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.lorentz_index import LorentzIndex


def main() -> None:
    parser = bench_parser(__doc__, repeats=5)
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--weights", help="trained projection (HyTEEncoder.save)")
    parser.add_argument(
        "--batch-copies",
        type=int,
        default=10,
        help="the batched run searches the test queries this many times over",
    )
    args = parser.parse_args()
    bench = start(
        args,
        config={
            "dataset": args.dataset,
            "chunks": "W=300 O=60",
            "BM25": "whitespace k1=1.2 b=0.75",
            "top-M": 50,
            "k": 10,
            "alpha": 0.5,
            "weights": args.weights or "untrained",
        },
    )

    ds = load_beir(args.dataset, split="test", data_dir=args.data_dir, download=False)
    docs = {d: doc.full_text for d, doc in ds.corpus.items() if doc.full_text.strip()}
    queries = list(ds.queries.values())
    encoder, load_s = timed(lambda: HyTEEncoder.from_pretrained(weights=args.weights))
    print(
        f"{len(docs)} docs, {len(queries)} test queries; encoder (word embeddings + "
        f"tokenizer) load: {load_s * 1e3:.0f} ms (once)"
    )
    results = {}

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index"
        index, build_s = timed(lambda: build_index(docs, path, encoder=encoder))
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        loads = bench.time(
            lambda i: LorentzIndex.load(path, encoder=encoder), repeats=args.repeats, warmup=0
        )
        index = LorentzIndex.load(path, encoder=encoder)
        print(
            f"index: {len(index)} chunks x {index.dim} float32, {size / 2**20:.1f} MiB on "
            f"disk; build {build_s:.2f} s; load (SHA-256 of every file) median "
            f"{loads.median:.1f} ms"
        )

        peer = BM25Index.build(index.texts, tokenizer="whitespace")  # bm25s, same chunks
        peer.save(Path(tmp) / "bm25s")
        peer_loads = bench.time(
            lambda i: BM25Index.load(Path(tmp) / "bm25s"), repeats=args.repeats, warmup=0
        )
        print(
            f"peer: bm25s index (BM25Index.save/load) of the same chunks: load median "
            f"{peer_loads.median:.1f} ms"
        )
        results["load_ms"] = {
            "index": loads.as_dict(),
            "bm25s": peer_loads.as_dict(),
            "build_s": build_s,
        }
        retriever = peer.retriever
        tokens = [q.lower().split() for q in queries]
        single = {
            "hybrid (encode + BM25 top-50 + Lorentz)": lambda q: index.search([q], 10),
            "index BM25 stage alone, top-50": lambda q: index.bm25.search([q], 50),
            "georag BM25Index.search (bm25s), top-50": lambda q: peer.search([q], 50),
            "raw bm25s retrieve, pre-tokenized, top-50": lambda t: retriever.retrieve(
                [t], k=50, show_progress=False
            ),
            "HyTE-H query encode only": lambda q: encoder.encode([q]),
        }
        print("\n| B=1 | median ms/query | p90 | vs raw bm25s |\n|---|---:|---:|---:|")
        ms = {}
        for label, fn in single.items():
            items = (tokens if label.startswith("raw") else queries) * 2
            ms[label] = bench.time(lambda i, f=fn, x=items: f(x[i]), repeats=len(items))
        base = ms["raw bm25s retrieve, pre-tokenized, top-50"].median
        for label, value in ms.items():
            print(
                f"| {label} | {value.median:.3f} | {value.p90:.3f} | {value.median / base:.2f}x |"
            )
        results["b1"] = {label: value.as_dict() for label, value in ms.items()}

        batch = queries * args.batch_copies
        batch_tokens = tokens * args.batch_copies
        batched = {
            "hybrid (encode + BM25 top-50 + Lorentz)": lambda b: index.search(b, 10),
            "index BM25 stage alone, top-50": lambda b: index.bm25.search(b, 50),
            "georag BM25Index.search (bm25s), top-50": lambda b: peer.search(b, 50),
            "raw bm25s retrieve, pre-tokenized, top-50": lambda b: retriever.retrieve(
                b, k=50, show_progress=False, n_threads=1
            ),
        }
        print(f"\n| batched, B={len(batch)} | queries/s | vs raw bm25s |\n|---|---:|---:|")
        rates = {}
        for label, fn in batched.items():
            items = batch_tokens if label.startswith("raw") else batch
            timing = bench.time(lambda i, f=fn, x=items: f(x), repeats=args.repeats, per=len(items))
            rates[label] = 1e3 / timing.median
        base = rates["raw bm25s retrieve, pre-tokenized, top-50"]
        for label, value in rates.items():
            print(f"| {label} | {value:.0f} | {value / base:.2f}x |")
        results["batched_queries_per_s"] = rates
    bench.finish(results)


if __name__ == "__main__":
    main()
