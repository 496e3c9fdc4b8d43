"""Latency measurement: median ms per query at B=1 and queries per second batched.

:func:`timed` times one call, :func:`measure` many (after warm-up), and
:class:`Timing` holds the samples with their median and 90th percentile. CUDA work is
waited for around every timed call.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from georag.perf.threads import SERVING_THREADS, torch_threads

__all__ = ["median_single_ms", "timed", "sync", "Timing", "measure", "percentile"]

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
    run_query: Callable[[int], object],
    num_queries: int,
    *,
    samples: int = 50,
    warmup: int = 2,
    threads: int | None = SERVING_THREADS,
) -> float:
    """Median milliseconds of ``run_query(i)`` over up to ``samples`` queries spread evenly.

    Parameters
    ----------
    run_query : callable
        Runs the stage on query ``i`` alone (B=1).
    num_queries : int
        Number of queries available.
    samples, warmup : int
        Timed queries (at most) and untimed calls before them.
    threads : int or None
        torch CPU threads while timing (one, the serving setting, by default; see
        :mod:`georag.perf.threads`); None: the current count.
    """
    if num_queries <= 0:
        raise ValueError(f"num_queries must be positive, got {num_queries}")
    if samples <= 0:
        raise ValueError(f"samples must be positive, got {samples}")
    with torch_threads(threads):
        for i in range(min(warmup, num_queries)):
            run_query(i)
        step = max(1, num_queries // samples)
        times = [
            timed(lambda i=i: run_query(i))[1] * 1e3
            for i in list(range(0, num_queries, step))[:samples]
        ]
    return statistics.median(times)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation, as ``numpy.percentile``."""
    if not values:
        raise ValueError("values: no samples")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must lie in [0, 100], got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one measurement, in milliseconds per unit.

    Attributes
    ----------
    samples_ms : tuple of float
        Wall-clock time of each timed call, divided by the units (e.g. queries) it handled.
    cpu_ms : tuple of float, optional
        Process CPU time (all threads) of the same calls, per unit.
    """

    samples_ms: tuple[float, ...]
    cpu_ms: tuple[float, ...] | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p90(self) -> float:
        return percentile(list(self.samples_ms), 90.0)

    @property
    def cpu_median(self) -> float | None:
        """Median process CPU time (all threads) per unit; on one thread and a loaded
        machine, close to what the wall time would be on a quiet one."""
        return None if self.cpu_ms is None else statistics.median(self.cpu_ms)

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "median_ms": self.median,
            "p90_ms": self.p90,
            "samples": len(self.samples_ms),
            "cpu_median_ms": self.cpu_median,
        }


def measure(fn: Callable[[int], object], *, repeats: int, warmup: int = 1, per: int = 1) -> Timing:
    """Time ``fn(i)`` for ``i`` in ``range(repeats)`` after ``warmup`` untimed calls.

    Parameters
    ----------
    fn : callable
        Takes the repeat index (e.g. to pick a different query each time).
    repeats, warmup : int
        Timed and untimed calls.
    per : int
        Units each call handles; samples are milliseconds per unit.
    """
    if repeats < 1 or warmup < 0 or per < 1:
        raise ValueError(
            f"need repeats >= 1, warmup >= 0 and per >= 1, got {repeats}, {warmup}, {per}"
        )
    for i in range(warmup):
        fn(i)
    wall, cpu = [], []
    for i in range(repeats):
        begin = time.process_time()
        wall.append(timed(lambda i=i: fn(i))[1] * 1e3 / per)
        cpu.append((time.process_time() - begin) * 1e3 / per)
    return Timing(tuple(wall), tuple(cpu))
