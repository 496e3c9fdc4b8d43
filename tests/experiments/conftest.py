"""Small labelled pools and their folds for the experiment protocols (384-dim candidates,
as the embedding map expects)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

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


class HashEncoder:
    """A stand-in for the text encoder that embeds no text: each text's row is a unit
    vector seeded by its SHA-256, so loaders, pools and splits run on a data set's real ids
    in seconds, without encoding its passages (``cache_name`` keeps its rows apart from a
    real model's in the embedding cache)."""

    cache_name = "test-hash-encoder"
    max_seq_length = 256
    dim = 384

    def encode(self, texts: list[str], *, desc: str = "encode") -> torch.Tensor:
        seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little") for t in texts]
        rows = np.stack([np.random.default_rng(s).standard_normal(self.dim) for s in seeds])
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return torch.from_numpy(rows).float()


@pytest.fixture
def hash_encoder(monkeypatch, tmp_path) -> HashEncoder:
    """A :class:`HashEncoder`, with ``$GEORAG_CACHE`` in the test's own folder."""
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path / "cache"))
    return HashEncoder()
