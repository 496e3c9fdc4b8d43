"""HippoRAG 2's retrieval on the entity-passage graph: PPR against igraph's prpack (as
HippoRAG calls it), the reset vector, the multi-hop ranking, the fallback and bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.batch import QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.registry import make_reranker
from georag.retrievers.hipporag2 import HippoRAG2, HippoRAG2Config, hipporag2_reset
from georag.retrievers.lexical import minmax
from tests.retrievers import entity_cases as cases

igraph = pytest.importorskip("igraph")


def prpack(csr: torch.Tensor, reset: np.ndarray, damping: float) -> np.ndarray:
    """HippoRAG 2's call (HippoRAG.py: personalized_pagerank(..., directed=False,
    weights='weight', reset=..., implementation='prpack')) on the upper triangle of ``csr``."""
    dense = csr.to_dense().numpy()
    i, j = np.nonzero(np.triu(dense))
    g = igraph.Graph(n=dense.shape[0], edges=list(zip(i.tolist(), j.tolist())), directed=False)
    g.es["weight"] = dense[i, j].tolist()
    return np.asarray(
        g.personalized_pagerank(
            vertices=range(dense.shape[0]),
            damping=damping,
            directed=False,
            weights="weight",
            reset=reset.tolist(),
            implementation="prpack",
        )
    )


def fitted(**options) -> HippoRAG2:
    c = cases.corpus()
    return HippoRAG2(HippoRAG2Config(**options)).fit_graph(
        c.embeddings, cases.graph(), doc_ids=c.doc_ids
    )


def test_ppr_equals_igraph_prpack_for_the_retrievers_reset_vectors():
    method = fitted()
    q = cases.queries()
    reset = method.reset(q, method.dense_scores(q))
    ours = method.ppr(reset)
    for row in range(reset.shape[0]):
        theirs = prpack(method.csr, reset[row].numpy(), 0.5)
        np.testing.assert_allclose(ours[row].numpy(), theirs, rtol=0, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 30),
    density=st.floats(0.0, 0.5),
    damping=st.floats(0.05, 0.95),
    seed=st.integers(0, 2**31 - 1),
)
def test_sparse_ppr_equals_prpack_on_random_graphs_with_isolated_nodes(n, density, damping, seed):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density, 1) * rng.uniform(1e-3, 10.0, (n, n))
    weights = upper + upper.T
    reset = rng.random(n) * (rng.random(n) < 0.5)
    reset[rng.integers(n)] += 1.0
    csr = torch.tensor(weights).to_sparse_csr()
    ours = personalized_pagerank(
        csr, torch.tensor(reset), damping=damping, tol=1e-12, max_iter=5000
    )
    np.testing.assert_allclose(ours.numpy(), prpack(csr, reset, damping), rtol=0, atol=1e-8)


def test_reset_vector_is_hipporag2s():
    dense = torch.tensor([[0.2, 0.6, 1.0], [0.5, 0.5, 0.1]], dtype=torch.float64)
    links = torch.tensor([[0.0, 1.0], [0.5, 0.0]], dtype=torch.float64)
    specificity = torch.tensor([1.0, 0.25], dtype=torch.float64)
    reset = hipporag2_reset(dense, links, specificity, passage_node_weight=0.05)
    expected = torch.tensor(
        [[0.0, 0.025, 0.05, 0.0, 0.25], [0.05, 0.05, 0.0, 0.5, 0.0]], dtype=torch.float64
    )
    torch.testing.assert_close(reset, expected)


def test_links_keep_the_top_phrases_and_mentions_score_highest():
    method = fitted(link_top_k=2, linking="both")
    q = cases.queries()
    reset = method.reset(q, method.dense_scores(q))
    phrases = reset[:, method.graph.num_passages :]
    assert ((phrases > 0).sum(dim=1) <= 2).all()
    vocab = method.graph.vocabulary()
    assert phrases[0, vocab["alpha film"]] > 0 and phrases[1, vocab["gamma song"]] > 0


def test_the_bridge_passage_is_reached_through_the_mentioned_title():
    method = fitted(link_top_k=1, linking="both", fusion="none")
    q = cases.queries()
    top = method.retrieve(q, top_k=2)
    ranked = [{method.row_ids[i] for i in row.nonzero().flatten().tolist()} for row in top.keep]
    # the film's passage names its director; the director's passage is the second hop
    assert ranked[0] == {"d0", "d1"} and ranked[1] == {"d3", "d4"}


def test_fusions_are_the_residual_of_the_graph_score_on_the_base():
    q = cases.queries()
    c = cases.corpus()
    alone = fitted(fusion="none")
    graph = alone.scores(q)
    fused = HippoRAG2(HippoRAG2Config(fusion="dense", fusion_weight=0.5)).fit_graph(
        c.embeddings, cases.graph(), doc_ids=c.doc_ids
    )
    expected = minmax(alone.dense_scores(q)) + 0.5 * graph / graph.amax(dim=1, keepdim=True)
    torch.testing.assert_close(fused.scores(q), expected)
    both = HippoRAG2(HippoRAG2Config(fusion="dense+bm25")).fit_graph(
        c.embeddings, cases.graph(), doc_ids=c.doc_ids
    )
    assert torch.isfinite(both.scores(q)).all()


def test_a_graph_without_phrases_falls_back_to_dense():
    c = cases.corpus()
    full = cases.graph()
    empty = dataclasses.replace(
        full,
        phrases=(),
        contains=torch.empty(2, 0, dtype=torch.long),
        synonym_index=torch.empty(2, 0, dtype=torch.long),
        synonym_weight=torch.empty(0),
        phrase_embeddings=full.phrase_embeddings[:0],
    )
    method = HippoRAG2().fit_graph(c.embeddings, empty, doc_ids=c.doc_ids)
    q = cases.queries()
    torch.testing.assert_close(method.scores(q), method.dense_scores(q))


def test_bad_input_is_one_line_naming_the_argument():
    c = cases.corpus()
    method = fitted()
    with pytest.raises(ValueError, match="queries: embeddings of width"):
        method.scores(QueryBatch(["q"], ["x"], torch.ones(1, 3, dtype=torch.float64)))
    with pytest.raises(ValueError, match="graph: has 7 passages"):
        HippoRAG2().fit_graph(c.embeddings[:3], cases.graph(), doc_ids=c.doc_ids[:3])
    with pytest.raises(ValueError, match="link_top_k"):
        make_reranker("hipporag2", link_top_k=0)
    with pytest.raises(ValueError, match="fusion"):
        make_reranker("hipporag2", fusion="rrf")
    with pytest.raises(ValueError, match="call fit"):
        HippoRAG2().retrieve(cases.queries(), top_k=2)
