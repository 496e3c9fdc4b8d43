"""Every method by name: pool rerankers and corpus-level retrievers, one registry.

Each name maps to a class built as ``cls(config)`` from its config dataclass; the class'
``name`` is its key. Pool rerankers (:class:`~georag.rerank.base.Reranker`) take a
:class:`~georag.batch.CandidateBatch` and compose with ``+`` into a
:class:`~georag.rerank.pipeline.RerankPipeline` (``ricci+ce``); corpus-level retrievers
(:class:`~georag.rerank.base.Retriever`: ``iso``, ``ppr_global``, ``hyte``) index a
:class:`~georag.batch.Corpus` and stand alone.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from georag.config import config_from_mapping, parse_value
from georag.rerank.base import Reranker, Retriever
from georag.rerank.pipeline import RerankPipeline
from georag.rerank.precision import Float32Compute

__all__ = [
    "available_methods",
    "config_class",
    "is_retriever",
    "make_method",
    "make_reranker",
    "parse_option",
    "register",
]

# name -> (module, class, config class or None)
_METHODS: dict[str, tuple[str, str, str | None]] = {
    "none": ("georag.rerank.base", "IdentityReranker", None),
    "ce": ("georag.rerank.cross_encoder", "CrossEncoderReranker", "CrossEncoderConfig"),
    "bi": ("georag.rerank.bi_encoder", "BiEncoderReranker", "BiEncoderConfig"),
    "diffusion": ("georag.rerank.diffusion", "DiffusionReranker", "DiffusionConfig"),
    "maniscope": ("georag.rerank.maniscope", "Maniscope", "ManiscopeConfig"),
    "ricci": ("georag.rerank.ricci_filtration", "RicciFiltration", "RicciFiltrationConfig"),
    "hyte_rescore": ("georag.rerank.hyte", "HyTEReranker", "HyTEConfig"),
    "hyte": ("georag.rerank.hyte", "HyTERetriever", "HyTEConfig"),
    "iso": ("georag.rerank.iso_rag", "IsoRag", "IsoRagConfig"),
    "ppr_global": ("georag.rerank.iso_rag", "GlobalPPR", "GlobalPPRConfig"),
    "learned_diffusion": (
        "georag.rerank.learned_diffusion",
        "LearnedDiffusion",
        "LearnedDiffusionConfig",
    ),
    "learned_maniscope": (
        "georag.rerank.learned_maniscope",
        "LearnedManiscope",
        "LearnedManiscopeConfig",
    ),
    "learned_map": ("georag.rerank.learned_map", "LearnedMap", "LearnedMapConfig"),
    "learned_ricci": ("georag.rerank.learned_ricci", "LearnedRicci", "LearnedRicciConfig"),
    "learned_iso": ("georag.rerank.learned_iso", "LearnedIso", "LearnedIsoConfig"),
    "phrase_ppr": ("georag.rerank.phrase_ppr", "PhrasePPR", "PhrasePPRConfig"),
}


def register(name: str, module: str, cls: str, config: str | None) -> None:
    """Make ``name`` resolve to ``module.cls`` configured by ``module.config``.

    ``cls.name`` must equal ``name`` (checked when the method is first built).
    """
    _METHODS[name] = (module, cls, config)


def available_methods() -> list[str]:
    """Method names whose modules import in this installation."""
    names = []
    for name, (module, _, _) in _METHODS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        names.append(name)
    return names


def _lookup(name: str) -> tuple[type, type | None]:
    if name not in _METHODS:
        raise ValueError(f"methods: unknown method {name!r} (known: {', '.join(_METHODS)})")
    module_name, cls_name, config_name = _METHODS[name]
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    if getattr(cls, "name", None) != name:
        raise ValueError(
            f"methods: {module_name}.{cls_name}.name is "
            f"{getattr(cls, 'name', None)!r}, not its registry key {name!r}"
        )
    return cls, None if config_name is None else getattr(module, config_name)


def config_class(name: str) -> type | None:
    """The config dataclass of method ``name`` (None for a method without options)."""
    return _lookup(name)[1]


def is_retriever(method: object) -> bool:
    """Whether ``method`` (an instance, a class or a spec) is a corpus-level retriever (has
    ``fit`` and ``retrieve``) rather than a pool reranker (is called on a batch).

    ``torch.nn.Module.__call__`` (which every module has, and which runs ``forward``) does
    not make a pool reranker: a module with ``fit`` and ``retrieve`` (``learned_iso``) is a
    retriever unless a class of its own defines ``__call__``."""
    if isinstance(method, str):
        if "+" in method:
            return False
        method = _lookup(method.strip())[0]
    kinds = (method if isinstance(method, type) else type(method)).__mro__
    own = [k for k in kinds if k is not torch.nn.Module]
    return all(any(attr in vars(k) for k in kinds) for attr in ("fit", "retrieve")) and not any(
        "__call__" in vars(k) for k in own
    )


def make_method(name: str, options: dict[str, Any] | None = None) -> Reranker | Retriever:
    """Build one method, ``cls(config_cls(**options))``.

    Parameters
    ----------
    name : str
        A registry key (see :func:`available_methods`).
    options : dict, optional
        Overrides of the method's config fields, checked against their types.
    """
    cls, config_cls = _lookup(name)
    options = dict(options or {})
    if config_cls is None:
        if options:
            raise ValueError(f"{name}: takes no options, got {sorted(options)}")
        return cls()
    return cls(config_from_mapping(config_cls, options, where=f"{name} options"))


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
) -> Reranker | Retriever:
    """Build a method from ``spec`` such as ``"none"``, ``"iso"`` or ``"ricci+ce"``.

    Parameters
    ----------
    spec : str
        A method name, or pool-reranker names joined with ``+``.
    options : dict, optional
        ``{stage name: {config field: value}}`` overrides.
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
