"""The multi-hop half of ``georag demo``: dense, BM25, their hybrid and the two entity-graph
retrievers on the bundled multi-hop corpus, and one question explained.

The corpus (:data:`~georag.data.bundled.DEMO_MULTIHOP_DIR`, its README says how it is
built) asks 2WikiMultihopQA-style questions ("Where was the director of X born?") whose
two gold passages are linked only through a title: the first names the second's title,
the second holds the answer and shares little wording with the question beyond what many
near-miss passages share too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from georag.batch import QueryBatch
from georag.data.bundled import DEMO_MULTIHOP_DIR
from georag.data.datasets import load_dataset
from georag.eval.explain import Explanation, explain
from georag.eval.explain_draw import draw_png, drawing
from georag.eval.runner import EvalConfig, eval_first_stage, run_eval
from georag.rerank.registry import make_reranker
from georag.resources import default_cache_dir
from georag.retrieval.candidates import stage_corpus
from georag.retrieval.encoder import TextEncoder

__all__ = ["EXPLAINED", "MULTIHOP_METHODS", "MultihopDemo", "fitted_retriever", "run_multihop"]

MULTIHOP_METHODS = ("dense", "bm25", "hybrid", "hipporag2", "iso_entity")
EXPLAINED = ("q13", "hipporag2")  # the question and method the demo explains


@dataclass(frozen=True)
class MultihopDemo:
    """The rows of the multi-hop table, the explained question and its picture."""

    rows: list[dict]
    explanation: Explanation
    picture: Path


def fitted_retriever(dataset, method: str, encoder: TextEncoder, options: dict | None = None):
    """``make_reranker(method, options)`` fitted on the corpus of ``dataset`` (a
    :class:`~georag.data.beir.BeirDataset`), its embeddings those of ``encoder``."""
    stage = eval_first_stage(EvalConfig(dataset=dataset.name), dataset, encoder)
    return make_reranker(method, options).fit(
        stage_corpus(dataset, stage, cache_dir=default_cache_dir())
    )


def query_batch(dataset, query_id: str, encoder: TextEncoder | None) -> QueryBatch | None:
    """The query ``query_id`` of ``dataset``, embedded by ``encoder`` (None: only checked)."""
    if query_id not in dataset.queries:
        some = ", ".join(list(dataset.queries)[:5])
        raise ValueError(f"--query: no query {query_id!r} in {dataset.name} (ids: {some}, ...)")
    text = dataset.queries[query_id]
    if encoder is None:
        return None
    return QueryBatch([query_id], [text], encoder.encode([text]))


def run_multihop(
    out: str | os.PathLike, *, encoder_backend: str = "torch", latency_samples: int = 10
) -> MultihopDemo:
    """Evaluate :data:`MULTIHOP_METHODS` on the bundled multi-hop corpus (at their registry
    defaults) and explain :data:`EXPLAINED`.

    Parameters
    ----------
    out : path
        Folder of the reports (``results.md``, ...) and ``explain.png``.
    encoder_backend : str
        The runtime of the text encoder.
    latency_samples : int
        Queries timed alone per method.

    Returns
    -------
    MultihopDemo
    """
    out = Path(out)
    config = EvalConfig(
        dataset=str(DEMO_MULTIHOP_DIR),
        methods=list(MULTIHOP_METHODS),
        top_m=20,
        out=str(out),
        latency_samples=latency_samples,
        baseline="dense",
        encoder_backend=encoder_backend,
    )
    dataset = load_dataset(config.dataset)
    encoder = TextEncoder(config.model, backend=encoder_backend)
    rows = run_eval(config, encoder=encoder)
    query_id, method = EXPLAINED
    retriever = fitted_retriever(dataset, method, encoder)
    query = query_batch(dataset, query_id, encoder)
    explanation = explain(retriever, query, relevant=set(dataset.qrels[query_id]))
    picture = draw_png(drawing(explanation), out / "explain.png")
    return MultihopDemo(rows, explanation, picture)
