"""georag: batched geometric reranking for retrieval-augmented generation.

The public API is re-exported here (loaded on first use, so ``import georag`` stays light
and changes no global state). Packages, bottom to top: ``georag.geometry`` (pure tensor
math), ``georag.models``, ``georag.data`` and ``georag.retrieval`` (loaders, encoders,
indexes, first stage), ``georag.rerank`` (one registry of every method), ``georag.eval``
(metrics, the side-by-side runner, reports); the ``georag`` command is ``georag.cli``
(``python -m georag``).

Examples
--------
>>> import georag
>>> data = georag.load_beir("scifact", data_dir="../shared/data")  # doctest: +SKIP
>>> batch = georag.build_candidate_pool(data, top_m=100)              # doctest: +SKIP
>>> result = georag.make_reranker("maniscope")(batch)                 # doctest: +SKIP
>>> georag.evaluate(result.to_run(batch), data.qrels, ["ndcg@10"])    # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS = {
    "CandidateBatch": "georag.batch",
    "Corpus": "georag.batch",
    "QueryBatch": "georag.batch",
    "RerankResult": "georag.batch",
    "Retriever": "georag.retrievers.retriever",
    "RetrievedDoc": "georag.retrievers.retriever",
    "build_index": "georag.retrievers.index",
    "scores_to_run": "georag.batch",
    "available_methods": "georag.rerank.registry",
    "make_reranker": "georag.rerank.registry",
    "config_class": "georag.rerank.registry",
    "load_config": "georag.config",
    "load_beir": "georag.data.beir",
    "load_dataset": "georag.data.datasets",
    "FirstStage": "georag.retrieval.candidates",
    "FirstStageConfig": "georag.retrieval.candidates",
    "build_candidate_pool": "georag.retrieval.candidates",
    "TextEncoder": "georag.retrieval.encoder",
    "evaluate": "georag.eval.metrics",
    "EvalConfig": "georag.eval.runner",
    "run_eval": "georag.eval.runner",
    "apply_thread_policy": "georag.perf.threads",
    "Reranker": "georag.api",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'georag' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
