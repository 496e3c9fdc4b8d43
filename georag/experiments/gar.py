"""The corpus-graph adaptive reranking experiment of ``scripts/quality/quality_gar.py``:
gar against its scorer alone at the same budget (documents scored per query).

* :func:`run_dataset`: every row's run over every fold of
  :func:`~georag.experiments.folds.learned_folds` (the scorers of :func:`scorer_specs`,
  the map trained on training queries only; :func:`gar_stage` per graph and budget);
* :func:`statistics` and :func:`table`: means, 95% bootstrap intervals, each gar row's
  paired randomization test against its scorer alone (Holm over the gar rows);
  :func:`query_runs`: the per-query runs file of a data set;
* :func:`graph_costs` and :func:`latency`: the corpus graphs' build time and size; ms per
  query of gar beside its scorer alone at B=1 and batched; :func:`markdown` of either.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import torch

from georag.batch import scores_to_run
from georag.experiments.folds import folds_from_args
from georag.experiments.runs import QueryRuns
from georag.experiments.significance import holm_tests, interval_rows, per_query_arrays
from georag.experiments.training import Training, fit
from georag.perf.timing import measure, timed
from georag.rerank.registry import make_reranker
from georag.retrieval.corpus_graph import build_corpus_graph
from train.corpus_data import load_query_set

METRICS = ("ndcg@10", "recall@10", "mrr@10", "recall@100", "recall@1000")
NAMES = {"ndcg@10": "NDCG@10", "recall@10": "Recall@10", "mrr@10": "MRR@10"}


def scorer_specs(train, args, folder: Path) -> tuple[dict, float, list]:
    """``{scorer name: (spec, options)}``, training seconds and notes (the map's)."""
    specs = {"dense": ("none", {})}
    if "map" not in args.scorers:
        return specs, 0.0, []
    reranker, spent, note = fit("learned_map", {}, train, Training.from_args(args), folder)
    path = folder / "map.pt"
    reranker.save(path)
    specs["map"] = ("learned_map", {"learned_map": {"weights": str(path)}})
    return specs, spent, [note]


def gar_stage(spec: str, options: dict, graph: str, budget: int, corpus, args):
    """The gar stage of one row, fitted (its graph cached under the corpus' cache)."""
    return make_reranker(
        "gar",
        scorer=spec,
        scorer_options=options,
        graph=graph,
        k=args.k,
        budget=budget,
        pool_size=budget,
        batch_size=args.batch,
    ).fit(corpus)


def run_dataset(dataset: str, args, encoder) -> dict:
    """Every row's run over every fold, the qrels, the folds' report queries, training
    seconds."""
    runs: dict[str, dict] = {}
    qrels: dict = {}
    report_ids: dict[str, list[str]] = {}
    train_s, notes = 0.0, []
    folds = folds_from_args(dataset, args, encoder, corpus=True)
    for train, _, _, report_q, label in folds:
        specs, spent, note = scorer_specs(train, args, Path(args.work) / dataset / label)
        train_s, notes = train_s + spent, notes + note
        qrels.update(report_q.qrels)
        report_ids[label] = list(report_q.batch.ids)
        corpus, queries = report_q.corpus, report_q.batch
        for budget in args.budgets:
            pool = gar_stage("none", {}, "dense", budget, corpus, args).dense_pool(queries)
            for name, (spec, options) in specs.items():
                with torch.no_grad():
                    alone = make_reranker(spec, options)(pool)
                runs.setdefault(f"{name} alone (c={budget})", {}).update(alone.to_run(pool))
                for graph in args.graphs:
                    stage = gar_stage(spec, options, graph, budget, corpus, args)
                    result = stage.expand(pool)
                    run = scores_to_run(result.scores, result.keep, queries.ids, corpus.doc_ids)
                    runs.setdefault(f"gar {graph} + {name} (c={budget})", {}).update(run)
        print(f"  {dataset} {label}: {len(queries.ids)} report queries done", flush=True)
    return {
        "runs": runs,
        "qrels": qrels,
        "folds": report_ids,
        "train_s": train_s,
        "notes": notes,
    }


def query_runs(dataset: str, result: dict, args, protocol: str, extra: dict) -> QueryRuns:
    """The :class:`~georag.experiments.runs.QueryRuns` of one data set's rows."""
    runs, rows = {}, {}
    for name, run in result["runs"].items():
        saved = "dense" if name == f"dense alone (c={min(args.budgets)})" else name
        runs[saved] = run
        scorer = name.split(" (c=")[0].removesuffix(" alone").split(" + ")[-1]
        rows[saved] = {
            "geometric": name.startswith("gar "),
            "train_s": result["train_s"] if scorer == "map" else 0.0,
        }
    command = "python scripts/quality/quality_gar.py " + shlex.join(sys.argv[1:])
    return QueryRuns(
        dataset,
        "gar",
        protocol,
        command,
        result["folds"],
        result["qrels"],
        runs,
        {"rows": rows, **extra},
    )


def statistics(result: dict, args) -> list[dict]:
    """Mean and 95% bootstrap interval of every row and metric; each gar row's NDCG@10
    against its scorer alone at the same budget (paired randomization, Holm over the gar
    rows): ``delta``, ``p``, ``p_holm``."""
    resampling = {"resamples": args.resamples, "seed": args.seed}
    _, values = per_query_arrays(result["runs"], result["qrels"], METRICS)
    rows = interval_rows(values, METRICS, **resampling)
    # each gar row against its scorer alone at the same budget, Holm over the gar rows
    tested = [r for r in rows if r["method"].startswith("gar ")]
    pairs = []
    for row in tested:
        scorer, budget = row["method"].split(" + ")[1].split(" ", 1)
        pairs.append((row["method"], f"{scorer} alone {budget}"))
    for row, (delta, p, p_holm) in zip(
        tested, holm_tests(values, "ndcg@10", pairs, **resampling), strict=True
    ):
        row["delta"], row["p"], row["p_holm"] = delta, p, p_holm
    return rows


def table(rows: list[dict]) -> str:
    """The Markdown table of :func:`statistics`' rows."""
    head = [f"{NAMES[m]} [95% CI]" for m in NAMES] + [
        "pool R@100",
        "pool R@1000",
        "ΔNDCG@10 vs scorer alone",
        "p (Holm)",
    ]
    lines = ["| method | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for r in rows:
        cells = [f"{r[m]:.4f} [{r[m + '_ci'][0]:.4f}, {r[m + '_ci'][1]:.4f}]" for m in NAMES]
        cells += [f"{r['recall@100']:.4f}", f"{r['recall@1000']:.4f}"]
        cells += [f"{r['delta']:+.4f}", f"{r['p_holm']:.4f}"] if "p" in r else ["", ""]
        lines.append(f"| {r['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def graph_costs(datasets: list[str], args, encoder) -> list[dict]:
    """Build time (wall and process CPU; not cached) and size of each corpus graph."""
    out = []
    for dataset in datasets:
        corpus = load_query_set(dataset, data_dir=args.data_dir, encoder=encoder).corpus
        texts = [f"{t} {x}".strip() for t, x in zip(corpus.titles, corpus.texts)]
        for kind in args.graphs:
            cpu = time.process_time()
            graph, seconds = timed(
                lambda kind=kind, c=corpus, t=texts: build_corpus_graph(
                    c.doc_ids, kind=kind, k=args.k, embeddings=c.embeddings, texts=t
                )
            )
            cpu = time.process_time() - cpu
            out.append(
                {
                    "dataset": dataset,
                    "graph": kind,
                    "docs": graph.num_docs,
                    "k": graph.k,
                    "build_s": seconds,
                    "cpu_s": cpu,
                    "mib": graph.nbytes / 2**20,
                    "load": os.getloadavg()[0],
                }
            )
            print(f"  graph {out[-1]}", flush=True)
    return out


def timings(fn, pool, samples: int):
    """``fn``'s :class:`~georag.perf.timing.Timing` at B=1 (``samples`` queries of ``pool``
    spread evenly, after two untimed) and batched (all of ``pool`` in one call)."""
    step = pool.batch_size // samples
    with torch.no_grad():
        single = measure(
            lambda i: fn(pool.slice(i * step, i * step + 1)), repeats=samples, warmup=2
        )
        batched = measure(lambda i: fn(pool), repeats=1, per=pool.batch_size)
    return single, batched


def latency(dataset: str, args, encoder) -> list[dict]:
    """ms per query, wall and process CPU (medians), of each scorer alone and of gar (dense
    graph) with it, at B=1 and batched. The map is the untrained identity map: its cost does
    not depend on its weights."""
    queries = load_query_set(dataset, split="test", data_dir=args.data_dir, encoder=encoder)
    corpus, batch = queries.corpus, queries.batch
    specs = {"dense": ("none", {}), "map": ("learned_map", {})}
    out = []
    for budget in args.budgets:
        pool = gar_stage("none", {}, "dense", budget, corpus, args).dense_pool(batch)
        samples = min(args.latency_samples, pool.batch_size)
        for name in args.scorers:
            spec, options = specs[name]
            stages = {
                f"{name} alone": make_reranker(spec, options),
                f"gar dense + {name}": gar_stage(spec, options, "dense", budget, corpus, args),
            }
            for label, stage in stages.items():
                fn = stage.expand if label.startswith("gar") else stage
                single, batched = timings(fn, pool, samples)
                out.append(
                    {
                        "dataset": dataset,
                        "method": f"{label} (c={budget})",
                        "ms_b1": single.median,
                        "cpu_ms_b1": single.cpu_median,
                        "ms_batched": batched.median,
                        "cpu_ms_batched": batched.cpu_median,
                        "queries": pool.batch_size,
                        "threads": torch.get_num_threads(),
                        "load": os.getloadavg()[0],
                    }
                )
                print(f"  latency {out[-1]}", flush=True)
    return out


def markdown(records: list[dict], keys: tuple[str, ...]) -> str:
    """A plain table of ``records``, one column per key (floats to 3 decimals)."""
    lines = ["| " + " | ".join(keys) + " |", "|---" * len(keys) + "|"]
    for r in records:
        cells = [f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
