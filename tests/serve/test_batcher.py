"""The micro-batcher's own rules: batch bounds, answers in order, 429, failure isolation."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from georag.serve.batcher import MAX_READ_MS, MicroBatcher
from georag.serve.config import ServeConfig
from georag.serve.metrics import Metrics
from georag.serve.shapes import RequestError


def _square_all(calls):
    def run(items):
        calls.append(list(items))
        if any(x < 0 for x in items):
            raise ValueError(f"negative item in {items}")
        return [x * x for x in items]

    return run


def test_batches_are_bounded_and_answers_go_back_in_order():
    calls: list = []

    async def scenario():
        batcher = MicroBatcher(
            _square_all(calls), max_batch=4, max_wait_ms=20, max_queue=64, metrics=Metrics()
        )
        batcher.start()
        return await asyncio.gather(*(batcher.submit(i) for i in range(10)))

    assert asyncio.run(scenario()) == [i * i for i in range(10)]
    assert [len(c) for c in calls] == [4, 4, 2] and sum(calls, []) == list(range(10))


def test_a_full_queue_refuses_with_429_and_a_failure_stays_with_its_request():
    calls: list = []

    async def scenario():
        batcher = MicroBatcher(
            _square_all(calls), max_batch=8, max_wait_ms=50, max_queue=3, metrics=Metrics()
        )
        batcher.start()
        return await asyncio.gather(
            *(batcher.submit(i) for i in (1, -2, 3, 4)), return_exceptions=True
        )

    one, bad, three, refused = asyncio.run(scenario())
    assert (one, three) == (1, 9)
    assert isinstance(bad, ValueError)
    assert isinstance(refused, RequestError) and refused.status == 429
    assert calls[0] == [1, -2, 3] and [1] in calls and [3] in calls  # then one by one


def test_metrics_count_the_batches():
    metrics = Metrics()

    async def scenario():
        batcher = MicroBatcher(
            _square_all([]), max_batch=8, max_wait_ms=5, max_queue=8, metrics=metrics
        )
        batcher.start()
        await asyncio.gather(*(batcher.submit(i) for i in range(5)))

    asyncio.run(scenario())
    assert metrics.batch_size.count == 1 and metrics.batch_size.sum == 5
    assert metrics.queue_wait.count == 5
    assert metrics.latency.count == 0  # request latency is the app's to record


def test_each_answer_goes_out_before_the_next_batch_runs():
    events: list = []

    def run(items):
        events.append(f"run {items[0]}")
        return items

    async def scenario():
        batcher = MicroBatcher(run, max_batch=1, max_wait_ms=0, max_queue=8, metrics=Metrics())

        async def ask(i):
            await batcher.submit(i)
            events.append(f"answered {i}")

        asks = [asyncio.ensure_future(ask(i)) for i in range(3)]
        await asyncio.sleep(0)  # all three queued before the batcher starts
        batcher.start()
        await asyncio.gather(*asks)

    asyncio.run(scenario())
    assert events == ["run 0", "answered 0", "run 1", "answered 1", "run 2", "answered 2"]


def _read_then_submit(batcher, item, seconds, submit=True):
    """A request whose body takes ``seconds`` to read, then is submitted (or fails)."""

    async def request():
        with batcher.reading():
            await asyncio.sleep(seconds)
        return await batcher.submit(item) if submit else None

    return request()


def test_a_batch_waits_for_the_requests_being_read_up_to_max_read_ms():
    calls: list = []

    async def scenario(read_seconds, max_read_ms, submit=True):
        calls.clear()
        batcher = MicroBatcher(
            _square_all(calls),
            max_batch=8,
            max_wait_ms=1,
            max_queue=8,
            metrics=Metrics(),
            max_read_ms=max_read_ms,
        )
        batcher.start()
        start = asyncio.get_running_loop().time()
        await asyncio.gather(batcher.submit(1), _read_then_submit(batcher, 2, read_seconds, submit))
        return asyncio.get_running_loop().time() - start

    asyncio.run(scenario(0.05, 500))  # read within max_read_ms: one batch
    assert calls == [[1, 2]]
    asyncio.run(scenario(0.3, 50))  # read for longer: the first goes alone after 50 ms
    assert calls == [[1], [2]]
    took = asyncio.run(scenario(0.05, 2000, submit=False))  # a read that fails
    assert calls == [[1]] and took < 1.0  # is waited for no more


def test_alone_a_request_waits_max_wait_ms_only():
    calls: list = []

    async def scenario():
        batcher = MicroBatcher(
            _square_all(calls), max_batch=8, max_wait_ms=1, max_queue=8, metrics=Metrics()
        )
        batcher.start()
        start = asyncio.get_running_loop().time()
        await _read_then_submit(batcher, 3, 0.01)
        return asyncio.get_running_loop().time() - start

    assert asyncio.run(scenario()) < 0.04  # 10 ms read, 1 ms wait: nowhere near 50 ms
    assert calls == [[3]]


@pytest.mark.parametrize("max_read_ms, batches", [(MAX_READ_MS, 1), (0, 2)])
def test_the_rerank_route_reads_its_body_under_the_batchers_mark(
    serve_reranker, max_read_ms, batches
):
    from georag.serve.app import create_app
    from georag.serve.service import demo_texts

    config = ServeConfig(method="maniscope", max_batch=8, max_wait_ms=1, max_read_ms=max_read_ms)
    app = create_app(config)
    app.state.service.reranker = serve_reranker("maniscope")
    docs = demo_texts("corpus.jsonl")[:6]
    statuses: list = []

    async def post(query: str, delay: float) -> None:
        body = orjson.dumps({"query": query, "texts": docs})
        scope = {"type": "http", "method": "POST", "path": "/rerank", "headers": []}
        scope.update(query_string=b"", root_path="", raw_path=b"/rerank", http_version="1.1")
        scope.update(scheme="http", client=("127.0.0.1", 1), server=("127.0.0.1", 8080))
        sent = asyncio.Event()

        async def receive():
            if sent.is_set():
                await asyncio.Event().wait()  # the client never leaves
            await asyncio.sleep(delay)  # the body takes ``delay`` to come
            sent.set()
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(scope, receive, send)

    async def scenario():
        async with app.router.lifespan_context(app):
            await asyncio.gather(post("heart disease", 0), post("cell biology", 0.02))

    asyncio.run(scenario())
    assert statuses == [200, 200]
    sizes = app.state.service.metrics.batch_size
    assert (sizes.count, sizes.sum) == (batches, 2)  # 20 ms apart, 1 ms max wait


def test_max_read_ms_is_a_setting_of_the_service():
    assert ServeConfig().max_read_ms == MAX_READ_MS
    with pytest.raises(ValueError, match="--max-read-ms: must lie in"):
        ServeConfig(max_read_ms=-1)
