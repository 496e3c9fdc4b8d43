"""Side-by-side evaluation: every method over one shared candidate pool."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from georag.data.beir import BeirDataset
from georag.data.datasets import load_dataset
from georag.eval.corpus_methods import CORPUS_METHODS, run_corpus_method
from georag.eval.metrics import evaluate
from georag.eval.timing import median_single_ms, timed
from georag.eval.trec import write_run
from georag.rerank.base import CandidateBatch, Reranker, RerankResult
from georag.rerank.registry import make_reranker
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder

__all__ = ["EvalConfig", "run_eval", "evaluate_methods", "METRICS"]

log = logging.getLogger(__name__)
METRICS = ("ndcg@10", "recall@2", "recall@5", "recall@10", "recall@100", "mrr@10")


@dataclass
class EvalConfig:
    """One evaluation: a data set, a first stage, and the methods to compare.

    ``method_options`` maps a stage name to overrides of its config dataclass.
    """

    dataset: str
    data_dir: str | None = None
    split: str = "test"
    methods: list[str] = field(default_factory=lambda: ["none"])
    first_stage: str = "dense"
    top_m: int = 100
    model: str = "all-MiniLM-L6-v2"
    index_kind: str = "flat"
    fusion: str = "rrf"
    out: str = "runs/eval"
    cache_dir: str | None = None
    max_queries: int | None = None
    batch_size: int = 256
    latency_samples: int = 50
    method_options: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, values: dict) -> EvalConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config: unknown key(s) {unknown} (known: {sorted(known)})")
        return cls(**values)


def _apply(reranker: Reranker, batch: CandidateBatch, batch_size: int) -> RerankResult:
    parts = [
        reranker(batch.slice(start, start + batch_size))
        for start in range(0, batch.batch_size, batch_size)
    ]
    return RerankResult(
        scores=torch.cat([p.scores for p in parts]), keep=torch.cat([p.keep for p in parts])
    )


def evaluate_methods(
    batch: CandidateBatch,
    qrels: dict[str, dict[str, int]],
    methods: list[str],
    *,
    dataset: str,
    out: Path | None = None,
    batch_size: int = 256,
    latency_samples: int = 50,
    method_options: dict[str, dict] | None = None,
    first_stage_ms: float | None = None,
) -> list[dict]:
    """Run each method over ``batch`` and score it.

    Returns
    -------
    list of dict
        One row per method: quality metrics, ``ms_per_query`` (median, B=1, this stage),
        ``queries_per_s`` (batched), ``kept_mean`` (candidates kept per query).
    """
    rows = []
    for spec in tqdm(methods, desc=f"{dataset}: methods"):
        reranker = make_reranker(spec, method_options)
        result, seconds = timed(lambda stage=reranker: _apply(stage, batch, batch_size))
        ms = median_single_ms(
            lambda i, stage=reranker: stage(batch.slice(i, i + 1)),
            batch.batch_size,
            samples=latency_samples,
        )
        run = result.to_run(batch)
        if out is not None:
            write_run(run, out / f"{dataset}.{spec}.trec", tag=spec)
        rows.append(
            {
                "dataset": dataset,
                "method": spec,
                **evaluate(run, qrels, METRICS),
                "ms_per_query": ms,
                "queries_per_s": batch.batch_size / max(seconds, 1e-12),
                "first_stage_ms_per_query": first_stage_ms,
                "kept_mean": result.keep.sum(1).float().mean().item(),
                "num_queries": batch.batch_size,
            }
        )
    return rows


def _first_stage_ms(stage: FirstStage, dataset: BeirDataset, samples: int) -> float:
    ids = list(dataset.queries)
    return median_single_ms(
        lambda i: stage.retrieve([ids[i]], [dataset.queries[ids[i]]]), len(ids), samples=samples
    )


def run_eval(config: EvalConfig, *, encoder: TextEncoder | None = None) -> list[dict]:
    """Load, retrieve once, rerank with every method, score, and write the reports.

    Writes ``results.json``, ``results.md`` (with the config), ``results.csv`` and one TREC
    run per method into ``config.out``.
    """
    from georag.eval.report import write_reports

    dataset = load_dataset(config.dataset, split=config.split, data_dir=config.data_dir)
    if config.max_queries is not None:
        keep = list(dataset.queries)[: config.max_queries]
        dataset = BeirDataset(
            dataset.name,
            dataset.corpus,
            {q: dataset.queries[q] for q in keep},
            {q: dataset.qrels[q] for q in keep},
        )
    encoder = encoder or TextEncoder(config.model)
    stage = FirstStage(
        dataset,
        FirstStageConfig(
            first_stage=config.first_stage,
            top_m=config.top_m,
            index_kind=config.index_kind,
            fusion=config.fusion,
        ),
        encoder=encoder,
        cache_dir=config.cache_dir,
    )
    log.info("corpus embeddings %s", "loaded from cache" if stage.cache_hit else "computed")
    ids = list(dataset.queries)
    query_embeddings = encoder.encode([dataset.queries[q] for q in ids], desc="queries")
    batch = stage.retrieve(
        ids, [dataset.queries[q] for q in ids], query_embeddings=query_embeddings, with_texts=True
    )
    first_ms = _first_stage_ms(stage, dataset, min(config.latency_samples, 20))
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = [m for m in config.methods if m in CORPUS_METHODS]
    rerankers = [m for m in config.methods if m not in CORPUS_METHODS]
    rows = evaluate_methods(
        batch,
        dataset.qrels,
        rerankers,
        dataset=dataset.name,
        out=out,
        batch_size=config.batch_size,
        latency_samples=config.latency_samples,
        method_options=config.method_options,
        first_stage_ms=first_ms,
    )
    for name in corpus:
        run, qps, ms = run_corpus_method(
            name,
            dataset,
            stage,
            query_embeddings,
            top_k=config.top_m,
            latency_samples=config.latency_samples,
        )
        write_run(run, out / f"{dataset.name}.{name}.trec", tag=name)
        rows.append(
            {
                "dataset": dataset.name,
                "method": name,
                **evaluate(run, dataset.qrels, METRICS),
                "ms_per_query": ms,
                "queries_per_s": qps,
                "first_stage_ms_per_query": None,
                "kept_mean": float(config.top_m),
                "num_queries": len(ids),
            }
        )
    for row in rows:
        row.update(
            first_stage=config.first_stage,
            top_m=config.top_m,
            model=config.model,
            cache_hit=stage.cache_hit,
        )
    write_reports(rows, out, config=asdict(config))
    return rows
