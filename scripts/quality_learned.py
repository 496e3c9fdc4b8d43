"""Learned geometry against the dense first stage, paper defaults and a tuned baseline.

For each data set, on the dense all-MiniLM-L6-v2 top-100 pool of every report query:

* ``dense``: the first-stage order;
* ``<method> paper``: the fixed reranker at the seed's defaults;
* ``<method> tuned``: its knobs searched by optuna TPE (``--trials``) on the training
  queries (:mod:`train.tune`);
* ``<method> learned``: its knobs trained by gradient through the geometry
  (:mod:`train.learned_module`, listwise loss, early stopping on held-out training queries);
* ``<method> learned+map``: the same plus a learned linear map of the embeddings;
* ``map alone``: the learned embedding map with no geometry (``learned_map``), the
  ablation that tells the gain of the geometry from the gain of adapting the embeddings.

A corpus-level learnable retriever (``learned_iso``) gets the same four rows (``iso
paper`` is :class:`~georag.rerank.iso_rag.IsoRag` at its defaults), ranked over the whole
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

    GEORAG_DATA=../shared/data python scripts/quality_learned.py \\
        --datasets scifact cranfield cisi --out docs/learned_results.md

Multi-hop sets (``hotpotqa_dev500``, ``musique_qa100``: supporting paragraphs as relevance
labels, 5-fold CV) report Recall@5 and Recall@2 first. A run makes one section per data
set and ``--methods`` selection (and ``--method-option`` fixed fields), kept in ``--work``
(``<dataset>__<methods>.json``, with the folds' query ids); rendering replaces the
sections it has and keeps every other section already in ``--out``, so runs of other
methods add to the same file.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.loggers import CSVLogger

import georag.eval.bench as harness
from georag._io import atomic_write
from georag.batch import RerankResult, scores_to_run
from georag.data.datasets import MULTIHOP_FILES
from georag.eval.metrics import per_query
from georag.eval.stats import bootstrap_ci, holm, paired_permutation_p
from georag.eval.timing import timed
from georag.rerank.base import IdentityReranker
from georag.rerank.registry import is_retriever, make_method, make_reranker, parse_option
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder
from train.corpus_data import CorpusQueryData, QuerySet, load_query_set
from train.learned_data import LearnedPoolData, split_rows
from train.learned_module import LearnedRerankerModule
from train.pools import Pool, load_pool
from train.tune import tune

BEIR_METRICS = ("ndcg@10", "recall@10", "mrr@10")
MULTIHOP_METRICS = ("recall@5", "recall@2", "ndcg@10", "mrr@10")
ORDER = ("scifact", "cranfield", "cisi", "hotpotqa_dev500", "musique_qa100")
GEOMETRIC = ("learned_diffusion", "learned_maniscope", "learned_ricci")
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
    trainer.fit(module, datamodule=data)
    reranker = module.reranker.eval()
    summary = {
        "val_init": module.initial_ndcg,
        "val_best": module._best[0],
        "epochs": trainer.current_epoch,
        "knobs": reranker.knobs(),
    }
    return reranker, module.train_seconds, summary


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


def run_dataset(dataset: str, args, encoder) -> dict:
    runs: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    notes: dict[str, list] = {}
    qrels: dict[str, dict[str, int]] = {}
    folds: dict[str, list[str]] = {}

    def add(name: str, run: dict, spent: float = 0.0, note=None) -> None:
        runs.setdefault(name, {}).update(run)
        seconds[name] = seconds.get(name, 0.0) + spent
        if note is not None:
            notes.setdefault(name, []).append(note)

    corpus = any(is_retriever(m) for m in args.methods)
    for train, report, train_q, report_q, label in folds_of(dataset, args, encoder, corpus):
        print(
            f"{dataset} {label}: {train.batch.batch_size} training queries, "
            f"{report.batch.batch_size} report queries",
            flush=True,
        )
        qrels.update(report.qrels)
        folds[label] = list(report.batch.query_ids)
        assert not set(train.batch.query_ids) & set(report.batch.query_ids)
        folder = Path(args.work) / dataset / label
        add("dense", rerank(IdentityReranker(), report))
        for method in args.methods:
            retriever = is_retriever(method)
            fit_on = train_q if retriever else train

            def apply(m, retriever=retriever, pool=report, queries=report_q):
                if retriever:
                    return retrieve(m.fit(queries.corpus), queries)
                return rerank(m, pool)

            short = make_method(method).fixed_method
            add(f"{short} paper", apply(make_reranker(short)))
            fixed_options = args.method_options.get(method, {})
            (best, study), spent = timed(
                lambda method=method, fit_on=fit_on, fixed_options=fixed_options: tune(
                    method, fit_on, trials=args.trials, seed=args.seed, options=fixed_options
                )
            )
            add(
                f"{short} tuned",
                apply(make_reranker(method, {method: {**fixed_options, **best}})),
                spent,
                {"knobs": best, "train_ndcg": study.best_value},
            )
            for suffix, options in (("learned", {}), ("learned+map", {"embedding_map": True})):
                reranker, spent, summary = fit(
                    method, {**fixed_options, **options}, fit_on, args, folder / f"{method}{suffix}"
                )
                add(f"{short} {suffix}", apply(reranker), spent, summary)
                print(f"  {short} {suffix}: {summary} {spent:.1f} s", flush=True)
        reranker, spent, summary = fit("learned_map", {}, train, args, folder / "map")
        add("map alone", rerank(reranker, report), spent, summary)
    return {"runs": runs, "seconds": seconds, "notes": notes, "qrels": qrels, "folds": folds}


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
        "| training s |\n|" + "---|" * (len(metrics) + 6) + "\n"
    )
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
        lines.append("| " + " | ".join(cells) + " |")
    return (
        f"### {saved['title']} ({rows[0]['queries']} report queries)\n\n"
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


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--trials", type=int, default=50)
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
    bench = harness.start(
        args, config={"datasets": args.datasets, "methods": args.methods}, device="cpu"
    )
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    encoder = None if args.render else TextEncoder(DEFAULT_MODEL, show_progress=False)
    given = [f"{n}.{k}={v}" for n, o in sorted(args.method_options.items()) for k, v in o.items()]
    selection = "+".join(args.methods) + "".join(f"__{g}" for g in given)
    for dataset in [] if args.render else args.datasets:
        load_start = os.getloadavg()[0]
        result, seconds = timed(lambda dataset=dataset: run_dataset(dataset, args, encoder))
        metrics = metrics_of(dataset)
        protocol = (
            "train on qrels/train.tsv, report on test"
            if dataset == "scifact"
            else f"{args.folds}-fold CV over queries, seed {args.seed} (the report queries of "
            f"each fold: `folds` in `{work / f'{dataset}__{selection}.json'}`)"
        )
        saved = {
            "title": f"{dataset}: {', '.join(args.methods)}"
            + (f" [{', '.join(given)}]" if given else ""),
            "metrics": metrics,
            "rows": statistics(result, metrics, args),
            "notes": result["notes"],
            "folds": result["folds"],
            "protocol": protocol,
            "command": f"python scripts/quality_learned.py --datasets {dataset} --methods "
            f"{' '.join(args.methods)} "
            + "".join(f"--method-option {g} " for g in given)
            + f"--trials {args.trials} --epochs {args.epochs} "
            f"--patience {args.patience} --lr {args.lr} --seed {args.seed}",
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
        "Generated by `scripts/quality_learned.py` (one section per data set, each with its "
        "command); do not edit by hand.\n\n"
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
        "over folds\n"
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
