"""A live ``serve --index`` follows another writer of its folder: the generation that
writer makes live is served within ``watch_ms`` plus the reload, and ``/health`` names it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from georag.retrievers.index import update_index
from tests.serve.harness import environment, thread_server

PROBE = {"id": "outside-1", "title": "Lanterns", "text": "zebrafish lanterns orbit quietly"}


def _generation(url: str) -> str:
    return httpx.get(f"{url}/health", timeout=10).json()["generation"]


def _wait_for_generation(url: str, old: str, bound: float) -> tuple[str, float]:
    start = time.monotonic()
    while time.monotonic() - start < bound:
        generation = _generation(url)
        if generation != old:
            return generation, time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"still serving {old} after {bound} s")


def _top_id(url: str, query: str) -> str:
    body = {"query": query, "top_k": 1}
    return httpx.post(f"{url}/retrieve", json=body, timeout=30).json()["results"][0]["id"]


def test_an_update_by_another_writer_is_served_within_the_bound(corpus_retriever):
    retriever = corpus_retriever()
    folder = retriever.index_dir
    with thread_server(retriever, index=str(folder), watch_ms=100) as url:
        before = _generation(url)
        size = httpx.get(f"{url}/health").json()["size"]
        written = update_index(folder, add=[PROBE], encoder=retriever.encoder)  # another writer
        generation, took = _wait_for_generation(url, before, bound=5)
        assert generation == written.generation.name and took < 5
        assert httpx.get(f"{url}/health").json()["size"] == size + 1
        assert _top_id(url, PROBE["text"]) == PROBE["id"]
        update_index(folder, delete=[PROBE["id"]], encoder=retriever.encoder)
        _wait_for_generation(url, generation, bound=5)
        assert _top_id(url, PROBE["text"]) != PROBE["id"]


@pytest.mark.slow
def test_georag_index_add_in_another_process_is_served(corpus_retriever, tmp_path):
    retriever = corpus_retriever()
    folder = retriever.index_dir
    documents = tmp_path / "more.jsonl"
    documents.write_text(json.dumps({"id": "outside-2", "text": PROBE["text"]}) + "\n")
    with thread_server(retriever, index=str(folder)) as url:  # the default watch_ms
        before = _generation(url)
        command = [
            sys.executable,
            "-m",
            "georag",
            "index",
            "add",
            "--index",
            str(folder),
            str(documents),
        ]
        done = subprocess.run(
            command, env=environment(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        _, took = _wait_for_generation(url, before, bound=10)
        print(f"served {took:.2f} s after georag index add returned")
        assert took < 2
        assert _top_id(url, PROBE["text"]) == "outside-2"
