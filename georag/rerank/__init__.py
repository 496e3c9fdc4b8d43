"""Pool rerankers and the method machinery (contract, registry, pipeline, pool helpers).

The corpus-level retrievers live in :mod:`georag.retrievers`; their earlier import paths
under this package (``georag.rerank.iso``, ``georag.rerank.corpus_retriever``, ...) import
the same modules of :mod:`georag.retrievers`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: earlier module name under georag.rerank -> its module now
MOVED = {
    f"georag.rerank.{old}": f"georag.retrievers.{new}"
    for old, new in {
        "corpus_retriever": "base",
        "dense": "dense",
        "gar": "gar",
        "iso": "iso",
        "learned_iso": "learned_iso",
        "phrase_ppr": "phrase_ppr",
        "ppr_global": "ppr_global",
    }.items()
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a name of :data:`MOVED` as the module it moved to (the same module object)."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module) -> None:
        """Nothing to run: the module was imported under its own name."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
