"""georag.Retriever over a corpus index: every corpus method, updates equal to a rebuild,
errors in one line, concurrent readers, reload."""

from __future__ import annotations

import threading

import pytest

import georag
from tests.index.conftest import GRAPHS, METHODS, QUERIES, N


@pytest.mark.parametrize("method", METHODS)
def test_update_equals_rebuild(pair, method):
    updated, full = (georag.Retriever(p, method) for p in pair)
    assert updated.size == full.size
    got, want = updated.retrieve_batch(QUERIES, k=10), full.retrieve_batch(QUERIES, k=10)
    for a, b in zip(got, want):
        assert [d.id for d in a] == [d.id for d in b]
        # the new passages were encoded apart from the rest: float32 rounding, no more
        assert [d.score for d in a] == pytest.approx([d.score for d in b], abs=1e-5)


def test_retrieve_answers_documents(pair):
    retriever = georag.Retriever(pair[1], "hipporag2")
    docs = retriever.retrieve(QUERIES[0], k=5)
    assert len(docs) == 5 and all(isinstance(d, georag.RetrievedDoc) for d in docs)
    assert [d.score for d in docs] == sorted((d.score for d in docs), reverse=True)
    assert "tide" in (docs[0].title + docs[0].text).lower()
    batched = retriever.retrieve_batch([QUERIES[0], QUERIES[1]], k=5)[0]
    assert [d.id for d in batched] == [d.id for d in docs]  # the query encoded in a batch:
    assert [d.score for d in batched] == pytest.approx([d.score for d in docs], abs=1e-5)
    assert retriever.method == "hipporag2" and retriever.index_dir == pair[1]
    assert retriever.size == N and retriever.retrieve_batch([], k=3) == []
    with pytest.raises(AttributeError):
        docs[0].score = 1.0  # frozen
    linked = "what causes tides"  # mentions a title: the graph score counts (else dense)
    fused = georag.Retriever(pair[1], "hipporag2", options={"fusion": "dense"})
    one, other = (r.retrieve(linked, k=5) for r in (retriever, fused))
    assert one[0].score > 1 and [d.score for d in one] != [d.score for d in other]


def test_second_stage_reranks_the_pool(pair):
    dense = georag.Retriever(pair[1], "dense").retrieve(QUERIES[0], k=20)
    for spec, rerank in (("dense+maniscope", None), ("dense", "maniscope")):
        retriever = georag.Retriever(pair[1], spec, rerank=rerank, pool_size=20)
        docs = retriever.retrieve(QUERIES[0], k=5)
        assert retriever.method == "dense+maniscope" and len(docs) == 5
        assert {d.id for d in docs} <= {d.id for d in dense}
    options = {"dense": {}, "maniscope": {"k": 3}}
    assert len(georag.Retriever(pair[1], "dense+maniscope", options=options).retrieve("x", 3)) == 3


@pytest.mark.parametrize(
    "method, options, message",
    [
        ("nope", None, "unknown method 'nope'"),
        ("maniscope", None, "is a pool reranker"),
        ("dense+iso", None, "only the first stage"),
        ("gar", None, "cannot run from an index"),
        ("hipporag2", {"extractors": "title,ngram"}, "'entity:title,ngram', which"),
        ("phrase_ppr", {"knn": 3}, "default ['knn']"),
        ("iso_entity", {"synonym_threshold": 0.5}, "default graph settings"),
        ("dense", {"k": 3}, "takes no options"),
    ],
)
def test_bad_methods_fail_at_construction(pair, method, options, message):
    with pytest.raises(ValueError) as err:
        georag.Retriever(pair[1], method, options=options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_graph_names_the_option(tmp_path, cache_env, demo_docs, encoder):
    from georag.retrievers.index import build_index

    build_index(demo_docs[:20], tmp_path / "bare", encoder=encoder)
    with pytest.raises(ValueError, match="--graph passage") as err:
        georag.Retriever(tmp_path / "bare", "iso")
    assert "lacks" in str(err.value)


def test_add_and_delete_errors(index_copy):
    retriever = georag.Retriever(index_copy, "dense")
    generation = retriever.generation
    with pytest.raises(ValueError, match=r"unknown id\(s\) \['nope'\]"):
        retriever.delete(["d001", "nope"])
    with pytest.raises(ValueError, match=r"already in the index \['d001'\]"):
        retriever.add([{"id": "d001", "text": "again"}])
    with pytest.raises(ValueError, match=r"duplicate id\(s\) \['x'\]"):
        retriever.add([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])
    with pytest.raises(ValueError, match="'text' must be a string"):
        retriever.add([{"id": "y", "text": 3}])
    assert retriever.generation == generation and retriever.size == N  # nothing changed


def test_add_delete_roundtrip_and_reload(index_copy):
    reader, writer = georag.Retriever(index_copy, "bm25"), georag.Retriever(index_copy, "bm25")
    graph_reader = georag.Retriever(index_copy, "hipporag2")  # reads memory-mapped graph files
    old = index_copy / graph_reader.generation
    query = "zebra xylophone quartet"
    writer.add([georag.RetrievedDoc("z1", "Zebra", "A zebra plays a xylophone quartet.", 0.0)])
    assert not old.exists()  # removed after the switch; its readers still answer from it
    assert len(graph_reader.retrieve(QUERIES[0], k=3)) == 3 and graph_reader.size == N
    assert writer.retrieve(query, k=1)[0].id == "z1" and writer.size == N + 1
    assert reader.retrieve(query, k=1)[0].id != "z1"  # its own generation until reload
    assert reader.reload() and reader.retrieve(query, k=1)[0].id == "z1"
    assert not reader.reload()
    writer.delete("z1")
    assert writer.size == N and writer.retrieve(query, k=1)[0].id != "z1"
    assert len([p for p in index_copy.iterdir() if p.name.startswith("gen-")]) == 1


def test_readers_see_before_or_after(index_copy):
    retriever = georag.Retriever(index_copy, "hybrid")
    new = [{"id": f"n{i}", "title": "Tides", "text": f"Tides rise and fall {i}."} for i in range(3)]
    before = retriever.retrieve_batch(QUERIES, k=5)
    answers, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            answers.append(retriever.retrieve_batch(QUERIES, k=5))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        retriever.add(new)
        after = retriever.retrieve_batch(QUERIES, k=5)
        retriever.delete([d["id"] for d in new])
    finally:
        stop.set()
        thread.join()
    assert after != before and answers
    assert all(a == before or a == after for a in answers)


def test_corpus_index_holds_its_parts(pair):
    from georag.retrievers.index import CorpusIndex

    index = CorpusIndex.open(pair[1])
    assert index.graphs == tuple(GRAPHS) and index.manifest["georag_version"] == georag.__version__
    assert index.embeddings.shape == (N, index.manifest["dim"])
    hits = index.store().search("tides", k=3, first_stage="bm25")
    assert len(hits) == 3 and hits[0][0] in index.row_of
