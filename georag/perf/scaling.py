"""The pure arithmetic of the corpus-growth benchmark (``scripts/bench/bench_scale.py``).

* synthetic corpora: :func:`grown_centres` (new cluster centres drawn around the fitted
  ones), :func:`centre_count`, :func:`texts_of_clusters` (a source text per synthetic
  document, from its own cluster);
* graphs: :func:`edges_of` (undirected k-NN edges and their lengths), :func:`edge_sample`;
* timing: :class:`Clock` (wall and CPU seconds, finished children included);
* skips and growth: :func:`estimate` (memory and flops before a case runs),
  :func:`extrapolate` and :func:`slope` (log-log), :func:`series_of`;
* the run: :func:`run_one` (one case in its own process, or why it is skipped),
  :func:`report` (the tables) and :func:`plot`.

The cases themselves (faiss, PPR, Ricci, the GAR corpus graph, the Lorentz index) are in
:mod:`georag.experiments.scale`, above the layers they time. Nothing of georag is
imported here.
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

DIM, K, GAR_K, QUERIES = 384, 10, 16, 256
SCIFACT_DOCS = 5183
#: Per thread, for the time estimates that decide a skip (faiss' flat search of SciFact on
#: this machine: 2.1e10 flops in 0.29 CPU seconds).
FLOPS_PER_S = 5e10
WHOLE_GRAPH = ("ricci", "grc")  # timed on sampled edges; slopes use ms per edge x edges


def grown_centres(fit, count: int, gen: np.random.Generator) -> dict:
    """The fitted centres, then ``count - fitted`` new ones drawn around them.

    A new centre is a fitted centre (its parent, drawn by cluster weight) plus a Gaussian
    step with the covariance of the fitted centres around their mean, scaled so that its
    expected length is the median distance from a fitted centre to its nearest fitted
    neighbour; it keeps its parent's norm, residual scale and weight (weights then
    renormalised). Parents and steps are drawn in order from two streams of ``gen``, so a
    smaller count's centres are the first ones of a larger count's (with the same seed).

    Parameters
    ----------
    fit : mapping
        ``centres (C, DIM)``, ``scale (C,)``, ``weight (C,)`` of :func:`centres_file`.
    count : int
        Number of centres wanted; at most ``C`` keeps the fitted ones.
    gen : numpy.random.Generator

    Returns
    -------
    dict
        ``centres (M, DIM) float32``, ``scale (M,)``, ``weight (M,)`` summing to 1,
        ``parent (M,)`` (the fitted centre of each; a fitted centre is its own), with
        ``M = max(count, C)``.
    """
    centres, scale, weight = (
        np.asarray(fit[k], dtype=np.float64) for k in ("centres", "scale", "weight")
    )
    fitted = len(centres)
    extra = max(0, count - fitted)
    parents, steps = gen.spawn(2)  # two streams: a count's draws prefix a larger count's
    parent = np.concatenate(
        [np.arange(fitted), parents.choice(fitted, extra, p=weight / weight.sum())]
    )
    gap = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    np.fill_diagonal(gap, np.inf)
    deviation = centres - centres.mean(0)
    # (C, DIM) deviations mixed by standard normal weights: covariance deviation' deviation / C
    step = steps.standard_normal((extra, fitted)) @ deviation / math.sqrt(fitted)
    step *= np.median(gap.min(1)) / math.sqrt((deviation**2).sum() / fitted)
    grown = centres[parent[fitted:]] + step
    norm = np.linalg.norm(centres, axis=1)[parent[fitted:]]
    grown *= (norm / np.linalg.norm(grown, axis=1))[:, None]
    all_weight = weight[parent]
    return {
        "centres": np.concatenate([centres, grown]).astype(np.float32),
        "scale": scale[parent],
        "weight": all_weight / all_weight.sum(),
        "parent": parent,
    }


def centre_count(n: int, fitted: int, docs_per_centre: float | None) -> int:
    """Centres of an ``n``-document corpus: ``n / docs_per_centre`` (rounded), at least
    the ``fitted`` ones; ``fitted`` whatever ``n`` when ``docs_per_centre`` is 0 or None."""
    if not docs_per_centre:
        return fitted
    return max(fitted, round(n / docs_per_centre))


def texts_of_clusters(
    label: np.ndarray, source_label: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """For each synthetic document a random source document of its cluster.

    Parameters
    ----------
    label : numpy.ndarray, shape (N,), int
        Cluster of each synthetic document.
    source_label : numpy.ndarray, shape (M,), int
        Cluster of each source (SciFact) document; every cluster in ``label`` has one.
    gen : numpy.random.Generator

    Returns
    -------
    numpy.ndarray, shape (N,), int64
        Index into the source documents, uniform within the cluster.
    """
    order = np.argsort(source_label, kind="stable")
    first = np.searchsorted(source_label[order], label, side="left")
    count = np.searchsorted(source_label[order], label, side="right") - first
    if (count == 0).any():
        raise ValueError("label: a cluster without source documents")
    return order[first + (gen.random(len(label)) * count).astype(np.int64)]


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


def edge_sample(total: int, count: int) -> np.ndarray:
    """``count`` random edge indices of ``total`` (all when ``count <= 0``), sorted."""
    if count <= 0 or count >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(3).choice(total, count, replace=False))


class Clock:
    """Wall and CPU seconds (this process and its finished children) of one timed part."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), _cpu()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, _cpu() - self.cpu


def _cpu() -> float:
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def estimate(kernel: str, n: int, threads: int, args) -> str | None:
    """Why a case is skipped on memory or flops before it runs (None: it runs)."""
    memory = n * DIM * 4 * 3 + n * 400  # corpus, its copy in faiss, a graph
    if kernel == "ppr":
        memory += n * QUERIES * 4 * 5
    if memory > args.max_gib * 2**30:
        return f"memory estimate {memory / 2**30:.1f} GiB > --max-gib {args.max_gib}"
    if kernel not in ("knn_flat", "knn_ivf", "corpus_graph_dense"):
        return None
    # flat: every pair; IVF: 8 of 4 sqrt(N) lists scanned plus the 4 sqrt(N) centroids
    flops = 2.0 * n * n * DIM if kernel != "knn_ivf" else 2.0 * n * (6 * math.sqrt(n)) * DIM
    seconds = flops / (FLOPS_PER_S * threads)
    if seconds > args.max_seconds:
        return (
            f"time estimate {seconds:.0f} s ({flops:.1e} flops) > --max-seconds {args.max_seconds}"
        )
    return None


def extrapolate(points: list[tuple[float, float]], n: float) -> float | None:
    """Seconds at ``n`` from measured ``(n, seconds)`` points: the fitted log-log slope
    (at least 1) from the largest point; None without points."""
    if not points:
        return None
    fitted = slope(points) if len(points) > 1 else 1.0
    n_max, t_max = max(points)
    return t_max * (n / n_max) ** max(1.0, fitted)


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log seconds against log size; None below two sizes."""
    if len({p[0] for p in points}) < 2:
        return None
    size, seconds = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(size, seconds, 1)[0])


def series_of(rows: list[dict], *, cpu: bool = False, whole_graph: bool = True) -> dict:
    """``{(timing, threads): [(n, seconds), ...]}`` of the measured rows; Ricci and GRC
    scaled from their sampled edges to the whole graph (seconds / sampled x edges) unless
    ``whole_graph`` is False."""
    series: dict = {}
    for row in rows:
        if row["skipped"]:
            continue
        whole = whole_graph and row["kernel"] in WHOLE_GRAPH
        scale = row["edges"] / row["ricci_edges"] if whole else 1.0
        for name, timing in row["timings"].items():
            seconds = timing["cpu_seconds" if cpu else "seconds"] * scale
            series.setdefault((name, row["threads"]), []).append((row["n"], seconds))
    return series


def read_rows(path: Path) -> list[dict]:
    """The case rows of an earlier run's ``--out`` JSON."""
    return json.loads(path.read_text())["results"]["rows"]


def run_one(
    kernel: str,
    size: str,
    n: int,
    threads: int,
    rows: list[dict],
    args,
    *,
    script: str,
    started: float,
) -> dict:
    """One case in its own process, or the reason it is skipped.

    Parameters
    ----------
    kernel, size : str
        The case (``size``: ``"scifact"`` or a document count).
    n : int
        Documents of ``size``.
    threads : int
        Threads of the case (``OMP_NUM_THREADS`` and ``GEORAG_THREADS`` of its process).
    rows : list of dict
        The rows measured so far: a kernel whose smaller sizes extrapolate past
        ``--max-seconds`` is skipped.
    args : argparse.Namespace
        The script's options (``max_gib``, ``max_seconds``, ``stop_after``); the process is
        ``python script --case KERNEL SIZE THREADS`` followed by the script's own arguments.
    script : str
        The benchmark script that runs one case under ``--case``.
    started : float
        ``time.time()`` at the start of the run (``--stop-after`` counts from it).

    Returns
    -------
    dict
        ``kernel``, ``size``, ``n``, ``threads``, ``skipped`` (the reason, or None) and,
        when measured, the case's ``timings``, ``peak_mib``, load averages and notes.
    """
    row = {"kernel": kernel, "size": size, "n": n, "threads": threads}
    reason = estimate(kernel, n, threads, args)
    if args.stop_after and time.time() - started > args.stop_after:
        reason = f"not started: past --stop-after {args.stop_after:.0f} s"
    done_before = series_of([r for r in rows if r["kernel"] == kernel], whole_graph=False)
    for (name, t), points in done_before.items():
        guess = extrapolate(points, n) if t == threads and reason is None else None
        if guess is not None and guess > args.max_seconds:
            reason = f"{name} extrapolates to {guess:.0f} s > --max-seconds {args.max_seconds:.0f}"
    if reason is None:
        command = [sys.executable, script, "--case", kernel, size, str(threads)]
        command += sys.argv[1:]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), GEORAG_THREADS=str(threads))
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
    if reason:
        figure = "skipped: " + reason
    else:
        figure = ", ".join(
            f"{name} {t['seconds']:.3g} s (CPU {t['cpu_seconds']:.3g})"
            for name, t in row["timings"].items()
        )
        figure += f", peak {row['peak_mib']:.0f} MiB"
    print(f"# {kernel} n={n} threads={threads}: {figure} (load {os.getloadavg()[0]:.1f})")
    sys.stdout.flush()
    return row


NOTES = (
    "edges",
    "recall_at_10",
    "ricci_edges",
    "max_diff_to_pot",
    "shortest_path",
    "max_diff_to_georag",
    "grc_process_seconds",
    "rows_padded",
    "chunks",
)


def report(rows: list[dict], args) -> None:
    """Print the case table and the slope table of ``rows``; the plot when ``args.plot``."""
    print(
        "\n| timing | n | threads | wall s | CPU s | peak MiB | load (start, end) | notes |"
        "\n|---|---:|---:|---:|---:|---:|---|---|"
    )
    for row in rows:
        head = f"| {row['kernel']} | {row['n']} | {row['threads']} |"
        if row["skipped"]:
            print(f"{head} | | | | | skipped: {row['skipped']} |")
            continue
        notes = ", ".join(
            f"{k} {row[k]:.3g}" if isinstance(row[k], float) else f"{k} {row[k]}"
            for k in NOTES
            if k in row
        )
        load = f"{row['load_start'][0]:.1f}, {row['load'][0]:.1f}"
        for name, t in row["timings"].items():
            head = f"| {name} | {row['n']} | {row['threads']} |"
            figures = f"{t['seconds']:.4g} | {t['cpu_seconds']:.4g} | {row['peak_mib']:.0f}"
            if row["kernel"] in WHOLE_GRAPH:
                ms = 1e3 * t["seconds"] / row["ricci_edges"]
                cpu_ms = 1e3 * t["cpu_seconds"] / row["ricci_edges"]
                notes_here = f"{ms:.3g} ms per edge wall, {cpu_ms:.3g} CPU; {notes}"
            else:
                notes_here = notes
            print(f"{head} {figures} | {load} | {notes_here} |")
    print(
        "\n| timing | threads | sizes | slope wall | slope CPU | at 1e7 (extrapolated): wall s "
        "| CPU s |\n|---|---:|---|---:|---:|---:|---:|"
    )
    series, cpu_series = series_of(rows), series_of(rows, cpu=True)
    for key, points in series.items():
        sizes = ", ".join(f"{n:g}" for n, _ in sorted(points))
        fitted, fitted_cpu = slope(points), slope(cpu_series[key])
        if fitted is None:
            print(f"| {key[0]} | {key[1]} | {sizes} | one size only | | | |")
            continue
        (n_max, t_max), (_, c_max) = max(points), max(cpu_series[key])
        print(
            f"| {key[0]} | {key[1]} | {sizes} | {fitted:.2f} | {fitted_cpu:.2f} | "
            f"{t_max * (1e7 / n_max) ** fitted:.3g} | {c_max * (1e7 / n_max) ** fitted_cpu:.3g} |"
        )
    if args.plot:
        plot(series, cpu_series, args.plot)


def plot(series: dict, cpu_series: dict, path: str) -> None:
    """Log-log lines of wall and CPU seconds against documents, one colour per timing,
    dashed at 2 threads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for name, _ in series})
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(names), 2)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5), sharey=True)
    for ax, data, what in ((axes[0], series, "wall"), (axes[1], cpu_series, "process CPU")):
        for (name, threads), points in sorted(data.items()):
            points = sorted(points)
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                linestyle="-" if threads == 1 else "--",
                color=colours[names.index(name)],
                label=f"{name} ({threads} thr)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title(f"{what} seconds")
    axes[0].set_ylabel("seconds (Ricci, GRC: whole graph from sampled edges; search: per query)")
    axes[1].legend(fontsize=6, ncol=2, loc="lower right")
    fig.suptitle("Growth with the corpus (shared 2-core machine: wall is an upper bound)")
    fig.tight_layout()
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)
    print(f"plot: {path}")
