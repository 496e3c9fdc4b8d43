"""The corpus routes over loopback: /retrieve against the in-process retriever, updates
seen by the next request, micro-batches of mixed top_k, the refusals and the API key."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.serve.harness import demo_texts, thread_server

KEY = "corpus-key"


@pytest.fixture(scope="module")
def texts():
    return demo_texts()


@pytest.fixture(scope="module")
def server(corpus_retriever, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("key") / "key.txt"
    key_file.write_text(KEY)
    retriever = corpus_retriever()
    limits = dict(max_docs=8, max_text_chars=2000, max_body_bytes=16 * 1024, max_top_k=20)
    settings = dict(index=str(retriever.index_dir), api_key_file=str(key_file), **limits)
    with thread_server(retriever, max_batch=8, max_wait_ms=20, **settings) as url:
        yield url, retriever


def _call(url, method, path, body=None, content=None, key=KEY):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, f"{url}{path}", json=body, content=content, headers=headers)


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


def test_retrieve_equals_the_in_process_retriever(server, texts):
    url, retriever = server
    queries, _ = texts
    response = _call(url, "POST", "/retrieve", {"query": queries[0], "top_k": 5})
    want = retriever.retrieve(queries[0], k=5)
    got = response.json()
    assert [r["id"] for r in got["results"]] == [d.id for d in want]
    assert [r["score"] for r in got["results"]] == pytest.approx([d.score for d in want], abs=1e-5)
    assert [r["text"] for r in got["results"]] == [d.text for d in want]
    assert got["meta"] == {"method": retriever.method, "top_k": 5, "returned": 5}
    default = _call(url, "POST", "/retrieve", {"query": queries[0]}).json()
    assert default["meta"]["top_k"] == 10 and len(default["results"]) == 10


def test_a_batch_of_mixed_top_k_answers_each_as_alone(server, texts):
    url, retriever = server
    queries, _ = texts
    cases = [(queries[i % len(queries)], 1 + i % 4) for i in range(16)]

    async def send():
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            return await asyncio.gather(
                *(client.post("/retrieve", json={"query": q, "top_k": k}) for q, k in cases)
            )

    for (query, k), response in zip(cases, asyncio.run(send())):
        assert _ids(response) == [d.id for d in retriever.retrieve(query, k=k)]
    metrics = _call(url, "GET", "/metrics").text
    count = float(metrics.split("georag_batch_size_count ")[1].split()[0])
    total = float(metrics.split("georag_batch_size_sum ")[1].split()[0])
    assert total / count > 1  # some requests shared a batch
    assert 'georag_retrieve_latency_seconds_bucket{le="+Inf"}' in metrics


def test_an_update_is_seen_by_the_next_retrieve(server):
    url, retriever = server
    size = retriever.size
    probe = "zebrafish lanterns orbit quietly"
    added = _call(url, "POST", "/documents", {"documents": [{"id": "new-1", "text": probe}]})
    assert added.status_code == 200 and added.json() == {"added": 1, "size": size + 1}
    assert _ids(_call(url, "POST", "/retrieve", {"query": probe, "top_k": 1})) == ["new-1"]
    deleted = _call(url, "DELETE", "/documents", {"ids": ["new-1"]})
    assert deleted.status_code == 200 and deleted.json() == {"deleted": 1, "size": size}
    assert "new-1" not in _ids(_call(url, "POST", "/retrieve", {"query": probe, "top_k": 20}))
    metrics = _call(url, "GET", "/metrics").text
    assert 'georag_documents_total{op="added"} 1' in metrics
    assert 'georag_documents_total{op="deleted"} 1' in metrics
    assert f"georag_index_documents {size}" in metrics


@pytest.mark.parametrize(
    "method, path, body, status, message",
    [
        ("POST", "/retrieve", b'{"query": "x"', 400, "malformed JSON"),
        ("POST", "/retrieve", b'{"top_k": 3}', 422, "query: expected a string"),
        ("POST", "/retrieve", b'{"query": "  "}', 422, "query: empty text"),
        ("POST", "/retrieve", b'{"query": "q", "top_k": 0}', 422, "top_k: expected a positive"),
        ("POST", "/retrieve", b'{"query": "q", "top_k": true}', 422, "top_k"),
        ("POST", "/retrieve", b'{"query": "q", "top_k": 21}', 413, "top_k: 21, over the limit"),
        ("POST", "/retrieve", b'{"query": "' + b"a" * 2001 + b'"}', 413, "query: 2001 char"),
        ("POST", "/retrieve", b" " * (16 * 1024 + 1), 413, "body: "),
        ("POST", "/documents", b'{"documents": {}}', 422, "documents: expected a list"),
        ("POST", "/documents", b'{"documents": []}', 422, "documents: empty list"),
        ("POST", "/documents", b'{"documents": [{"text": "t"}]}', 422, "documents[0].id"),
        ("POST", "/documents", b'{"documents": [{"id": "a"}]}', 422, "documents[0].text"),
        ("POST", "/documents", b'{"documents": [{"id": "a", "text": "t", "title": 3}]}', 422,
         "documents[0].title"),
        ("POST", "/documents", b'{"documents": [{"id": "a", "text": "t"}, {"id": "a", '
         b'"text": "u"}]}', 422, "documents[1]: id 'a' given twice"),
        ("POST", "/documents", b'{"documents": [{"id": "d001", "text": "t"}]}', 409, "d001"),
        ("POST", "/documents", b'{"documents": [' + b",".join(
            b'{"id": "n%d", "text": "t"}' % i for i in range(9)) + b"]}", 413, "9 items"),
        ("DELETE", "/documents", b'{"ids": "d001"}', 422, "ids: expected a list"),
        ("DELETE", "/documents", b'{"ids": [7]}', 422, "ids[0]: expected a string"),
        ("DELETE", "/documents", b'{"ids": ["no-such-id"]}', 409, "no-such-id"),
        ("DELETE", "/documents", b'{"ids": ["d002", "no-such-id"]}', 409, "no-such-id"),
        ("PUT", "/documents", b"{}", 405, ""),
    ],
)  # fmt: skip
def test_bad_requests_get_one_line_and_change_nothing(server, method, path, body, status, message):
    url, retriever = server
    size = retriever.size
    response = _call(url, method, path, content=body)
    assert response.status_code == status
    if message:
        error = response.json()["error"]
        assert message in error and "\n" not in error and response.json()["status"] == status
    assert retriever.size == size  # a refused update applied nothing
    assert _call(url, "GET", "/health").json()["size"] == size


def test_the_api_key_is_required_on_every_corpus_route(server, texts):
    url, retriever = server
    size = retriever.size
    calls = [
        ("POST", "/retrieve", {"query": texts[0][0]}),
        ("POST", "/documents", {"documents": [{"id": "k", "text": "t"}]}),
        ("DELETE", "/documents", {"ids": ["d001"]}),
        ("GET", "/metrics", None),
    ]
    for method, path, body in calls:
        for key in (None, "wrong"):
            response = _call(url, method, path, body, key=key)
            assert response.status_code == 401 and "API key" in response.json()["error"]
    assert retriever.size == size
    assert httpx.get(f"{url}/health").status_code == 200
