"""Pool rerankers and the method machinery (contract, registry, pipeline, pool helpers).

The machinery stands at this package's top: :mod:`~georag.rerank.base` (the contract),
:mod:`~georag.rerank.registry`, :mod:`~georag.rerank.pipeline`, :mod:`~georag.rerank.pool`,
:mod:`~georag.rerank.precision`, :mod:`~georag.rerank.small_pool` and
:mod:`~georag.rerank.learned` (the base of every learnable reranker). The methods sit in one
folder per kind:

* :mod:`georag.rerank.geometric`: the geometric methods and their learnable twins
  (``diffusion``, ``maniscope``, ``ricci_filtration``, ``hyte``);
* :mod:`georag.rerank.baselines`: the non-geometric second stages (``adapter``,
  ``learned_map``, ``doc_prior``, ``rocchio``, ``ltr``);
* :mod:`georag.rerank.heads`: residual geometric heads and the features they weigh
  (``residual_heads``, ``geo_features``);
* :mod:`georag.rerank.text`: text second stages (``bi_encoder``, ``cross_encoder``).

Earlier import paths keep working and import the same module objects (:data:`MOVED`): a
method's flat path under this package (``georag.rerank.maniscope`` is
:mod:`georag.rerank.geometric.maniscope`) and the corpus-level retrievers' paths
(``georag.rerank.iso``, ``georag.rerank.corpus_retriever``, ...), which are modules of
:mod:`georag.retrievers`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: earlier module name under georag.rerank -> its module now
MOVED = {
    f"georag.rerank.{old}": f"georag.{new}"
    for old, new in {
        "corpus_retriever": "retrievers.base",
        "dense": "retrievers.dense",
        "gar": "retrievers.gar",
        "iso": "retrievers.iso",
        "learned_iso": "retrievers.learned_iso",
        "phrase_ppr": "retrievers.phrase_ppr",
        "ppr_global": "retrievers.ppr_global",
        "diffusion": "rerank.geometric.diffusion",
        "hyte": "rerank.geometric.hyte",
        "maniscope": "rerank.geometric.maniscope",
        "ricci_filtration": "rerank.geometric.ricci_filtration",
        "adapter": "rerank.baselines.adapter",
        "doc_prior": "rerank.baselines.doc_prior",
        "learned_map": "rerank.baselines.learned_map",
        "ltr": "rerank.baselines.ltr",
        "rocchio": "rerank.baselines.rocchio",
        "geo_features": "rerank.heads.geo_features",
        "residual_heads": "rerank.heads.residual_heads",
        "bi_encoder": "rerank.text.bi_encoder",
        "cross_encoder": "rerank.text.cross_encoder",
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
