"""Pictures of the Ricci flow: query-edge lengths over iterations (the paper's Figure 3)
and the histogram of final query-edge lengths with the surgery threshold eta."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from georag.eval.plots import pyplot, save_figure

__all__ = ["plot_flow", "plot_query_edge_histogram"]


def plot_flow(
    history: np.ndarray,
    path: str | os.PathLike,
    *,
    eta: float = 1.0,
    relevant: np.ndarray | None = None,
    title: str = "Ricci flow: query-edge lengths",
) -> Path:
    """Draw each query edge's length across the flow iterations, to PNG.

    Parameters
    ----------
    history : np.ndarray, shape (T + 1, W)
        Query-edge lengths before the flow and after each iteration (e.g.
        ``RicciFlowResult.history_lengths[:, b, 0, 1:]``); ``nan`` or 0 columns (padding,
        no edge) are skipped. Drawn on a log axis, clipped at 1e-6.
    path : str or PathLike
        Output PNG.
    eta : float
        Surgery threshold, drawn as a dashed line; edges ending above it are "removed".
    relevant : np.ndarray, shape (W,), bool, optional
        Marks relevant chunks (drawn solid; others dotted).
    title : str

    Returns
    -------
    Path
        The written file.
    """
    history = np.asarray(history, dtype=float)
    if history.ndim != 2 or history.shape[0] < 1:
        raise ValueError(f"history must have shape (T + 1, W), got {history.shape}")
    if relevant is not None and np.shape(relevant) != (history.shape[1],):
        raise ValueError(
            f"relevant must have shape ({history.shape[1]},), got {np.shape(relevant)}"
        )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    steps = np.arange(history.shape[0])
    for col in range(history.shape[1]):
        line = history[:, col]
        if not np.isfinite(line).all() or (line == 0).all():
            continue
        removed = line[-1] > eta
        style = "-" if relevant is None or relevant[col] else ":"
        ax.plot(
            steps,
            np.clip(line, 1e-6, None),
            style,
            color="tab:red" if removed else "tab:blue",
            lw=1.4,
        )
    ax.axhline(eta, color="black", ls="--", lw=1, label=f"eta = {eta:g}")
    ax.set_yscale("log")
    ax.set_xlabel("Ricci-flow iteration")
    ax.set_ylabel("normalized query-edge length")
    ax.set_title(title)
    handles = [
        plt.Line2D([], [], color="tab:blue", label="kept (final <= eta)"),
        plt.Line2D([], [], color="tab:red", label="removed (final > eta)"),
        plt.Line2D([], [], color="black", ls="--", label=f"eta = {eta:g}"),
    ]
    if relevant is not None:
        handles += [
            plt.Line2D([], [], color="gray", ls="-", label="relevant chunk"),
            plt.Line2D([], [], color="gray", ls=":", label="non-relevant chunk"),
        ]
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def plot_query_edge_histogram(
    lengths: np.ndarray,
    path: str | os.PathLike,
    *,
    eta: float = 1.0,
    relevant: np.ndarray | None = None,
    bins: int = 40,
) -> Path:
    """Histogram (log-spaced bins) of final normalized query-edge lengths, eta marked.

    Parameters
    ----------
    lengths : np.ndarray, shape (K,)
        Final query-edge lengths of real candidates (non-finite values are dropped).
    path : str or PathLike
        Output PNG.
    eta : float
        Surgery threshold, drawn as a vertical line.
    relevant : np.ndarray, shape (K,), bool, optional
        Splits the histogram into relevant and non-relevant chunks.
    bins : int

    Returns
    -------
    Path
        The written file.
    """
    lengths = np.asarray(lengths, dtype=float).ravel()
    if relevant is not None and np.shape(relevant) != lengths.shape:
        raise ValueError(f"relevant must have shape {lengths.shape}, got {np.shape(relevant)}")
    finite = np.isfinite(lengths)
    if not finite.any():
        raise ValueError("lengths holds no finite value")
    values = np.clip(lengths[finite], 1e-6, None)
    edges = np.logspace(np.log10(values.min()), np.log10(max(values.max(), eta * 1.01)), bins)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    if relevant is None:
        ax.hist(values, bins=edges, color="tab:blue")
    else:
        rel = np.asarray(relevant, dtype=bool)[finite]
        ax.hist(
            [values[~rel], values[rel]],
            bins=edges,
            stacked=True,
            color=["tab:gray", "tab:green"],
            label=["non-relevant", "relevant"],
        )
    ax.axvline(eta, color="black", ls="--", label=f"eta = {eta:g}")
    ax.set_xscale("log")
    ax.set_xlabel("final normalized query-edge length")
    ax.set_ylabel("chunks")
    ax.set_title(f"{int((values <= eta).sum())} of {values.size} chunks kept (<= eta)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
