"""The entity-passage graph: extractors, synonym edges, the sealed folder and its checks,
incremental adds, and the title graph of the 2WikiMultihopQA corpus."""

from __future__ import annotations

import json
import sys
import zlib

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from georag._io import MANIFEST, dump_manifest, sha256_file
from georag.retrieval import entity_graph as eg
from georag.retrieval import extractors as ex
from georag.retrieval.entity_graph import (
    EntityGraphConfig,
    build_entity_graph,
    load_entity_graph,
    synonym_edges,
)
from georag.retrieval.extractors import MentionIndex, normalise, title_phrases
from georag.retrieval.phrase_graph import PhraseGraphConfig, build_phrase_graph, corpus_fingerprint

IDS = ["a", "b", "c", "d", "e"]
TITLES = ["Shirley Temple", "Kiss-and-Tell", "Golden Age", "Where Are You", ""]
TEXTS = [
    "Shirley Temple was an actress, famous in the Golden Age of film.",
    "Kiss and Tell is a film starring Shirley Temple as Corliss Archer.",
    "The golden age of radio in the United States ran for decades.",
    "Where are you now, asked the song.",
    "Radio drama of the 1940s. Shirley",  # "Shirley" alone is no title; no own title
]


def fake_encode(phrases: list[str]) -> torch.Tensor:
    """Hashed bags of character trigrams, each row normalised on its own (deterministic)."""
    out = torch.zeros(len(phrases), 32)
    for i, phrase in enumerate(phrases):
        padded = f"  {phrase} "
        for a in range(len(padded) - 2):
            out[i, zlib.crc32(padded[a : a + 3].encode()) % 32] += 1.0
        out[i] /= out[i].norm()
    return out


def fake_spacy(titles, texts, *, min_alnum=3, progress=False):
    """A stand-in for the spaCy extractor: capitalised words of the text."""
    fake_spacy.calls.append(len(texts))
    return [
        {normalise(w) for w in text.split() if w[:1].isupper() and len(w) >= min_alnum}
        for text in texts
    ]


fake_spacy.calls = []


def holders(graph) -> dict[str, list[int]]:
    return {
        p: sorted(graph.contains[0, graph.contains[1] == j].tolist())
        for p, j in graph.vocabulary().items()
    }


def assert_same(a, b) -> None:
    assert a.num_passages == b.num_passages and a.phrases == b.phrases
    for name in ("contains", "synonym_index", "synonym_weight"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert (a.phrase_embeddings is None) == (b.phrase_embeddings is None)
    if a.phrase_embeddings is not None:
        assert torch.equal(a.phrase_embeddings, b.phrase_embeddings)
    assert (a.fingerprint, a.config, a.extractor_phrases) == (
        b.fingerprint,
        b.config,
        b.extractor_phrases,
    )
    assert a.corpus.tolist() == b.corpus.tolist()
    assert a.spacy_found.tolist() == b.spacy_found.tolist()


def reseal(folder, version: int = eg.VERSION) -> None:
    """Rewrite the manifest over the files as they are now (to reach the checks behind it)."""
    files = {
        f.name: {"size": f.stat().st_size, "sha256": sha256_file(f)}
        for f in sorted(folder.iterdir())
        if f.name != MANIFEST
    }
    meta = {"format": eg.FORMAT, "version": version, "files": files}
    (folder / MANIFEST).write_bytes(dump_manifest(meta))


# ---------------------------------------------------------------------------- extractors
def test_normalise_and_alnum():
    assert normalise("  Kiss-and-Tell (1945 film)! ") == "kiss and tell 1945 film"
    assert ex.alnum_count("a b") == 2 and ex.alnum_count("zürich") == 6
    assert ex.passage_text("", "text") == "text"
    assert ex.passage_text("T", "text") == "T. text"


def test_mentions_are_exact_word_runs_within_one_text():
    index = MentionIndex(["golden age", "age", "shirley temple", "", "temple of doom"])
    found = index.find(["The Golden-Age; ages", "shirley", "temple", "Temple of doom!", ""])
    assert found == [{0, 1}, set(), set(), {4}, set()]  # no match across texts
    assert MentionIndex([]).find(["anything"]) == [set()]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("ab ba a b c".split()), max_size=8), min_size=1, max_size=5),
    st.lists(st.lists(st.sampled_from(["a", "b", "ba", "c"]), min_size=1, max_size=3), max_size=6),
)
def test_mentions_match_a_brute_force_search(texts, phrases):
    texts = [" ".join(t) for t in texts]
    phrases = [" ".join(p) for p in phrases]
    expected = [
        {j for j, p in enumerate(phrases) if f" {p} " in f" {normalise(t)} "} for t in texts
    ]
    assert MentionIndex(phrases).find(texts) == expected


def test_title_extractor_links_own_and_mentioned_titles():
    found = title_phrases(TITLES, TEXTS)
    assert found[0] == {"shirley temple", "golden age"}
    assert found[1] == {"kiss and tell", "shirley temple"}  # "Kiss-and-Tell" normalised
    assert found[2] == {"golden age"}
    assert found[3] == {"where are you"}  # stop words only: own passage, never looked up
    assert found[4] == set()  # no title and no whole title in the text


def test_ngram_extractor_is_the_phrase_graphs():
    config = EntityGraphConfig(extractors=("ngram",), max_df=1.0)
    graph = build_entity_graph(IDS, TITLES, TEXTS, config=config)
    phrase = build_phrase_graph(IDS, TITLES, TEXTS, config=PhraseGraphConfig(max_df=1.0))
    assert graph.phrases == phrase.phrases
    assert torch.equal(graph.contains, phrase.contains)


def test_spacy_extractor_keeps_entities_and_noun_chunks():
    pytest.importorskip("spacy")
    pytest.importorskip(ex.SPACY_MODEL)
    texts = [
        "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer. She won in "
        "the United States.",
        "The radio ran for decades; it was 95% popular in May 1940 and cost $5. He met his "
        "wife, Ann Lee, at 10.",
    ]
    first, second = ex.spacy_phrases(["", ""], texts)
    assert {"shirley temple", "corliss archer", "united states", "1945 film"} <= first
    assert "she" not in first and "the united states" not in first  # pronoun, determiner
    assert {"radio", "wife", "ann lee"} <= second
    assert not {"decades", "may", "may 1940", "95", "10", "his wife", "he"} & second  # dates
    assert all(ex.alnum_count(p) >= 3 for p in first | second)


def test_spacy_errors_name_the_extra_or_the_model(monkeypatch):
    ex.load_spacy.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(ImportError, match=r"georag\[entities\]"):
        ex.load_spacy()
    monkeypatch.undo()
    pytest.importorskip("spacy")
    ex.load_spacy.cache_clear()
    monkeypatch.setattr(ex, "SPACY_MODEL", "no_such_model_package")
    with pytest.raises(ImportError, match=r"no_such_model_package .*georag\[entities\]"):
        ex.load_spacy()
    monkeypatch.undo()
    pytest.importorskip(ex.SPACY_MODEL)
    ex.load_spacy.cache_clear()
    monkeypatch.setitem(ex.SPACY_SHA256, "ner/model", "0" * 64)
    with pytest.raises(ValueError, match=f"^{ex.SPACY_MODEL}: .*ner/model .*different model") as e:
        ex.load_spacy()
    assert "\n" not in str(e.value)
    monkeypatch.undo()
    ex.load_spacy.cache_clear()


# ---------------------------------------------------------------------------- the graph
def test_title_graph_nodes_edges_and_specificity():
    graph = build_entity_graph(IDS, TITLES, TEXTS)
    assert graph.phrases == ("golden age", "kiss and tell", "shirley temple", "where are you")
    assert holders(graph) == {
        "golden age": [0, 2],
        "kiss and tell": [1],
        "shirley temple": [0, 1],
        "where are you": [3],
    }
    assert graph.document_frequency().tolist() == [2, 1, 2, 1]
    assert graph.specificity().tolist() == [0.5, 1.0, 0.5, 1.0]
    assert graph.counts() == {
        "passages": 5,
        "phrases": 4,
        "phrases_title": 4,
        "passage_phrase_edges": 6,
        "synonym_edges": 0,
        "isolated_passages": 1,
    }
    assert graph.phrase_embeddings is None and graph.num_nodes == 9
    assert graph.fingerprint == corpus_fingerprint(IDS, TITLES, TEXTS)
    got = graph.mentions(["Was Shirley Temple in a golden-age film?", "nothing"])
    assert got.shape == (2, 4) and got.dtype == torch.float32
    assert got[0].tolist() == [1.0, 0.0, 1.0, 0.0] and got[1].sum() == 0


def test_to_csr_is_symmetric_with_scaled_synonyms():
    config = EntityGraphConfig(extractors=("title", "ngram"), max_df=1.0, synonym_threshold=0.5)
    graph = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
    assert graph.counts()["synonym_edges"] > 0
    n = graph.num_passages
    dense = graph.to_csr(torch.float64).to_dense()
    assert dense.shape == (graph.num_nodes, graph.num_nodes) and torch.equal(dense, dense.T)
    assert dense[:n, :n].abs().sum() == 0  # no passage-passage edges
    row, col = graph.contains
    assert (dense[row, col + n] == 1.0).all() and int((dense[:n] != 0).sum()) == row.numel()
    i, j = graph.synonym_index
    assert torch.allclose(dense[i + n, j + n], graph.synonym_weight.double())
    half = graph.to_csr(synonym_scale=0.5).to_dense()
    assert torch.allclose(half[i + n, j + n], 0.5 * graph.synonym_weight)
    none = graph.to_csr(synonym_scale=0.0).to_dense()
    assert none[n:, n:].abs().sum() == 0
    with pytest.raises(ValueError, match="^synonym_scale"):
        graph.to_csr(synonym_scale=-1.0)


def brute_synonyms(emb: np.ndarray, eligible: np.ndarray, threshold: float, cap: int):
    cos = emb.astype(np.float64) @ emb.astype(np.float64).T
    edges = {}
    ok = np.flatnonzero(eligible)
    for i in ok:
        others = [j for j in ok if j != i and cos[i, j] >= threshold]
        for j in sorted(others, key=lambda j: -cos[i, j])[:cap]:
            edges[(min(i, j), max(i, j))] = cos[i, j]
    return edges, cos


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 30),
    st.integers(2, 6),
    st.floats(-0.2, 0.9),
    st.integers(1, 5),
    st.integers(1, 7),
)
def test_synonym_edges_match_the_rule(seed, p, d, threshold, cap, block):
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((p, d)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    eligible = rng.random(p) < 0.8
    expected, cos = brute_synonyms(emb, eligible, threshold, cap)
    ok = np.flatnonzero(eligible)
    sub = cos[np.ix_(ok, ok)][~np.eye(len(ok), dtype=bool)]
    assume(np.all(np.abs(sub - threshold) > 1e-5))  # no pair on the threshold
    for i in range(len(ok)):  # no tie at a row's cap
        row = np.sort(np.delete(cos[ok[i], ok], i))[::-1]
        assume(len(row) <= cap or row[cap - 1] - row[cap] > 1e-5)
    old = eg._BLOCK_ELEMENTS
    eg._BLOCK_ELEMENTS = block * max(int(eligible.sum()), 1)  # several row blocks
    try:
        index, weight = synonym_edges(
            torch.from_numpy(emb), torch.from_numpy(eligible), threshold=threshold, cap=cap
        )
    finally:
        eg._BLOCK_ELEMENTS = old
    got = dict(zip(map(tuple, index.T.tolist()), weight.tolist()))
    assert set(got) == set(expected)
    assert all(abs(got[e] - expected[e]) < 1e-5 for e in got)
    assert (index[0] < index[1]).all() and weight.dtype == torch.float32
    keys = index[0] * p + index[1]
    assert (keys[1:] > keys[:-1]).all()


def test_synonym_cap_and_either_side_rule():
    # points on a circle; with cap=1 each keeps its nearest: 0->1, 1->2, 2->1, 3->2, 4->3
    angles = torch.tensor([0.0, 0.10, 0.13, 0.17, 0.22])
    emb = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    every = torch.ones(5, dtype=torch.bool)
    index, weight = synonym_edges(emb, every, threshold=0.9, cap=1)
    assert index.T.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]  # 0-1 kept by 0 alone
    assert torch.allclose(weight, torch.cos(angles[1:] - angles[:-1]), atol=1e-6)
    index, _ = synonym_edges(emb, every, threshold=0.9, cap=4)
    assert index.shape == (2, 10)  # every pair
    index, _ = synonym_edges(emb, every, threshold=0.9995, cap=4)
    assert index.T.tolist() == [[1, 2]]  # cos(0.03) only
    some = torch.tensor([True, False, True, True, True])
    assert 1 not in synonym_edges(emb, some, threshold=0.9, cap=2)[0]
    assert synonym_edges(emb[:1], every[:1], threshold=0.0, cap=3)[0].shape == (2, 0)


def test_synonyms_skip_short_phrases_and_can_be_disabled():
    config = EntityGraphConfig(extractors=("ngram",), max_df=1.0, synonym_threshold=0.0)
    graph = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
    short = {j for j, p in enumerate(graph.phrases) if ex.alnum_count(p) < 3}
    assert not short & set(graph.synonym_index.flatten().tolist())
    assert graph.phrase_embeddings.shape == (len(graph.phrases), 32)
    off = EntityGraphConfig(extractors=("ngram",), max_df=1.0, synonym_threshold=None)
    graph = build_entity_graph(IDS, TITLES, TEXTS, config=off, encode=fake_encode)
    assert graph.counts()["synonym_edges"] == 0 and graph.phrase_embeddings is not None


# ---------------------------------------------------------------------------- add
COMBINATIONS = [("title",), ("ngram",), ("title", "ngram"), ("spacy",), ("title", "spacy")]
COMBINATIONS += [("title", "ngram", "spacy")]


@pytest.mark.parametrize("extractors", COMBINATIONS)
def test_add_equals_a_rebuild(extractors, monkeypatch):
    monkeypatch.setattr(eg, "spacy_phrases", fake_spacy)
    config = EntityGraphConfig(extractors=extractors, max_df=0.5, synonym_threshold=0.6)
    full = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
    encoded: list[str] = []

    def counting(phrases):
        encoded.extend(phrases)
        return fake_encode(phrases)

    part = build_entity_graph(IDS[:2], TITLES[:2], TEXTS[:2], config=config, encode=fake_encode)
    fake_spacy.calls.clear()
    grown = part.add(IDS[2:4], TITLES[2:4], TEXTS[2:4], encode=counting)
    grown = grown.add(IDS[4:], TITLES[4:], TEXTS[4:], encode=counting)
    assert_same(grown, full)
    assert fake_spacy.calls == ([2, 1] if "spacy" in extractors else [])  # new passages only
    assert len(encoded) == len(set(encoded)) and not set(encoded) & set(part.phrases)
    plain = build_entity_graph(IDS[:3], TITLES[:3], TEXTS[:3], config=config)
    assert_same(
        plain.add(IDS[3:], TITLES[3:], TEXTS[3:]),
        build_entity_graph(IDS, TITLES, TEXTS, config=config),
    )


@pytest.mark.parametrize("extractors", [("title",), ("ngram",), ("title", "ngram", "spacy")])
def test_remove_equals_a_rebuild(extractors, monkeypatch):
    monkeypatch.setattr(eg, "spacy_phrases", fake_spacy)
    config = EntityGraphConfig(extractors=extractors, max_df=0.5, synonym_threshold=0.6)
    full = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
    keep = [0, 2, 3, len(IDS) - 1]
    rest = [[column[i] for i in keep] for column in (IDS, TITLES, TEXTS)]
    fake_spacy.calls.clear()
    smaller = full.remove(sorted(set(range(len(IDS))) - set(keep)), encode=fake_encode)
    assert not any(fake_spacy.calls)  # the kept passages' spaCy phrases are reused
    assert_same(smaller, build_entity_graph(*rest, config=config, encode=fake_encode))
    with pytest.raises(ValueError, match="^rows: need some of the"):
        full.remove(range(len(IDS)))


def test_add_needs_encode_for_new_phrases_of_an_embedded_graph():
    graph = build_entity_graph(IDS[:2], TITLES[:2], TEXTS[:2], encode=fake_encode)
    with pytest.raises(ValueError, match="^encode: needed to embed .* new phrases"):
        graph.add(IDS[2:], TITLES[2:], TEXTS[2:])


def test_add_equals_a_rebuild_with_spacy():
    pytest.importorskip("spacy")
    pytest.importorskip(ex.SPACY_MODEL)
    for extractors in [("spacy",), ("title", "spacy"), ("title", "ngram", "spacy")]:
        config = EntityGraphConfig(extractors=extractors, max_df=0.5, synonym_threshold=0.6)
        full = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
        part = build_entity_graph(IDS[:3], TITLES[:3], TEXTS[:3], config=config, encode=fake_encode)
        assert_same(part.add(IDS[3:], TITLES[3:], TEXTS[3:], encode=fake_encode), full)
        assert full.extractor_phrases["spacy"] > 0


# ---------------------------------------------------------------------------- the folder
def built(tmp_path, monkeypatch):
    monkeypatch.setattr(eg, "spacy_phrases", fake_spacy)
    config = EntityGraphConfig(extractors=("title", "spacy"), synonym_threshold=0.5)
    graph = build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode)
    return graph, graph.save(tmp_path / "graph")


def test_save_load_round_trip(tmp_path, monkeypatch):
    graph, folder = built(tmp_path, monkeypatch)
    again = load_entity_graph(folder, fingerprint=corpus_fingerprint(IDS, TITLES, TEXTS))
    assert_same(again, graph)
    assert again.counts() == graph.counts() and again.counts()["synonym_edges"] > 0
    new = ["f"], ["Radio"], ["Golden Age radio."]
    assert_same(again.add(*new, encode=fake_encode), graph.add(*new, encode=fake_encode))
    graph.save(folder)  # replaces itself
    plain = build_entity_graph(IDS, TITLES, TEXTS)
    assert_same(load_entity_graph(plain.save(tmp_path / "plain")), plain)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="^graph: .*other exists and is not an entity graph"):
        plain.save(tmp_path / "other")
    assert (tmp_path / "other" / "keep.txt").read_text() == "x"


def one_line_error(folder, match, fingerprint=None):
    with pytest.raises(ValueError, match=match) as err:
        load_entity_graph(folder, fingerprint=fingerprint)
    assert str(err.value).startswith("graph: ") and "\n" not in str(err.value)


def test_corrupt_folders_are_one_line_errors(tmp_path, monkeypatch):
    graph, folder = built(tmp_path, monkeypatch)
    one_line_error(tmp_path / "missing", "manifest.json missing")
    other = corpus_fingerprint(IDS, TITLES, [t + "!" for t in TEXTS])
    one_line_error(folder, "was built for another corpus", fingerprint=other)

    def fresh():
        return graph.save(tmp_path / "graph")

    blob = bytearray((folder / "contains.npy").read_bytes())
    blob[-3] ^= 0xFF
    (folder / "contains.npy").write_bytes(bytes(blob))
    one_line_error(folder, r"contains\.npy: checksum mismatch")
    fresh()
    data = (folder / "synonym_weight.npy").read_bytes()
    (folder / "synonym_weight.npy").write_bytes(data[:-4])
    one_line_error(folder, r"synonym_weight\.npy: .* bytes, the manifest says")
    reseal(folder)
    one_line_error(folder, r"synonym_weight\.npy: not a readable \.npy array \(truncated\?\)")
    emb, weight = graph.phrase_embeddings.numpy(), graph.synonym_weight.numpy()
    cases = {
        "contains.npy": (graph.contains.int().numpy(), r"contains\.npy: expected int64"),
        "phrase_embeddings.npy": (emb[:, :5], r"embeddings\.npy: expected float32 \(\d+, 32\)"),
        "synonym_index.npy": (graph.synonym_index.numpy() + 100, r"index\.npy: indices outside"),
        "synonym_weight.npy": (np.full_like(weight, np.nan), r"synonym_weight\.npy: NaN"),
        "corpus_offsets.npy": (graph.corpus.offsets[:-1], r"offsets\.npy: expected int64 \(16,\)"),
    }
    contains = graph.contains.numpy().copy()
    contains[0, 0] = 99
    cases["spacy_found_offsets.npy"] = (graph.spacy_found.offsets[::-1].copy(), r"does not cut")
    for name, (array, match) in cases.items():
        fresh()
        np.save(folder / name, array)
        reseal(folder)
        one_line_error(folder, match)
    fresh()
    np.save(folder / "contains.npy", contains)
    reseal(folder)
    one_line_error(folder, r"contains\.npy: indices outside \[0, 5\)")
    fresh()
    np.save(folder / "contains.npy", graph.contains.numpy()[:, ::-1].copy())
    reseal(folder)
    one_line_error(folder, r"contains\.npy: pairs not sorted")
    for version, match in ((0, "format version 0, .*rebuild"), (3, "format version 3")):
        fresh()
        reseal(folder, version=version)
        one_line_error(folder, match)
    fresh()
    meta = json.loads((folder / "graph.json").read_text())
    meta["config"]["extractors"] = ["llm"]
    (folder / "graph.json").write_text(json.dumps(meta))
    reseal(folder)
    one_line_error(folder, r"graph\.json: not an entity graph \(extractors")
    fresh()
    (folder / "contains.npy").unlink()
    one_line_error(folder, r"contains\.npy: missing")


# ---------------------------------------------------------------------------- errors
def test_bad_config_corpus_and_encoder():
    for field, value in [
        ("extractors", ("llm",)),
        ("extractors", ()),
        ("extractors", ("title", "title")),
        ("max_words", 0),
        ("max_df", 0.0),
        ("synonym_threshold", 1.5),
        ("synonym_max", 0),
        ("min_alnum", -1),
        ("edge_weight", 0.0),
    ]:
        with pytest.raises(ValueError, match=f"^{field}: "):
            EntityGraphConfig(**{field: value})
    assert EntityGraphConfig(extractors=["title", "ngram"]).extractors == ("title", "ngram")
    with pytest.raises(ValueError, match="^doc_ids: the corpus is empty"):
        build_entity_graph([], [], [])
    with pytest.raises(ValueError, match="must agree on N"):
        build_entity_graph(IDS, TITLES[:2], TEXTS)
    with pytest.raises(ValueError, match="^titles: row 1 is NoneType"):
        build_entity_graph(IDS[:2], ["x", None], TEXTS[:2])
    for bad, match in [
        (lambda ps: fake_encode(ps)[:-1], r"^encode: expected float \(4, D\), got \(3, 32\)"),
        (lambda ps: [0.0] * len(ps), "^encode: expected float .* got list"),
        (lambda ps: 2 * fake_encode(ps), "^encode: 4 rows are not finite unit vectors"),
        (lambda ps: fake_encode(ps) * torch.nan, "^encode: 4 rows are not finite"),
    ]:
        with pytest.raises(ValueError, match=match):
            build_entity_graph(IDS, TITLES, TEXTS, encode=bad)


def test_progress_bars(capsys):
    config = EntityGraphConfig(extractors=("title", "ngram"), max_df=1.0, synonym_threshold=0.5)
    build_entity_graph(IDS, TITLES, TEXTS, config=config, encode=fake_encode, progress=True)
    err = capsys.readouterr().err
    assert "encode" in err and "synonyms" in err


# ---------------------------------------------------------------------------- real data
@pytest.mark.data
def test_title_graph_of_2wikimultihopqa(data_dir):
    path = data_dir / "2wikimultihopqa_hipporag" / "2wikimultihopqa_corpus.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    rows = json.loads(path.read_text())
    ids = [str(i) for i in range(len(rows))]
    titles, texts = [r["title"] for r in rows], [r["text"] for r in rows]
    graph = build_entity_graph(ids, titles, texts)
    counts = graph.counts()
    assert counts["passages"] == 6119 and counts["isolated_passages"] == 0
    assert counts["phrases"] == len({normalise(t) for t in titles}) == 6115
    assert counts["passage_phrase_edges"] == 9232
    # the vectorised matcher against a plain search, on a sample of passages
    stop = ex._stopwords()
    looked_up = {t for t in map(normalise, titles) if not all(w in stop for w in t.split())}
    vocab = graph.vocabulary()
    for i in range(0, 6119, 97):
        text = f" {normalise(texts[i])} "
        expected = {t for t in looked_up if f" {t} " in text} | {normalise(titles[i])}
        assert {graph.phrases[j] for j in graph.contains[1, graph.contains[0] == i]} == expected
        assert all(p in vocab for p in expected)
