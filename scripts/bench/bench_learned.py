"""Cost of the learnable rerankers: training step, its peak memory, and inference.

On one batch of B queries of a real dense top-100 pool (cranfield by default), or, for a
corpus-level retriever (``learned_iso``), of B queries over a whole real corpus
(``--corpus-dataset``, hotpotqa_dev500 by default; the fixed method is IsoRag):

* forward + backward time per query of one training step (listwise loss; the reranker is
  built, and fitted on its corpus, before the clock starts), median over ``--repeats``
  runs, for each learnable reranker with and without the embedding map;
* peak memory of one training step above what was allocated before it:
  ``torch.cuda.max_memory_allocated`` on CUDA; on CPU the running sum, in time order, of the
  allocations and frees that ``torch.profiler`` records (``profile_memory=True``);
* inference: the learnable reranker (eval mode) at the paper defaults, and with the knobs
  it learned (on scifact; learned_iso: on hotpotqa_dev500), against the fixed reranker on
  the same batch, interleaved runs (rotated start), medians and their ratio (goal: within
  10%). A moved damping changes the number of power iterations, so the default-knob ratio
  is the like-for-like one; where the fixed method takes the learned knobs as options
  (IsoRag), it also runs at them.

Usage: ``python scripts/bench/bench_learned.py [--dataset cranfield] [--batch 64]``
"""

from __future__ import annotations

import dataclasses
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from georag.perf.bench import Bench, bench_parser, start
from georag.rerank.registry import config_class, is_retriever, make_method, make_reranker
from train.corpus_data import load_query_set
from train.losses import ranking_loss
from train.pools import load_pool, take

TOP_K = 100  # a corpus-level retriever ranks this many passages (the pool's depth)

# fold 1 of hotpotqa_dev500, scripts/quality/quality_learned.py --methods learned_iso (fold 0's best
# epoch was the start)
LEARNED_ISO = {
    "damping": 0.6157,
    "lam": 0.8463,
    "prune_threshold": 0.6198,
    "topo_weight": 0.8085,
}
# the knobs learned on scifact by scripts/quality/quality_learned.py (docs/learned_results.md)
MOVED = {
    "learned_diffusion": {
        "fixed.damping": 0.795,
        "edge_power": 0.565,
        "teleport_power": 1.383,
        "fusion": 0.308,
    },
    "learned_maniscope": {"fixed.alpha": 0.625, "length_scale": 1.629, "fusion": 0.490},
    # last epoch of the short scifact run (configs/train/learned_ricci.yaml, 3 x 5 steps)
    "learned_ricci": {
        "fixed.alpha": 0.5693,
        "fixed.exp_power": 1.9097,
        "fixed.step": 0.8824,
        "fixed.eta": 1.0073,
        "length_power": 0.0853,
        "geometry_weight": 0.0765,
    },
    "learned_iso": LEARNED_ISO,
}


def workload(method: str, args):
    """``(batch, gains, corpus)``: B queries (repeated if fewer), the gains of what the
    method ranks, and the corpus of a corpus-level retriever (``None`` for a pool one)."""
    if is_retriever(method):
        queries = load_query_set(args.corpus_dataset, data_dir=args.data_dir)
        rows = (torch.arange(args.batch) % queries.batch.batch_size).tolist()
        part = queries.subset(rows)
        return part.batch, part.gains, queries.corpus
    pool = load_pool(args.dataset, data_dir=args.data_dir)
    rows = torch.arange(args.batch) % pool.batch.batch_size
    return take(pool.batch, rows), pool.gains[rows], None


def built(method, options, corpus, device):
    """The learnable reranker in training mode, fitted on ``corpus`` when it ranks one."""
    reranker = make_method(method, options)
    if corpus is not None:
        reranker.fit(corpus)
    return reranker.to(device).train()


def train_step(reranker, batch, gains):
    reranker.zero_grad(set_to_none=True)
    scores, ranked = reranker.score(batch)
    loss = ranking_loss(scores, ranked, gains, temperature=0.5)
    loss.backward()


def infer(stage, batch):
    """One inference pass of a pool reranker or a fitted corpus-level retriever."""
    return stage.retrieve(batch, top_k=TOP_K) if is_retriever(stage) else stage(batch)


def median_ms(bench: Bench, fn, repeats: int) -> float:
    """Median wall milliseconds of ``repeats`` calls (device synchronised, no warm-up)."""
    return bench.time(lambda _: fn(), repeats=repeats, warmup=0).median


def peak_mib(reranker, batch, gains, device) -> float:
    """Peak memory of one training step above what was allocated before it (MiB)."""
    train_step(reranker, batch, gains)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        train_step(reranker, batch, gains)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    # CPU: the profiler's allocation record, summed in time order (allocations +, frees -)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(reranker, batch, gains)
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage
        peak = max(peak, live)
    return peak / 2**20


def main() -> None:
    parser = bench_parser(__doc__, repeats=7)
    parser.set_defaults(threads=1)
    parser.add_argument("--dataset", default="cranfield")
    parser.add_argument("--corpus-dataset", default="hotpotqa_dev500")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--methods", nargs="+", default=list(MOVED), help="learnable rerankers (registry names)"
    )
    args = parser.parse_args()
    bench = start(
        args,
        config={
            "pool dataset": f"{args.dataset} (M=100)",
            "corpus dataset": args.corpus_dataset,
            "B": args.batch,
            "medians of": args.repeats,
        },
    )
    device = torch.device(bench.device)
    rows = []
    print(
        "| method | map | fwd+bwd ms/query | peak MiB of one step | fixed ms/query | "
        "learnable at defaults ms/query (ratio) | learnable, learned knobs "
        "ms/query (ratio) | fixed at the learned knobs ms/query (learnable's ratio to it) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method in args.methods:
        batch, gains, corpus = workload(method, args)
        batch, gains = batch.to(device), gains.to(device)
        fixed = make_method(method).fixed_method
        moved = MOVED.get(method, {})
        stages = [
            make_reranker(fixed),
            make_reranker(method),
            make_reranker(method, {method: moved}),
        ]
        # the fixed method at the learned knobs, where its config holds them all (IsoRag's,
        # and the learned config's own "fixed." fields)
        fixed_config = config_class(fixed)
        names = {f.name for f in dataclasses.fields(fixed_config)} if fixed_config else set()
        at_fixed = {key.removeprefix("fixed."): value for key, value in moved.items()}
        if moved and set(at_fixed) <= names:
            stages.append(make_reranker(fixed, {fixed: at_fixed}))
        if corpus is not None:
            stages = [stage.fit(corpus) for stage in stages]
        for stage in stages:  # warm-up
            infer(stage, batch)
        # side by side, interleaved (each round starts at another stage), so load drifts and
        # the position in a round hit all alike
        runs = []
        for round_ in range(args.repeats):
            times = {}
            for k in range(len(stages)):
                i = (round_ + k) % len(stages)
                times[i] = median_ms(bench, lambda s=stages[i], b=batch: infer(s, b), 1)
            runs.append([times[i] for i in range(len(stages))])
        fixed_ms, default_ms, learned_ms, *same = (
            statistics.median(r[i] for r in runs) / args.batch for i in range(len(stages))
        )
        same_cell = f"{same[0]:.4f} ({learned_ms / same[0]:.3f})" if same else "n/a"
        for embedding_map in (False, True):
            reranker = built(method, {"embedding_map": embedding_map}, corpus, device)
            step = (
                median_ms(
                    bench, lambda r=reranker, b=batch, g=gains: train_step(r, b, g), args.repeats
                )
                / args.batch
            )
            peak = peak_mib(reranker, batch, gains, device)
            infer_cells = (
                f"{fixed_ms:.4f} | {default_ms:.4f} ({default_ms / fixed_ms:.3f}) | "
                f"{learned_ms:.4f} ({learned_ms / fixed_ms:.3f}) | {same_cell}"
            )
            print(
                f"| {method} | {'yes' if embedding_map else 'no'} | {step:.3f} | {peak:.1f} | "
                f"{infer_cells if not embedding_map else ' | | | '} |",
                flush=True,
            )
            rows.append(
                {
                    "method": method,
                    "map": embedding_map,
                    "fwd_bwd_ms_per_query": step,
                    "peak_mib": peak,
                    "fixed_ms_per_query": fixed_ms,
                    "default_ms_per_query": default_ms,
                    "learned_ms_per_query": learned_ms,
                }
            )
    bench.finish({"rows": rows})


if __name__ == "__main__":
    main()
