"""The encoder backends side by side: quality (NDCG@10, Recall@5, cosine to torch) and speed
(query latency at B=1, batched throughput, corpus docs/s, peak memory).

Used by ``scripts/bench/bench_encode.py``; the backends are
:mod:`georag.retrieval.backends`. Each backend's speed is measured in a child process of its
own, so that its peak resident memory (``VmHWM``) is its own.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from georag.perf.threads import torch_threads
from georag.retrieval.backends import BACKENDS
from georag.retrieval.encoder import TextEncoder

__all__ = ["QUALITY_SETS", "cosine_to_torch", "quality", "speed", "speed_in_child"]

#: (data set, methods, metric): the quality part's runs of ``georag eval``
QUALITY_SETS = (
    ("scifact", ("none", "maniscope", "ricci+bi"), "ndcg@10"),
    ("cranfield", ("none", "maniscope", "ricci+bi"), "ndcg@10"),
    ("hotpotqa_dev500", ("none",), "recall@5"),
)


def _texts(dataset: str, data_dir: str | None, limit: int) -> list[str]:
    from georag.data.datasets import load_dataset

    data = load_dataset(dataset, data_dir=data_dir)
    docs = [d.full_text for d in list(data.corpus.values())[:limit]]
    return list(data.queries.values())[:limit] + docs


def cosine_to_torch(
    backend: str, texts: list[str], reference: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-wise cosine (N,) of ``backend``'s embeddings of ``texts`` to torch's, and torch's
    embeddings (N, D) (``reference`` when given)."""
    if reference is None:
        reference = TextEncoder(device="cpu", show_progress=False).encode(texts)
    embeddings = TextEncoder(device="cpu", backend=backend, show_progress=False).encode(texts)
    return (embeddings * reference).sum(1), reference


def quality(
    backends: list[str],
    data_dir: str | None,
    *,
    sets=QUALITY_SETS,
    max_queries: int | None = None,
    cosine_texts: int = 300,
) -> list[dict]:
    """One row per (backend, data set, method): the set's metric, by ``georag eval``'s
    runner (embedding caches keyed by backend), and each backend's cosine to torch over
    ``cosine_texts`` SciFact queries and as many abstracts (min and mean)."""
    from georag.eval.runner import EvalConfig, run_eval

    rows = []
    texts = _texts("scifact", data_dir, cosine_texts)
    reference = None
    for backend in backends:
        cosine, reference = cosine_to_torch(backend, texts, reference)
        base = {
            "backend": backend,
            "cos_min": cosine.min().item(),
            "cos_mean": cosine.mean().item(),
        }
        for dataset, methods, metric in sets:
            with tempfile.TemporaryDirectory() as out:
                config = EvalConfig(
                    dataset=dataset,
                    data_dir=data_dir,
                    methods=list(methods),
                    out=out,
                    max_queries=max_queries,
                    latency_samples=1,
                    encoder_backend=backend,
                )
                for row in run_eval(config):
                    rows.append(
                        {**base, "dataset": dataset, "method": row["method"], metric: row[metric]}
                    )
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def speed(backend: str, queries: list[str], docs: dict[str, list[str]], *, batch: int = 32) -> dict:
    """Speed of ``backend`` (MiniLM, CPU): B=1 query latency (median, p90, ms) on one
    thread, batched queries/s and each corpus' docs/s on one and on two threads."""
    encoder = TextEncoder(device="cpu", backend=backend, show_progress=False, batch_size=batch)
    result: dict = {"backend": backend}
    for threads in (1, 2):
        with torch_threads(threads):
            if encoder.session is not None:  # the session's pool follows the thread count
                encoder.session = type(encoder.session)(encoder.session.path, threads=threads)
            encoder.encode(queries[:8])  # warm up
            if threads == 1:
                times = []
                for query in queries:
                    start = time.perf_counter()
                    encoder.encode([query])
                    times.append(1000.0 * (time.perf_counter() - start))
                result["b1_median_ms"], result["b1_p90_ms"] = _quantiles(times)
            start = time.perf_counter()
            encoder.encode(queries)
            result[f"queries_per_s_{threads}t"] = len(queries) / (time.perf_counter() - start)
            for name, texts in docs.items():
                start = time.perf_counter()
                encoder.encode(texts)
                result[f"{name}_docs_per_s_{threads}t"] = len(texts) / (time.perf_counter() - start)
    with open("/proc/self/status") as fh:
        hwm = [line for line in fh if line.startswith("VmHWM")]
    result["peak_rss_mb"] = int(hwm[0].split()[1]) / 1024 if hwm else float("nan")
    return result


def speed_in_child(backend: str, data_dir: str | None, limit: int) -> dict:
    """:func:`speed` in a fresh interpreter (its own peak memory), on ``limit`` SciFact
    queries and ``limit`` documents of SciFact and of hotpotqa_dev500."""
    code = (
        "import json, sys; from georag.experiments.encoder_bench import _child; "
        "print(json.dumps(_child(sys.argv[1], sys.argv[2] or None, int(sys.argv[3]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, backend, data_dir or "", str(limit)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(backend: str, data_dir: str | None, limit: int) -> dict:
    from georag.data.datasets import load_dataset

    scifact = load_dataset("scifact", data_dir=data_dir)
    hotpot = load_dataset("hotpotqa_dev500", data_dir=data_dir)
    docs = {
        name: [d.full_text for d in list(data.corpus.values())[:limit]]
        for name, data in (("scifact", scifact), ("hotpotqa", hotpot))
    }
    return speed(backend, list(scifact.queries.values())[:limit], docs)


def check_backends(names: list[str]) -> list[str]:
    """``names`` (all of :data:`BACKENDS` when empty), each checked."""
    for name in names:
        if name not in BACKENDS:
            raise ValueError(f"--backends: expected some of {', '.join(BACKENDS)}, got {name!r}")
    return list(names) or list(BACKENDS)
