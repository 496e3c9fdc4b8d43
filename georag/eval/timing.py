"""Latency measurement: median ms per query at B=1 and queries per second batched."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import torch

__all__ = ["median_single_ms", "timed", "sync"]

T = TypeVar("T")


def sync() -> None:
    """Wait for queued CUDA work so that wall-clock timings are honest."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn`` and return ``(its result, seconds)``."""
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - start


def median_single_ms(
    run_query: Callable[[int], object], num_queries: int, *, samples: int = 50, warmup: int = 2
) -> float:
    """Median milliseconds of ``run_query(i)`` over up to ``samples`` queries spread evenly.

    Parameters
    ----------
    run_query : callable
        Runs the stage on query ``i`` alone (B=1).
    num_queries : int
        Number of queries available.
    """
    if num_queries <= 0:
        raise ValueError(f"num_queries must be positive, got {num_queries}")
    if samples <= 0:
        raise ValueError(f"samples must be positive, got {samples}")
    for i in range(min(warmup, num_queries)):
        run_query(i)
    step = max(1, num_queries // samples)
    times = [
        timed(lambda i=i: run_query(i))[1] * 1e3
        for i in list(range(0, num_queries, step))[:samples]
    ]
    return statistics.median(times)
