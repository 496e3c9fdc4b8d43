"""Every method by name: pool rerankers and corpus-level retrievers, one registry.

A method is a class built as ``cls(config)`` from its config dataclass ``cls.config_class``
(None: it takes no options) and registered under ``cls.name`` by the :func:`register`
decorator in its own module. The built-in method modules are imported on the first lookup
that needs them (:data:`METHOD_MODULES`, in order, until the name is found); another
package registers its methods by importing a module that applies :func:`register`, or lazily
with :func:`register_module`.

Pool rerankers (:class:`~georag.rerank.base.PoolReranker`) take a
:class:`~georag.batch.CandidateBatch` and compose with ``+`` into a
:class:`~georag.rerank.pipeline.RerankPipeline` (``ricci+ce``); corpus-level retrievers
(:class:`~georag.rerank.base.Retriever`: ``iso``, ``ppr_global``, ``hyte``) index a
:class:`~georag.batch.Corpus` and stand alone.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

import torch

from georag.config import config_from_mapping, parse_value
from georag.rerank.base import CorpusRetriever, IdentityReranker, PoolReranker, Retriever
from georag.rerank.pipeline import RerankPipeline
from georag.rerank.precision import Float32Compute

__all__ = [
    "METHOD_MODULES",
    "available_methods",
    "config_class",
    "is_retriever",
    "make_method",
    "make_reranker",
    "parse_option",
    "register",
    "register_module",
]

#: Modules that register methods, imported on demand (cheapest first).
METHOD_MODULES = [
    "georag.rerank.geometric.diffusion",
    "georag.rerank.geometric.maniscope",
    "georag.rerank.baselines.learned_map",
    "georag.rerank.text.cross_encoder",
    "georag.rerank.text.bi_encoder",
    "georag.rerank.geometric.hyte",
    "georag.retrievers.hyte",
    "georag.rerank.geometric.ricci_filtration",
    "georag.retrievers.iso",
    "georag.retrievers.ppr_global",
    "georag.retrievers.dense",
    "georag.retrievers.learned_iso",
    "georag.rerank.baselines.adapter",
    "georag.rerank.baselines.doc_prior",
    "georag.rerank.baselines.rocchio",
    "georag.rerank.baselines.ltr",
    "georag.rerank.heads.residual_heads",
    "georag.retrievers.gar",
    "georag.retrievers.phrase_ppr",
    "georag.retrievers.lexical",
    "georag.retrievers.hipporag2",
    "georag.retrievers.iso_entity",
    "georag.retrievers.learned_hipporag2",
    "georag.retrievers.learned_iso_entity",
]
_METHODS: dict[str, type] = {}
_imported: set[str] = set()

C = TypeVar("C", bound=type)


def register(cls: C) -> C:
    """Class decorator: make ``cls.name`` build ``cls(cls.config_class(...))``.

    The class sets ``name`` and ``config_class`` (None for a method without options). A
    second class under a taken name is an error.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or "+" in name:
        raise ValueError(f"methods: {cls.__qualname__}.name must be a name without '+'")
    if not hasattr(cls, "config_class"):
        raise ValueError(f"methods: {cls.__qualname__} sets no config_class (None: no options)")
    taken = _METHODS.get(name)
    if taken is not None and taken.__qualname__ != cls.__qualname__:
        raise ValueError(f"methods: {name!r} is taken by {taken.__module__}.{taken.__qualname__}")
    _METHODS[name] = cls
    return cls


register(IdentityReranker)


def register_module(module: str) -> None:
    """Import ``module`` (which registers its methods) on the next lookup of an unknown name."""
    if module not in METHOD_MODULES:
        METHOD_MODULES.append(module)


def _import_until(name: str | None) -> None:
    """Import the method modules in turn until ``name`` is registered (None: all of them);
    a module whose third-party dependency is not installed is skipped."""
    for module in METHOD_MODULES:
        if name is not None and name in _METHODS:
            return
        if module in _imported:
            continue
        _imported.add(module)
        try:
            importlib.import_module(module)
        except ImportError as err:
            if (err.name or "").split(".")[0] == "georag":
                raise  # a georag module that does not import is a bug, not a missing extra
            continue


def available_methods() -> list[str]:
    """Method names whose modules import in this installation."""
    _import_until(None)
    return list(_METHODS)


def _lookup(name: str) -> type:
    _import_until(name)
    if name not in _METHODS:
        raise ValueError(f"methods: unknown method {name!r} (known: {', '.join(_METHODS)})")
    return _METHODS[name]


def config_class(name: str) -> type | None:
    """The config dataclass of method ``name`` (None for a method without options)."""
    return _lookup(name).config_class


def is_retriever(method: object) -> bool:
    """Whether ``method`` (an instance, a class or a spec) is a corpus-level retriever (has
    ``fit`` and ``retrieve``) rather than a pool reranker (is called on a batch).

    ``torch.nn.Module.__call__`` (which every module has, and which runs ``forward``) and
    :class:`~georag.rerank.base.CorpusRetriever`'s (which only reports the misuse) do not
    make a pool reranker: a class with ``fit`` and ``retrieve`` is a retriever unless a
    class of its own defines ``__call__``."""
    if isinstance(method, str):
        if "+" in method:
            return False
        method = _lookup(method.strip())
    kinds = (method if isinstance(method, type) else type(method)).__mro__
    own = [k for k in kinds if k not in (torch.nn.Module, CorpusRetriever)]
    return all(any(attr in vars(k) for k in kinds) for attr in ("fit", "retrieve")) and not any(
        "__call__" in vars(k) for k in own
    )


def make_method(name: str, options: dict[str, Any] | Any = None) -> PoolReranker | Retriever:
    """Build one method, ``cls(config_cls(**options))``.

    Parameters
    ----------
    name : str
        A registry key (see :func:`available_methods`).
    options : dict or config, optional
        Overrides of the method's config fields, checked against their types (a nested
        config's field by a dotted key, ``fixed.alpha``); or the method's config itself,
        already checked (built once per run, e.g. by ``EvalConfig.resolved_options``).
    """
    cls = _lookup(name)
    if cls.config_class is not None and isinstance(options, cls.config_class):
        return cls(options)
    options = dict(options or {})
    if cls.config_class is None:
        if options:
            raise ValueError(f"{name}: takes no options, got {sorted(options)}")
        return cls()
    return cls(config_from_mapping(cls.config_class, options, where=f"{name} options"))


def parse_option(name: str, key: str, text: str) -> Any:
    """Parse the text of option ``key`` of method ``name`` to its field's type."""
    config_cls = config_class(name)
    if config_cls is None:
        raise ValueError(f"{name}: takes no options, got {key!r}")
    try:
        return parse_value(config_cls, key, text)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def make_reranker(
    spec: str, options: dict[str, dict] | None = None, **overrides: Any
) -> PoolReranker | Retriever:
    """Build a method from ``spec`` such as ``"none"``, ``"iso"`` or ``"ricci+ce"``.

    Parameters
    ----------
    spec : str
        A method name, or pool-reranker names joined with ``+``.
    options : dict, optional
        ``{stage name: {config field: value}}`` overrides, or ``{stage name: config}``.
    **overrides
        Config fields of a single-stage ``spec`` (``make_reranker("maniscope", k=7)``).
    """
    options = options or {}
    names = [part.strip() for part in spec.split("+")]
    if not all(names):
        raise ValueError(f"methods: malformed method spec {spec!r}")
    if overrides:
        if len(names) > 1:
            raise ValueError(
                f"methods: keyword options need a single-stage spec, got {spec!r}; "
                "pass options={stage: {...}} instead"
            )
        options = {**options, names[0]: {**options.get(names[0], {}), **overrides}}
    built = [make_method(n, options.get(n)) for n in names]
    # half / bfloat16 batches are computed in float32 (see georag.rerank.precision)
    stages = [m if is_retriever(m) else Float32Compute(m) for m in built]
    if len(stages) == 1:
        return stages[0]
    alone = [s.name for s in stages if is_retriever(s)]
    if alone:
        raise ValueError(
            f"methods: {', '.join(alone)} ranks a whole corpus and cannot be "
            f"composed with '+' in {spec!r}"
        )
    return RerankPipeline(stages)
