"""The rows of the learned-geometry experiment: one role of one method over every fold.

Roles (:data:`~georag.experiments.selection.ROLES`): ``paper`` (the fixed method at its
paper's defaults), ``tuned`` (its knobs searched by TPE on the training queries,
:func:`train.tune.tune`), ``learned`` (trained by gradient, :func:`~georag.experiments.
training.fit`), ``learned+map`` (the same plus a learned linear map of the embeddings) and
``map`` (the map alone, ``learned_map``: the ablation that tells the gain of the geometry
from the gain of adapting the embeddings). Pool rerankers rank each report query's pool; a
corpus-level retriever ranks the top :data:`CORPUS_TOP_K` of the whole corpus.

:func:`run_dataset` runs every role of a data set, side by side in forked processes with
one torch thread each or one after another; every role seeds itself, so the rows are the
same either way.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from georag.batch import RerankResult, scores_to_run
from georag.experiments.folds import Fold, subset_training
from georag.experiments.selection import ROLES, LearnedRun
from georag.experiments.training import fit
from georag.rerank.base import IdentityReranker
from georag.rerank.registry import is_retriever, make_method, make_reranker
from train.corpus_data import QuerySet
from train.pools import Pool
from train.tune import failed_trials, tune

__all__ = [
    "CORPUS_TOP_K",
    "Run",
    "rerank",
    "retrieve",
    "row_name",
    "role_tasks",
    "needs_corpus",
    "run_role",
    "run_dataset",
]

CORPUS_TOP_K = 100  # corpus-level retrievers rank this many passages (the pool's depth)

Run = dict[str, dict[str, float]]  # a TREC run, {query id: {doc id: score}}


def rerank(reranker, pool: Pool, batch_size: int = 256) -> Run:
    """The TREC run of ``reranker`` over every query of ``pool``.

    Parameters
    ----------
    reranker : PoolReranker
        Called on slices of ``pool.batch`` (no gradient).
    pool : Pool
        B queries of M candidates.
    batch_size : int
        Queries per call.

    Returns
    -------
    dict
        ``{query id: {doc id: score}}`` of the kept candidates (:meth:`RerankResult.to_run`).
    """
    parts = []
    with torch.no_grad():
        for start in range(0, pool.batch.batch_size, batch_size):
            parts.append(reranker(pool.batch.slice(start, start + batch_size)))
    result = RerankResult(torch.cat([p.scores for p in parts]), torch.cat([p.keep for p in parts]))
    return result.to_run(pool.batch)


def retrieve(retriever, queries: QuerySet) -> Run:
    """The TREC run of a fitted corpus-level ``retriever`` over every query of ``queries``.

    Parameters
    ----------
    retriever : Retriever
        Fitted on ``queries.corpus`` (N passages).
    queries : QuerySet
        B queries.

    Returns
    -------
    dict
        ``{query id: {doc id: score}}``, the top :data:`CORPUS_TOP_K` corpus rows of each.
    """
    with torch.no_grad():
        result = retriever.retrieve(queries.batch, top_k=CORPUS_TOP_K)
    return scores_to_run(result.scores, result.keep, queries.batch.ids, retriever.row_ids)


def row_name(role: str, method: str | None) -> str:
    """The table row of ``role`` of ``method`` (``map alone`` has no method):
    ``"<fixed method> <role>"``, e.g. ``ricci learned+map``."""
    return "map alone" if role == "map" else f"{make_method(method).fixed_method} {role}"


def role_tasks(methods: tuple[str, ...], roles: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """``(role, method)`` of every row to compute besides dense, in table order (the map
    alone last, once)."""
    tasks = [(r, m) for m in methods for r in ROLES if r != "map" and r in roles]
    return tasks + ([("map", None)] if "map" in roles else [])


def needs_corpus(methods: tuple[str, ...]) -> bool:
    """Whether some method is a corpus-level retriever (its folds need the query sets)."""
    return any(is_retriever(m) for m in methods)


def run_role(role: str, method: str | None, dataset: str, folds: list[Fold], run: LearnedRun):
    """One row over every fold, each fold's model fitted on its training queries only.

    Parameters
    ----------
    role : str
        One of :data:`~georag.experiments.selection.ROLES`.
    method : str or None
        The learnable method (``None`` for ``map``).
    dataset : str
        Names the training folders, ``<run.work>/<dataset>/<fold label>/``.
    folds : list of Fold
    run : LearnedRun

    Returns
    -------
    dict
        ``run`` (the TREC run over every report query), ``train_s`` (training or search
        seconds, summed over folds), ``notes`` (one dict per fold for the tuned and trained
        roles, else empty), ``wall_s`` and ``cpu_s`` of the whole role (this process's CPU
        time: honest when the process is paused or shares a core).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    out: Run = {}
    train_s, notes = 0.0, []
    retriever = method is not None and is_retriever(method)
    fixed_options = run.method_options.get(method, {})
    for train, report, train_q, report_q, label in folds:
        folder = Path(run.work) / dataset / label
        fit_on = train_q if retriever else train

        def apply(m, pool=report, queries=report_q):
            if retriever:
                return retrieve(m.fit(queries.corpus), queries)
            return rerank(m, pool)

        note = None
        if role == "paper":
            part = apply(make_reranker(make_method(method).fixed_method))
        elif role == "tuned":
            started = time.perf_counter()
            best, study = tune(
                method, fit_on, trials=run.trials, seed=run.seed, options=fixed_options
            )
            spent = time.perf_counter() - started
            part = apply(make_reranker(method, {method: {**fixed_options, **best}}))
            train_s += spent
            note = {
                "knobs": best,
                "train_ndcg": study.best_value,
                "trials": len(study.trials),
                "failed_trials": failed_trials(study),
            }
        elif role == "map":
            reranker, spent, note = fit("learned_map", {}, train, run.training, folder / "map")
            part, train_s = rerank(reranker, report), train_s + spent
        else:
            options = {**fixed_options, **({"embedding_map": True} if role != "learned" else {})}
            reranker, spent, note = fit(
                method, options, fit_on, run.training, folder / f"{method}{role}"
            )
            part, train_s = apply(reranker), train_s + spent
        out.update(part)
        if note is not None:
            notes.append(note)
            print(f"  {row_name(role, method)} {label}: {note} {spent:.1f} s", flush=True)
    return {
        "run": out,
        "train_s": train_s,
        "notes": notes,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


_FOLDS: dict[str, list[Fold]] = {}  # the data set being run, inherited by forked workers


def _pinned(threads: int) -> None:
    torch.set_num_threads(threads)


def _run_task(task: tuple[str, str | None], run: LearnedRun) -> dict:
    ((dataset, folds),) = _FOLDS.items()
    return run_role(*task, dataset, folds, run)


def run_dataset(dataset: str, folds: list[Fold], run: LearnedRun) -> dict:
    """Every row of ``dataset``: dense and the roles of each method.

    The folds are cut to ``run.train_queries`` training queries first
    (:func:`~georag.experiments.folds.subset_training`). The roles run in ``run.jobs``
    forked processes (one torch thread each, the longest roles submitted first) or, with
    1, one after another in this process.

    Parameters
    ----------
    dataset : str
    folds : list of Fold
        Their training and report queries must be disjoint (checked).
    run : LearnedRun

    Returns
    -------
    dict
        ``runs`` (``{row: TREC run}``, dense first, then table order), ``qrels`` (of every
        report query), ``folds`` (``{label: report query ids}``), ``training``
        (``{label: [queries kept, queries there were]}``), and per row ``seconds``
        (training), ``notes``, ``wall_s`` and ``cpu_s``.
    """
    folds, training = subset_training(folds, run.train_queries, run.seed)
    runs: dict[str, Run] = {"dense": {}}
    qrels: dict[str, dict[str, int]] = {}
    fold_ids: dict[str, list[str]] = {}
    for train, report, _, _, label in folds:
        print(
            f"{dataset} {label}: {train.batch.batch_size} training queries, "
            f"{report.batch.batch_size} report queries",
            flush=True,
        )
        if set(train.batch.query_ids) & set(report.batch.query_ids):
            raise ValueError(f"folds: {label} trains on some of its report queries")
        qrels.update(report.qrels)
        fold_ids[label] = list(report.batch.query_ids)
        runs["dense"].update(rerank(IdentityReranker(), report))
    tasks = role_tasks(run.methods, run.roles)
    _FOLDS[dataset] = folds
    try:
        if run.jobs == 1:
            done = [_run_task(task, run) for task in tasks]
        else:
            heavy_first = sorted(tasks, key=lambda t: t[0] in ("paper", "map"))
            with ProcessPoolExecutor(
                max_workers=min(run.jobs, len(tasks)),
                mp_context=multiprocessing.get_context("fork"),
                initializer=_pinned,
                initargs=(1,),
            ) as pool:
                futures = {t: pool.submit(_run_task, t, run) for t in heavy_first}
                done = [futures[t].result() for t in tasks]
    finally:
        _FOLDS.clear()
    rows = {"seconds": {}, "notes": {}, "wall_s": {}, "cpu_s": {}}
    for task, part in zip(tasks, done, strict=True):
        name = row_name(*task)
        runs[name] = part["run"]
        rows["seconds"][name] = part["train_s"]
        rows["wall_s"][name], rows["cpu_s"][name] = part["wall_s"], part["cpu_s"]
        if part["notes"]:
            rows["notes"][name] = part["notes"]
    return {"runs": runs, "qrels": qrels, "folds": fold_ids, "training": training, **rows}
