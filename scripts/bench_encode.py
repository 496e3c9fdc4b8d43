"""Encoding throughput and the embedding cache.

Usage: python scripts/bench_encode.py --dataset scifact --data-dir ../shared/data [--docs 2000]

Builds the first stage twice over the same corpus with an empty cache folder: the first run
encodes (docs/s reported), the second must load from the cache and encode nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from georag.data.beir import BeirDataset, load_beir
from georag.eval.report import environment
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--docs", type=int, default=2000, help="encode the first N documents")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    data = load_beir(args.dataset, data_dir=args.data_dir)
    corpus = dict(list(data.corpus.items())[: args.docs])
    data = BeirDataset(data.name, corpus, data.queries, data.qrels)
    encoder = TextEncoder(batch_size=args.batch_size, show_progress=False)
    print(
        f"config: {args.dataset}, {len(corpus)} docs, all-MiniLM-L6-v2, batch {args.batch_size}, "
        f"device {encoder.device}, torch threads {torch.get_num_threads()}"
    )
    print("environment:", environment())
    with tempfile.TemporaryDirectory() as cache:
        config = FirstStageConfig(first_stage="dense")
        start = time.perf_counter()
        first = FirstStage(data, config, encoder=encoder, cache_dir=cache)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        second = FirstStage(data, config, encoder=encoder, cache_dir=cache)
        warm = time.perf_counter() - start
    print(f"cold: {cold:.1f} s, {len(corpus) / cold:.1f} docs/s (cache hit: {first.cache_hit})")
    print(
        f"warm: {warm:.2f} s (cache hit: {second.cache_hit}), "
        f"identical embeddings: {torch.equal(first.embeddings, second.embeddings)}"
    )


if __name__ == "__main__":
    main()
