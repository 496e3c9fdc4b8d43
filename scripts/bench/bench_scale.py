"""How corpus-level kernels grow with the corpus: SciFact, then synthetic corpora from 1e4 to 1e6.

Synthetic corpora: ``--centres`` cluster centres fitted (faiss k-means) on SciFact's
all-MiniLM-L6-v2 embeddings (the embedding cache, encoded when absent), each document a
centre plus isotropic noise scaled to that cluster's residual norm, normalised; SciFact
itself is the real point (``--sizes scifact``). The number of centres grows with N at
SciFact's documents per centre (5,183 / 64, ``--docs-per-centre``; 0 keeps the fitted 64,
whose clusters then grow denser with N): the new ones are drawn around the fitted ones
(:func:`georag.perf.scaling.grown_centres`: a Gaussian step with the fitted centres'
covariance, as long as the median distance between nearest fitted centres), so a larger
corpus has more topics, not denser ones. A synthetic document's text, for the kernels that
need texts, is the text of a random SciFact document of its centre's fitted cluster (so the
vocabulary stays SciFact's and every text recurs about N / 5,183 times). Each (kernel, size,
threads) case runs in its own process (peak RSS = its ru_maxrss, data generation included)
under a wall-time cap (``--max-seconds``); a case is skipped, the reason printed, when its
memory or flops estimate exceeds the caps, or when the kernel's smaller sizes of the same
run extrapolate (log-log, slope at least 1) past the cap. Kernels:

- ``knn_flat`` / ``knn_ivf``: corpus k-NN graph (k=10) by faiss IndexFlatIP / IVF-Flat
  (nlist = 4 sqrt(N) trained 10 rounds on 16 nlist points, nprobe 8; recall@10 of IVF
  against flat on 1,000 documents). The IVF graph is kept in ``--work`` for the graph
  kernels below (built untimed there when absent);
- ``ppr`` / ``ppr_igraph``: whole-graph personalized PageRank for 256 seed documents on the
  IVF k-NN graph, georag's sparse path against python-igraph's prpack (one call per seed);
- ``ricci``: sparse Ollivier-Ricci curvature (exact) of ``--ricci-edges`` random edges of
  the IVF k-NN graph (all when 0), ms per edge, max difference to POT's network simplex on
  ``--pot-edges`` of them;
- ``grc``: GraphRicciCurvature 0.6.1 (OTD, in ``.venv-peers`` or ``--peer-python``, proc =
  threads) on the first ``--grc-edges`` of those edges, all-pairs shortest paths where the
  N x N float64 matrix fits ``--max-gib`` / 2, pairwise ones beyond, timed inside the peer
  (its constructor and ``compute_ricci_curvature_edges``), max difference to georag's exact
  path;
- ``corpus_graph_dense`` / ``corpus_graph_bm25``: the GAR corpus graph
  (:mod:`georag.retrieval.corpus_graph`, k=16) from the embeddings / the texts;
- ``lorentz``: HyTE-H Lorentz index (untrained projection) build of the texts, then hybrid
  search of SciFact's test queries, B=1 (median over ``--lorentz-queries``) and batched
  (all in one call, median of 3), seconds per query.

Kernels whose code is single-threaded (``ricci``, ``ppr_igraph``, ``corpus_graph_bm25``) run
at one thread only.

Per case: wall and process CPU seconds of the timed part (children included), the load
average at its start and end. Then the log-log slope of seconds against size per timing
and thread count (Ricci and GRC: the whole graph, ms per edge x edges), the 1e7
extrapolation, and the plot. ``--report`` redoes the tables and the plot from the JSON of
earlier runs (``--out``); ``--prior`` adds an earlier run's rows to a new run's (larger
sizes after smaller ones)::

    python scripts/bench/bench_scale.py --sizes scifact 10000 100000 --threads-list 1 2 \\
        --max-seconds 240 --data-dir ../shared/data --out runs/scale.json --plot docs/scale.png
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from georag.experiments.scale import KERNELS, centres_file, run_case
from georag.perf.bench import bench_parser, start
from georag.perf.scaling import SCIFACT_DOCS, read_rows, report, run_one

#: Code that is single-threaded (numba without parallel loops, prpack, bm25s at n_threads=0):
#: run at one thread only, a second thread would time the same work.
SINGLE_THREADED = ("ricci", "ppr_igraph", "corpus_graph_bm25")
STARTED = time.time()


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--sizes", nargs="+", default=["scifact", "10000", "100000"])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--threads-list", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-seconds", type=float, default=240.0, help="wall cap per case")
    parser.add_argument("--max-gib", type=float, default=20.0, help="memory cap per case")
    parser.add_argument("--centres", type=int, default=64, help="k-means centres fitted")
    parser.add_argument(
        "--docs-per-centre",
        type=float,
        default=None,
        help="centres grow as N / this (default: the fitted set's ratio; 0: fitted only)",
    )
    parser.add_argument(
        "--centres-dataset",
        default="scifact",
        help="BEIR set whose embeddings the centres fit ('random': random centres, noise 0.6)",
    )
    parser.add_argument("--ricci-edges", type=int, default=20000, help="0: every edge")
    parser.add_argument("--pot-edges", type=int, default=2000)
    parser.add_argument("--grc-edges", type=int, default=20000, help="of the Ricci edges")
    parser.add_argument(
        "--peer-python", default=None, help="python of GraphRicciCurvature (.venv-peers)"
    )
    parser.add_argument("--lorentz-queries", type=int, default=100, help="B=1 searches")
    parser.add_argument("--work", default="runs/bench_scale", help="centres and graphs cache")
    parser.add_argument(
        "--stop-after", type=float, default=None, help="start no case past these seconds"
    )
    parser.add_argument("--plot", default=None, help="log-log PNG of seconds against size")
    parser.add_argument("--report", nargs="+", type=Path, help="tables from earlier --out JSON")
    parser.add_argument(
        "--prior",
        nargs="+",
        type=Path,
        help="earlier --out JSON: their rows inform the skips and join the tables",
    )
    parser.add_argument(
        "--case", nargs=3, metavar=("KERNEL", "SIZE", "THREADS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.case:
        kernel, size, threads = args.case
        print(json.dumps(run_case(kernel, size, int(threads), args)))
        return
    if args.report:
        report([row for path in args.report for row in read_rows(path)], args)
        return
    bench = start(
        args,
        config={
            k: getattr(args, k)
            for k in (
                "sizes",
                "kernels",
                "threads_list",
                "max_seconds",
                "max_gib",
                "centres",
                "centres_dataset",
                "docs_per_centre",
                "ricci_edges",
                "pot_edges",
                "grc_edges",
                "lorentz_queries",
            )
        },
    )
    if any(s != "scifact" for s in args.sizes):
        centres_file(Path(args.work), args.data_dir, args.centres, args.centres_dataset)
    prior = [row for path in args.prior or [] for row in read_rows(path)]
    rows: list[dict] = []
    for size in args.sizes:  # every kernel at a size before the next size
        n = SCIFACT_DOCS if size == "scifact" else int(size)
        for kernel in args.kernels:
            for threads in args.threads_list:
                if threads > 1 and kernel in SINGLE_THREADED:
                    continue
                rows.append(
                    run_one(
                        kernel,
                        size,
                        n,
                        threads,
                        prior + rows,
                        args,
                        script=__file__,
                        started=STARTED,
                    )
                )
    report(prior + rows, args)
    bench.finish({"rows": rows})


if __name__ == "__main__":
    main()
