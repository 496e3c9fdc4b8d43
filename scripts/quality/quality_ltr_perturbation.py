"""How far each geometry-adds row moves when its float32 inputs move by a unit in the last place.

One fold of ``quality_geometry_adds.py`` (scifact: train on qrels/train.tsv, report on test;
the other sets: the first of the seeded folds) runs once as is and then once per seed with
its inputs nudged by ``--ulps`` units in the last place, up or down by a seeded hash of each
value's bits (equal values move alike, so a document shared by the fitting and the report
pool moves the same way in both):

* ``raw_cosine``: only the first-stage cosine feature, which LambdaRank alone reads (every
  other row is unchanged by construction);
* ``embeddings``: the query and document embeddings that the map trains on, and the raw
  cosine (the geometric and BM25 features kept).

Printed: each row's report NDCG@10 as is and its largest absolute change over the seeds.
With ``--encode-batches K``, also K of the corpus's encoding batches (the first, the last and
evenly between, as sentence-transformers forms them: texts sorted by length, 64 a batch)
encoded again at 1 and 2 torch threads, and their texts one at a time, against the
cached corpus embeddings: the rows equal bit for bit and the largest difference in units in
the last place.

Usage::

    python scripts/quality/quality_ltr_perturbation.py --datasets scifact --seeds 3
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import numpy as np
import torch

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.data.datasets import load_dataset
from georag.experiments.adds_features import PoolData, corpus_features, prepare, report_run
from georag.experiments.geometry_adds import Settings, folds_of, run_fold
from georag.experiments.significance import per_query_arrays
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import FirstStageConfig, corpus_embeddings, corpus_units
from georag.retrieval.encoder import TextEncoder

MODES = ("raw_cosine", "embeddings")


def nudge(x: torch.Tensor, ulps: int, seed: int) -> torch.Tensor:
    """``x`` (float32, any shape) moved ``ulps`` units in the last place, each value up or
    down by a hash of its bits and ``seed`` (equal values move alike)."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    up = (((bits * 2654435761 + seed * 40503) >> 11) & 1).bool()
    target = torch.where(up, torch.inf, -torch.inf).to(x.dtype)
    for _ in range(ulps):
        x = torch.nextafter(x, target)
    return x


def nudged(data: PoolData, mode: str, ulps: int, seed: int) -> PoolData:
    """A copy of ``data`` with the inputs of ``mode`` nudged (see the module docstring)."""
    features = {**data.features, "raw_cosine": nudge(data.features["raw_cosine"], ulps, seed)}
    if mode == "raw_cosine":
        return replace(data, features=features)
    return replace(
        data,
        query=nudge(data.query, ulps, seed),
        table=nudge(data.table, ulps, seed),
        features=features,
    )


def ndcg_rows(fit: PoolData, report: PoolData, settings: Settings) -> dict[str, float]:
    """Report NDCG@10 of every row of :func:`~georag.experiments.geometry_adds.run_fold`."""
    scores = run_fold(fit, report, settings, log=lambda text: None)["scores"]
    runs = {name: report_run(report, s) for name, s in scores.items()}
    _, values = per_query_arrays(runs, report.pool.qrels, ("ndcg@10",))
    return {name: float(v["ndcg@10"].mean()) for name, v in values.items()}


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Units in the last place between float32 tensors of one shape (same-sign values)."""
    return (a.view(torch.int32).to(torch.int64) - b.view(torch.int32).to(torch.int64)).abs()


def encode_check(dataset: str, data_dir, encoder: TextEncoder, batches: int) -> dict:
    """Re-encode ``batches`` of the corpus's encoding batches and compare to the cache."""
    texts = corpus_units(load_dataset(dataset, data_dir=data_dir), FirstStageConfig()).texts
    cached, hit = corpus_embeddings(texts, encoder)
    model = encoder.model  # the batches as its encode forms them
    order = np.argsort([-model._input_length(t) for t in texts])
    if model._can_flatten_inputs():
        order = model._interleave_sorted_indices(order)
    size = encoder.batch_size
    starts = np.linspace(0, (len(texts) - 1) // size, batches).round().astype(int) * size
    rows = np.concatenate([order[s : s + size] for s in starts])
    sample = [texts[i] for i in rows]
    want = cached[torch.from_numpy(rows)]
    result = {"cache_hit": hit, "rows": len(rows)}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        got = torch.cat([encoder.encode(sample[s : s + size]) for s in range(0, len(rows), size)])
        result[f"batched, {threads} thread(s)"] = got
    torch.set_num_threads(1)
    result["one text at a time, 1 thread"] = torch.cat([encoder.encode([t]) for t in sample])
    for name, got in list(result.items()):
        if isinstance(got, torch.Tensor):
            result[name] = {
                "rows_equal": int((got == want).all(1).sum()),
                "max_ulps": int(ulp_distance(got, want).max()),
            }
    return result


def perturbation(dataset: str, args, encoder: TextEncoder, settings: Settings) -> dict:
    """Every row's NDCG@10 on the first fold and its largest change under each mode."""
    started, load = time.perf_counter(), os.getloadavg()[0]
    fit_pool, report_pool, label, split = folds_of(dataset, args, encoder)[0]
    fit, report = prepare(corpus_features(dataset, args.data_dir, split), fit_pool, report_pool)
    base = ndcg_rows(fit, report, settings)
    moved = {mode: {name: 0.0 for name in base} for mode in args.modes}
    for mode in args.modes:
        for seed in range(args.seeds):
            rows = ndcg_rows(
                nudged(fit, mode, args.ulps, seed), nudged(report, mode, args.ulps, seed), settings
            )
            for name, value in rows.items():
                moved[mode][name] = max(moved[mode][name], abs(value - base[name]))
    print(
        f"### {dataset} ({label}, {report.pool.batch.batch_size} report queries; "
        f"{args.ulps} ulp, {args.seeds} seeds; {torch.get_num_threads()} torch thread(s); "
        f"{(time.perf_counter() - started) / 60:.1f} min, load average "
        f"{load:.1f} -> {os.getloadavg()[0]:.1f})\n"
    )
    print("| row | NDCG@10 | " + " | ".join(f"max abs Δ, {m}" for m in args.modes) + " |")
    print("|---|---|" + "---|" * len(args.modes))
    for name, value in base.items():
        cells = " | ".join(f"{moved[mode][name]:.4f}" for mode in args.modes)
        print(f"| {name} | {value:.4f} | {cells} |", flush=True)
    return {"fold": label, "ndcg@10": base, "max_abs_change": moved}


def parse_args(argv=None):
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="+", default=["scifact"])
    parser.add_argument("--seeds", type=harness.positive_int, default=3)
    parser.add_argument("--ulps", type=harness.positive_int, default=1)
    parser.add_argument(
        "--modes", nargs="*", choices=MODES, default=list(MODES), help="none: no perturbation"
    )
    parser.add_argument("--epochs", type=harness.positive_int, default=20)
    parser.add_argument("--patience", type=harness.positive_int, default=3)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encode-batches", type=harness.non_negative_int, default=0)
    parser.set_defaults(train_queries=0)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    encoder = TextEncoder(DEFAULT_MODEL, show_progress=False)
    settings = Settings(
        epochs=args.epochs, patience=args.patience, seed=args.seed, drop_heads=False
    )
    out = {}
    for dataset in args.datasets:
        out[dataset] = {}
        if args.encode_batches:
            out[dataset]["encode"] = encode_check(
                dataset, args.data_dir, encoder, args.encode_batches
            )
            print(f"### {dataset} encoding\n\n" + json.dumps(out[dataset]["encode"], indent=1))
        if args.modes:
            out[dataset].update(perturbation(dataset, args, encoder, settings))
    if args.bench_out:
        atomic_write(args.bench_out, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
