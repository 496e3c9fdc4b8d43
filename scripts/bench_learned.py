"""Cost of the learnable rerankers: training step, its peak memory, and inference.

On one batch of B queries of a real dense top-100 pool (cranfield by default):

* forward + backward time per query of one training step (listwise loss), median over
  ``--repeats`` runs, for each learnable reranker with and without the embedding map;
* peak memory of one training step: ``torch.cuda.max_memory_allocated`` on CUDA; on CPU
  the rise of the process's peak resident set size (``ru_maxrss``) over one step, measured
  in a fresh subprocess per method (so earlier steps cannot hide it);
* inference: the learnable reranker (eval mode) at the paper defaults, and with knobs
  moved off them as training moves them, against the fixed reranker on the same batch,
  interleaved runs, medians and their ratio (goal: within 10%). A moved damping changes
  the number of power iterations, so the default-knob ratio is the like-for-like one.

Usage: ``python scripts/bench_learned.py [--dataset cranfield] [--batch 64]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from georag.rerank.registry import make_reranker
from train.losses import ranking_loss
from train.pools import load_pool, take

METHODS = {"learned_diffusion": "diffusion", "learned_maniscope": "maniscope"}
MOVED = {"learned_diffusion": {"damping": 0.7, "edge_power": 2.0, "teleport_power": 0.8,
                               "fusion": 0.05},
         "learned_maniscope": {"alpha": 0.6, "length_scale": 0.5, "fusion": 0.05}}


def batch_of(args):
    pool = load_pool(args.dataset)
    rows = torch.arange(args.batch) % pool.batch.batch_size
    return take(pool.batch, rows), pool.gains[rows]


def train_step(method, options, batch, gains, device):
    reranker = make_reranker(method, {method: options}).to(device).train()
    scores, ranked = reranker.score(batch)
    loss = ranking_loss(scores, ranked, gains, temperature=0.5)
    loss.backward()
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def peak_child(args, method, embedding_map):
    """One training step in a fresh process that holds only the batch; prints the rise of
    its peak memory (MiB) over that step (on CPU it includes one-time allocator growth)."""
    device = torch.device(args.device)
    batch, gains = torch.load(args.peak_child_batch, weights_only=False)
    batch, gains = batch.to(device), gains.to(device)
    options = {"embedding_map": embedding_map}
    if device.type == "cuda":
        train_step(method, options, batch, gains, device)  # warm-up: CUDA context, kernels
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        train_step(method, options, batch, gains, device)
        rise = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        train_step(method, options, batch, gains, device)
        rise = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    print(json.dumps({"peak_mib": rise}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cranfield")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--peak-child", nargs=2, metavar=("METHOD", "MAP"))
    parser.add_argument("--peak-child-batch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak_child:
        peak_child(args, args.peak_child[0], args.peak_child[1] == "1")
        return
    device = torch.device(args.device)
    print(f"# {platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
          f"thread(s), device {device}, load average {os.getloadavg()[0]:.1f}; dataset "
          f"{args.dataset}, B={args.batch}, M=100, medians of {args.repeats}")
    batch, gains = batch_of(args)
    saved = tempfile.NamedTemporaryFile(suffix=".pt", delete=False)
    torch.save((batch, gains), saved.name)
    batch, gains = batch.to(device), gains.to(device)
    print("| method | map | fwd+bwd ms/query | peak MiB of one step | fixed ms/query | "
          "learnable at defaults ms/query (ratio) | learnable, moved knobs ms/query (ratio) |")
    print("|---|---|---|---|---|---|---|")
    for method, fixed_name in METHODS.items():
        stages = [make_reranker(fixed_name), make_reranker(method),
                  make_reranker(method, {method: MOVED[method]})]
        for stage in stages:  # warm-up
            stage(batch)
        # side by side, interleaved, so load drifts hit all alike
        runs = [[median_ms(lambda s=s: s(batch), 1) for s in stages] for _ in range(args.repeats)]
        fixed_ms, default_ms, learned_ms = (
            statistics.median(r[i] for r in runs) / args.batch for i in range(3))
        for embedding_map in (False, True):
            options = {"embedding_map": embedding_map}
            step = median_ms(lambda m=method, o=options: train_step(m, o, batch, gains, device),
                             args.repeats) / args.batch
            child = subprocess.run(
                [sys.executable, __file__, "--dataset", args.dataset, "--batch", str(args.batch),
                 "--threads", str(args.threads), "--device", args.device,
                 "--peak-child", method, "1" if embedding_map else "0",
                 "--peak-child-batch", saved.name],
                capture_output=True, text=True, check=True)
            peak = json.loads(child.stdout.strip().splitlines()[-1])["peak_mib"]
            infer = (f"{fixed_ms:.4f} | {default_ms:.4f} ({default_ms / fixed_ms:.3f}) | "
                     f"{learned_ms:.4f} ({learned_ms / fixed_ms:.3f})")
            print(f"| {method} | {'yes' if embedding_map else 'no'} | {step:.3f} | {peak:.1f} | "
                  f"{infer if not embedding_map else ' | | '} |", flush=True)
    os.unlink(saved.name)


if __name__ == "__main__":
    main()
