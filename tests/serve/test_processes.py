"""``georag serve`` as a process: start-up errors, SIGTERM under load, a killed worker.

Loopback only, bounded counts and times; the servers share the test run's disk text cache
(``--cache-dir``), so they encode nothing the other tests encoded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest

from tests.serve.harness import demo_texts, environment, process_server, serve_command


@pytest.fixture(scope="module")
def cache_dir(serve_reranker, tmp_path_factory):
    """The test run's text cache folder, holding the demo texts' embeddings."""
    reranker = serve_reranker("none")
    queries, docs = demo_texts()
    reranker.rank_batch(queries[:4], [docs[:30]] * 4)
    return str(reranker.cache.folder.parent)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        serve_command(*args), env=environment(), capture_output=True, text=True, timeout=120
    )


def test_a_model_that_is_not_installed_fails_at_start_up_in_one_line():
    started = time.monotonic()
    done = _run("--method", "ce", "--method-option", "ce.model=nobody/no-such-cross-encoder")
    assert done.returncode == 2
    assert done.stderr.startswith("georag: error: model 'nobody/no-such-cross-encoder'")
    assert "give ce.model=PATH" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 60  # the imports; no hub retries


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (("--method", "iso"), "retrieves from a whole corpus"),
        (("--method", "maniscope", "--max-batch", "8", "--max-queue", "4"), "--max-queue"),
        (("--method", "maniscope", "--weights", "w.pt"), "--weights"),
        (("--method", "maniscope", "--api-key-file", "/no/such/key"), "--api-key-file"),
    ],
)
def test_bad_settings_fail_in_one_line(args, message):
    done = _run(*args)
    assert done.returncode == 2 and done.stderr.startswith("georag: error:")
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


async def _send(url: str, bodies: list[dict], path: str = "/rerank") -> list:
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        return await asyncio.gather(
            *(client.post(path, json=b) for b in bodies), return_exceptions=True
        )


def _accepted(url: str, path: str = "/rerank") -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    line = [
        x for x in text.splitlines() if x.startswith(f'georag_requests_total{{route="{path}"}}')
    ]
    return int(line[0].split()[-1]) if line else 0


@pytest.mark.slow
@pytest.mark.parametrize("served", ["rerank", "index"])
def test_sigterm_under_load_answers_every_accepted_request(served, cache_dir, tiny_index, tmp_path):
    queries, docs = demo_texts()
    args = ("--max-batch", "4", "--max-wait-ms", "50")
    if served == "rerank":
        path, bodies = "/rerank", [{"query": queries[i % 4], "texts": docs[:30]} for i in range(24)]
        args += ("--method", "maniscope", "--cache-dir", cache_dir)
    else:
        path, bodies = "/retrieve", [{"query": queries[i % 8], "top_k": 5} for i in range(24)]
        shutil.copytree(tiny_index, tmp_path / "index")
        args += ("--method", "dense", "--index", str(tmp_path / "index"))
    with process_server(*args) as (process, url):

        async def scenario():
            load = asyncio.ensure_future(_send(url, bodies, path))
            deadline = time.monotonic() + 60
            while _accepted(url, path) < len(bodies) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            accepted = _accepted(url, path)
            os.killpg(process.pid, signal.SIGTERM)
            return accepted, await load

        accepted, responses = asyncio.run(scenario())
        assert accepted == len(bodies)
        assert [getattr(r, "status_code", r) for r in responses] == [200] * len(bodies)
        # uvicorn re-raises the signal once it has finished: the exit status is SIGTERM's
        assert process.wait(60) in (0, -signal.SIGTERM)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health", timeout=5)


@pytest.mark.slow
def test_a_killed_worker_leaves_the_others_serving(cache_dir):
    queries, docs = demo_texts()
    args = ("--method", "maniscope", "--workers", "2", "--cache-dir", cache_dir)
    with process_server(*args, timeout=400) as (process, url):
        pids = set()
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:
            with httpx.Client(base_url=url, timeout=10) as one:  # a new connection each time
                response = one.get("/health")
            if response.status_code == 200:
                pids.add(response.json()["pid"])
        assert len(pids) == 2
        victim = min(pids)

        async def scenario():
            bodies = [{"query": queries[i % 4], "texts": docs[:20]} for i in range(16)]
            before = asyncio.ensure_future(_send(url, bodies))
            await asyncio.sleep(0.05)
            os.kill(victim, signal.SIGKILL)
            lost = await before
            after = await _send(url, bodies)  # sent once the worker is gone
            return lost, after

        lost, after = asyncio.run(scenario())
        failed = sum(getattr(r, "status_code", None) != 200 for r in lost)
        print(f"killed worker: {failed} of {len(lost)} requests in flight failed")
        assert [getattr(r, "status_code", None) for r in after] == [200] * len(after)
        assert sum(getattr(r, "status_code", None) == 200 for r in lost) >= 1
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        assert process.poll() is None  # the supervisor is still up
