"""Corpus graphs: dense k-NN and BM25 neighbours, the checked artifact and its bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.retrieval.bm25 import BM25Index
from georag.retrieval.corpus_graph import (
    CorpusGraph,
    build_corpus_graph,
    corpus_graph_for,
    fingerprint,
)

TEXTS = [
    "ricci curvature of graphs and flows",
    "ricci flow on graphs with surgery",
    "curvature bounds for riemannian manifolds",
    "dense retrieval with sentence embeddings",
    "sentence embeddings for semantic search",
    "bm25 lexical retrieval baseline",
    "zebra",  # shares no token with any other text
]
IDS = [f"doc{i}" for i in range(len(TEXTS))]


def _unit(n: int, d: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=1, keepdim=True)


def test_dense_graph_is_the_exact_cosine_knn_without_self():
    emb = _unit(50, 8)
    graph = build_corpus_graph([str(i) for i in range(50)], kind="dense", k=5, embeddings=emb)
    sims = (emb @ emb.T).double().fill_diagonal_(-np.inf)
    ref = sims.topk(5, dim=1)
    assert graph.neighbours.dtype == np.int32 and graph.weights.dtype == np.float32
    np.testing.assert_array_equal(graph.neighbours, ref.indices.numpy())
    np.testing.assert_allclose(graph.weights, ref.values.numpy(), atol=1e-5)


def test_bm25_graph_is_each_texts_top_hits_padded_with_itself():
    graph = build_corpus_graph(IDS, kind="bm25", k=2, texts=TEXTS)
    index = BM25Index.build(TEXTS)
    scores, rows = index.search(TEXTS, 3)
    for i in range(len(TEXTS) - 1):
        hits = [int(r) for r, s in zip(rows[i], scores[i]) if r != i and s > 0][:2]
        assert graph.neighbours[i, : len(hits)].tolist() == hits
        assert (graph.neighbours[i, len(hits) :] == i).all()
    assert graph.neighbours[6].tolist() == [6, 6]  # no shared token: itself, weight 0
    assert graph.weights[6].tolist() == [0.0, 0.0]


def test_save_load_maps_the_arrays_and_checks_the_corpus(tmp_path):
    emb = _unit(30, 6)
    ids = [f"d{i}" for i in range(30)]
    graph = build_corpus_graph(ids, kind="dense", k=4, embeddings=emb)
    graph.save(tmp_path / "g")
    loaded = CorpusGraph.load(tmp_path / "g")
    assert isinstance(loaded.neighbours, np.memmap) and isinstance(loaded.weights, np.memmap)
    assert loaded.neighbours.shape == (30, 4) and loaded.neighbours.dtype == np.int32
    np.testing.assert_array_equal(loaded.neighbours, graph.neighbours)
    np.testing.assert_array_equal(loaded.weights, graph.weights)
    assert loaded.kind == "dense" and loaded.fingerprint == fingerprint(ids, emb)
    loaded.check_corpus(ids, emb)


def test_another_corpus_a_stale_graph_and_a_corrupt_file_are_one_line_errors(tmp_path):
    emb = _unit(30, 6)
    ids = [f"d{i}" for i in range(30)]
    build_corpus_graph(ids, kind="dense", k=4, embeddings=emb).save(tmp_path / "g")
    with pytest.raises(ValueError, match=r"^graph: a corpus graph of another corpus") as err:
        corpus_graph_for(
            [f"x{i}" for i in range(30)], kind="dense", k=4, embeddings=emb, path=tmp_path / "g"
        )
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"^graph: a stale dense corpus graph"):
        corpus_graph_for(ids, kind="dense", k=4, embeddings=_unit(30, 6, 1), path=tmp_path / "g")
    with pytest.raises(ValueError, match=r"^graph: .* not bm25 with k=4"):
        corpus_graph_for(ids, kind="bm25", k=4, texts=ids, path=tmp_path / "g")
    blob = bytearray((tmp_path / "g" / "neighbours.npy").read_bytes())
    blob[-1] ^= 0xFF
    (tmp_path / "g" / "neighbours.npy").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match=r"^path: .*neighbours.npy: checksum mismatch") as err:
        CorpusGraph.load(tmp_path / "g")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"^path: .*not a georag-corpus-graph folder"):
        CorpusGraph.load(tmp_path / "missing")


def test_cached_graph_is_built_once_and_a_corrupt_entry_rebuilt(tmp_path):
    emb = _unit(20, 4)
    ids = [f"d{i}" for i in range(20)]
    first = corpus_graph_for(ids, kind="dense", k=3, embeddings=emb, cache_dir=tmp_path)
    (folder,) = (tmp_path / "graphs").iterdir()
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    again = corpus_graph_for(ids, kind="dense", k=3, embeddings=emb, cache_dir=tmp_path)
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(first.neighbours, again.neighbours)
    weights = np.array(first.weights)  # a copy: the file under the map is overwritten next
    (folder / "weights.npy").write_bytes(b"garbage")
    rebuilt = corpus_graph_for(ids, kind="dense", k=3, embeddings=emb, cache_dir=tmp_path)
    np.testing.assert_array_equal(rebuilt.weights, weights)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "dense", "k": 0}, r"^k: .*got 0"),
        ({"kind": "dense", "k": 7}, r"^k: .*1 <= k < 7, got 7"),
        ({"kind": "lexical", "k": 2}, r"^kind must be one of"),
        ({"kind": "bm25", "k": 2, "texts": None}, r"^texts: a bm25 corpus graph"),
    ],
)
def test_bad_build_arguments(kwargs, message):
    args = {"embeddings": _unit(7, 3), "texts": TEXTS, **kwargs}
    with pytest.raises(ValueError, match=message):
        build_corpus_graph(IDS, **args)
