"""Rerankers by name, so that the CLI and configs can ask for ``ricci+ce``.

Each name maps to a factory taking keyword overrides of the method's config dataclass.
Stages are joined with ``+`` into a :class:`~georag.rerank.pipeline.RerankPipeline`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import fields

from georag.rerank.base import Reranker
from georag.rerank.pipeline import RerankPipeline

__all__ = ["available_methods", "make_reranker"]

# name -> (module, reranker class, config class or None)
_METHODS: dict[str, tuple[str, str, str | None]] = {
    "none": ("georag.rerank.base", "IdentityReranker", None),
    "ce": ("georag.rerank.cross_encoder", "CrossEncoderReranker", "CrossEncoderConfig"),
    "diffusion": ("georag.rerank.diffusion", "DiffusionReranker", "DiffusionConfig"),
    "maniscope": ("georag.rerank.maniscope", "Maniscope", "ManiscopeConfig"),
    "hyte": ("georag.rerank.hyte", "HyTEReranker", "HyTEConfig"),
    "ricci": ("georag.rerank.ricci_filtration", "RicciFiltration", "RicciFiltrationConfig"),
    "bi": ("georag.rerank.bi_encoder", "BiEncoderReranker", "BiEncoderConfig"),
}


def register(name: str, module: str, cls: str, config: str | None) -> None:
    """Make ``name`` resolve to ``module.cls`` configured by ``module.config``."""
    _METHODS[name] = (module, cls, config)


def available_methods() -> list[str]:
    """Reranker names whose modules import in this installation.

    The evaluation harness also knows the corpus-level retrievers ``iso`` and ``ppr_global``
    (:mod:`georag.eval.corpus_methods`), which walk the passage graph instead of a pool.
    """
    names = []
    for name, (module, _, _) in _METHODS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        names.append(name)
    return names


def _factory(name: str) -> Callable[..., Reranker]:
    if name not in _METHODS:
        raise ValueError(f"methods: unknown method {name!r} (known: {', '.join(_METHODS)})")
    module_name, cls_name, config_name = _METHODS[name]
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    if config_name is None:
        return lambda **overrides: cls()
    config_cls = getattr(module, config_name)
    known = {f.name for f in fields(config_cls)}

    def build(**overrides: object) -> Reranker:
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"{name}: unknown option(s) {unknown} (known: {sorted(known)})")
        return cls(config_cls(**overrides))

    return build


def make_reranker(spec: str, options: dict[str, dict] | None = None) -> Reranker:
    """Build a reranker from ``spec`` such as ``"none"``, ``"diffusion"`` or ``"ricci+ce"``.

    Parameters
    ----------
    spec : str
        Stage names joined with ``+``.
    options : dict, optional
        ``{stage name: {config field: value}}`` overrides.
    """
    options = options or {}
    names = [part.strip() for part in spec.split("+")]
    if not all(names):
        raise ValueError(f"methods: malformed method spec {spec!r}")
    stages = [_factory(n)(**options.get(n, {})) for n in names]
    if len(stages) == 1:
        return stages[0]
    return RerankPipeline(stages)
