"""The benchmark harness of scripts/: one parser, one timer, one header.

Every benchmark script builds its parser with :func:`bench_parser` (``--data-dir``,
``--device``, ``--threads``, ``--repeats``, ``--out``), calls :func:`start` once (which
applies the thread policy of :mod:`georag.perf.threads` and prints the header: device,
threads, wait policy, load average), times with :meth:`Bench.time` (warm-up, CUDA
synchronisation, median and 90th percentile) and ends with :meth:`Bench.finish`, which
prints the load average at the end and writes the figures beside the header as JSON
when ``--out`` is given::

    parser = bench_parser(__doc__, repeats=5)
    args = parser.parse_args()
    bench = start(args, config={"B": 256})
    t = bench.time(lambda i: kernel(x), repeats=args.repeats, per=256)
    bench.finish({"kernel": t.as_dict()})

``--data-dir`` resolves data set names as the ``georag`` command does: the folder given,
else ``$GEORAG_DATA``, else the download cache (:func:`georag.data.beir.resolve_dataset`);
:func:`data_root` gives the folder itself to scripts that read files in it. Peer
implementations with pinned dependencies run in the ``.venv-peers`` environment
(:func:`peer_python`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from georag._io import atomic_write
from georag.perf.threads import ThreadSettings, apply_thread_policy

__all__ = [
    "bench_parser",
    "start",
    "Bench",
    "default_device",
    "busy_neighbours",
    "data_root",
    "peer_python",
]

_SPIN = "while True:\n    pass\n"


def default_device() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def busy_neighbours(count: int, *, settle_s: float = 0.5) -> Iterator[list[int]]:
    """Run ``count`` CPU-bound neighbour processes (a Python busy loop each) meanwhile.

    They start before the body (``settle_s`` seconds to get scheduled) and are stopped,
    by their process ids, when it ends, also on error. Yields their ids.
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        if procs:
            time.sleep(settle_s)
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def positive_int(value: str) -> int:
    """An argparse type: an integer >= 1 (else a one-line usage error naming the option)."""
    return _int_at_least(value, 1, "a positive integer")


def non_negative_int(value: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(value, 0, "a non-negative integer")


def _int_at_least(value: str, low: int, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value!r}") from None
    if number < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return number


def data_root(args: argparse.Namespace) -> Path:
    """The data folder itself, for scripts that read files in it: ``--data-dir``, else
    ``$GEORAG_DATA``; when neither names a folder, exits with a one-line error (status 2)."""
    from georag.resources import data_roots

    roots = data_roots(args.data_dir)
    if roots and roots[0].is_dir():
        return roots[0]
    problem = f"no folder {roots[0]}" if roots else "give the data folder or set $GEORAG_DATA"
    print(f"{Path(sys.argv[0]).name}: error: --data-dir: {problem}", file=sys.stderr)
    raise SystemExit(2)


def peer_python() -> Path | None:
    """The python of the peers environment (``.venv-peers`` beside ``georag/``, built by
    ``make peers``: GraphRicciCurvature 0.6.1 and its pinned scipy), None when absent."""
    path = Path(__file__).resolve().parents[2] / ".venv-peers" / "bin" / "python"
    return path if path.exists() else None


def bench_parser(
    doc: str | None, *, repeats: int | None = 5, out: str = "--out", device: bool = True
) -> argparse.ArgumentParser:
    """The shared options; add the script's own to the parser returned.

    Parameters
    ----------
    doc : str
        The script's docstring: its first line is the description, the rest the epilog.
    repeats : int or None
        Default of ``--repeats``; None for a script that repeats nothing (no option).
    out : str
        The option that names the JSON file of header and figures (``args.bench_out``);
        another name where the script's own ``--out`` is its product (a run, a folder).
    device : bool
        Offer ``--device``; False for a script that places nothing itself (see :func:`start`).
    """
    lines = (doc or "").strip().splitlines()
    parser = argparse.ArgumentParser(
        description=lines[0] if lines else None,
        epilog="\n".join(lines[1:]).strip() or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="where data set names resolve (default: $GEORAG_DATA, as the georag command)",
    )
    if device:
        parser.add_argument(
            "--device", default=None, help="torch device (default: cuda when available, else cpu)"
        )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch CPU threads (default: $GEORAG_THREADS, $OMP_NUM_THREADS, else the free cores)",
    )
    if repeats is not None:
        parser.add_argument(
            "--repeats",
            type=positive_int,
            default=repeats,
            help=f"timed repetitions per figure (default {repeats})",
        )
    parser.add_argument(
        out,
        dest="bench_out",
        metavar="JSON",
        type=Path,
        default=None,
        help="write the figures and the header to this JSON file",
    )
    return parser


@dataclass
class Bench:
    """A started benchmark: its settings, its header and its timer."""

    script: str
    device: str
    threads: ThreadSettings
    config: dict
    started: float = field(default_factory=time.time)
    out: Path | None = None

    def header(self) -> dict:
        import torch

        return {
            "script": self.script,
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.started)),
            "device": self.device,
            "threads": self.threads.threads,
            "threads_source": self.threads.source,
            "interop_threads": self.threads.interop_threads,
            "omp_wait_policy": self.threads.wait_policy,
            "cores": self.threads.cores,
            "load_start": list(self.threads.load),
            "machine": f"{platform.machine()}, python {platform.python_version()}, "
            f"torch {torch.__version__}"
            + "".join(
                f", {name} {sys.modules[name].__version__}"
                for name in ("transformers", "faiss", "networkx")
                if name in sys.modules
            ),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "config": self.config,
        }

    def sync(self) -> None:
        """Wait for the device's queued work (CUDA); nothing on a CPU."""
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[int], object], *, repeats: int, warmup: int = 1, per: int = 1):
        """:func:`georag.perf.timing.measure` with this benchmark's device synchronised.

        Returns
        -------
        georag.perf.timing.Timing
            Milliseconds per unit (``per`` units per call): ``.median``, ``.p90``.
        """
        from georag.perf.timing import measure

        def call(i: int) -> object:
            out = fn(i)
            self.sync()
            return out

        return measure(call, repeats=repeats, warmup=warmup, per=per)

    def finish(self, results: object) -> dict:
        """Print the load at the end; write header and ``results`` to ``--out`` (JSON)."""
        load_end = os.getloadavg()
        print(
            f"# load average at the end {load_end[0]:.2f} {load_end[1]:.2f} "
            f"{load_end[2]:.2f} (start {self.threads.load[0]:.2f}); "
            f"wall {time.time() - self.started:.1f} s"
        )
        record = {
            **self.header(),
            "load_end": list(load_end),
            "wall_s": time.time() - self.started,
            "results": results,
        }
        if self.out is not None:
            atomic_write(self.out, json.dumps(record, indent=1, default=str) + "\n")
            print(f"# wrote {self.out}")
        return record


def start(
    args: argparse.Namespace, *, config: dict | None = None, device: str | None = None
) -> Bench:
    """Apply the thread policy, pick the device and print the header.

    Parameters
    ----------
    args : argparse.Namespace
        From a :func:`bench_parser` parser.
    config : dict, optional
        The benchmark's own settings, printed and written with the figures.
    device : str, optional
        Where the work runs when the parser has no ``--device`` (default: torch's default,
        :func:`default_device`).
    """
    settings = apply_thread_policy(args.threads)
    bench = Bench(
        script=Path(sys.argv[0]).name,
        device=getattr(args, "device", None) or device or default_device(),
        threads=settings,
        config=dict(config or {}),
        out=args.bench_out,
    )
    head = bench.header()
    print(
        f"# {head['script']} on {head['date_utc']} UTC: {head['machine']}; "
        f"device {bench.device} (CUDA: {head['cuda']})"
    )
    print(f"# {settings.describe()}")
    if bench.config:
        print("# config: " + ", ".join(f"{k}={v}" for k, v in bench.config.items()))
    return bench
