"""Figures: quality against latency for every method of an evaluation."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["plot_quality_latency", "pyplot", "save_figure"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | os.PathLike, *, dpi: int) -> Path:
    """Write ``fig`` to ``path`` (its folder created when missing), close it, return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def plot_quality_latency(
    rows: list[dict], path: str | os.PathLike, *, metric: str = "ndcg@10"
) -> Path:
    """Scatter ``metric`` against median ms/query (log scale), one marker per method and data set.

    Parameters
    ----------
    rows : list of dict
        Rows of ``results.json``.
    path : path
        PNG to write.
    """
    plt = pyplot()
    if not rows:
        raise ValueError("rows: nothing to plot")
    missing = [r.get("method") for r in rows if metric not in r or "ms_per_query" not in r]
    if missing:
        raise ValueError(f"rows: {missing} lack {metric!r} or 'ms_per_query'")
    datasets = sorted({r["dataset"] for r in rows})
    markers = "osD^v<>p*h"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for d_index, dataset in enumerate(datasets):
        subset = [r for r in rows if r["dataset"] == dataset]
        ax.scatter(
            [max(r["ms_per_query"], 1e-3) for r in subset],
            [r[metric] for r in subset],
            marker=markers[d_index % len(markers)],
            label=dataset,
            s=40,
        )
        for r in subset:
            ax.annotate(
                r["method"],
                (max(r["ms_per_query"], 1e-3), r[metric]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("rerank latency, median ms/query at B=1 (log)")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} against latency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=130)
