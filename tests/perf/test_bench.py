"""The benchmark harness and the thread policy (no timing is asserted: only behaviour)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from georag.perf import threads
from georag.perf.bench import (
    bench_parser,
    busy_neighbours,
    data_root,
    non_negative_int,
    positive_int,
    start,
)
from georag.perf.timing import Timing, measure, percentile


def test_percentile_matches_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 50):
        values = rng.random(n).tolist()
        for q in (0, 10, 50, 90, 100):
            assert percentile(values, q) == pytest.approx(np.percentile(values, q), abs=1e-12)
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
    with pytest.raises(ValueError, match="q must lie in"):
        percentile([1.0], 101)


def test_measure_warms_up_and_scales_per_unit():
    seen = []
    timing = measure(lambda i: seen.append(i), repeats=4, warmup=2, per=10)
    assert seen == [0, 1, 0, 1, 2, 3]  # warm-up calls, then the timed ones
    assert len(timing.samples_ms) == 4 and all(s >= 0 for s in timing.samples_ms)
    t = Timing((1.0, 2.0, 3.0, 10.0))
    assert t.median == 2.5 and t.p90 == pytest.approx(np.percentile([1, 2, 3, 10], 90))
    assert t.as_dict() == {"median_ms": 2.5, "p90_ms": t.p90, "samples": 4, "cpu_median_ms": None}
    assert len(timing.cpu_ms) == 4 and timing.cpu_median >= 0
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure(lambda i: None, repeats=0)


def test_thread_count_sources(monkeypatch):
    for name in ("GEORAG_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert threads.default_threads(cores=8, busy=0) == 8
    assert threads.default_threads(cores=8, busy=2.6) == 5
    assert threads.default_threads(cores=2, busy=9) == 1
    assert threads._threads_from(3) == (3, "argument")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads._threads_from(None) == (2, "$OMP_NUM_THREADS")
    monkeypatch.setenv("GEORAG_THREADS", "5")
    assert threads._threads_from(None) == (5, "$GEORAG_THREADS")
    assert threads._threads_from(1) == (1, "argument")
    monkeypatch.setenv("GEORAG_THREADS", "many")
    with pytest.raises(ValueError, match=r"\$GEORAG_THREADS must be a positive integer"):
        threads._threads_from(None)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        threads._threads_from(0)


def test_busy_cores_sees_neighbours_at_once():
    if not os.path.exists("/proc/loadavg"):
        pytest.skip("needs /proc/loadavg")
    with busy_neighbours(2, settle_s=0.3) as pids:
        assert len(pids) == 2
        assert threads.busy_cores() >= 2  # spinning processes are always runnable
        assert threads.default_threads(cores=2) == 1
    for pid in pids:  # stopped and reaped when the block ends
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_policy_in_a_fresh_process_sets_passive_wait_and_threads(tmp_path):
    code = (
        "import os, sys; from georag.perf.threads import apply_thread_policy; "
        "s = apply_thread_policy(); import torch; "
        "print(s.threads, torch.get_num_threads(), s.source, os.environ['OMP_WAIT_POLICY'], "
        "'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["GEORAG_THREADS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["1", "1", "$GEORAG_THREADS", "PASSIVE", "True"]


def test_parser_start_and_finish_write_the_header(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEORAG_THREADS", raising=False)
    before = torch.get_num_threads()
    parser = bench_parser("Title line.\n\nMore text.", repeats=3)
    args = parser.parse_args(
        ["--threads", "1", "--out", str(tmp_path / "r.json"), "--device", "cpu"]
    )
    assert args.repeats == 3 and args.data_dir is None and parser.description == "Title line."
    try:
        bench = start(args, config={"B": 4})
        t = bench.time(lambda i: torch.ones(4).sum(), repeats=3, per=4)
        record = bench.finish({"k": t.as_dict()})
    finally:
        torch.set_num_threads(before)
    printed = capsys.readouterr().out
    assert "torch threads 1 (argument)" in printed and "config: B=4" in printed
    assert "load average at the end" in printed
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["threads"] == 1 and saved["device"] == "cpu" and saved["config"] == {"B": 4}
    assert len(saved["load_start"]) == 3 and len(saved["load_end"]) == 3
    assert saved["results"]["k"]["samples"] == 3 and record["results"] == saved["results"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--threads", "0"])


def test_data_root_is_the_folder_or_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEORAG_DATA", raising=False)
    parser = bench_parser(None, repeats=None, device=False)
    assert data_root(parser.parse_args(["--data-dir", str(tmp_path)])) == tmp_path
    for argv, message in (
        ([], "set $GEORAG_DATA"),
        (["--data-dir", str(tmp_path / "x")], "no folder"),
    ):
        with pytest.raises(SystemExit) as stop:
            data_root(parser.parse_args(argv))
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip()
        assert "error: --data-dir: " in err and message in err and "\n" not in err
    assert not hasattr(parser.parse_args([]), "repeats") and not hasattr(
        parser.parse_args([]), "device"
    )


@pytest.mark.parametrize(
    ("parse", "good", "bad"),
    [(positive_int, ("1", "48"), ("0", "-3", "x")), (non_negative_int, ("0", "7"), ("-1", "1.5"))],
)
def test_count_options_are_one_line_usage_errors(parse, good, bad, capsys):
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--n", type=parse)
    assert [parser.parse_args(["--n", v]).n for v in good] == [int(v) for v in good]
    for value in bad:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(["--n", value])
        assert exit_.value.code == 2
        assert "argument --n: must be a" in capsys.readouterr().err


def test_torch_threads_sets_the_count_inside_and_restores_it():
    before = torch.get_num_threads()
    other = 2 if before == 1 else 1
    try:
        with threads.torch_threads(other):
            assert torch.get_num_threads() == other
        assert torch.get_num_threads() == before
        with pytest.raises(RuntimeError, match="boom"), threads.torch_threads(other):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == before
        with threads.torch_threads(None):
            assert torch.get_num_threads() == before
        with pytest.raises(ValueError, match="threads must be a positive integer"):
            with threads.torch_threads(0):
                pass
    finally:
        torch.set_num_threads(before)


def test_single_query_latency_is_timed_on_the_serving_threads():
    from georag.perf.timing import median_single_ms

    before = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)
        median_single_ms(lambda i: seen.append(torch.get_num_threads()), 6, samples=3)
        assert set(seen) == {threads.SERVING_THREADS} and torch.get_num_threads() == 2
        seen.clear()
        median_single_ms(lambda i: seen.append(torch.get_num_threads()), 6, threads=None)
        assert set(seen) == {2}
    finally:
        torch.set_num_threads(before)
