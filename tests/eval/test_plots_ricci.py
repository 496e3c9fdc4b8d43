"""The Ricci-flow pictures are written as PNG and reject bad shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.eval.plots_ricci import plot_flow, plot_query_edge_histogram
from georag.geometry.graphs import cosine_dissimilarity, threshold_graph
from georag.geometry.ricci import ricci_flow

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_flow_and_histogram_from_a_real_flow(tmp_path):
    x = torch.randn(2, 11, 8, generator=torch.Generator().manual_seed(0))
    adjacency = threshold_graph(cosine_dissimilarity(x))
    res = ricci_flow(adjacency.float(), adjacency, iterations=5, history=True)
    history = res.history_lengths[:, 0, 0, 1:].numpy()
    relevant = np.arange(10) % 3 == 0
    flow_png = plot_flow(history, tmp_path / "flow.png", relevant=relevant)
    hist_png = plot_query_edge_histogram(
        res.lengths[:, 0, 1:].numpy(),
        tmp_path / "hist.png",
        relevant=np.tile(relevant, (2, 1)).ravel(),
    )
    for path in (flow_png, hist_png):
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5000


def test_plots_reject_bad_input(tmp_path):
    with pytest.raises(ValueError, match="history"):
        plot_flow(np.ones(5), tmp_path / "a.png")
    with pytest.raises(ValueError, match="relevant"):
        plot_flow(np.ones((3, 4)), tmp_path / "a.png", relevant=np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="no finite"):
        plot_query_edge_histogram(np.array([np.nan]), tmp_path / "b.png")
