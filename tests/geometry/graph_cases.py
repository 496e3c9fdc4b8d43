"""Graph generators shared by the Ricci tests (tests/geometry is on the path under
pytest's default import mode)."""

from __future__ import annotations

import numpy as np


def adversarial_graphs(
    seed: int, n: int, *, pieces: int, isolated: int, zero_share: float
) -> tuple[np.ndarray, np.ndarray]:
    """One graph: ``pieces`` random components, ``isolated`` edgeless nodes, lengths
    log-uniform in [1e-17, 1e3] with a share of exact zeros."""
    gen = np.random.default_rng(seed)
    adjacency = np.zeros((n, n), dtype=bool)
    live = n - isolated
    labels = gen.integers(0, pieces, live)
    upper = np.triu(gen.random((live, live)) < gen.uniform(0.3, 0.9), 1)
    upper &= labels[:, None] == labels[None, :]
    adjacency[:live, :live] = upper | upper.T
    w = np.triu(10.0 ** gen.uniform(-17, 3, (n, n)), 1)
    w[np.triu(gen.random((n, n)) < zero_share, 1)] = 0.0
    lengths = np.where(adjacency, w + w.T, 0.0)
    return lengths[None], adjacency[None]
