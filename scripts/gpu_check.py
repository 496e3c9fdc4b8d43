"""GPU parity and speed check for every georag kernel, in one prepared run (< 5 minutes).

Usage: python scripts/gpu_check.py [--scale 1.0] [--threads N] [--out runs/gpu_check.json]

Runs each kernel on the CPU and, when CUDA is present, on the GPU with the same inputs,
asserts that the results agree, and prints both timings (median of --repeats runs, 3) and
the ratio; CUDA is synchronised around every timed call.
Without CUDA it runs the CPU side only and says so. Exit status 1 on any parity failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from georag.geometry.diffusion import edge_index_to_csr, personalized_pagerank
from georag.geometry.graphs import (
    cosine_dissimilarity,
    knn_graph,
    shortest_paths,
    single_source_shortest_paths,
    threshold_graph,
)
from georag.geometry.hyperbolic import add_time, lorentz_distance, oem_pool
from georag.geometry.ricci import ricci_flow
from georag.geometry.transport import sinkhorn
from georag.perf.bench import Bench, bench_parser, start


def _time(bench: Bench, fn: Callable[[], object], repeats: int) -> tuple[object, float]:
    out = fn()  # warm-up (and CUDA kernel compilation / caching)
    return out, bench.time(lambda i: fn(), repeats=repeats, warmup=0).median


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, tuple):
        return out[0]
    return out.lengths if hasattr(out, "lengths") else out.cost


def cases(scale: float) -> dict[str, tuple[Callable, tuple, float]]:
    """name -> (kernel taking the inputs, CPU inputs, absolute tolerance)."""
    g = torch.Generator().manual_seed(0)
    b = max(8, int(1024 * scale))
    x = torch.nn.functional.normalize(torch.randn(b, 21, 384, generator=g), dim=-1)
    r = cosine_dissimilarity(x)
    adjacency = threshold_graph(r, quantile=0.5, force_node=0)
    unit = adjacency.float()
    cands = torch.nn.functional.normalize(
        torch.randn(max(8, int(1000 * scale)), 100, 384, generator=g), dim=-1
    )
    knn_lengths, knn_adjacency = knn_graph(cands, 5)
    weights = (cands[:, :50] @ cands[:, :50].transpose(1, 2)).clamp_min(0)
    teleport = torch.rand(weights.shape[:2], generator=g)
    n, edges = int(100_000 * scale) or 1000, int(1_000_000 * scale) or 10000
    edge_index = torch.randint(0, n, (2, edges), generator=g)
    csr = edge_index_to_csr(edge_index, n, torch.rand(edges, generator=g))
    many = torch.rand(n, 256, generator=g)
    a = torch.full((b, 21), 1 / 21)
    points = add_time(0.5 * torch.randn(b, 64, 384, generator=g))
    token_mask = torch.rand(b, 64, generator=g) > 0.2
    token_mask[:, 0] = True
    return {
        "sinkhorn (B=1024, 21x21, eps=0.05)": (
            lambda a, c: sinkhorn(a, a, c, epsilon=0.05, max_iter=200),
            (a, r),
            1e-4,
        ),
        "ricci flow (B=1024, N=21, 20 it)": (
            lambda lengths, adj: ricci_flow(  # the tensor path on both devices (auto would
                # run the compiled flow on the CPU: another schedule, see ricci.compiled)
                lengths,
                adj,
                iterations=20,
                method="sinkhorn",
                accuracy=None,
                backend="tensor",
            ),
            (unit, adjacency),
            1e-3,
        ),
        "ricci flow batched IPM (B=64, N=21, 1e-9)": (
            lambda lengths, adj: ricci_flow(
                lengths, adj, iterations=20, method="batched", accuracy=1e-9
            ),
            (r[: max(2, b // 16)].double() * unit[: max(2, b // 16)], adjacency[: max(2, b // 16)]),
            1e-5,
        ),
        "all-pairs shortest paths (B=1024, N=21)": (shortest_paths, (r * unit, adjacency), 1e-5),
        "k-NN graph (B=1000, M=100, k=5)": (lambda c: knn_graph(c, 5)[0], (cands,), 1e-5),
        "single-source shortest paths (M=100)": (
            lambda lengths, adj: single_source_shortest_paths(
                lengths, adj, torch.zeros(lengths.shape[0], dtype=torch.long, device=lengths.device)
            ),
            (knn_lengths, knn_adjacency),
            1e-5,
        ),
        "dense PPR (B=1000, N=50)": (personalized_pagerank, (weights, teleport), 1e-6),
        "sparse PPR (100k nodes, 1M edges, Q=256)": (personalized_pagerank, (csr, many), 1e-6),
        "Lorentz distance (B x 64 x 385)": (
            lambda p: lorentz_distance(p[:, :1], p),
            (points,),
            1e-3,
        ),
        "OEM pooling (B x 64 tokens)": (lambda p, m: oem_pool(p, m), (points, token_mask), 1e-3),
    }


def faiss_check(bench: Bench, repeats: int) -> str:
    from georag.retrieval.dense import DenseIndex, faiss_gpu_available

    if not faiss_gpu_available():
        return "faiss GPU: not available (faiss-cpu or no CUDA)"
    g = torch.Generator().manual_seed(1)
    docs = torch.nn.functional.normalize(torch.randn(100_000, 384, generator=g), dim=1)
    queries = torch.nn.functional.normalize(torch.randn(1000, 384, generator=g), dim=1)
    results = {}
    for use_gpu in (False, True):
        index = DenseIndex(384, use_gpu=use_gpu)
        index.add(docs)
        results[use_gpu] = _time(bench, lambda index=index: index.search(queries, 100), repeats)
    same = (results[False][0][1] == results[True][0][1]).float().mean().item()
    return (
        f"faiss flat 100k x 384, 1000 queries: CPU {results[False][1]:.1f} ms, GPU "
        f"{results[True][1]:.1f} ms, top-100 id agreement {same:.4f}"
    )


def main() -> int:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink sizes for a smoke run")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    bench = start(args, config={"scale": args.scale, "medians of": args.repeats})
    if args.scale != 1.0:
        print(f"scale {args.scale}: the sizes in the labels are full-scale, multiply them by it")
    if not cuda:
        print("no CUDA device: CPU timings only, no parity check")
    failures, results = 0, {}
    print(f"{'kernel':45s} {'cpu ms':>10s} {'gpu ms':>10s} {'speed-up':>9s} {'max |diff|':>11s}")
    for name, (kernel, inputs, tol) in cases(args.scale).items():
        cpu_out, cpu_ms = _time(
            bench, lambda kernel=kernel, inputs=inputs: kernel(*inputs), args.repeats
        )
        line = f"{name:45s} {cpu_ms:10.2f}"
        results[name] = {"cpu_ms": cpu_ms}
        if cuda:
            gpu_inputs = tuple(_to(v, "cuda") for v in inputs)
            gpu_out, gpu_ms = _time(bench, lambda k=kernel, i=gpu_inputs: k(*i), args.repeats)
            reference, result = _first_tensor(cpu_out), _first_tensor(gpu_out).cpu()
            finite = torch.isfinite(reference)
            diff = (reference[finite] - result[finite]).abs().max().item() if finite.any() else 0.0
            same_inf = torch.equal(finite, torch.isfinite(result))
            ok = diff <= tol and same_inf
            failures += not ok
            results[name].update(gpu_ms=gpu_ms, max_abs_diff=diff, parity=ok)
            line += (
                f" {gpu_ms:10.2f} {cpu_ms / gpu_ms:8.1f}x {diff:11.2e}"
                f"{'' if ok else '  PARITY FAILED'}"
            )
        print(line, flush=True)
    print(faiss_check(bench, args.repeats))
    bench.finish(results)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
