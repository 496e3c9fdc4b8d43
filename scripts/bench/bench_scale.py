"""How corpus-level kernels grow with the corpus: synthetic SciFact-like corpora from 1e4 to 1e6.

Synthetic corpora: ``--centres`` cluster centres fitted (faiss k-means) on SciFact's
all-MiniLM-L6-v2 embeddings (the embedding cache, encoded when absent), each document a
centre plus isotropic noise scaled to that cluster's residual norm, normalised; SciFact
itself is the real point (``--sizes scifact``). Each (kernel, size, threads) case runs in
its own process (peak RSS = its ru_maxrss, data generation included) under a wall-time cap
(``--max-seconds``); a case whose estimate (memory or flops) exceeds the caps is skipped
and the reason printed. Kernels:

- ``knn_flat`` / ``knn_ivf``: corpus k-NN graph (k=10) by faiss IndexFlatIP / IVF-Flat
  (nlist = 4 sqrt(N) trained 10 rounds on 16 nlist points, nprobe 8; recall@10 of IVF
  against flat on 1,000 queries);
- ``ppr`` / ``ppr_igraph``: whole-graph personalized PageRank for 256 seed documents on the
  IVF k-NN graph, georag's sparse path against python-igraph's prpack (one call per seed);
- ``ricci``: sparse Ollivier-Ricci curvature (exact) of ``--ricci-edges`` random edges of
  the IVF k-NN graph (all when 0), ms per edge, max difference to POT's network simplex on
  ``--pot-edges`` of them.

Then the log-log slope of seconds against size per kernel and thread count, and the 1e7
extrapolation. The machine is shared: threads and load average are printed beside every
figure::

    python scripts/bench/bench_scale.py --sizes scifact 10000 100000 --threads-list 1 2 \\
        --max-seconds 240 --data-dir ../shared/data --plot docs/scale.png
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from georag.perf.bench import bench_parser, start

KERNELS = ("knn_flat", "knn_ivf", "ppr", "ppr_igraph", "ricci")
DIM, K, QUERIES = 384, 10, 256
FLOPS_PER_S = 2e10  # per thread, for the time estimates that decide a skip


def centres_file(work: Path, data_dir, count: int, dataset: str = "scifact") -> Path:
    """Cluster centres and residual scales fitted on a data set's MiniLM embeddings."""
    path = work / f"{dataset}_centres_{count}.npz"
    if path.is_file():
        return path
    import faiss

    if dataset == "random":  # no embeddings at hand: random centres, the noise of a cluster
        gen = np.random.default_rng(0)
        centres = gen.standard_normal((count, DIM)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        scale, weight = np.full(count, 0.6), np.full(count, 1.0 / count)
        np.savez(path, centres=centres, scale=scale, weight=weight)
        return path
    embeddings = scifact_embeddings(data_dir, dataset)
    kmeans = faiss.Kmeans(DIM, count, niter=20, seed=0)
    kmeans.train(embeddings)
    _, label = kmeans.index.search(embeddings, 1)
    label = label[:, 0]
    residual = np.linalg.norm(embeddings - kmeans.centroids[label], axis=1)
    scale = np.array(
        [residual[label == c].mean() if (label == c).any() else 0.0 for c in range(count)]
    )
    weight = np.bincount(label, minlength=count) / len(label)
    np.savez(path, centres=kmeans.centroids, scale=scale, weight=weight)
    return path


def scifact_embeddings(data_dir, dataset: str = "scifact") -> np.ndarray:
    from georag.data.beir import load_beir
    from georag.retrieval.candidates import corpus_embeddings
    from georag.retrieval.encoder import TextEncoder

    dataset = load_beir(dataset, split="test", data_dir=data_dir)
    texts = [doc.full_text for doc in dataset.corpus.values()]
    embeddings, _ = corpus_embeddings(texts, TextEncoder(show_progress=False))
    return np.ascontiguousarray(embeddings.numpy(), dtype=np.float32)


def corpus(size: str, work: Path, data_dir, centres: int, fitted_on: str) -> np.ndarray:
    if size == "scifact":
        return scifact_embeddings(data_dir)
    fit = np.load(centres_file(work, data_dir, centres, fitted_on))
    gen = np.random.default_rng(int(size))
    label = gen.choice(len(fit["weight"]), size=int(size), p=fit["weight"])
    x = np.empty((int(size), DIM), dtype=np.float32)
    for start_row in range(0, len(x), 100_000):
        rows = slice(start_row, start_row + 100_000)
        noise = gen.standard_normal((len(label[rows]), DIM)).astype(np.float32)
        noise *= (fit["scale"][label[rows]] / math.sqrt(DIM))[:, None].astype(np.float32)
        x[rows] = fit["centres"][label[rows]] + noise
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def ivf_knn(x: np.ndarray, k: int, queries: np.ndarray | None = None):
    import faiss

    n = len(x)
    nlist = max(1, int(4 * math.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    sample = x[np.random.default_rng(0).choice(n, min(n, 16 * nlist), replace=False)]
    index.train(sample)
    index.add(x)
    index.nprobe = 8
    return index.search(x if queries is None else queries, k + 1)


def edges_of(neighbours: np.ndarray, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected k-NN edges (each once) without self loops; lengths 1 - cos."""
    n = len(neighbours)
    rows = np.repeat(np.arange(n), neighbours.shape[1])
    cols, sim = neighbours.ravel(), sims.ravel()
    keep = (cols >= 0) & (cols != rows)
    lo, hi = np.minimum(rows, cols)[keep], np.maximum(rows, cols)[keep]
    key, first = np.unique(lo * n + hi, return_index=True)
    return np.stack([key // n, key % n]), np.clip(1.0 - sim[keep][first], 0.0, None).astype(
        np.float64
    )


def run_case(kernel: str, size: str, threads: int, args) -> dict:
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    x = corpus(size, Path(args.work), args.data_dir, args.centres, args.centres_dataset)
    n = len(x)
    extra: dict = {"n": n}
    if kernel == "knn_flat":
        index = faiss.IndexFlatIP(DIM)
        t = time.perf_counter()
        index.add(x)
        index.search(x, K + 1)
        seconds = time.perf_counter() - t
    elif kernel == "knn_ivf":
        t = time.perf_counter()
        ivf_knn(x, K)
        seconds = time.perf_counter() - t
        probe = x[np.random.default_rng(1).choice(n, min(n, 1000), replace=False)]
        flat = faiss.IndexFlatIP(DIM)
        flat.add(x)
        _, truth = flat.search(probe, K + 1)
        _, got = ivf_knn(x, K, probe)
        extra["recall_at_10"] = float(
            np.mean([len(set(a[1:]) & set(b[1:])) / K for a, b in zip(truth, got)])
        )
    else:
        sims, neighbours = ivf_knn(x, K)
        edges, lengths = edges_of(neighbours, sims)
        extra["edges"] = int(edges.shape[1])
        seeds = np.random.default_rng(2).choice(n, QUERIES, replace=False)
        if kernel == "ppr":
            from georag.geometry.diffusion import personalized_pagerank

            e = torch.from_numpy(edges)
            w = torch.from_numpy(np.maximum(1.0 - lengths, 0.0)).float()
            t = time.perf_counter()
            both = torch.cat([e, e.flip(0)], 1)
            weights = torch.sparse_coo_tensor(
                both, torch.cat([w, w]), (n, n), check_invariants=True
            )
            teleport = torch.zeros(n, QUERIES)
            teleport[torch.from_numpy(seeds), torch.arange(QUERIES)] = 1.0
            personalized_pagerank(weights.coalesce().to_sparse_csr(), teleport, damping=0.85)
            seconds = time.perf_counter() - t
        elif kernel == "ppr_igraph":
            import igraph

            t = time.perf_counter()
            graph = igraph.Graph(n=n, edges=edges.T.tolist())
            weight = np.maximum(1.0 - lengths, 0.0).tolist()
            for seed in seeds:
                graph.personalized_pagerank(
                    damping=0.85, reset_vertices=[int(seed)], weights=weight
                )
            seconds = time.perf_counter() - t
        else:
            from georag.geometry.ricci.sparse import sparse_ollivier_ricci

            e, lengths_t = torch.from_numpy(edges), torch.from_numpy(lengths)
            total = edges.shape[1]
            count = total if args.ricci_edges <= 0 else min(args.ricci_edges, total)
            subset = torch.from_numpy(
                np.sort(np.random.default_rng(3).choice(total, count, replace=False))
            )
            cpu0 = time.process_time()
            t = time.perf_counter()
            kappa = sparse_ollivier_ricci(e, lengths_t, n, subset=subset, method="exact")
            seconds = time.perf_counter() - t
            extra.update(
                ricci_edges=count,
                ms_per_edge=1e3 * seconds / count,
                cpu_ms_per_edge=1e3 * (time.process_time() - cpu0) / count,
            )
            if args.pot_edges > 0:
                check = subset[: args.pot_edges]
                pot = sparse_ollivier_ricci(e, lengths_t, n, subset=check, method="pot")
                extra["max_diff_to_pot"] = float((pot - kappa[: len(check)]).abs().max())
                extra["pot_edges"] = len(check)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mib": peak, "load": os.getloadavg(), **extra}


def estimate(kernel: str, n: int, threads: int, args) -> str | None:
    """Why a case is skipped before it runs (None: it runs)."""
    memory = n * DIM * 4 * 3 + n * 400  # corpus, its copy in faiss, a graph
    if kernel == "ppr":
        memory += n * QUERIES * 4 * 5
    if memory > args.max_gib * 2**30:
        return f"memory estimate {memory / 2**30:.1f} GiB > --max-gib {args.max_gib}"
    flops = (
        2.0 * n * n * DIM if kernel == "knn_flat" else 2.0 * n * (8 / (4 * math.sqrt(n))) * n * DIM
    )
    seconds = flops / (FLOPS_PER_S * threads)
    if seconds > args.max_seconds:
        return (
            f"time estimate {seconds:.0f} s ({flops:.1e} flops) > --max-seconds {args.max_seconds}"
        )
    return None


def slope(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 2:
        return None
    size, seconds = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(size, seconds, 1)[0])


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--sizes", nargs="+", default=["scifact", "10000", "100000"])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--threads-list", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-seconds", type=float, default=240.0, help="wall cap per case")
    parser.add_argument("--max-gib", type=float, default=20.0, help="memory cap per case")
    parser.add_argument("--centres", type=int, default=64)
    parser.add_argument(
        "--centres-dataset",
        default="scifact",
        help="BEIR set whose embeddings the centres fit ('random': random centres, noise 0.6)",
    )
    parser.add_argument("--ricci-edges", type=int, default=20000, help="0: every edge")
    parser.add_argument("--pot-edges", type=int, default=2000)
    parser.add_argument("--work", default="runs/bench_scale", help="fitted centres cache")
    parser.add_argument("--plot", default=None, help="log-log PNG of seconds against size")
    parser.add_argument(
        "--case", nargs=3, metavar=("KERNEL", "SIZE", "THREADS"), help=argparse_hidden()
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.case:
        kernel, size, threads = args.case
        print(json.dumps(run_case(kernel, size, int(threads), args)))
        return
    bench = start(
        args,
        config={
            k: getattr(args, k)
            for k in (
                "sizes",
                "kernels",
                "threads_list",
                "max_seconds",
                "max_gib",
                "centres",
                "ricci_edges",
                "pot_edges",
            )
        },
    )
    if any(s != "scifact" for s in args.sizes):
        centres_file(Path(args.work), args.data_dir, args.centres, args.centres_dataset)
    rows = []
    for kernel in args.kernels:
        for size in args.sizes:
            n = 5183 if size == "scifact" else int(size)
            for threads in args.threads_list:
                row = {"kernel": kernel, "size": size, "n": n, "threads": threads}
                reason = estimate(kernel, n, threads, args)
                if reason is None:
                    command = [sys.executable, __file__, "--case", kernel, size, str(threads)]
                    command += sys.argv[1:]
                    env = dict(
                        os.environ, OMP_NUM_THREADS=str(threads), GEORAG_THREADS=str(threads)
                    )
                    try:
                        done = subprocess.run(
                            command,
                            capture_output=True,
                            text=True,
                            timeout=args.max_seconds,
                            env=env,
                            check=False,
                        )
                        if done.returncode == 0:
                            row.update(json.loads(done.stdout.strip().splitlines()[-1]))
                        else:
                            tail = done.stderr.strip().splitlines() or [str(done.returncode)]
                            reason = f"failed: {tail[-1]}"
                    except subprocess.TimeoutExpired:
                        reason = f"time cap: over --max-seconds {args.max_seconds:.0f} s (killed)"
                row["skipped"] = reason
                rows.append(row)
                figure = (
                    "skipped: " + reason
                    if reason
                    else f"{row['seconds']:.2f} s, peak {row['peak_mib']:.0f} MiB"
                )
                print(
                    f"# {kernel} n={n} threads={threads}: {figure} (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    report(rows, args)
    bench.finish({"rows": rows})


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def report(rows: list[dict], args) -> None:
    print("\n| kernel | n | threads | seconds | peak MiB | notes |\n|---|---:|---:|---:|---:|---|")
    for row in rows:
        if row["skipped"]:
            head = f"| {row['kernel']} | {row['n']} | {row['threads']} |"
            print(f"{head} | | skipped: {row['skipped']} |")
            continue
        notes = ", ".join(
            f"{k} {row[k]:.4g}" if isinstance(row[k], float) else f"{k} {row[k]}"
            for k in (
                "edges",
                "recall_at_10",
                "ricci_edges",
                "ms_per_edge",
                "cpu_ms_per_edge",
                "max_diff_to_pot",
            )
            if k in row
        )
        head = f"| {row['kernel']} | {row['n']} | {row['threads']} |"
        figures = f"{row['seconds']:.2f} | {row['peak_mib']:.0f}"
        print(f"{head} {figures} | {notes}, load {row['load'][0]:.1f} |")
    print(
        "\n| kernel | threads | slope (log s / log n, synthetic sizes) "
        "| seconds at 1e7 (extrapolated) |\n|---|---:|---:|---:|"
    )
    series = {}
    for row in rows:
        if not row["skipped"] and row["size"] != "scifact":
            seconds = (
                row["seconds"] / row.get("ricci_edges", 1) * row.get("edges", 1)
                if row["kernel"] == "ricci"
                else row["seconds"]
            )
            series.setdefault((row["kernel"], row["threads"]), []).append((row["n"], seconds))
    for (kernel, threads), points in series.items():
        fitted = slope(points)
        if fitted is None:
            print(f"| {kernel} | {threads} | one size only | |")
            continue
        n_max, t_max = max(points)
        print(f"| {kernel} | {threads} | {fitted:.2f} | {t_max * (1e7 / n_max) ** fitted:.3g} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for (kernel, threads), points in sorted(series.items()):
            points = sorted(points)
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                label=f"{kernel} ({threads} thr)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_ylabel("seconds (ricci: whole graph, from the sampled edges)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
