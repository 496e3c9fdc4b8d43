"""The passage-phrase graph: extraction rules, structure, the sealed artifact and its checks."""

from __future__ import annotations

import pytest
import torch

from georag.retrieval.phrase_graph import (
    PhraseGraphConfig,
    build_phrase_graph,
    corpus_fingerprint,
    extract_phrases,
    load_phrase_graph,
    query_phrase_weights,
    word_ngrams,
)

IDS = ["a", "b", "c", "d", "e"]
TITLES = ["Shirley Temple", "Kiss and Tell", "Golden Age", "", "Golden Age"]
TEXTS = [
    "Shirley Temple was an actress and a diplomat in the United States.",
    "Kiss and Tell is a film starring Shirley Temple as Corliss Archer.",
    "The Golden Age of radio in the United States ran for decades.",
    "the of and",  # stop words only: an isolated passage
    "Radio drama of the 1940s.",
]


def test_ngrams_skip_stop_word_edges_and_numbers():
    stop = frozenset({"the", "of", "and"})
    got = word_ngrams("The King of Spain 1943 and", 3, stop)
    assert got == {"king", "spain", "king of spain", "spain 1943"}


def test_graph_links_passages_through_shared_phrases():
    graph = build_phrase_graph(IDS, TITLES, TEXTS, config=PhraseGraphConfig(max_df=1.0))
    vocab = graph.vocabulary()
    holders = {
        p: sorted(graph.contains[0, graph.contains[1] == j].tolist()) for p, j in vocab.items()
    }
    assert holders["shirley temple"] == [0, 1]
    assert holders["united states"] == [0, 2]
    assert holders["golden age"] == [2, 4]
    assert holders["corliss"] == [1]  # a single word may sit in one passage
    assert "corliss archer" not in vocab  # a multi-word phrase must link two passages
    assert graph.counts()["isolated_passages"] == 1  # stop words only
    assert graph.counts()["passages"] == 5
    csr = graph.to_csr(torch.float64).to_dense()
    assert torch.equal(csr, csr.T)
    assert csr.shape == (graph.num_nodes, graph.num_nodes)
    assert csr[: graph.num_passages, : graph.num_passages].abs().sum() == 0  # bipartite


def test_max_df_drops_frequent_phrases():
    texts = [f"common word number{i}" for i in range(200)]
    ids = [str(i) for i in range(200)]
    found = extract_phrases(texts, PhraseGraphConfig(max_df=0.05))
    assert all("common" not in f and "number" + str(i) in f for i, f in enumerate(found))
    graph = build_phrase_graph(ids, [""] * 200, texts, config=PhraseGraphConfig(max_df=0.05))
    assert "common word" not in graph.vocabulary()


def test_query_phrases_weigh_by_specificity():
    graph = build_phrase_graph(IDS, TITLES, TEXTS, config=PhraseGraphConfig(max_df=1.0))
    w = query_phrase_weights(["Who is Shirley Temple?", "nothing known here zzz"], graph)
    vocab = graph.vocabulary()
    assert w[0, vocab["shirley temple"]] == pytest.approx(0.5)  # in two passages
    assert w[0, vocab["shirley"]] == pytest.approx(0.5)
    assert w[1].sum() == 0
    assert set(w[0].nonzero().flatten().tolist()) == {
        vocab["shirley temple"],
        vocab["shirley"],
        vocab["temple"],
    }


def test_knn_edges_need_embeddings_and_join_passages():
    with pytest.raises(ValueError, match="^embeddings: knn > 0"):
        build_phrase_graph(IDS, TITLES, TEXTS, config=PhraseGraphConfig(knn=2))
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.rand(5, 8, generator=gen))  # positive cosines
    graph = build_phrase_graph(IDS, TITLES, TEXTS, emb, config=PhraseGraphConfig(knn=2))
    assert graph.counts()["knn_edges"] == 10 and graph.counts()["isolated_passages"] == 0
    dense = graph.to_csr().to_dense()[:5, :5]
    assert (dense > 0).sum() > 0 and torch.equal(dense, dense.T)


def test_yake_extractor_builds_a_graph():
    pytest.importorskip("yake")
    cfg = PhraseGraphConfig(extractor="yake", max_df=1.0, phrases_per_passage=5)
    graph = build_phrase_graph(IDS, TITLES, TEXTS, config=cfg)
    vocab = graph.vocabulary()
    assert "shirley temple" in vocab
    first = set(graph.contains[1, graph.contains[0] == 0].tolist())
    assert 1 <= len(first) <= 5  # at most phrases_per_passage per passage


def test_save_load_round_trip_and_cache(tmp_path):
    cfg = PhraseGraphConfig(max_df=1.0)
    graph = build_phrase_graph(IDS, TITLES, TEXTS, config=cfg, cache_dir=tmp_path)
    (cached,) = tmp_path.glob("phrase-graph-*.pt")
    again = load_phrase_graph(cached, fingerprint=corpus_fingerprint(IDS, TITLES, TEXTS))
    assert again.phrases == graph.phrases and again.config == cfg
    assert torch.equal(again.contains, graph.contains)
    # a corrupt cache entry is rebuilt, not trusted
    cached.write_bytes(cached.read_bytes()[:-40] + b"x" * 40)
    rebuilt = build_phrase_graph(IDS, TITLES, TEXTS, config=cfg, cache_dir=tmp_path)
    assert torch.equal(rebuilt.contains, graph.contains)
    load_phrase_graph(cached)  # rewritten whole


def test_bad_graph_files_are_one_line_errors_naming_graph(tmp_path):
    graph = build_phrase_graph(IDS, TITLES, TEXTS)
    path = graph.save(tmp_path / "graph.pt")
    other = corpus_fingerprint(IDS, TITLES, [t + "!" for t in TEXTS])
    with pytest.raises(ValueError, match="^graph: .* was built for another corpus") as err:
        load_phrase_graph(path, fingerprint=other)
    assert "\n" not in str(err.value)
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (tmp_path / "corrupt.pt").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="^graph: .*corrupt") as err:
        load_phrase_graph(tmp_path / "corrupt.pt")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="^graph: .*no such file"):
        load_phrase_graph(tmp_path / "missing.pt")


def test_bad_config_and_corpus():
    with pytest.raises(ValueError, match="extractor"):
        PhraseGraphConfig(extractor="llm")
    with pytest.raises(ValueError, match="max_df"):
        PhraseGraphConfig(max_df=0.0)
    with pytest.raises(ValueError, match="^doc_ids: the corpus is empty"):
        build_phrase_graph([], [], [])
    with pytest.raises(ValueError, match="must agree on N"):
        build_phrase_graph(IDS, TITLES[:2], TEXTS)
