"""Passage graph: semantic k-NN vs brute force, topological rules, caching, CSR."""

from __future__ import annotations

import pytest
import torch

from georag.retrieval.passage_graph import (
    PassageGraphConfig,
    build_passage_graph,
    entity_strings,
    topological_edges,
)


def _pairs(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in edge_index.T.tolist()}


def test_semantic_edges_are_the_symmetrized_brute_force_knn():
    gen = torch.Generator().manual_seed(1)
    emb = torch.nn.functional.normalize(torch.randn(30, 6, generator=gen), dim=1)
    cfg = PassageGraphConfig(
        knn=4, title_mentions=False, shared_titles=False, shared_entities=False
    )
    graph = build_passage_graph(emb, [""] * 30, ["x"] * 30, config=cfg)
    sim = emb @ emb.T
    sim.fill_diagonal_(-2)
    expect = set()
    for i in range(30):
        for j in sim[i].topk(4).indices.tolist():
            if sim[i, j] > 0:
                expect.add((min(i, j), max(i, j)))
    assert _pairs(graph.edge_index) == expect
    dense = graph.to_csr().to_dense()
    assert torch.equal(dense, dense.T)
    for i, j in expect:
        assert dense[i, j] == pytest.approx(sim[i, j].item(), abs=1e-6)
    assert not graph.topological.any() and graph.counts()["edges"] == len(expect)


def test_topological_rules():
    titles = ["Paris (band)", "Shirley Temple", "Shirley Temple", "Kiss and Tell", "Other"]
    texts = [
        "A band from Lyon.",
        "Shirley Temple Black was an American actress.",
        "Temple was named ambassador by the United States Government.",
        "Kiss and Tell starred Shirley Temple; it was shown in paris.",
        "The United States Government said nothing.",
    ]
    cfg = PassageGraphConfig(knn=0)
    edges = _pairs(topological_edges(titles, texts, config=cfg))
    # shared title (1, 2); mentions: 3 mentions "Shirley Temple" (1, 2) and "paris" (0);
    # shared entity "united states government" (2, 4); "shirley temple" (1, 3)
    assert edges == {(1, 2), (1, 3), (2, 3), (0, 3), (2, 4)}
    only_titles = PassageGraphConfig(knn=0, title_mentions=False, shared_entities=False)
    assert _pairs(topological_edges(titles, texts, config=only_titles)) == {(1, 2)}
    capped = PassageGraphConfig(knn=0, title_mentions=False, shared_titles=False, max_entity_df=2)
    assert (2, 4) in _pairs(topological_edges(titles, texts, config=capped))
    assert entity_strings("Met Big Ben in New  York") == {"met big ben", "new york"}
    assert entity_strings("The Who. A Band") == set()
    assert entity_strings("The Big Apple") == {"big apple"}


def test_entities_in_too_many_passages_make_no_edges():
    texts = [f"Common Name met person {i}" for i in range(5)]
    cfg = PassageGraphConfig(knn=0, title_mentions=False, shared_titles=False, max_entity_df=4)
    assert topological_edges([""] * 5, texts, config=cfg).shape == (2, 0)
    cfg = PassageGraphConfig(knn=0, title_mentions=False, shared_titles=False, max_entity_df=5)
    assert topological_edges([""] * 5, texts, config=cfg).shape == (2, 10)


def test_edge_kinds_weights_and_degree():
    emb = torch.nn.functional.normalize(torch.tensor([[1.0, 0.1], [1.0, 0.2], [-1.0, 0.3]]), dim=1)
    graph = build_passage_graph(
        emb, ["A", "B", "C"], ["x", "mentions A", "y"], config=PassageGraphConfig(knn=1)
    )
    # semantic: 0-1 (both ways); 2's nearest has cosine < 0: no edge. topological: 0-1.
    assert _pairs(graph.edge_index) == {(0, 1)}
    assert graph.counts() == {"edges": 1, "semantic": 1, "topological": 1, "both": 1}
    weight = graph.edge_weight(topo_weight=0.5)
    assert torch.allclose(weight, graph.semantic + 0.5)
    assert graph.degree().tolist() == [1, 1, 0]
    expect = torch.stack([weight[0], weight[1], weight[0] * 0])
    assert torch.allclose(graph.strength(weight), expect)


def test_cache_roundtrip_and_corruption(tmp_path):
    gen = torch.Generator().manual_seed(2)
    emb = torch.nn.functional.normalize(torch.randn(20, 5, generator=gen), dim=1)
    titles, texts = [f"T{i}" for i in range(20)], [f"about t{(i + 1) % 20}" for i in range(20)]
    first = build_passage_graph(emb, titles, texts, cache_dir=tmp_path)
    files = list(tmp_path.glob("passage-graph-*.npz"))
    assert len(files) == 1 and not list(tmp_path.glob(".*tmp"))
    second = build_passage_graph(emb, titles, texts, cache_dir=tmp_path)
    assert torch.equal(first.edge_index, second.edge_index)
    assert torch.equal(first.semantic, second.semantic)
    files[0].write_bytes(b"garbage")  # a corrupt entry is rebuilt, not trusted
    third = build_passage_graph(emb, titles, texts, cache_dir=tmp_path)
    assert torch.equal(first.edge_index, third.edge_index)
    other = build_passage_graph(
        emb, titles, texts, cache_dir=tmp_path, config=PassageGraphConfig(knn=2)
    )
    assert len(list(tmp_path.glob("passage-graph-*.npz"))) == 2
    assert other.counts()["semantic"] < first.counts()["semantic"]


def test_duplicate_embeddings_make_no_self_loops():
    emb = torch.nn.functional.normalize(torch.ones(4, 3), dim=1)
    graph = build_passage_graph(
        emb, ["a", "b", "c", "d"], ["w"] * 4, config=PassageGraphConfig(knn=2)
    )
    assert (graph.edge_index[0] != graph.edge_index[1]).all()
    assert graph.degree().min() >= 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(embeddings=torch.ones(3, 2)), "must agree on N"),
        (dict(embeddings=torch.full((2, 2), float("nan"))), "NaN"),
        (dict(embeddings=torch.ones(0, 2), titles=[], texts=[]), "empty"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(embeddings=torch.ones(2, 2), titles=["a", "b"], texts=["x", "y"])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        build_passage_graph(args["embeddings"], args["titles"], args["texts"])
    with pytest.raises(ValueError, match="knn"):
        PassageGraphConfig(knn=-1)


def test_real_slice(data_dir):
    from georag.data.multihop import load_multihop

    data = load_multihop(data_dir / "hotpotqa_dev500_ircot/dev_subsampled.jsonl", max_questions=15)
    docs = list(data.corpus.values())
    edges = topological_edges(
        [d.title for d in docs], [d.text for d in docs], config=PassageGraphConfig()
    )
    assert edges.shape[1] > 0
    # within a HotpotQA question the bridge passage usually mentions the other's title
    pairs = _pairs(edges)
    row = {d.doc_id: i for i, d in enumerate(docs)}
    linked = sum(
        (min(row[a], row[b]), max(row[a], row[b])) in pairs
        for a, b in (tuple(r) for r in data.qrels.values())
    )
    assert linked >= 5
