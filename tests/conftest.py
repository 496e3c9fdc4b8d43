"""Shared fixtures: the real data sets in ../shared/data, skipped cleanly when absent.

Hypothesis: with ``$CI`` set (``.ci/run`` sets it) the "ci" profile draws the same
examples on every run (``derandomize``), so a CI result is reproducible; elsewhere each run
draws new ones, which is how new failing cases are found (pin them with ``@example`` or a
regression test).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Where the real benchmark data lives: $GEORAG_DATA, else ../shared/data beside the repo."""
    env = os.environ.get("GEORAG_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder; skips the test when it is absent."""
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path}")
    return path


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory) -> Path:
    """One embedding cache for the whole test run, so each corpus is encoded once."""
    return tmp_path_factory.mktemp("georag-cache")


@pytest.fixture(scope="session")
def text_encoder():
    """One all-MiniLM-L6-v2 encoder for the whole run: the model loads once."""
    from georag.retrieval.encoder import TextEncoder

    return TextEncoder(show_progress=False)
