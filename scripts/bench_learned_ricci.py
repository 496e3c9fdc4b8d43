"""Cost of learned_ricci: forward+backward per query, peak memory of a training step, and
inference of a (trained) learned reranker against the fixed RicciFiltration.

Real SciFact training queries (dense MiniLM top-100, the training split; never the test
split). The fixed and the learned reranker run side by side on the same batch, repeated;
medians and ratios are printed with the threads and load average.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python scripts/bench_learned_ricci.py \
        [--weights runs/learned_ricci/weights.pt] [--batch 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import torch

from georag.rerank.learned_ricci import LearnedRicci, LearnedRicciConfig
from georag.rerank.registry import make_reranker
from georag.rerank.ricci_filtration import RicciFiltration, RicciFiltrationConfig
from train.losses import ranking_loss
from train.pools import load_pool, take


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=None, help="trained learned_ricci weights")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pool = load_pool("scifact", split="train", top_m=100)
    batch = take(pool.batch, torch.arange(args.batch))
    gains = pool.gains[: args.batch]
    print(f"threads={torch.get_num_threads()} load={os.getloadavg()} B={batch.batch_size} "
          f"M={batch.num_candidates} D={batch.query.shape[1]} repeats={args.repeats}")
    print(f"fixed config: {RicciFiltrationConfig()}")

    for checkpoint in (False, True):
        model = LearnedRicci(LearnedRicciConfig(checkpoint=checkpoint))
        model.train()

        def step(model=model):
            model.zero_grad()
            scores, ranked = model.score(batch)
            ranking_loss(scores, ranked, gains).backward()

        before = _peak_rss_mib()
        step()
        grown = _peak_rss_mib() - before
        seconds = _median_seconds(step, args.repeats)
        print(f"train step checkpoint={checkpoint}: {seconds:.3f} s per batch, "
              f"{1e3 * seconds / batch.batch_size:.2f} ms per query forward+backward; "
              f"peak RSS grew {grown:.0f} MiB in the first step (process peak "
              f"{_peak_rss_mib():.0f} MiB)")

    fixed = RicciFiltration()
    if args.weights:
        learned = make_reranker("learned_ricci", {"learned_ricci": {"weights": args.weights}})
        label = f"trained ({args.weights})"
    else:
        learned, label = LearnedRicci(), "untrained"
    fixed(batch), learned(batch)  # warm up
    times = {"fixed": [], "learned": []}
    for _ in range(args.repeats):  # interleaved, same batch
        for name, method in (("fixed", fixed), ("learned", learned)):
            start = time.perf_counter()
            method(batch)
            times[name].append(time.perf_counter() - start)
    t_fixed, t_learned = (statistics.median(times[k]) for k in ("fixed", "learned"))
    print(f"inference on the same batch: fixed {t_fixed:.3f} s, learned_ricci {label} "
          f"{t_learned:.3f} s, ratio learned/fixed {t_learned / t_fixed:.3f}")
    print(f"learned knobs: {learned.knobs()}")


if __name__ == "__main__":
    main()
