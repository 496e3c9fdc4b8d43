"""scripts/gpu_check.py must keep running: a tiny-scale smoke run (parity is checked on CUDA)."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


@pytest.mark.slow
def test_gpu_check_runs_every_kernel():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "0.005"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for kernel in (
        "sinkhorn",
        "ricci flow",
        "batched IPM",
        "shortest paths",
        "k-NN graph",
        "dense PPR",
        "sparse PPR",
        "Lorentz distance",
        "OEM pooling",
        "faiss",
    ):
        assert kernel in done.stdout
    assert "PARITY FAILED" not in done.stdout
