"""The CPU thread policy of the ``georag`` command and the scripts.

torch runs its CPU kernels on an OpenMP pool of ``torch.get_num_threads()`` threads
(all cores by default), whose idle threads spin while they wait for the next parallel
region. Next to other busy processes the pool oversubscribes the cores: a thread that
is descheduled holds every parallel region up, and the spinning ones burn the time that
the others need. Measured on a shared 2-core machine (load average ~11, figures and
command in docs/performance.md), torch's defaults ran diffusion, Maniscope and
Ricci-Filtration 8x to 230x slower than one thread in the same minutes; with one thread
an extra CPU-bound neighbour slowed them by at most ~2x.

The policy, applied by :func:`apply_thread_policy` (the ``georag`` command and every
script call it at start; the library itself sets nothing, on import or later):

- threads: ``--threads`` if given, else ``$GEORAG_THREADS``, else ``$OMP_NUM_THREADS``,
  else the cores that are free at start: the usable cores less the other processes
  running at that moment (:func:`busy_cores`), at least 1;
- ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep instead of spinning) unless the
  environment sets it; OpenMP reads it once, when torch is imported, so it only takes
  effect when torch was not imported yet;
- one inter-op thread (georag runs no parallel graph-level work), unless torch already
  ran inter-op work, after which torch refuses the change.

Single queries (B=1) run on one thread: their kernels are too small to split, and
waking a second thread for each of them costs more than it saves (measured on a
2-core machine with ``OMP_WAIT_POLICY=PASSIVE``, docs/performance.md: Ricci-Filtration
2.9 ms per query on one thread against 4.4 ms on two, diffusion 0.49 against 0.69,
Maniscope 0.55 against 0.95; batched, two threads are 1.5x faster for Maniscope and no
faster for diffusion or Ricci). The harness times B=1 inside :func:`torch_threads`
(``SERVING_THREADS``) and restores the count afterwards; a server that answers one query
at a time should run with one thread per process.

From Python, call ``apply_thread_policy()`` (or ``torch.set_num_threads(n)``) yourself,
and export ``OMP_WAIT_POLICY=PASSIVE`` before starting Python.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "THREADS_ENV",
    "ThreadSettings",
    "usable_cores",
    "busy_cores",
    "default_threads",
    "apply_thread_policy",
    "SERVING_THREADS",
    "torch_threads",
]

THREADS_ENV = "GEORAG_THREADS"
WAIT_POLICY = "PASSIVE"
#: torch CPU threads for one query at a time (B=1), see the module docstring
SERVING_THREADS = 1


@dataclass(frozen=True)
class ThreadSettings:
    """What :func:`apply_thread_policy` set (and what it found).

    Attributes
    ----------
    threads : int
        ``torch.get_num_threads()`` afterwards.
    source : str
        Where the count came from: ``"argument"``, ``"$GEORAG_THREADS"``,
        ``"$OMP_NUM_THREADS"`` or ``"free cores"``.
    interop_threads : int
        ``torch.get_num_interop_threads()`` afterwards.
    wait_policy : str
        ``OMP_WAIT_POLICY`` (or why it is unset).
    cores : int
        Usable cores (CPU affinity).
    load : tuple of float
        ``os.getloadavg()`` when the policy was applied.
    """

    threads: int
    source: str
    interop_threads: int
    wait_policy: str
    cores: int
    load: tuple[float, float, float]

    def describe(self) -> str:
        """One line for a log or a benchmark header."""
        return (
            f"torch threads {self.threads} ({self.source}), interop {self.interop_threads}, "
            f"OMP_WAIT_POLICY {self.wait_policy}, usable cores {self.cores}, "
            f"load average {self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f}"
        )


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def busy_cores(samples: int = 5) -> float:
    """Other runnable processes right now: the median of ``samples`` reads of the
    running-task count in ``/proc/loadavg`` (less this process), 1 ms apart.

    Unlike the load averages, which trail a new neighbour by a minute, the count sees a
    CPU-bound process the moment it runs. Off Linux: the 1-minute load average.
    """
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as fh:
                counts.append(int(fh.read().split()[3].split("/")[0]) - 1)
        except (OSError, IndexError, ValueError):
            return os.getloadavg()[0]
        if i + 1 < samples:
            time.sleep(0.001)
    return float(statistics.median(counts))


def default_threads(cores: int | None = None, busy: float | None = None) -> int:
    """The free cores: ``cores - round(busy)``, clipped to ``[1, cores]``.

    Parameters
    ----------
    cores : int, optional
        Usable cores; :func:`usable_cores` by default.
    busy : float, optional
        Runnable processes besides this one; :func:`busy_cores` by default.
    """
    cores = usable_cores() if cores is None else cores
    busy = busy_cores() if busy is None else busy
    return max(1, min(cores, cores - round(busy)))


def _threads_from(threads: int | None) -> tuple[int, str]:
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads}")
        return threads, "argument"
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"${THREADS_ENV} must be a positive integer, got {value!r}")
        return int(value), f"${THREADS_ENV}"
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) >= 1:
        return int(value), "$OMP_NUM_THREADS"
    return default_threads(), "free cores"


def apply_thread_policy(threads: int | None = None) -> ThreadSettings:
    """Set torch's CPU threads by the policy above; call it once, at program start.

    Parameters
    ----------
    threads : int, optional
        Explicit thread count (``--threads``); wins over ``$GEORAG_THREADS``.

    Raises
    ------
    ValueError
        When ``threads`` or ``$GEORAG_THREADS`` is not a positive integer.
    """
    count, source = _threads_from(threads)
    wait = os.environ.get("OMP_WAIT_POLICY")
    if wait is None and "torch" not in sys.modules:
        os.environ["OMP_WAIT_POLICY"] = wait = WAIT_POLICY
    elif wait is None:
        wait = "unset (torch was imported first; export OMP_WAIT_POLICY=PASSIVE)"
    import torch

    torch.set_num_threads(count)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # inter-op work already ran; torch keeps its pool
        pass
    return ThreadSettings(
        threads=torch.get_num_threads(),
        source=source,
        interop_threads=torch.get_num_interop_threads(),
        wait_policy=wait,
        cores=usable_cores(),
        load=os.getloadavg(),
    )


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block on ``threads`` torch CPU threads, then restore the count.

    Parameters
    ----------
    threads : int or None
        Intra-op threads inside the block; None leaves the count as it is.

    Raises
    ------
    ValueError
        When ``threads`` is not a positive integer.
    """
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads}")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
