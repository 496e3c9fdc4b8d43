"""Figure of a sweep: quality (and kept count n*) against each knob of the grid."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from georag.eval.plots import pyplot, save_figure

__all__ = ["plot_sweep"]


def plot_sweep(
    rows: list[dict],
    knobs: list[str],
    path: str | os.PathLike,
    *,
    metric: str = "ndcg@10",
    title: str = "",
) -> Path:
    """One panel per knob: every grid point's ``metric`` with its 95% interval against the
    knob's value, the mean over the other knobs (line), the mean kept count n* (right axis,
    dotted) and the baseline row (dashed, with its interval as a band).

    Parameters
    ----------
    rows : list of dict
        The sweep's rows; the first is the baseline (it has none of the knobs).
    knobs : list of str
    path : path
        PNG to write.
    """
    plt = pyplot()
    base, points = rows[0], rows[1:]
    if not points or not knobs:
        raise ValueError("rows: a sweep needs a baseline row and at least one grid point")
    fig, axes = plt.subplots(1, len(knobs), figsize=(4.2 * len(knobs), 3.8), squeeze=False)
    for ax, knob in zip(axes[0], knobs):
        levels = list(dict.fromkeys(r[knob] for r in points))
        x_of = {v: i for i, v in enumerate(levels)}
        others = max(len(points) // len(levels), 1)
        for j, r in enumerate(points):
            offset = ((j % others) - (others - 1) / 2) * 0.25 / others
            x = x_of[r[knob]] + offset
            y, low, high = r[metric], r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]
            ax.errorbar(
                x,
                y,
                yerr=[[y - low], [high - y]],
                fmt="o",
                ms=3,
                color="tab:blue",
                alpha=0.35,
                lw=0.8,
            )
        means = [np.mean([r[metric] for r in points if r[knob] == v]) for v in levels]
        ax.plot(range(len(levels)), means, "-o", color="tab:blue", lw=2, label=f"{metric}, mean")
        ax.axhline(base[metric], color="black", ls="--", lw=1, label="first stage")
        ax.axhspan(base[f"{metric}_ci_low"], base[f"{metric}_ci_high"], color="grey", alpha=0.15)
        ax.set_xticks(range(len(levels)), [str(v) for v in levels])
        ax.set_xlabel(knob)
        ax.set_ylabel(metric)
        kept = [np.mean([r["kept_mean"] for r in points if r[knob] == v]) for v in levels]
        twin = ax.twinx()
        twin.plot(range(len(levels)), kept, ":s", color="tab:orange", label="kept n*")
        twin.set_ylabel("kept per query (n*)", color="tab:orange")
        ax.grid(alpha=0.3)
    handles = [h for a in (axes[0][0], twin) for h in a.get_legend_handles_labels()[0]]
    fig.legend(
        handles,
        [h.get_label() for h in handles],
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, path, dpi=120)
