"""The entity-graph benchmark's measurements (georag.experiments.entity_bench) on the tiny
multi-hop corpus of the entity-graph tests and its stand-in encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from georag.experiments.entity_bench import (
    encode_latency,
    index_case,
    latency,
    prpack_graph,
    run_child,
    throughput,
)
from georag.experiments.entity_multihop import DEFAULT
from georag.rerank.registry import make_reranker
from tests.retrievers import entity_cases as cases

igraph = pytest.importorskip("igraph")

STEPS = ("retrieve", "reset", "ppr", "prpack")


def fitted():
    """The default row's retriever, fitted on the tiny corpus and its graph."""
    method, options = DEFAULT
    c = cases.corpus()
    return make_reranker(method, {method: options}).fit_graph(
        c.embeddings, cases.graph(), doc_ids=c.doc_ids
    )


def test_latency_times_every_step_and_matches_prpack():
    retriever = fitted()
    out = latency(retriever, cases.queries(), num_queries=3, warmup=1)
    for step in STEPS:
        assert set(out[step]) == {"median_ms", "p90_ms", "samples", "cpu_median_ms"}
        assert out[step]["samples"] == 3 and out[step]["median_ms"] > 0
    assert out["queries"] == 3 and out["warmup"] == 1 and out["skipped_no_reset_mass"] == 0
    assert out["nodes"] == retriever.graph.num_nodes
    assert out["max_abs_diff"] <= 1e-8 and out["max_abs_diff_float64"] <= 1e-8


def test_latency_times_only_the_first_queries():
    out = latency(fitted(), cases.queries(), num_queries=2, warmup=5)
    assert out["queries"] == 2 and out["warmup"] == 2


def test_prpack_graph_holds_each_undirected_edge_once():
    retriever = fitted()
    graph = prpack_graph(retriever.csr)
    dense = retriever.csr.to_dense().numpy()
    assert graph.vcount() == dense.shape[0]
    assert graph.ecount() == int(np.count_nonzero(np.triu(dense)))
    rebuilt = np.zeros_like(dense)
    for edge in graph.es:
        i, j = edge.tuple
        rebuilt[i, j] = rebuilt[j, i] = edge["weight"]
    np.testing.assert_array_equal(rebuilt, dense)


def test_throughput_and_encode_latency():
    out = throughput(fitted(), cases.queries(), repeats=2)
    assert out["queries"] == 3 and out["repeats"] == 2 and out["queries_per_s"] > 0
    assert out["ms_per_query"]["samples"] == 2

    class Encoder:
        def encode(self, texts):
            return cases.encode(texts)

    enc = encode_latency(Encoder(), cases.QUERIES, num=2, warmup=1)
    assert enc["samples"] == 2 and enc["median_ms"] > 0
    with pytest.raises(ValueError, match="none to encode"):
        encode_latency(Encoder(), [], num=5)


@pytest.fixture
def tiny_beir(tmp_path):
    """The tiny corpus as a BEIR folder (load_dataset reads it by path)."""
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    lines = [
        json.dumps({"_id": f"d{i}", "title": t, "text": x})
        for i, (t, x) in enumerate(zip(cases.TITLES, cases.TEXTS))
    ]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    queries = [json.dumps({"_id": f"q{i}", "text": q}) for i, q in enumerate(cases.QUERIES)]
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    qrels = ["query-id\tcorpus-id\tscore", "q0\td0\t1", "q1\td3\t1", "q2\td5\t1"]
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_index_case_reports_costs_counts_and_size(tiny_beir):
    row = index_case(str(tiny_beir), ["title"], encode=cases.encode)
    assert row["extractors"] == "title" and row["passages"] == len(cases.TITLES)
    assert row["phrases"] == len(cases.TITLES)  # one phrase per title
    assert row["passage_phrase_edges"] >= len(cases.TITLES)
    for key in ("build_s", "build_cpu_s", "build_encoder_s", "save_s", "disk_mib"):
        assert row[key] > 0, key
    assert row["encode_synonyms_s"] == pytest.approx(row["build_encoder_s"] - row["build_s"])
    assert row["rss_loaded_mib"] <= row["rss_build_mib"] <= row["rss_peak_mib"]
    assert "spacy_load_s" not in row


def test_run_child_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        run_child("nothing", threads=1)


@pytest.mark.slow
def test_run_child_reports_the_error_of_a_failed_case(tmp_path):
    out = run_child("index", threads=1, name=str(tmp_path / "absent"), extractors=["title"])
    assert set(out) == {"error"} and out["error"]


@pytest.mark.slow
def test_run_child_measures_a_case_in_its_own_process(tiny_beir):
    """The real path: a child process with the MiniLM encoder."""
    out = run_child("index", threads=1, name=str(tiny_beir), extractors=["title"])
    assert "error" not in out, out
    assert out["phrases"] == len(cases.TITLES) and out["child_wall_s"] > out["build_s"]
    assert out["rss_peak_mib"] > out["rss_build_mib"]


@pytest.mark.slow
def test_full_index_case_builds_the_default_index_in_a_child(tiny_beir):
    out = run_child("full_index", threads=1, name=str(tiny_beir))
    assert "error" not in out, out
    assert out["method"] == DEFAULT[0] and out["passages"] == len(cases.TITLES)
    parts = out["encode_passages_s"] + out["graph_s"] + out["fit_s"]
    assert out["total_s"] == pytest.approx(parts) and out["rss_peak_mib"] > 0
