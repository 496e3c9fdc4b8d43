"""The micro-batcher's own rules: batch bounds, answers in order, 429, failure isolation."""

from __future__ import annotations

import asyncio

from georag.serve.batcher import MicroBatcher
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
