"""Cost of each stage of the geometry-adds comparison, beside the map alone.

Milliseconds per query at B=1 and batched (B=``--batch``), M=100 candidates, D=384, on a
synthetic pool (scores only depend on shapes): the learned adapter (map alone; map+bm25
with its BM25 weight), Rocchio feedback, LambdaRank inference (5 features), the graph
smoothing head and the linear geometric head on the adapter's scores, and the feature
computations (BM25 pool scores over a 5000-document corpus, the pool geometry of
:func:`~georag.rerank.heads.geo_features.pool_features`, the hubness against 800 training
queries). Threads pinned (``--threads``); wall and process CPU milliseconds, the load
average beside every figure.

Usage::

    python scripts/bench/bench_geometry_adds.py --threads 1 --repeats 20
"""

from __future__ import annotations

import os

import numpy as np
import torch

import georag.perf.bench as harness
from georag.eval.synthetic import random_batch
from georag.experiments.adds_features import GEO_FEATURES, bm25_pool_scores
from georag.perf.timing import measure
from georag.rerank.baselines.adapter import AdapterConfig, LearnedAdapter
from georag.rerank.baselines.ltr import LambdaRank, LambdaRankConfig
from georag.rerank.baselines.rocchio import rocchio_scores
from georag.rerank.heads.geo_features import hubness_features, pool_features
from georag.rerank.heads.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
)
from georag.retrieval.bm25 import BM25Index

M, D = 100, 384


def stages(batch, feats, model, bm25, rows, texts, train_q, train_top, train_ids):
    """``{stage: callable(batch, feats)}``; every stage includes the map."""
    plain = LearnedAdapter(AdapterConfig(dim=D))
    lexical = LearnedAdapter(AdapterConfig(dim=D, features=("bm25",)))
    smooth = GraphSmoothing(GraphSmoothingConfig(k=10))
    head = FeatureHead(FeatureHeadConfig(features=GEO_FEATURES))

    def rocchio(b, f):
        s = plain.score(b)[0]
        return rocchio_scores(plain.map_query(b.query), plain.map_docs(b.cands), b.mask, s, 0.5, 5)

    def ltr(b, f):
        s = plain.score(b)[0]
        x = torch.stack([s, b.scores, f["bm25"], f["rank"], f["prior"]], -1)
        return model.predict(x, b.mask)

    return {
        "map alone": lambda b, f: plain.score(b)[0],
        "map+bm25 (BM25 given)": lambda b, f: lexical.score(b, f)[0],
        "map+prf": rocchio,
        "ltr (features given)": ltr,
        "map + smoothing": lambda b, f: smooth.residual(
            plain.score(b)[0], plain.map_docs(b.cands), b.mask
        ),
        "map + geo head (features given)": lambda b, f: head.residual(plain.score(b)[0], b.mask, f),
        "feature: BM25 pool scores": lambda b, f: bm25_pool_scores(
            bm25, texts[: b.batch_size], rows[: b.batch_size]
        ),
        "feature: pool geometry": lambda b, f: pool_features(b),
        "feature: hubness / CSLS": lambda b, f: hubness_features(b, train_q, train_top, train_ids),
    }


def main(argv=None) -> None:
    parser = harness.bench_parser(__doc__, repeats=20, device=False)
    parser.add_argument("--batch", type=harness.positive_int, default=64)
    args = parser.parse_args(argv)
    bench = harness.start(args, config={"M": M, "D": D, "batch": args.batch}, device="cpu")
    rng = np.random.default_rng(0)
    big = random_batch(rng, args.batch, M, D, dtype=torch.float32, unit=True)
    g = torch.Generator().manual_seed(0)
    feats = {n: torch.randn(big.mask.shape, generator=g) for n in ("bm25", "rank", "prior")}
    feats.update({n: torch.randn(big.mask.shape, generator=g) for n in GEO_FEATURES})
    words = [f"w{i}" for i in range(3000)]
    corpus = [" ".join(rng.choice(words, 120)) for _ in range(5000)]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(args.batch)]
    bm25 = BM25Index.build(corpus, tokenizer="whitespace")
    rows = torch.from_numpy(rng.integers(0, 5000, size=(args.batch, M)))
    model = LambdaRank(LambdaRankConfig(features=("m", "r", "b", "k", "p"), rounds=100))
    x = torch.randn(args.batch, M, 5, generator=g)
    model.fit(x, big.mask, (x[..., 0] > 1).float())
    train_q = torch.nn.functional.normalize(torch.randn(800, D, generator=g), dim=1)
    train_top = [[f"t{i}-{j}" for j in range(10)] for i in range(800)]
    train_ids = [f"q{i}" for i in range(800)]
    table = stages(big, feats, model, bm25, rows, texts, train_q, train_top, train_ids)
    print(f"| stage | B=1 ms/query (CPU ms) | B={args.batch} ms/query (CPU ms) | load average |")
    print("|---|---|---|---|")
    figures = {}
    with torch.no_grad():
        for name, fn in table.items():
            one = measure(
                lambda i, fn=fn: fn(
                    big.slice(i % args.batch, i % args.batch + 1),
                    {k: v[i % args.batch : i % args.batch + 1] for k, v in feats.items()},
                ),
                repeats=args.repeats,
            )
            many = measure(
                lambda i, fn=fn: fn(big, feats), repeats=max(3, args.repeats // 4), per=args.batch
            )
            load = os.getloadavg()[0]
            figures[name] = {"b1": one.as_dict(), "batched": many.as_dict(), "load": load}
            print(
                f"| {name} | {one.median:.3f} ({one.cpu_median:.3f}) "
                f"| {many.median:.3f} ({many.cpu_median:.3f}) | {load:.1f} |",
                flush=True,
            )
    bench.finish(figures)


if __name__ == "__main__":
    main()
