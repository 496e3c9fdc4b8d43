"""Small labelled pools and their folds for the experiment protocols (384-dim candidates,
as the embedding map expects)."""

from __future__ import annotations

import numpy as np
import pytest

from georag.eval.synthetic import random_batch
from georag.experiments.folds import Fold
from train.pools import Pool


def _labelled_pool(seed: int, b: int, m: int, d: int) -> Pool:
    """``b`` queries of ``m`` candidates (float64), three of them judged relevant (gain 1 or
    2) and one judged document outside the pool."""
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, b, m, d, padded=[(1, m - 2)], unit=True, shuffle=True)
    qrels = {}
    for q, row in zip(batch.query_ids, batch.doc_ids, strict=True):
        real = [doc for doc in row if doc]
        picked = rng.choice(len(real), size=3, replace=False)
        qrels[q] = {real[i]: int(rng.integers(1, 3)) for i in picked}
        qrels[q][f"unretrieved-{q}"] = 1
    return Pool.from_batch(batch, qrels)


@pytest.fixture
def labelled_pool():
    """``labelled_pool(seed, b=10, m=12, d=384)``."""

    def make(seed: int, b: int = 10, m: int = 12, d: int = 384) -> Pool:
        return _labelled_pool(seed, b, m, d)

    return make


@pytest.fixture
def two_folds(labelled_pool):
    """Two folds of a 10-query pool: each half reported by a model fitted on the other."""
    pool = labelled_pool(3)
    halves = [list(range(0, 5)), list(range(5, 10))]
    return [
        Fold(pool.subset(halves[1 - f]), pool.subset(halves[f]), None, None, f"fold{f}")
        for f in range(2)
    ]
