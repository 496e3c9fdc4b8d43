"""The public API: ``georag.<name>`` for every name in ``__all__``, one version, and
``python -m georag``."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import georag


def test_every_exported_name_resolves():
    for name in georag.__all__:
        assert getattr(georag, name) is not None, name
    assert georag.make_reranker("none").name == "none"
    assert "maniscope" in georag.available_methods()


def test_one_version():
    assert georag.__version__ == importlib.metadata.version("georag")


def test_import_is_light_and_changes_no_global_state():
    code = (
        "import sys, torch; t = torch.get_num_threads(); import georag; "
        "assert 'georag.rerank' not in sys.modules and 'torch_geometric' not in sys.modules; "
        "assert torch.get_num_threads() == t"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_python_dash_m_georag():
    out = subprocess.run(
        [sys.executable, "-m", "georag", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "usage: georag" in out and "eval" in out
    bad = subprocess.run(
        [sys.executable, "-m", "georag", "eval", "--top-m", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("georag: error:")


def test_pool_rerankers_do_not_import_torch_geometric():
    """The first diffusion or Maniscope call in a fresh process pays no torch_geometric import
    (it takes seconds; only the sparse edge-list path of the diffusion kernel needs it)."""
    code = (
        "import sys, numpy as np; from georag.eval.synthetic import random_batch; "
        "from georag.rerank.registry import make_reranker; "
        "batch = random_batch(np.random.default_rng(0), 2, 12, 8, unit=True); "
        "[make_reranker(m)(batch) for m in ('diffusion', 'maniscope')]; "
        "assert 'torch_geometric' not in sys.modules, 'imported torch_geometric'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
