"""Fault injection (see harness.py): kill -9 mid-write and flipped bytes, per artifact type.

The default suite runs a few trials of each; ``-m slow`` runs 30 kill and 30 flip trials
of each. Every trial must end in an intact version (kill) or a clean one-line error / a
recompute (flip), with no litter left after the next write.
"""

from __future__ import annotations

import sys

import pytest

from .harness import ARTIFACTS, run_isolated

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork and SIGKILL")

QUICK = ["cache", "faiss", "bm25", "store", "trec", "results"]  # the rest: -m slow


def _check_kill(got, trials):
    assert got.get("ok", 0) == trials, dict(got)
    assert got.get("litter", 0) == 0, dict(got)


def _check_flip(got, trials):
    assert got.get("corrupt", 0) == 0 and got.get("traceback", 0) == 0, dict(got)
    assert got.get("clean", 0) + got.get("recompute", 0) == trials, dict(got)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Six kill and six flip trials of each quick artifact, in one fresh process (a fork
    of the test session would carry its threads: a lock one of them holds at the fork
    stays held in the writer)."""
    return run_isolated(QUICK, 6, tmp_path_factory.mktemp("faults"), timeout=300)


@pytest.mark.parametrize("name", QUICK)
def test_quick_kill_and_flip(name, quick):
    _check_kill(quick[name]["kill -9"], 6)
    _check_flip(quick[name]["byte flip"], 6)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ARTIFACTS))
def test_thirty_kills_and_thirty_flips(name, tmp_path):
    counts = run_isolated([name], 30, tmp_path)[name]  # a fresh process per artifact
    kills = counts["kill -9"]
    _check_kill(kills, 30)
    assert kills["mid-write"] > 0, "no kill landed inside a write: the trial proves nothing"
    _check_flip(counts["byte flip"], 30)
