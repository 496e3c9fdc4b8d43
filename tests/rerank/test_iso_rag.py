"""ISO-RAG: local graphs vs torch-geometric, pruning rule, PPR parity with networkx, baselines."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
import yaml
from torch_geometric.utils import k_hop_subgraph

from georag.geometry.cheeger import pruning_scores
from georag.rerank.iso_rag import DenseRetriever, GlobalPPR, IsoRag, IsoRagConfig, output_to_run
from georag.retrieval.passage_graph import build_passage_graph

N, D = 40, 8


@pytest.fixture(scope="module")
def corpus():
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)
    titles = [f"Title{i}" for i in range(N)]
    texts = [f"passage {i} mentions title{(3 * i) % N} and Big Entity{i % 4} here"
             for i in range(N)]
    graph = build_passage_graph(emb, titles, texts)
    radius = 0.5 + torch.rand(N, generator=gen) * 2
    queries = torch.nn.functional.normalize(torch.randn(6, D, generator=gen), dim=1)
    return emb, graph, radius, queries


def _nx_graph(w: np.ndarray) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(w.shape[0]))
    g.add_weighted_edges_from((i, j, w[i, j]) for i in range(len(w)) for j in range(i + 1, len(w))
                              if w[i, j] > 0)
    return g


def test_local_graph_is_the_one_hop_subgraph_of_the_seeds(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag(emb, graph, radius, IsoRagConfig(max_nodes=N))
    t = model.trace(queries)
    sim = queries @ emb.T
    dense = graph.to_csr(graph.edge_weight(topo_weight=0.5)).to_dense()
    for b in range(queries.shape[0]):
        seeds = sim[b].topk(3).indices
        subset, _, _, _ = k_hop_subgraph(seeds, 1, graph.edge_index, num_nodes=N)
        local = t.nodes[b][t.mask[b]]
        assert set(local.tolist()) == set(subset.tolist())
        assert local[:3].tolist() == seeds.tolist()  # seeds first
        m = int(t.mask[b].sum())
        torch.testing.assert_close(t.weights[b, :m, :m], dense[local][:, local])


def test_max_nodes_keeps_seeds_then_the_most_similar_neighbours(corpus):
    emb, graph, radius, queries = corpus
    t = IsoRag(emb, graph, radius, IsoRagConfig(max_nodes=7)).trace(queries)
    full = IsoRag(emb, graph, radius, IsoRagConfig(max_nodes=N)).trace(queries)
    for b in range(queries.shape[0]):
        members = full.nodes[b][full.mask[b]]
        expect = members[3:][full.similarity[b][full.mask[b]][3:].argsort(descending=True)][:4]
        assert t.nodes[b, 3:].tolist() == expect.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pruning_removes_exactly_the_rule_edges_and_ppr_matches_networkx(corpus, dtype):
    emb, graph, radius, queries = corpus
    cfg = IsoRagConfig(prune_threshold=0.3, max_nodes=20, tol=1e-10, max_iter=500)
    t = IsoRag(emb.to(dtype), graph, radius.to(dtype), cfg).trace(queries.to(dtype))
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
        np.testing.assert_allclose(t.ppr[b, :m].double().numpy(), [ref[i] for i in range(m)],
                                   atol=tol)
        assert (t.ppr[b, m:] == 0).all()


def test_final_score_and_ranking(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag(emb, graph, radius)
    t = model.trace(queries)
    ppr = t.ppr / t.ppr.amax(1, keepdim=True)
    expect = (0.9 * ppr + 0.1 * t.similarity).masked_fill(~t.mask, -math.inf)
    torch.testing.assert_close(t.final, expect)
    out = model.retrieve(queries, top_k=5)
    for b in range(queries.shape[0]):
        order = t.final[b].argsort(descending=True)[:5]
        assert out.indices[b].tolist() == t.nodes[b, order].tolist()
    assert (out.removed == t.removed.sum((1, 2)) // 2).all()


def test_batched_equals_one_at_a_time_and_is_deterministic(corpus):
    emb, graph, radius, queries = corpus
    model = IsoRag(emb, graph, radius)
    batch = model.retrieve(queries, top_k=5)
    again = model.retrieve(queries, top_k=5)
    assert torch.equal(batch.indices, again.indices) and torch.equal(batch.scores, again.scores)
    for b in range(queries.shape[0]):
        one = model.retrieve(queries[b:b + 1], top_k=5)
        assert one.indices[0].tolist() == batch.indices[b].tolist()
        torch.testing.assert_close(one.scores[0], batch.scores[b])


def test_ablations_change_what_they_name(corpus):
    emb, graph, radius, queries = corpus
    noprune = IsoRag(emb, graph, radius, IsoRagConfig(prune_threshold=math.inf)).trace(queries)
    assert not noprune.removed.any() and torch.equal(noprune.pruned, noprune.weights)
    notopo = IsoRag(emb, graph, radius, IsoRagConfig(topological=False, max_nodes=N))
    dense = notopo.csr.to_dense()
    semantic_only = graph.to_csr(graph.edge_weight(topological=False)).to_dense()
    torch.testing.assert_close(dense, semantic_only)
    degvol = IsoRag(emb, graph, radius, IsoRagConfig(volume="degree"))
    assert torch.equal(degvol.volume, graph.degree(graph.edge_weight(topo_weight=0.5)).float())


def test_empty_graph_after_pruning_falls_back_to_the_seeds(corpus):
    """Documented: with every edge pruned all nodes dangle and PPR equals the seed weights."""
    emb, graph, radius, queries = corpus
    model = IsoRag(emb, graph, radius, IsoRagConfig(prune_threshold=0.0))
    model.prune = lambda w, s: (torch.zeros_like(w), w > 0)
    t = model.trace(queries)
    assert (t.pruned == 0).all()
    expect = t.personalization / t.personalization.sum(1, keepdim=True)
    torch.testing.assert_close(t.ppr, expect)
    out = model.retrieve(queries, top_k=3)
    assert (out.removed == out.edges).all()
    assert torch.isfinite(out.scores).all()


def test_global_ppr_matches_networkx(corpus):
    emb, graph, radius, queries = corpus
    model = GlobalPPR(emb.double(), graph, num_seeds=3, tol=1e-12, max_iter=1000)
    out = model.retrieve(queries.double(), top_k=N)
    dense = graph.to_csr(graph.edge_weight(topo_weight=0.5)).to_dense().double().numpy()
    g = _nx_graph(dense)
    sim = queries.double() @ emb.double().T
    for b in range(queries.shape[0]):
        seeds = sim[b].topk(3).indices.tolist()
        ref = nx.pagerank(g, alpha=0.5, personalization={s: sim[b, s].item() for s in seeds},
                          tol=1e-12, max_iter=1000)
        got = dict(zip(out.indices[b].tolist(), out.scores[b].tolist()))
        np.testing.assert_allclose([got[i] for i in range(N)], [ref[i] for i in range(N)],
                                   atol=1e-9)


def test_dense_baseline_and_run(corpus):
    emb, _, _, queries = corpus
    out = DenseRetriever(emb).retrieve(queries, top_k=4)
    assert out.indices.tolist() == (queries @ emb.T).topk(4).indices.tolist()
    run = output_to_run(out, [f"q{i}" for i in range(6)], [f"d{j}" for j in range(N)])
    assert list(run["q0"].values()) == [4.0, 3.0, 2.0, 1.0]


def test_bad_input(corpus):
    emb, graph, radius, queries = corpus
    with pytest.raises(ValueError, match=r"num_seeds \(41\) is larger than the corpus \(40"):
        IsoRag(emb, graph, radius, IsoRagConfig(num_seeds=41, max_nodes=50)).retrieve(queries)
    with pytest.raises(ValueError, match="num_seeds"):
        GlobalPPR(emb, graph, num_seeds=41).retrieve(queries)
    with pytest.raises(ValueError, match="max_nodes"):
        IsoRagConfig(num_seeds=5, max_nodes=4)
    with pytest.raises(ValueError, match="volume"):
        IsoRagConfig(volume="area")
    with pytest.raises(ValueError, match="radius"):
        IsoRag(emb, graph, torch.zeros(N))
    with pytest.raises(ValueError, match=r"query must have shape \(B, 8\)"):
        IsoRag(emb, graph, radius).retrieve(queries[:, :4])
    with pytest.raises(ValueError, match="NaN"):
        IsoRag(emb, graph, radius).retrieve(torch.full((1, D), float("nan")))
    with pytest.raises(ValueError, match="embeddings must have shape"):
        IsoRag(emb[:5], graph, radius)


def test_yaml_matches_the_config_defaults():
    path = Path(__file__).parents[2] / "configs/rerank/iso_rag.yaml"
    values = yaml.safe_load(path.read_text())
    defaults = {f.name: f.default for f in dataclasses.fields(IsoRagConfig)}
    assert values == defaults
