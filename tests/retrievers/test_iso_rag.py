"""ISO-RAG: local graphs vs torch-geometric, pruning rule, PPR parity with networkx, baselines."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.utils import k_hop_subgraph

from georag.geometry.cheeger import pruning_scores
from georag.retrieval.passage_graph import build_passage_graph
from georag.retrievers.base import output_to_run
from georag.retrievers.dense import DenseRetriever
from georag.retrievers.iso import IsoRag, IsoRagConfig
from georag.retrievers.ppr_global import GlobalPPR, GlobalPPRConfig

N, D = 40, 8


@pytest.fixture(scope="module")
def corpus():
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)
    titles = [f"Title{i}" for i in range(N)]
    texts = [
        f"passage {i} mentions title{(3 * i) % N} and Big Entity{i % 4} here" for i in range(N)
    ]
    graph = build_passage_graph(emb, titles, texts)
    radius = 0.5 + torch.rand(N, generator=gen) * 2
    queries = torch.nn.functional.normalize(torch.randn(6, D, generator=gen), dim=1)
    return emb, graph, radius, queries


def _nx_graph(w: np.ndarray) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(w.shape[0]))
    g.add_weighted_edges_from(
        (i, j, w[i, j]) for i in range(len(w)) for j in range(i + 1, len(w)) if w[i, j] > 0
    )
    return g


def test_local_graph_is_the_one_hop_subgraph_of_the_sources(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag(IsoRagConfig(max_nodes=N)).fit_graph(emb, graph, radius)
    t = model.trace(queries)
    sim = queries @ emb.T
    dense = graph.to_csr(graph.edge_weight(topo_weight=0.5)).to_dense()
    for b in range(queries.shape[0]):
        sources = sim[b].topk(3).indices
        subset, _, _, _ = k_hop_subgraph(sources, 1, graph.edge_index, num_nodes=N)
        local = t.nodes[b][t.mask[b]]
        assert set(local.tolist()) == set(subset.tolist())
        assert local[:3].tolist() == sources.tolist()  # sources first
        m = int(t.mask[b].sum())
        torch.testing.assert_close(t.weights[b, :m, :m], dense[local][:, local])


def test_max_nodes_keeps_seeds_then_the_most_similar_neighbours(corpus):
    emb, graph, radius, queries = corpus
    t = IsoRag(IsoRagConfig(max_nodes=7)).fit_graph(emb, graph, radius).trace(queries)
    full = IsoRag(IsoRagConfig(max_nodes=N)).fit_graph(emb, graph, radius).trace(queries)
    for b in range(queries.shape[0]):
        members = full.nodes[b][full.mask[b]]
        expect = members[3:][full.similarity[b][full.mask[b]][3:].argsort(descending=True)][:4]
        assert t.nodes[b, 3:].tolist() == expect.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pruning_removes_exactly_the_rule_edges_and_ppr_matches_networkx(corpus, dtype):
    emb, graph, radius, queries = corpus
    cfg = IsoRagConfig(prune_threshold=0.3, max_nodes=20, tol=1e-10, max_iter=500)
    t = IsoRag(cfg).fit_graph(emb.to(dtype), graph, radius.to(dtype)).trace(queries.to(dtype))
    assert t.removed.any() and (~t.removed & (t.weights > 0)).any()
    rule = (t.weights > 0) & (pruning_scores(t.weights, t.ratio, mask=t.mask) > 0.3)
    assert torch.equal(t.removed, rule)
    torch.testing.assert_close(t.pruned, t.weights.masked_fill(rule, 0.0))
    for b in range(queries.shape[0]):
        m = int(t.mask[b].sum())
        g = _nx_graph(t.pruned[b, :m, :m].double().numpy())
        p = {i: t.personalization[b, i].item() for i in range(m)}
        ref = nx.pagerank(g, alpha=0.5, personalization=p, tol=1e-12, max_iter=1000)
        tol = 1e-5 if dtype == torch.float32 else 1e-8
        np.testing.assert_allclose(
            t.ppr[b, :m].double().numpy(), [ref[i] for i in range(m)], atol=tol
        )
        assert (t.ppr[b, m:] == 0).all()


def test_final_score_and_ranking(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag().fit_graph(emb, graph, radius)
    t = model.trace(queries)
    ppr = t.ppr / t.ppr.amax(1, keepdim=True)
    expect = (0.9 * ppr + 0.1 * t.similarity).masked_fill(~t.mask, -math.inf)
    torch.testing.assert_close(t.final, expect)
    out = model.search(queries, top_k=5)
    for b in range(queries.shape[0]):
        order = t.final[b].argsort(descending=True)[:5]
        assert out.indices[b].tolist() == t.nodes[b, order].tolist()
    assert (out.removed == t.removed.sum((1, 2)) // 2).all()


def test_batched_equals_one_at_a_time_and_is_deterministic(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag().fit_graph(emb, graph, radius)
    batch = model.search(queries, top_k=5)
    again = model.search(queries, top_k=5)
    assert torch.equal(batch.indices, again.indices) and torch.equal(batch.scores, again.scores)
    for b in range(queries.shape[0]):
        one = model.search(queries[b : b + 1], top_k=5)
        assert one.indices[0].tolist() == batch.indices[b].tolist()
        torch.testing.assert_close(one.scores[0], batch.scores[b])


def test_ablations_change_what_they_name(corpus):
    emb, graph, radius, queries = corpus
    noprune = IsoRag(IsoRagConfig(prune_threshold=math.inf)).fit_graph(emb, graph, radius)
    noprune = noprune.trace(queries)
    assert not noprune.removed.any() and torch.equal(noprune.pruned, noprune.weights)
    notopo = IsoRag(IsoRagConfig(topological=False, max_nodes=N)).fit_graph(emb, graph, radius)
    dense = notopo.csr.to_dense()
    semantic_only = graph.to_csr(graph.edge_weight(topological=False)).to_dense()
    torch.testing.assert_close(dense, semantic_only)
    degvol = IsoRag(IsoRagConfig(volume="degree")).fit_graph(emb, graph, radius)
    assert torch.equal(degvol.volume, graph.degree(graph.edge_weight(topo_weight=0.5)).float())


def test_empty_graph_after_pruning_falls_back_to_the_sources(corpus):
    """Documented: with every edge pruned all nodes dangle and PPR equals the seed weights."""
    emb, graph, radius, queries = corpus
    model = IsoRag(IsoRagConfig(prune_threshold=0.0)).fit_graph(emb, graph, radius)
    model.prune = lambda w, s: (torch.zeros_like(w), w > 0)
    t = model.trace(queries)
    assert (t.pruned == 0).all()
    expect = t.personalization / t.personalization.sum(1, keepdim=True)
    torch.testing.assert_close(t.ppr, expect)
    out = model.search(queries, top_k=3)
    assert (out.removed == out.edges).all()
    assert torch.isfinite(out.scores).all()


def test_global_ppr_matches_networkx(corpus):
    emb, graph, radius, queries = corpus
    model = GlobalPPR(GlobalPPRConfig(num_sources=3, tol=1e-12, max_iter=1000)).fit_graph(
        emb.double(), graph
    )
    out = model.search(queries.double(), top_k=N)
    dense = graph.to_csr(graph.edge_weight(topo_weight=0.5)).to_dense().double().numpy()
    g = _nx_graph(dense)
    sim = queries.double() @ emb.double().T
    for b in range(queries.shape[0]):
        sources = sim[b].topk(3).indices.tolist()
        ref = nx.pagerank(
            g,
            alpha=0.5,
            personalization={s: sim[b, s].item() for s in sources},
            tol=1e-12,
            max_iter=1000,
        )
        got = dict(zip(out.indices[b].tolist(), out.scores[b].tolist()))
        np.testing.assert_allclose(
            [got[i] for i in range(N)], [ref[i] for i in range(N)], atol=1e-9
        )


def test_dense_baseline_and_run(corpus):
    emb, _, _, queries = corpus
    out = DenseRetriever().fit_embeddings(emb).search(queries, top_k=4)
    assert out.indices.tolist() == (queries @ emb.T).topk(4).indices.tolist()
    run = output_to_run(out, [f"q{i}" for i in range(6)], [f"d{j}" for j in range(N)])
    assert list(run["q0"]) == [f"d{j}" for j in out.indices[0].tolist()]
    values = list(run["q0"].values())
    assert values == sorted(values, reverse=True) and len(set(values)) == 4


@pytest.mark.parametrize("name", ["iso", "ppr_global", "dense"])
def test_the_retriever_contract(corpus, name, tmp_path):
    """Built from the registry as cls(config), fitted on a Corpus, ranking every corpus row:
    the same passages and order as the tensor-level search."""
    from georag.batch import Corpus, QueryBatch
    from georag.rerank.registry import is_retriever, make_reranker

    emb, graph, radius, queries = corpus
    method = DenseRetriever() if name == "dense" else make_reranker(name)
    assert is_retriever(method) and method.name == name
    with pytest.raises(ValueError, match="call fit"):
        method.retrieve(QueryBatch(["q"], ["t"], queries[:1]), top_k=3)
    ids = [f"d{j}" for j in range(N)]
    if name == "dense":
        method.fit(Corpus(ids, [""] * N, [""] * N, emb))
    else:  # the graph of the fixture, not one built from texts
        method.fit_graph(emb, graph, doc_ids=ids)
    qb = QueryBatch([f"q{i}" for i in range(len(queries))], [""] * len(queries), queries)
    result = method.retrieve(qb, top_k=5)
    assert result.scores.shape == (len(queries), N) and (result.keep.sum(1) == 5).all()
    out = method.search(queries, top_k=5)
    got = torch.where(result.keep, result.scores, -torch.inf).topk(5).indices
    assert torch.equal(got, out.indices)


def test_bad_input(corpus):
    emb, graph, radius, queries = corpus
    with pytest.raises(ValueError, match=r"num_sources \(41\) is larger than the corpus \(40"):
        model = IsoRag(IsoRagConfig(num_sources=41, max_nodes=50)).fit_graph(emb, graph, radius)
        model.search(queries)
    with pytest.raises(ValueError, match="num_sources"):
        GlobalPPR(GlobalPPRConfig(num_sources=41)).fit_graph(emb, graph).search(queries)
    with pytest.raises(ValueError, match="max_nodes"):
        IsoRagConfig(num_sources=5, max_nodes=4)
    with pytest.raises(ValueError, match="volume"):
        IsoRagConfig(volume="area")
    with pytest.raises(ValueError, match="radius"):
        IsoRag().fit_graph(emb, graph, torch.zeros(N))
    with pytest.raises(ValueError, match=r"query must have shape \(B, 8\)"):
        IsoRag().fit_graph(emb, graph, radius).search(queries[:, :4])
    with pytest.raises(ValueError, match="NaN"):
        IsoRag().fit_graph(emb, graph, radius).search(torch.full((1, D), float("nan")))
    with pytest.raises(ValueError, match="embeddings must have shape"):
        IsoRag().fit_graph(emb[:5], graph, radius)


def test_fit_with_a_trained_head_uses_its_radii(corpus, tmp_path):
    """`head=` (IsoRag and learned_iso): the radii of the saved Poincare head, not the fixed
    projection's, set the volume proxy; the same search as fit_graph with those radii."""
    from georag.batch import Corpus
    from georag.models.poincare import PoincareHead
    from georag.rerank.registry import make_reranker
    from georag.retrieval.passage_graph import corpus_graph
    from georag.retrievers.iso import head_radius

    emb, graph, _, queries = corpus
    torch.manual_seed(0)
    head = PoincareHead(in_dim=D, out_dim=4, hidden=8)
    path = tmp_path / "head.pt"
    head.save(path)
    texts = [f"passage {i}" for i in range(N)]
    corp = Corpus([f"d{j}" for j in range(N)], [f"Title{j}" for j in range(N)], texts, emb)
    radius = head_radius(corp, str(path))
    with torch.no_grad():
        expected = head.radius(emb.float()).clamp_min(1e-6)
    torch.testing.assert_close(radius, expected.to(emb.dtype), rtol=0, atol=0)
    assert head_radius(corp, None) is None
    for name, key in (("iso", "head"), ("learned_iso", "fixed.head")):
        fitted = make_reranker(name, {name: {key: str(path)}}).fit(corp)
        reference = make_reranker(name).fit_graph(emb, corpus_graph(corp), radius)
        got, want = fitted.search(queries, top_k=5), reference.search(queries, top_k=5)
        assert torch.equal(got.indices, want.indices)
