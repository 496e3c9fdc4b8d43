"""The load test's parts (georag.serve.load, load_retrieve) against a real server: the
raw client's cells, and updates under load checked against the index's states."""

from __future__ import annotations

import os

import orjson

from georag.serve import load
from georag.serve.load_retrieve import (
    compare_retrieve,
    copy_index,
    retrieve_references,
    update_states,
    updates_under_load,
)
from tests.serve.conftest import TINY
from tests.serve.harness import demo_documents, demo_texts, thread_server


def test_a_cell_of_retrieves_matches_the_in_process_retriever(corpus_retriever):
    retriever = corpus_retriever()
    queries = demo_texts()[0][:6]
    expected = retrieve_references(retriever.index_dir, "dense", queries, 5)
    with thread_server(retriever, index="x", max_batch=8, max_wait_ms=5) as url:
        bodies = [orjson.dumps({"query": q, "top_k": 5}) for q in queries]
        requests = [load.request_bytes(url, b, "/retrieve") for b in bodies]
        row = load.measure_cell(
            url,
            os.getpid(),  # the server runs in this process
            requests,
            lambda i, answer: compare_retrieve(answer, expected[i], 1e-4),
            3,
            "retrieve_latency_seconds",
        )
    assert row["requests"] == 6 and row["errors"] == row["mismatches"] == 0
    assert row["mean_batch"] >= 1 and row["p99_ms"] > 0


def test_updates_under_load_are_consistent_and_visible(corpus_retriever, tmp_path):
    retriever = corpus_retriever()
    held = demo_documents()[TINY : TINY + 4]  # not in the tiny index
    groups, probes = [held[:2], held[2:]], [d["text"] for d in held]
    states = update_states(
        copy_index(retriever.index_dir, tmp_path / "s"), "dense", probes, groups, 5
    )
    assert states[0] != states[-1]  # the updates change the probes' answers
    with thread_server(retriever, index="x", max_batch=8, max_wait_ms=2) as url:
        figures = updates_under_load(url, probes, groups, states, 5, 3, 1e-4)
        assert figures["updates"] == 2 and figures["documents_added"] == 4
        assert figures["update_errors"] == figures["retrieve_errors"] == 0
        assert figures["inconsistent"] == figures["not_visible_after_ack"] == 0
        assert figures["retrieves"] > 0
        # the check catches answers that match no state allowed: here, the state before
        stale = updates_under_load(url, probes, [], [states[0]], 5, 2, 1e-4)
    assert stale["inconsistent"] == stale["retrieves"] > 0
