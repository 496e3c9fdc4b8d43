"""Learned geometry against the dense first stage, paper defaults and a tuned baseline.

For each data set, on the dense all-MiniLM-L6-v2 top-100 pool of every report query:

* ``dense``: the first-stage order;
* ``<method> paper``: the fixed reranker at its paper's defaults;
* ``<method> tuned``: its knobs searched by optuna TPE (``--trials``) on the training
  queries (:mod:`train.tune`);
* ``<method> learned``: its knobs trained by gradient through the geometry
  (:mod:`train.learned_module`, listwise loss, early stopping on held-out training queries);
* ``<method> learned+map``: the same plus a learned linear map of the embeddings;
* ``map alone``: the learned embedding map with no geometry (``learned_map``), the
  ablation that tells the gain of the geometry from the gain of adapting the embeddings.

A corpus-level learnable retriever (``learned_iso``) gets the same four rows (``iso
paper`` is :class:`~georag.rerank.iso.IsoRag` at its defaults), ranked over the whole
corpus (:mod:`train.corpus_data`) instead of the pool, on the same folds.

Protocols: scifact trains on ``qrels/train.tsv`` (a seeded 20% held out for validation)
and reports on the test split; cranfield and cisi (one judged split) use seeded 5-fold
cross-validation over queries: each fold is reported by models trained and tuned on the
other four (with their own 20% validation part), and the table pools the report folds.
No test or report query chooses anything.

Statistics (per section, :mod:`georag.eval.stats`): mean over queries with a 95% percentile
bootstrap interval, and a paired two-sided randomization test of the first metric
(NDCG@10; Recall@5 on multi-hop sets) against dense, Holm-corrected over the methods; and
the same test of each ``learned+map`` row against ``map alone`` (the geometry's own gain),
Holm-corrected over those rows.

Usage::

    GEORAG_DATA=../shared/data python scripts/quality/quality_learned.py \\
        --datasets scifact cranfield cisi --out docs/learned_results.md
    python scripts/quality/quality_learned.py --datasets cisi --methods learned_ricci --jobs 3

Rows and cost: ``--roles`` computes some of the rows (always with dense), ``--jobs J``
runs the roles of a data set in J forked processes with one torch thread each (the rows
are those of one process: every role seeds itself), and ``--train-queries K`` trains and
tunes every row on a seeded K of each fold's training queries (the heading and the
protocol line say so). Each row reports the wall and CPU seconds of its role; the CPU
seconds are the cost figure on a shared machine. A TPE trial that raises fails alone; the
section counts the failed trials.

Multi-hop sets (``hotpotqa_dev500``, ``musique_qa100``: supporting paragraphs as relevance
labels, 5-fold CV) report Recall@5 and Recall@2 first. A run makes one section per data
set and ``--methods`` selection (and ``--method-option`` fixed fields), kept in ``--work``
(``<dataset>__<methods>.json``, with the folds' query ids); rendering replaces the
sections it has and keeps every other section already in ``--out``, so runs of other
methods add to the same file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.loggers import CSVLogger

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.batch import RerankResult, scores_to_run
from georag.data.datasets import MULTIHOP_FILES
from georag.eval.metrics import per_query
from georag.eval.stats import bootstrap_ci, holm, paired_permutation_p
from georag.perf.timing import timed
from georag.rerank.base import IdentityReranker
from georag.rerank.registry import is_retriever, make_method, make_reranker, parse_option
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder
from train.corpus_data import CorpusQueryData, QuerySet, load_query_set
from train.learned_data import LearnedPoolData, split_rows
from train.learned_module import LearnedRerankerModule
from train.pools import Pool, load_pool
from train.tune import TRIAL_ERRORS, failed_trials, tune

BEIR_METRICS = ("ndcg@10", "recall@10", "mrr@10")
MULTIHOP_METRICS = ("recall@5", "recall@2", "ndcg@10", "mrr@10")
ORDER = ("scifact", "cranfield", "cisi", "hotpotqa_dev500", "musique_qa100")
GEOMETRIC = ("learned_diffusion", "learned_maniscope", "learned_ricci")
ROLES = ("paper", "tuned", "learned", "learned+map", "map")  # the rows besides dense
SCIFACT = ("train", "test")  # its training and report splits
CORPUS_TOP_K = 100  # corpus-level retrievers rank this many passages (the pool's depth)


def rerank(reranker, pool: Pool, batch_size: int = 256) -> dict[str, dict[str, float]]:
    """The TREC run of ``reranker`` over every query of ``pool``."""
    parts = []
    with torch.no_grad():
        for start in range(0, pool.batch.batch_size, batch_size):
            parts.append(reranker(pool.batch.slice(start, start + batch_size)))
    result = RerankResult(torch.cat([p.scores for p in parts]), torch.cat([p.keep for p in parts]))
    return result.to_run(pool.batch)


def retrieve(retriever, queries: QuerySet) -> dict[str, dict[str, float]]:
    """The TREC run of a fitted corpus-level ``retriever`` over every query of ``queries``."""
    with torch.no_grad():
        result = retriever.retrieve(queries.batch, top_k=CORPUS_TOP_K)
    return scores_to_run(result.scores, result.keep, queries.batch.ids, retriever.row_ids)


def fit(method: str, options: dict, train: Pool | QuerySet, args, folder: Path):
    """Train ``method`` on ``train`` (its rows: training + validation; a pool, or a query
    set for a corpus-level retriever); returns ``(reranker, seconds, summary)``."""
    L.seed_everything(args.seed, verbose=False)
    common = {
        "dataset": "given",
        "protocol": "holdout",
        "val_fraction": args.val_fraction,
        "seed": args.seed,
        "batch_size": args.batch_size,
    }
    if isinstance(train, QuerySet):
        data = CorpusQueryData(**common).use_queries(train)
    else:
        data = LearnedPoolData(**common).use_pool(train)
    module = LearnedRerankerModule(method, options, loss=args.loss, lr=args.lr, map_lr=args.map_lr)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        devices=1,
        default_root_dir=str(folder),
        logger=CSVLogger(str(folder), name="logs"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[EarlyStopping(monitor="val/ndcg@10", mode="max", patience=args.patience)],
    )
    started, error = time.perf_counter(), None
    try:
        trainer.fit(module, datamodule=data)
    except TRIAL_ERRORS as failure:  # stops training like early stopping, and is reported
        if module._best is None:  # not even the starting knobs were validated
            raise
        error = f"epoch {trainer.current_epoch}: {type(failure).__name__}: {failure}"
        print(f"  training stopped by an error at {error}", flush=True)
        module.reranker.load_state_dict(module._best[1])  # the best validated weights
    reranker = module.reranker.eval()
    summary = {
        "val_init": module.initial_ndcg,
        "val_best": module._best[0],
        "epochs": trainer.current_epoch,
        "knobs": reranker.knobs(),
    }
    if error is not None:
        summary["error"] = error
    spent = module.train_seconds if error is None else time.perf_counter() - started
    return reranker, spent, summary


def training_subset(num_queries: int, keep: int, seed: int) -> list[int]:
    """A seeded ``keep`` of ``num_queries`` training rows (in order; all when ``keep`` is 0
    or not smaller)."""
    if not keep or keep >= num_queries:
        return list(range(num_queries))
    rows = torch.randperm(num_queries, generator=torch.Generator().manual_seed(seed))[:keep]
    return sorted(rows.tolist())


def subset_training(folds: list[tuple], keep: int, seed: int) -> tuple[list[tuple], dict]:
    """The folds with ``keep`` seeded training queries each (:func:`training_subset`), and
    ``{label: [queries kept, queries there were]}``."""
    out, counts = [], {}
    for train, report, train_q, report_q, label in folds:
        rows = training_subset(train.batch.batch_size, keep, seed)
        counts[label] = [len(rows), train.batch.batch_size]
        if len(rows) < train.batch.batch_size:
            train = train.subset(rows)
            train_q = None if train_q is None else train_q.subset(rows)
        out.append((train, report, train_q, report_q, label))
    return out, counts


def folds_of(dataset: str, args, encoder, corpus: bool) -> list[tuple]:
    """``(training pool, report pool, training queries, report queries, label)`` per fold;
    the query sets (``None`` unless ``corpus``) hold the same queries over the corpus."""
    if dataset == "scifact":
        train = load_pool("scifact", split="train", data_dir=args.data_dir, encoder=encoder)
        report = load_pool("scifact", split="test", data_dir=args.data_dir, encoder=encoder)
        sets = (None, None)
        if corpus:
            sets = tuple(
                load_query_set("scifact", split=x, data_dir=args.data_dir, encoder=encoder)
                for x in SCIFACT
            )
        return [(train, report, *sets, "holdout")]
    pool = load_pool(dataset, split="test", data_dir=args.data_dir, encoder=encoder)
    queries = (
        load_query_set(dataset, split="test", data_dir=args.data_dir, encoder=encoder)
        if corpus
        else None
    )
    if queries is not None and queries.batch.ids != pool.batch.query_ids:
        raise ValueError(f"{dataset}: pool and corpus queries differ in order")
    out = []
    for fold in range(args.folds):
        rows = split_rows(
            pool.batch.batch_size,
            protocol="kfold",
            val_fraction=args.val_fraction,
            seed=args.seed,
            folds=args.folds,
            fold=fold,
        )
        fit_rows = rows["train"] + rows["val"]
        out.append(
            (
                pool.subset(fit_rows),
                pool.subset(rows["report"]),
                None if queries is None else queries.subset(fit_rows),
                None if queries is None else queries.subset(rows["report"]),
                f"fold{fold}",
            )
        )
    return out


def row_name(role: str, method: str | None) -> str:
    """The table row of ``role`` (of ``method``; ``map alone`` has none)."""
    return "map alone" if role == "map" else f"{make_method(method).fixed_method} {role}"


def role_tasks(args) -> list[tuple[str, str | None]]:
    """``(role, method)`` of every row to compute besides dense, in table order."""
    tasks = [(r, m) for m in args.methods for r in ROLES if r != "map" and r in args.roles]
    return tasks + ([("map", None)] if "map" in args.roles else [])


def run_role(role: str, method: str | None, dataset: str, folds: list[tuple], args) -> dict:
    """One row over every fold: its run, training seconds, notes, and the role's wall and
    CPU seconds (this process's CPU time: honest when the process is paused or shares a
    core)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run: dict[str, dict] = {}
    train_s, notes = 0.0, []
    retriever = method is not None and is_retriever(method)
    fixed_options = args.method_options.get(method, {})
    for train, report, train_q, report_q, label in folds:
        folder = Path(args.work) / dataset / label
        fit_on = train_q if retriever else train

        def apply(m, pool=report, queries=report_q):
            if retriever:
                return retrieve(m.fit(queries.corpus), queries)
            return rerank(m, pool)

        note = None
        if role == "paper":
            part = apply(make_reranker(make_method(method).fixed_method))
        elif role == "tuned":
            (best, study), spent = timed(
                lambda fit_on=fit_on: tune(
                    method, fit_on, trials=args.trials, seed=args.seed, options=fixed_options
                )
            )
            part = apply(make_reranker(method, {method: {**fixed_options, **best}}))
            train_s += spent
            note = {
                "knobs": best,
                "train_ndcg": study.best_value,
                "trials": len(study.trials),
                "failed_trials": failed_trials(study),
            }
        elif role == "map":
            reranker, spent, note = fit("learned_map", {}, train, args, folder / "map")
            part, train_s = rerank(reranker, report), train_s + spent
        else:
            options = {**fixed_options, **({"embedding_map": True} if role != "learned" else {})}
            reranker, spent, note = fit(method, options, fit_on, args, folder / f"{method}{role}")
            part, train_s = apply(reranker), train_s + spent
        run.update(part)
        if note is not None:
            notes.append(note)
            print(f"  {row_name(role, method)} {label}: {note} {spent:.1f} s", flush=True)
    return {
        "run": run,
        "train_s": train_s,
        "notes": notes,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


_FOLDS: dict[str, list[tuple]] = {}  # the data set being run, inherited by forked workers


def _pinned(threads: int) -> None:
    torch.set_num_threads(threads)


def _run_task(task: tuple[str, str | None], args) -> dict:
    ((dataset, folds),) = _FOLDS.items()
    return run_role(*task, dataset, folds, args)


def run_dataset(dataset: str, args, encoder) -> dict:
    """Every row of ``dataset`` (dense and the ``--roles`` of each method), the roles in
    ``--jobs`` processes (forked, one torch thread each) or, with 1, one after another in
    this process; the rows are the same either way (each role seeds itself)."""
    corpus = any(is_retriever(m) for m in args.methods)
    folds, training = subset_training(
        folds_of(dataset, args, encoder, corpus), args.train_queries, args.seed
    )
    runs: dict[str, dict] = {"dense": {}}
    qrels: dict[str, dict[str, int]] = {}
    fold_ids: dict[str, list[str]] = {}
    for train, report, _, _, label in folds:
        print(
            f"{dataset} {label}: {train.batch.batch_size} training queries, "
            f"{report.batch.batch_size} report queries",
            flush=True,
        )
        assert not set(train.batch.query_ids) & set(report.batch.query_ids)
        qrels.update(report.qrels)
        fold_ids[label] = list(report.batch.query_ids)
        runs["dense"].update(rerank(IdentityReranker(), report))
    tasks = role_tasks(args)
    _FOLDS[dataset] = folds
    try:
        if args.jobs == 1:
            done = [_run_task(task, args) for task in tasks]
        else:
            heavy_first = sorted(tasks, key=lambda t: t[0] in ("paper", "map"))
            with ProcessPoolExecutor(
                max_workers=min(args.jobs, len(tasks)),
                mp_context=multiprocessing.get_context("fork"),
                initializer=_pinned,
                initargs=(1,),
            ) as pool:
                futures = {t: pool.submit(_run_task, t, args) for t in heavy_first}
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


def _span(counts) -> str:
    low, high = min(counts := list(counts)), max(counts)
    return f"{low}" if low == high else f"{low}-{high}"


def training_text(
    training: dict[str, list[int]], notes: dict[str, list], val_fraction: float
) -> str:
    """What the rows were trained and tuned on, and how many TPE trials failed."""
    labels = list(training)
    used = _span(n for n, _ in training.values())
    total = _span(n for _, n in training.values())
    what = f"a seeded {used} of the {total}" if used != total else f"all {used}"
    text = (
        f"; trained and tuned on {what} training queries"
        + (" of each fold" if len(training) > 1 else "")
        + f" (learned rows: a seeded {val_fraction:.0%} of them for validation)"
    )
    for name, folds in notes.items():
        stopped = [f"{label} at {f['error']}" for label, f in zip(labels, folds) if "error" in f]
        if stopped:
            text += (
                f"; {name}: training stopped by an error in {len(stopped)} of {len(folds)} "
                f"folds ({'; '.join(stopped)}), the best validated weights before it are used"
            )
        if folds and "failed_trials" in folds[0]:
            failed = sum(f["failed_trials"] for f in folds)
            trials = sum(f["trials"] for f in folds)
            text += f"; {name}: {failed} of {trials} TPE trials failed"
    return text


def metrics_of(dataset: str) -> tuple[str, ...]:
    """Reported metrics; the first is the one tested against dense."""
    return MULTIHOP_METRICS if dataset in MULTIHOP_FILES else BEIR_METRICS


def statistics(result: dict, metrics: tuple[str, ...], args) -> list[dict]:
    qrels = result["qrels"]
    table = {name: per_query(run, qrels, metrics) for name, run in result["runs"].items()}
    queries = sorted(qrels)
    values = {
        name: {m: np.array([t[m][q] for q in queries]) for m in metrics}
        for name, t in table.items()
    }
    primary = metrics[0]
    dense = values["dense"][primary]
    rows, pvalues = [], []
    resampling = {"resamples": args.resamples, "seed": args.seed}
    for name, per in values.items():
        row = {"method": name, "queries": len(queries), "train_s": result["seconds"].get(name, 0.0)}
        for key in ("wall_s", "cpu_s"):
            if name in result.get(key, {}):
                row[key] = result[key][name]
        for metric in metrics:
            row[metric] = float(per[metric].mean())
            row[f"{metric}_ci"] = bootstrap_ci(per[metric], **resampling)
        if name != "dense":
            row["delta"] = float((per[primary] - dense).mean())
            row["p"] = paired_permutation_p(per[primary], dense, **resampling)
            pvalues.append(row["p"])
        rows.append(row)
    for row, p in zip([r for r in rows if r["method"] != "dense"], holm(pvalues), strict=True):
        row["p_holm"] = p
    # the geometry's own gain: "<m> learned+map" against "map alone", Holm over those rows
    mapped = [r for r in rows if r["method"].endswith("learned+map")]
    if mapped and "map alone" in values:
        alone = values["map alone"][primary]
        raw = []
        for row in mapped:
            x = values[row["method"]][primary]
            raw.append(paired_permutation_p(x, alone, **resampling))
            row["delta_map"] = float((x - alone).mean())
        for row, p in zip(mapped, holm(raw), strict=True):
            row["p_map_holm"] = p
    return rows


def markdown(saved: dict) -> str:
    """One section: the table of one data set and ``--methods`` selection."""
    metrics, rows = saved["metrics"], saved["rows"]
    names = {
        "ndcg@10": "NDCG@10",
        "recall@10": "Recall@10",
        "recall@2": "Recall@2",
        "recall@5": "Recall@5",
        "mrr@10": "MRR@10",
    }
    head = (
        "| method | "
        + " | ".join(f"{names[m]} [95% CI]" for m in metrics)
        + f" | Δ{names[metrics[0]]} vs dense | p (Holm) | Δ vs map alone | p (Holm) "
        "| training s |"
    )
    timed_roles = any("cpu_s" in r for r in rows)
    head += " role wall s / CPU s |" if timed_roles else ""
    head += "\n|" + "---|" * (len(metrics) + 6 + timed_roles) + "\n"
    lines = []
    for r in rows:
        cells = [r["method"]]
        if r["method"] in saved["notes"] and "val_init" in saved["notes"][r["method"]][0]:
            folds = saved["notes"][r["method"]]
            start = np.mean([f["val_init"] for f in folds])
            best = np.mean([f["val_best"] for f in folds])
            cells[0] += f" (val {start:.3f} → {best:.3f})"
        for metric in metrics:
            low, high = r[f"{metric}_ci"]
            cells.append(f"{r[metric]:.4f} [{low:.4f}, {high:.4f}]")
        cells.append(f"{r['delta']:+.4f}" if "delta" in r else "")
        cells.append(f"{r['p_holm']:.4f}" if "p_holm" in r else "")
        cells.append(f"{r['delta_map']:+.4f}" if "delta_map" in r else "")
        cells.append(f"{r['p_map_holm']:.4f}" if "p_map_holm" in r else "")
        cells.append(f"{r['train_s']:.1f}" if r["train_s"] else "")
        if timed_roles:
            cells.append(f"{r['wall_s']:.0f} / {r['cpu_s']:.0f}" if "cpu_s" in r else "")
        lines.append("| " + " | ".join(cells) + " |")
    note = f"{saved['note']}\n\n" if saved.get("note") else ""
    return (
        f"### {saved['title']} ({rows[0]['queries']} report queries)\n\n{note}"
        "Learned rows: validation NDCG@10 on held-out training queries at the start "
        "(paper defaults) → at the exported epoch, mean over folds.\n\n"
        f"`{saved['command']}`; {saved['date']}, load average {saved['load']}; "
        f"{saved['protocol']}\n\n" + head + "\n".join(lines)
    )


def section_key(section: str) -> str:
    """The heading of a section without its query count: ``dataset: methods``."""
    heading = section.split("\n", 1)[0].removeprefix("### ")
    return heading.rsplit(" (", 1)[0]


def dataset_order(key: str) -> int:
    name = key.split(":")[0].strip()
    return ORDER.index(name) if name in ORDER else len(ORDER)


def merge_sections(old: str, new: dict[str, str]) -> list[str]:
    """The sections of the file text ``old`` with those of ``new`` (by key) replaced or
    added, ordered by data set (stable)."""
    kept = ["### " + part for part in old.split("\n### ")[1:]] if old else []
    sections = {section_key(part): part.rstrip() for part in kept}
    sections.update(new)
    return [sections[k] for k in sorted(sections, key=dataset_order)]


def add_training_options(parser) -> None:
    """The options of :func:`fit` and :func:`folds_of` (training, folds, statistics)."""
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--patience", type=int, default=8)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--loss", default="listwise")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--map-lr", type=float, default=1e-3)
    parser.add_argument("--resamples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)


def parse_args(argv: list[str] | None = None):
    """The command line, with ``method_options`` (``{method: {key: value}}``) parsed."""
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(GEOMETRIC),
        help="learnable geometric rerankers (registry names)",
    )
    parser.add_argument(
        "--method-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a fixed config field of a learnable method in the tuned and learned rows "
        "(repeatable; named in the section's heading)",
    )
    parser.add_argument(
        "--roles",
        nargs="+",
        choices=ROLES,
        default=list(ROLES),
        help="the rows to compute besides dense (map: the map alone; named in the heading "
        "unless all)",
    )
    parser.add_argument(
        "--train-queries",
        type=harness.non_negative_int,
        default=0,
        help="train and tune on a seeded subset of this many of each fold's training "
        "queries (0: all; named in the heading)",
    )
    parser.add_argument(
        "--jobs",
        type=harness.positive_int,
        default=1,
        help="run the roles of a data set in this many processes (1 torch thread each); "
        "the rows are the same as with 1",
    )
    parser.add_argument(
        "--note",
        default="",
        help="a paragraph under the section's heading (e.g. how the run was sized, and why)",
    )
    parser.add_argument("--trials", type=int, default=50)
    add_training_options(parser)
    parser.add_argument("--work", default="runs/quality_learned")
    parser.add_argument("--out", default="docs/learned_results.md")
    parser.add_argument(
        "--render", action="store_true", help="only rewrite --out from the sections saved in --work"
    )
    args = parser.parse_args(argv)
    args.method_options = {}
    for text in args.method_option:
        name, _, rest = text.partition(".")
        key, sep, value = rest.partition("=")
        if not (name and key and sep):
            parser.error(f"--method-option: expected NAME.KEY=VALUE, got {text!r}")
        try:
            parsed = parse_option(name, key, value)
        except ValueError as error:
            parser.error(f"--method-option: {error}")
        args.method_options.setdefault(name, {})[key] = parsed
    return args


def selection_of(args) -> tuple[str, str, str]:
    """``(heading suffix, work file stem suffix, command options)`` that tell this run's
    sections from others of the same data set: the fixed method options, the training
    subset and the roles when not all."""
    given = [f"{n}.{k}={v}" for n, o in sorted(args.method_options.items()) for k, v in o.items()]
    extra = given + ([f"{args.train_queries} training queries"] if args.train_queries else [])
    roles = [r for r in ROLES if r in args.roles]
    extra += [] if roles == list(ROLES) else [f"roles {' '.join(roles)}"]
    heading = f": {', '.join(args.methods)}" + (f" [{', '.join(extra)}]" if extra else "")
    stem = "+".join(args.methods) + "".join("__" + g.replace(" ", "-") for g in extra)
    command = (
        f"--methods {' '.join(args.methods)} "
        + "".join(f"--method-option {g} " for g in given)
        + (f"--roles {' '.join(roles)} " if roles != list(ROLES) else "")
        + (f"--train-queries {args.train_queries} " if args.train_queries else "")
        + f"--trials {args.trials} --epochs {args.epochs} --patience {args.patience} "
        f"--lr {args.lr} --seed {args.seed} --jobs {args.jobs}"
    )
    return heading, stem, command


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    bench = harness.start(
        args, config={"datasets": args.datasets, "methods": args.methods}, device="cpu"
    )
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    encoder = None if args.render else TextEncoder(DEFAULT_MODEL, show_progress=False)
    heading, selection, options = selection_of(args)
    for dataset in [] if args.render else args.datasets:
        load_start = os.getloadavg()[0]
        result, seconds = timed(lambda dataset=dataset: run_dataset(dataset, args, encoder))
        metrics = metrics_of(dataset)
        protocol = (
            "train on qrels/train.tsv, report on test"
            if dataset == "scifact"
            else f"{args.folds}-fold CV over queries, seed {args.seed} (the report queries of "
            f"each fold: `folds` in `{work / f'{dataset}__{selection}.json'}`)"
        ) + training_text(result["training"], result["notes"], args.val_fraction)
        saved = {
            "title": dataset + heading,
            "metrics": metrics,
            "rows": statistics(result, metrics, args),
            "notes": result["notes"],
            "folds": result["folds"],
            "training": result["training"],
            "protocol": protocol,
            "command": f"python scripts/quality/quality_learned.py --datasets {dataset} {options}",
            "note": args.note,
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min",
            "load": f"{load_start:.1f} -> {os.getloadavg()[0]:.1f}",
        }
        path = work / f"{dataset}__{selection}.json"
        atomic_write(path, json.dumps(saved, indent=1, default=str))
        print(markdown(saved), flush=True)
    new = {}
    for path in sorted(work.glob("*__*.json")):
        saved = json.loads(path.read_text())
        new[saved["title"]] = markdown(saved)
    out = Path(args.out)
    old = out.read_text() if out.is_file() else ""
    header = (
        "# Learned geometry: results\n\n"
        "Generated by `scripts/quality/quality_learned.py` (one section per data set, each with "
        "its command); do not edit by hand.\n\n"
        f"- machine: {platform.machine()}, {torch.get_num_threads()} torch thread(s), torch "
        f"{torch.__version__}, CPU; shared with other jobs (load average per section)\n"
        "- pool: dense all-MiniLM-L6-v2 top 100 (exact faiss); scifact: train on "
        "qrels/train.tsv, report on test; the others: seeded 5-fold CV over queries, "
        "report folds pooled\n"
        "- CI: 95% percentile bootstrap over queries; p: paired randomization test of the "
        "first metric against dense, Holm-corrected over the methods of the data set; "
        "'vs map alone': the same test of each learned+map row against the map alone (the "
        "geometry's own gain), Holm over those rows\n"
        "- training s: gradient training (learned rows) or the TPE search (tuned rows), summed "
        "over folds (wall seconds); role wall s / CPU s (sections that have it): the whole "
        "row (training or search and reranking, all folds), wall and CPU seconds of its "
        "process (`--jobs`: roles side by side, one torch thread each); the CPU seconds are "
        "the honest cost on a shared, sometimes paused machine\n"
        "- corpus-level retrievers (`learned_iso`; `iso paper` = IsoRag at its defaults) rank "
        f"the top {CORPUS_TOP_K} of the whole corpus on the same folds, not the pool; `dense` "
        "and `map alone` stay the pool rows\n"
        "- sections whose heading names no methods come from earlier runs of "
        "learned_diffusion and learned_maniscope\n\n"
    )
    atomic_write(out, header + "\n\n".join(merge_sections(old, new)) + "\n")
    bench.finish({"sections": sorted(new), "out": str(out)})


if __name__ == "__main__":
    main()
