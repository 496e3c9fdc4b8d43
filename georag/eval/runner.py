"""Side-by-side evaluation: every method over one shared candidate pool."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from georag.batch import CandidateBatch, Corpus, QueryBatch, RerankResult, scores_to_run
from georag.config import config_from_mapping, read_yaml
from georag.data.beir import BeirDataset
from georag.data.datasets import load_dataset
from georag.eval.metrics import per_query
from georag.eval.stats import annotate
from georag.eval.trec import write_run
from georag.perf.timing import median_single_ms, timed
from georag.rerank.base import PoolExpander, PoolReranker
from georag.rerank.registry import config_class, is_retriever, make_reranker
from georag.resources import DEFAULT_MODEL, default_cache_dir
from georag.retrieval.backends import check_backend, with_backend
from georag.retrieval.candidates import FirstStage, FirstStageConfig, stage_corpus
from georag.retrieval.encoder import TextEncoder

__all__ = ["EvalConfig", "run_eval", "evaluate_methods", "METRICS"]

log = logging.getLogger(__name__)
METRICS = ("ndcg@10", "recall@2", "recall@5", "recall@10", "recall@100", "mrr@10")


@dataclass
class EvalConfig:
    """One evaluation: a data set, a first stage, and the methods to compare.

    ``method_configs`` maps a method name to a YAML file of its config dataclass (e.g.
    ``configs/rerank/ricci_filtration.yaml``); ``method_options`` maps a method name to
    overrides of its config fields, applied over the YAML file.
    """

    dataset: str
    data_dir: str | None = None
    split: str = "test"
    methods: list[str] = field(default_factory=lambda: ["none"])
    first_stage: str = "dense"
    top_m: int = 100
    model: str = DEFAULT_MODEL
    index_kind: str = "flat"
    fusion: str = "rrf"
    out: str = "runs/eval"
    cache_dir: str | None = None
    max_queries: int | None = None
    batch_size: int = 256
    latency_samples: int = 50
    method_configs: dict[str, str] = field(default_factory=dict)
    method_options: dict[str, dict] = field(default_factory=dict)
    baseline: str | None = "none"
    encoder_backend: str = "torch"

    def __post_init__(self) -> None:
        check_backend(self.encoder_backend)
        if self.baseline not in (None, "none") and self.baseline not in self.methods:
            raise ValueError(f"baseline: {self.baseline!r} is not among the methods {self.methods}")

    @classmethod
    def from_dict(cls, values: dict) -> EvalConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config: unknown key(s) {unknown} (known: {sorted(known)})")
        return cls(**values)

    def resolved_options(self) -> dict[str, object]:
        """``{method: config}``: each method's config built from its YAML file, then its
        options over it.

        Every value is checked against the method's config dataclass here, once, before any
        work; the methods are built from these configs as they are.
        """
        options: dict[str, object] = {}
        given = with_backend("+".join(self.methods), self.method_options, self.encoder_backend)
        for name in sorted(set(self.method_configs) | set(given)):
            config_cls = config_class(name)
            if config_cls is None:
                raise ValueError(f"method_options: {name!r} takes no options")
            values = {}
            if name in self.method_configs:
                values = read_yaml(self.method_configs[name], argument=f"method_configs[{name}]")
            values.update(given.get(name, {}))
            options[name] = config_from_mapping(config_cls, values, where=f"{name} options")
        return options


def _progress(method: object, total: int, batch_size: int) -> tqdm:
    """A per-method bar over queries (shown when the method runs in more than one batch)."""
    return tqdm(
        total=total,
        desc=f"  {getattr(method, 'name', 'method')}",
        unit="query",
        leave=False,
        disable=total <= batch_size,
    )


def _apply(reranker: PoolReranker, batch: CandidateBatch, batch_size: int) -> RerankResult:
    parts = []
    with _progress(reranker, batch.batch_size, batch_size) as bar:
        for start in range(0, batch.batch_size, batch_size):
            parts.append(reranker(batch.slice(start, start + batch_size)))
            bar.update(parts[-1].scores.shape[0])
    return RerankResult(
        scores=torch.cat([p.scores for p in parts]), keep=torch.cat([p.keep for p in parts])
    )


def score_run(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Means and per-query values ``{metric: {query_id: value}}`` of :data:`METRICS`."""
    values = per_query(run, qrels, METRICS)
    return {m: sum(v.values()) / len(v) for m, v in values.items()}, values


def evaluate_methods(
    batch: CandidateBatch,
    qrels: dict[str, dict[str, int]],
    methods: list[str],
    *,
    dataset: str,
    out: Path | None = None,
    batch_size: int = 256,
    latency_samples: int = 50,
    method_options: dict[str, dict | object] | None = None,
    first_stage_ms: float | None = None,
    corpus: Corpus | None = None,
    queries: QueryBatch | None = None,
    per_query_out: dict[str, dict] | None = None,
) -> list[dict]:
    """Run each method and score it: pool rerankers over ``batch``, corpus-level retrievers
    over ``corpus`` (fitted once each) for ``queries``.

    ``per_query_out``, when given, receives ``{method: {metric or "kept": {query_id:
    value}}}``: each query's metrics and its kept count.

    Returns
    -------
    list of dict
        One row per method: quality metrics, ``ms_per_query`` (median, B=1, this stage),
        ``queries_per_s`` (batched, after one untimed query), ``kept_mean`` (candidates kept
        per query).
    """
    rows = []
    for spec in tqdm(methods, desc=f"{dataset}: methods"):
        method = make_reranker(spec, method_options)
        if is_retriever(method):
            if corpus is None or queries is None:
                raise ValueError(f"methods: {spec!r} ranks a corpus; pass corpus and queries")
            method.fit(corpus)
            top_k = batch.num_candidates

            if isinstance(method, PoolExpander):  # it starts from the shared pool

                def run_all(m=method):
                    return _apply(m.expand, batch, batch_size)  # a result over the corpus rows

                def run_one(i, m=method):
                    return m.expand(batch.slice(i, i + 1))

            else:

                def run_all(m=method, k=top_k):
                    return _apply_retriever(m, queries, k, batch_size)

                def run_one(i, m=method, k=top_k):
                    return m.retrieve(queries.slice(i, i + 1), top_k=k)

            def to_run(result, m=method):
                return scores_to_run(result.scores, result.keep, queries.ids, m.row_ids)

            stage_ms = None
        else:

            def run_all(m=method):
                return _apply(m, batch, batch_size)

            def run_one(i, m=method):
                return m(batch.slice(i, i + 1))

            def to_run(result):
                return result.to_run(batch)

            stage_ms = first_stage_ms
        run_one(0)  # untimed: one-time costs (a JIT load, lazy imports) stay out
        result, seconds = timed(run_all)
        run = to_run(result)
        ms = median_single_ms(run_one, batch.batch_size, samples=latency_samples)
        if out is not None:
            write_run(run, out / f"{dataset}.{spec}.trec", tag=spec)
        means, values = score_run(run, qrels)
        if per_query_out is not None:
            kept = dict(zip(batch.query_ids, result.keep.sum(1).tolist()))
            per_query_out[spec] = {**values, "kept": kept}
        rows.append(
            {
                "dataset": dataset,
                "method": spec,
                **means,
                "ms_per_query": ms,
                "queries_per_s": batch.batch_size / max(seconds, 1e-12),
                "first_stage_ms_per_query": stage_ms,
                "kept_mean": result.keep.sum(1).float().mean().item(),
                "num_queries": batch.batch_size,
            }
        )
    return rows


def _apply_retriever(retriever, queries: QueryBatch, top_k: int, batch_size: int) -> RerankResult:
    parts = []
    with _progress(retriever, len(queries.ids), batch_size) as bar:
        for start in range(0, len(queries.ids), batch_size):
            parts.append(retriever.retrieve(queries.slice(start, start + batch_size), top_k=top_k))
            bar.update(parts[-1].scores.shape[0])
    return RerankResult(
        scores=torch.cat([p.scores for p in parts]), keep=torch.cat([p.keep for p in parts])
    )


def _corpus(dataset: BeirDataset, stage: FirstStage) -> Corpus:
    """The corpus rows of ``stage`` for the corpus-level retrievers (whole passages)."""
    if stage.config.chunk_window is not None:
        raise ValueError("methods: corpus-level retrievers need whole passages, not chunks")
    return stage_corpus(dataset, stage, cache_dir=default_cache_dir())


def eval_dataset(config) -> BeirDataset:
    """The data set of ``config`` (an :class:`EvalConfig` or a sweep config), cut to its
    first ``max_queries`` queries when set."""
    dataset = load_dataset(config.dataset, split=config.split, data_dir=config.data_dir)
    if config.max_queries is None:
        return dataset
    keep = list(dataset.queries)[: config.max_queries]
    return BeirDataset(
        dataset.name,
        dataset.corpus,
        {q: dataset.queries[q] for q in keep},
        {q: dataset.qrels[q] for q in keep},
        {q: dataset.answers[q] for q in keep if q in dataset.answers},
    )


def eval_first_stage(
    config: EvalConfig, dataset: BeirDataset, encoder: TextEncoder | None = None
) -> FirstStage:
    """The first stage of ``config`` over ``dataset``: its kind, pool size, index and fusion,
    encoding with ``encoder`` (default: ``config.model``)."""
    return FirstStage(
        dataset,
        FirstStageConfig(
            first_stage=config.first_stage,
            top_m=config.top_m,
            index_kind=config.index_kind,
            fusion=config.fusion,
        ),
        encoder=encoder or TextEncoder(config.model, backend=config.encoder_backend),
        cache_dir=config.cache_dir,
    )


def run_eval(config: EvalConfig, *, encoder: TextEncoder | None = None) -> list[dict]:
    """Load, retrieve once, rerank with every method, score, and write the reports.

    Writes ``results.json``, ``results.md`` (with the config), ``results.csv``,
    ``results.tex``, ``per_query.json`` (each method's per-query metrics and kept counts)
    and one TREC run per method into ``config.out``.
    """
    from georag.eval.report import write_reports

    dataset = eval_dataset(config)
    stage = eval_first_stage(config, dataset, encoder)
    encoder = stage.encoder
    log.info("corpus embeddings %s", "loaded from cache" if stage.cache_hit else "computed")
    ids = list(dataset.queries)
    query_embeddings = encoder.encode([dataset.queries[q] for q in ids], desc="queries")
    # the first stage runs once; its time per query is that of this batched run
    batch, seconds = timed(
        lambda: stage.retrieve(
            ids,
            [dataset.queries[q] for q in ids],
            query_embeddings=query_embeddings,
            with_texts=True,
        )
    )
    first_ms = 1000.0 * seconds / max(len(ids), 1)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    options = config.resolved_options()
    corpus = None
    if any(is_retriever(m) for m in config.methods):
        corpus = _corpus(dataset, stage)
    values: dict[str, dict] = {}
    rows = evaluate_methods(
        batch,
        dataset.qrels,
        config.methods,
        dataset=dataset.name,
        out=out,
        batch_size=config.batch_size,
        latency_samples=config.latency_samples,
        method_options=options,
        first_stage_ms=first_ms,
        corpus=corpus,
        queries=QueryBatch(ids, [dataset.queries[q] for q in ids], query_embeddings),
        per_query_out=values,
    )
    for row in rows:
        row.update(
            first_stage=config.first_stage,
            top_m=config.top_m,
            model=config.model,
            cache_hit=stage.cache_hit,
        )
    baseline = config.baseline if config.baseline in config.methods else None
    annotate(rows, values, METRICS, baseline=baseline)
    write_reports(rows, out, config=asdict(config), per_query=values)
    return rows
