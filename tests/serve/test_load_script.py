"""scripts/bench/load_serve.py keeps running: its smoke settings end to end (two servers, the
raw client, the metrics read back, parity with the in-process reranker or retriever, updates
under load, the Markdown rows)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.serve.harness import ROOT, environment


@pytest.mark.slow
@pytest.mark.data
def test_the_quick_load_run_answers_every_request_as_in_process(data_dir, tmp_path):
    out = tmp_path / "load.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench" / "load_serve.py"), "--quick"]
    command += ["--first-stage", "bm25", "--data-dir", str(data_dir)]  # no corpus encoding
    command += ["--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
    done = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["results"]
    cells = [(r["batching"], r["concurrency"]) for r in rows]
    assert cells == [(b, c) for b in ("off (B=1)", "max 64, 2 ms") for c in (1, 4)]
    assert all(r["requests"] == 16 and r["errors"] == r["mismatches"] == 0 for r in rows)
    assert all(r["server_cpu_ms"] > 0 for r in rows)
    assert rows[0]["mean_batch"] == 1 and rows[-1]["mean_batch"] > 1
    assert "| maniscope | off (B=1) | 1 |" in done.stdout


@pytest.mark.slow
def test_the_quick_retrieve_run_answers_as_in_process_and_updates_consistently(tmp_path):
    out = tmp_path / "load.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench" / "load_serve.py")]
    command += ["--mode", "retrieve", "--quick", "--out", str(out)]
    done = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())["results"]
    cells = [(r["batching"], r["concurrency"]) for r in figures["cells"]]
    assert cells == [(b, c) for b in ("off (B=1)", "max 64, 2 ms") for c in (1, 4)]
    assert all(
        r["requests"] == 16 and r["errors"] == r["mismatches"] == 0 for r in figures["cells"]
    )
    for row in figures["updates"]:
        assert row["updates"] == 4 and row["update_errors"] == row["retrieve_errors"] == 0
        assert row["inconsistent"] == row["not_visible_after_ack"] == 0 and row["retrieves"] > 0
    assert "| dense | off (B=1) | 1 |" in done.stdout
