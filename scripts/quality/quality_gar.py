"""Corpus-graph adaptive reranking (gar) against its scorer alone, with the same budget.

For each data set and budget c (documents scored per query), on the exact dense
all-MiniLM-L6-v2 top-c pool of every report query:

* ``<scorer> alone``: the scorer over the pool (``dense``: the first-stage cosine order;
  ``map``: ``learned_map`` trained on training queries only);
* ``gar <graph> + <scorer>``: :class:`~georag.retrievers.gar.AdaptiveReranker` with that scorer
  over the same pool, expanding through the dense k-NN or the BM25 corpus graph (k = 16,
  b = 16), scoring c documents per query in all.

Columns: NDCG@10, Recall@10, MRR@10 (95% percentile bootstrap), the pool recall R@100 and
R@1000 of the run (before expansion: the scorer-alone rows, whose run is the pool; after:
the gar rows), and a paired two-sided randomization test of NDCG@10 against the scorer alone
at the same budget, Holm-corrected over the gar rows of the data set.

Protocols (``scripts/quality/quality_learned.py``'s folds): scifact trains on ``qrels/train.tsv``
(a seeded 20% held out for early stopping) and reports on test; cranfield and cisi use
seeded 5-fold cross-validation over queries, each fold reported by a map trained on the
other four. Nothing is chosen on a report query; gar has no trained knob (paper defaults).

Every row's per-query run (each report query's top 100; the ``dense alone (c=100)`` row,
the pool's first-stage order, saved as ``dense``), the folds, the qrels, the protocol and
each row's geometric flag (the gar rows) and training seconds (the map's, for the rows that
use it) are saved with :func:`georag.experiments.runs.save_runs` in ``--work``
(``<dataset>.runs.json.gz``) for ``scripts/quality/quality_combined.py``.

Also: the corpus-graph build time and size of every corpus in ``--graph-datasets``, and ms
per query (wall and process CPU) of gar beside its scorer alone at B=1 (median) and batched
(all test queries in one call), threads pinned.

Usage::

    GEORAG_DATA=../shared/data python scripts/quality/quality_gar.py --threads 1 \\
        --datasets scifact cranfield cisi --out docs/methods/gar_results.md
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.batch import scores_to_run
from georag.experiments.folds import learned_folds
from georag.experiments.runs import QueryRuns, save_runs
from georag.experiments.significance import holm_tests, interval_rows, per_query_arrays
from georag.experiments.training import Training, add_training_options, fit
from georag.perf.timing import measure, timed
from georag.rerank.registry import make_reranker
from georag.resources import DEFAULT_MODEL
from georag.retrieval.corpus_graph import build_corpus_graph
from georag.retrieval.encoder import TextEncoder
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
    folds = learned_folds(
        dataset,
        data_dir=args.data_dir,
        encoder=encoder,
        corpus=True,
        folds=args.folds,
        val_fraction=args.val_fraction,
        seed=args.seed,
    )
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


def parse_args(argv=None):
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="*", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--graph-datasets", nargs="*", default=None, help="default: --datasets")
    parser.add_argument("--latency-dataset", default="scifact", help="'': no cost table")
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--budgets", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--graphs", nargs="+", default=["dense", "bm25"])
    parser.add_argument("--scorers", nargs="+", choices=("dense", "map"), default=["dense", "map"])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16, help="gar's scoring batch b")
    add_training_options(parser)  # the map's training and the folds, as quality_learned
    parser.add_argument("--work", default="runs/combined/gar")
    parser.add_argument("--out", default="runs/combined/gar/results.md")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    bench = harness.start(
        args, config={k: v for k, v in vars(args).items() if k != "bench_out"}, device="cpu"
    )
    encoder = TextEncoder(DEFAULT_MODEL, show_progress=False)
    sections = [f"Command: `python scripts/quality/quality_gar.py {' '.join(sys.argv[1:])}`"]
    results: dict = {}
    for dataset in args.datasets:
        load = os.getloadavg()[0]
        result, seconds = timed(lambda dataset=dataset: run_dataset(dataset, args, encoder))
        rows = statistics(result, args)
        results[dataset] = {"rows": rows, "train_s": result["train_s"], "notes": result["notes"]}
        protocol = (
            "train on qrels/train.tsv, report on test"
            if dataset == "scifact"
            else f"{args.folds}-fold CV over queries, seed {args.seed}"
        )
        sections.append(
            f"### {dataset} ({rows[0]['queries']} report queries; {protocol}; map training "
            f"{result['train_s']:.1f} s; section wall {seconds:.0f} s, load {load:.1f})\n\n"
            + table(rows)
        )
        print(sections[-1], flush=True)
        date = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min"
        extra = {"date": date, "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}"}
        save_runs(args.work, query_runs(dataset, result, args, protocol, extra))
        atomic_write(Path(args.out), "\n\n".join(sections) + "\n")  # each section when done
    graph_sets = args.datasets if args.graph_datasets is None else args.graph_datasets
    graphs = graph_costs(graph_sets, args, encoder)
    keys = ("dataset", "graph", "docs", "k", "build_s", "cpu_s", "mib", "load")
    sections.append("### corpus graphs\n\n" + markdown(graphs, keys))
    timing = latency(args.latency_dataset, args, encoder) if args.latency_dataset else []
    if timing:
        keys = ("method", "ms_b1", "cpu_ms_b1", "ms_batched", "cpu_ms_batched", "queries")
        keys += ("threads", "load")
        sections.append(f"### cost ({args.latency_dataset})\n\n" + markdown(timing, keys))
    print("\n\n".join(sections[-2:]))
    atomic_write(Path(args.out), "\n\n".join(sections) + "\n")
    bench.finish({"quality": results, "graphs": graphs, "latency": timing, "time": time.time()})


if __name__ == "__main__":
    main()
