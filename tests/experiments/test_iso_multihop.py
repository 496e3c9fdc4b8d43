"""georag.experiments.iso_multihop: the random-pruning ablation removes as many edges as
ISO-RAG, chosen among the existing ones, symmetrically and by its seed."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.experiments.iso_multihop import RandomPrune
from georag.retrievers.iso import IsoRag, IsoRagConfig


def _graphs(seed: int, b: int = 3, m: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu(torch.rand(b, m, m, generator=g) < 0.5, 1)
    weights = torch.rand(b, m, m, generator=g, dtype=torch.float64) * upper
    weights = weights + weights.transpose(1, 2)
    scores = torch.rand(b, m, m, generator=g, dtype=torch.float64)
    return weights, scores + scores.transpose(1, 2)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), threshold=st.sampled_from([0.5, 1.0, 1.5]))
def test_random_pruning_removes_as_many_existing_edges_as_iso_rag(seed, threshold):
    weights, scores = _graphs(seed)
    config = IsoRagConfig(prune_threshold=threshold)
    _, removed = IsoRag(config).prune(weights, scores)
    pruned, picked = RandomPrune(config, seed=seed).prune(weights, scores)
    assert torch.equal(picked.sum(dim=(1, 2)), removed.sum(dim=(1, 2)))
    assert torch.equal(picked, picked.transpose(1, 2)) and not (picked & (weights == 0)).any()
    assert torch.equal(pruned, weights.masked_fill(picked, 0.0))
    again, _ = RandomPrune(config, seed=seed).prune(weights, scores)
    assert torch.equal(again, pruned)
