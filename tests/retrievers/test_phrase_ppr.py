"""Phrase-graph PPR: parity with networkx, the zero residual, expansion, bad input."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from georag.batch import CandidateBatch, Corpus, QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.rerank.baselines.learned_map import LearnedMap, LearnedMapConfig
from georag.rerank.registry import available_methods, is_retriever, make_reranker
from georag.retrieval.phrase_graph import (
    PhraseGraph,
    PhraseGraphConfig,
    build_phrase_graph,
    query_phrase_weights,
)
from georag.retrievers.phrase_ppr import (
    PhrasePPR,
    PhrasePPRConfig,
    phrase_ppr_feature,
    residual_scores,
    teleport,
)

# three components (alpha, delta, omega phrases) and an isolated passage (stop words only)
TEXTS = [
    "alpha beta story",
    "alpha gamma tale",
    "gamma beta again",
    "delta epsilon news",
    "delta zeta report",
    "the of and",
    "omega sigma",
    "omega sigma twice",
]
N, D = len(TEXTS), 6


def _graph(knn: int = 0, embeddings=None) -> PhraseGraph:
    ids = [str(i) for i in range(N)]
    cfg = PhraseGraphConfig(max_df=1.0, knn=knn)
    return build_phrase_graph(ids, [""] * N, TEXTS, embeddings, config=cfg)


def _networkx_ppr(csr: torch.Tensor, p: np.ndarray, damping: float) -> np.ndarray:
    dense = csr.to_dense().numpy()
    g = nx.Graph()
    g.add_nodes_from(range(dense.shape[0]))
    rows, cols = np.nonzero(np.triu(dense))
    g.add_weighted_edges_from((int(i), int(j), float(dense[i, j])) for i, j in zip(rows, cols))
    pr = nx.pagerank(
        g, alpha=damping, personalization=dict(enumerate(p)), tol=1e-14, max_iter=10_000
    )
    return np.array([pr[i] for i in range(dense.shape[0])])


@pytest.mark.parametrize("knn", [0, 2])
def test_ppr_matches_networkx_on_components_and_isolated_nodes(knn):
    gen = torch.Generator().manual_seed(1)
    emb = torch.nn.functional.normalize(torch.rand(N, D, generator=gen, dtype=torch.float64))
    graph = _graph(knn, emb)
    assert graph.counts()["isolated_passages"] == (1 if knn == 0 else 0)
    csr = graph.to_csr(torch.float64)
    scores = torch.rand(3, N, generator=gen, dtype=torch.float64)
    phrases = query_phrase_weights(["alpha story", "omega news", "nothing"], graph).double()
    p = teleport(scores, phrases, num_sources=2, passage_weight=0.3)
    ours = personalized_pagerank(csr, p, damping=0.5, tol=1e-13, max_iter=1000)
    for b in range(3):
        ref = _networkx_ppr(csr, p[:, b].numpy(), 0.5)
        np.testing.assert_allclose(ours[:, b].numpy(), ref, rtol=1e-9, atol=1e-12)
    feature = phrase_ppr_feature(
        csr, scores, phrases, num_sources=2, passage_weight=0.3, damping=0.5, tol=1e-13
    )
    torch.testing.assert_close(feature, ours[:N].T / ours[:N].T.amax(dim=1, keepdim=True))


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 7),
    p=st.integers(1, 7),
    seed=st.integers(0, 2**31 - 1),
    damping=st.floats(0.05, 0.95),
    share=st.floats(0.01, 1.0),
)
@example(n=5, p=4, seed=12309967, damping=0.95, share=0.01)  # off by 3.8 rtol at tol 1e-13
def test_ppr_matches_networkx_on_random_bipartite_graphs(n, p, seed, damping, share):
    gen = torch.Generator().manual_seed(seed)
    links = torch.rand(n, p, generator=gen) < 0.35  # some passages and phrases isolated
    contains = links.nonzero().T.contiguous()
    graph = PhraseGraph(
        n,
        tuple(f"w{j}" for j in range(p)),
        contains,
        torch.empty(2, 0, dtype=torch.long),
        torch.empty(0),
        "",
        PhraseGraphConfig(),
    )
    csr = graph.to_csr(torch.float64)
    scores = torch.rand(2, n, generator=gen, dtype=torch.float64)
    some = torch.rand(2, p, generator=gen) < 0.5
    weights = torch.rand(2, p, generator=gen, dtype=torch.float64) * some
    tele = teleport(scores, weights, num_sources=2, passage_weight=share)
    torch.testing.assert_close(tele.sum(dim=0), torch.ones(2, dtype=torch.float64))
    # both stop at an L1 change below N * tol, which leaves up to N * tol * d / (1 - d) of
    # error; at networkx's tol both meet rtol 1e-8 (tol 1e-13 does not at d = 0.95)
    ours = personalized_pagerank(csr, tele, damping=damping, tol=1e-14, max_iter=5000)
    for b in range(2):
        ref = _networkx_ppr(csr, tele[:, b].numpy(), damping)
        np.testing.assert_allclose(ours[:, b].numpy(), ref, rtol=1e-8, atol=1e-12)


def _fitted(tmp_path, weight: float, perturb: bool = True):
    gen = torch.Generator().manual_seed(3)
    emb = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)
    mapped = LearnedMap(LearnedMapConfig(dim=D))
    if perturb:
        with torch.no_grad():
            mapped.embed.weight.add_(0.3 * torch.randn(D, D, generator=gen))
            mapped.fusion.raw.fill_(0.4)
    path = tmp_path / "map.pt"
    mapped.save(path)
    model = PhrasePPR(PhrasePPRConfig(weight=weight, map=str(path), num_sources=2))
    corpus = Corpus([str(i) for i in range(N)], [""] * N, TEXTS, emb)
    queries = QueryBatch(
        ["q0", "q1"],
        ["alpha story", "omega"],
        torch.nn.functional.normalize(torch.randn(2, D, generator=gen), dim=1),
    )
    return model.fit(corpus), mapped, corpus, queries


def test_zero_weight_is_the_learned_map_exactly(tmp_path):
    model, mapped, corpus, queries = _fitted(tmp_path, 0.0)
    # the pool the map reranks: every passage, in dense order
    raw = queries.embeddings @ corpus.embeddings.T
    order = raw.argsort(dim=1, descending=True)
    batch = CandidateBatch(
        query=queries.embeddings,
        cands=corpus.embeddings[order],
        scores=raw.gather(1, order),
        mask=torch.ones_like(order, dtype=torch.bool),
        query_ids=queries.ids,
        doc_ids=[[corpus.doc_ids[i] for i in row] for row in order.tolist()],
    )
    pool = mapped(batch).scores
    ours = model.retrieve(queries, top_k=N).scores.gather(1, order)
    assert (ours - pool).abs().max() <= 1e-6
    # and a zero residual over a real PPR feature changes nothing
    base = model.base_scores(queries)
    feature = model.feature(queries, base)
    assert feature.max() == 1.0
    assert (residual_scores(base, feature, torch.tensor(0.0)) - base).abs().max() <= 1e-6
    assert torch.equal(residual_scores(base, feature, 0.0), base)


def test_a_shared_phrase_brings_in_a_passage_the_base_ranks_last(tmp_path):
    model, _, corpus, queries = _fitted(tmp_path, 0.0, perturb=False)
    one = QueryBatch(["q"], ["omega"], queries.embeddings[:1])
    base = model.base_scores(one)
    holders = [6, 7]  # the "omega" passages
    base = base.clone()
    base[0, holders] = base.min() - 1.0  # outside any top-k of the base
    feature = model.feature(one, base)
    assert set(feature[0].topk(2).indices.tolist()) == set(holders)
    final = residual_scores(base, feature, 5.0)
    assert set(final[0].topk(2).indices.tolist()) == set(holders)


def test_bad_input_is_one_line_naming_the_argument(tmp_path):
    model, _, corpus, queries = _fitted(tmp_path, 0.5)
    path = model.graph.save(tmp_path / "graph.pt")
    other = Corpus(corpus.doc_ids, corpus.titles, [t + " x" for t in TEXTS], corpus.embeddings)
    with pytest.raises(ValueError, match="^graph: .*another corpus") as err:
        PhrasePPR(PhrasePPRConfig(graph=str(path))).fit(other)
    assert "\n" not in str(err.value)
    assert PhrasePPR(PhrasePPRConfig(graph=str(path))).fit(corpus).graph.phrases
    blob = bytearray(path.read_bytes())
    blob[40] ^= 0xFF
    (tmp_path / "bad.pt").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="^graph: .*(corrupt|checksum)") as err:
        PhrasePPR(PhrasePPRConfig(graph=str(tmp_path / "bad.pt"))).fit(corpus)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="^graph: has 8 passages"):
        PhrasePPR().fit_graph(corpus.embeddings[:5], model.graph, doc_ids=corpus.doc_ids)
    wide = QueryBatch(["q"], ["alpha"], torch.ones(1, D + 1) / (D + 1) ** 0.5)
    with pytest.raises(ValueError, match="^queries: embeddings of width"):
        model.retrieve(wide, top_k=2)
    with pytest.raises(ValueError, match="call fit"):
        PhrasePPR().retrieve(queries, top_k=2)
    with pytest.raises(ValueError, match="passage_weight"):
        PhrasePPRConfig(passage_weight=0.0)
    with pytest.raises(ValueError, match="^weight must be finite"):
        PhrasePPRConfig(weight=float("nan"))
    with pytest.raises(ValueError, match="^weights: "):
        PhrasePPR(PhrasePPRConfig(map=str(path)))  # a graph is not a map
    with pytest.raises(ValueError, match="phrase_weights must have shape"):
        teleport(torch.rand(2, N), torch.rand(3, 4), num_sources=1, passage_weight=0.5)


def test_registered_as_a_corpus_retriever(tmp_path):
    assert "phrase_ppr" in available_methods()
    method = make_reranker("phrase_ppr", weight=0.25)
    assert is_retriever(method) and method.config.weight == 0.25
    model, _, corpus, queries = _fitted(tmp_path, 0.25)
    result = model.retrieve(queries, top_k=3)
    assert result.keep.sum(dim=1).tolist() == [3, 3]
    assert len(model.row_ids) == N


@pytest.mark.slow  # encodes the demo corpus with all-MiniLM-L6-v2
def test_zero_weight_is_the_learned_map_on_its_real_faiss_pool(tmp_path, embedding_cache_dir):
    from georag.data.bundled import DEMO_DIR
    from train.corpus_data import load_query_set
    from train.pools import load_pool

    pool = load_pool(str(DEMO_DIR), top_m=20, cache_dir=embedding_cache_dir / "embeddings")
    data = load_query_set(str(DEMO_DIR), cache_dir=embedding_cache_dir)
    mapped = LearnedMap()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        mapped.embed.weight.add_(0.05 * torch.randn(384, 384, generator=gen))
        mapped.fusion.raw.fill_(0.3)
    mapped.save(tmp_path / "map.pt")
    model = PhrasePPR(PhrasePPRConfig(map=str(tmp_path / "map.pt"))).fit(data.corpus)
    assert data.batch.ids == pool.batch.query_ids
    ours = model.scores(data.batch)  # every corpus row; the map scores the pool's 20
    column = {d: i for i, d in enumerate(model.row_ids)}
    index = torch.tensor([[column[d] for d in row] for row in pool.batch.doc_ids])
    expect = mapped(pool.batch).scores
    assert (ours.gather(1, index) - expect).abs().max() <= 1e-6
    with_graph = PhrasePPR(PhrasePPRConfig(map=str(tmp_path / "map.pt"), weight=0.3))
    moved = with_graph.fit(data.corpus).retrieve(data.batch, top_k=20)
    assert (moved.keep.sum(dim=1) == 20).all()
    assert not torch.equal(moved.keep, model.retrieve(data.batch, top_k=20).keep)


def test_feature_options_are_the_configured_solver_with_an_optional_passage_weight():
    cfg = PhrasePPRConfig(num_sources=3, passage_weight=0.3, damping=0.7, tol=1e-9)
    options = cfg.feature_options()
    assert options == {
        "num_sources": 3,
        "passage_weight": 0.3,
        "damping": 0.7,
        "tol": 1e-9,
        "max_iter": cfg.max_iter,
        "block_size": cfg.block_size,
    }
    assert cfg.feature_options(1.0) == {**options, "passage_weight": 1.0}


def test_phrase_ppr_runs_on_the_entity_graph_with_mentioned_phrases_as_seeds():
    from georag.retrievers.phrase_ppr import PhrasePPR, PhrasePPRConfig
    from tests.retrievers import entity_cases as cases

    c, q, graph = cases.corpus(), cases.queries(), cases.graph()
    method = PhrasePPR(PhrasePPRConfig(entities="title", weight=1.0))
    method.fit_graph(c.embeddings, graph, doc_ids=c.doc_ids)
    base = method.base_scores(q)
    feature = method.feature(q, base)
    assert feature.shape == (3, 7) and torch.allclose(feature.amax(dim=1), torch.ones(3).double())
    # the film's question mentions its title: the director's passage outranks the lake's
    assert feature[0, 1] > feature[0, 6]
    with pytest.raises(ValueError, match="extractor"):
        PhrasePPRConfig(entities="wordnet")
