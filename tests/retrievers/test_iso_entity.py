"""ISO-RAG on the entity-passage graph: the local graph reaches the second hop, phrase nodes
are never ranked, the ablations prune what they say, and bad input is one line."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from georag.rerank.registry import make_reranker
from georag.retrievers.iso import IsoRagConfig
from georag.retrievers.iso_entity import IsoEntity, IsoEntityConfig
from tests.retrievers import entity_cases as cases


def fitted(**options) -> IsoEntity:
    c = cases.corpus()
    config = IsoEntityConfig(**options)
    return IsoEntity(config).fit_graph(c.embeddings, cases.graph(), doc_ids=c.doc_ids)


def test_scores_cover_passages_only_and_reach_the_second_hop():
    method = fitted(iso=IsoRagConfig(num_sources=1), link_top_k=1, linking="mention")
    scores = method.scores(cases.queries())
    assert scores.shape == (3, 7)
    # query 0 seeds Alpha Film's passage and title; Bob Smith's passage is two hops away
    assert torch.isfinite(scores[0, 1]) and scores[0].argmax() == 0


def test_one_hop_misses_what_two_hops_reach():
    one = fitted(iso=IsoRagConfig(num_sources=1), link_top_k=1, linking="mention", hops=1)
    two = fitted(iso=IsoRagConfig(num_sources=1), link_top_k=1, linking="mention", hops=2)
    q = cases.queries()
    assert (torch.isfinite(two.scores(q)).sum() > torch.isfinite(one.scores(q)).sum()).item()


def test_random_pruning_removes_as_many_edges_as_the_rule():
    method = fitted(iso=IsoRagConfig(prune_threshold=0.05))
    rng = torch.Generator().manual_seed(0)
    upper = torch.triu(torch.rand(4, 9, 9, generator=rng), 1)
    weights = (upper + upper.transpose(1, 2)) * (torch.rand(4, 9, 9, generator=rng) > 0.3)
    weights = torch.maximum(weights, weights.transpose(1, 2))
    scores = torch.rand(4, 9, 9, generator=rng)
    scores = (scores + scores.transpose(1, 2)) / 2
    _, rule = method.prune(weights, scores)
    random = IsoEntity(dataclasses.replace(method.config, pruning="random"))
    pruned, picked = random.prune(weights, scores)
    assert torch.equal(picked.sum(dim=(1, 2)), (rule & (weights > 0)).sum(dim=(1, 2)))
    assert torch.equal(pruned, weights.masked_fill(picked, 0.0))


def test_no_pruning_keeps_every_local_edge():
    method = fitted(iso=IsoRagConfig(prune_threshold=float("inf")))
    weights = torch.ones(1, 3, 3) - torch.eye(3)
    pruned, removed = method.prune(weights, torch.full((1, 3, 3), 1e9))
    assert torch.equal(pruned, weights) and not removed.any()


def test_fusion_with_dense_ranks_every_passage():
    scores = fitted(fusion="dense").scores(cases.queries())
    assert torch.isfinite(scores).all()


def test_bad_input_is_one_line_naming_the_argument():
    c = cases.corpus()
    with pytest.raises(ValueError, match="pruning"):
        make_reranker("iso_entity", pruning="degree")
    with pytest.raises(ValueError, match="hops"):
        make_reranker("iso_entity", hops=0)
    with pytest.raises(ValueError, match="graph: has 7 passages"):
        IsoEntity().fit_graph(c.embeddings[:2], cases.graph(), doc_ids=c.doc_ids[:2])
    bare = dataclasses.replace(cases.graph(), phrase_embeddings=None)
    with pytest.raises(ValueError, match="phrase embeddings"):
        IsoEntity().fit_graph(c.embeddings, bare, doc_ids=c.doc_ids)
