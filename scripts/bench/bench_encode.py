"""Encoding throughput and the embedding cache.

Usage:
    python scripts/bench/bench_encode.py --dataset scifact --data-dir ../shared/data [--docs 2000]

Builds the first stage twice over the same corpus with an empty cache folder: the first run
encodes (docs/s reported), the second must load from the cache and encode nothing.
"""

from __future__ import annotations

import tempfile

import torch

from georag.data.beir import BeirDataset, load_beir
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder


def main() -> None:
    parser = bench_parser(__doc__, repeats=None)
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--docs", type=int, default=2000, help="encode the first N documents")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    bench = start(
        args,
        config={
            "dataset": args.dataset,
            "docs": args.docs,
            "model": DEFAULT_MODEL,
            "batch": args.batch_size,
        },
    )
    data = load_beir(args.dataset, data_dir=args.data_dir)
    corpus = dict(list(data.corpus.items())[: args.docs])
    data = BeirDataset(data.name, corpus, data.queries, data.qrels)
    encoder = TextEncoder(batch_size=args.batch_size, show_progress=False, device=bench.device)
    with tempfile.TemporaryDirectory() as cache:
        config = FirstStageConfig(first_stage="dense")
        first, cold = timed(lambda: FirstStage(data, config, encoder=encoder, cache_dir=cache))
        second, warm = timed(lambda: FirstStage(data, config, encoder=encoder, cache_dir=cache))
    same = torch.equal(first.embeddings, second.embeddings)
    print(f"cold: {cold:.1f} s, {len(corpus) / cold:.1f} docs/s (cache hit: {first.cache_hit})")
    print(f"warm: {warm:.2f} s (cache hit: {second.cache_hit}), identical embeddings: {same}")
    bench.finish(
        {
            "cold_s": cold,
            "docs_per_s": len(corpus) / cold,
            "warm_s": warm,
            "cache_hit": [first.cache_hit, second.cache_hit],
            "identical": same,
        }
    )


if __name__ == "__main__":
    main()
