"""Latency: ISO-RAG's local Cheeger-pruned PPR against whole-graph PPR, side by side.

Both start from the same query embeddings, sources and passage graph; each timed call is
the whole retrieval (cosine to the corpus, sources, then for ISO-RAG: local graph
extraction, local Cheeger ratios, pruning, dense batched PPR on (B, M, M); for the
baseline: sparse CSR PPR over the whole corpus graph with B personalization columns).
The PPR step alone is also timed on the same sources and personalization: dense batched
power iteration on the pruned local graphs (B, M, M) against sparse CSR power iteration
over the whole graph with B columns. Batched: all questions in one call (median of
``--repeats`` runs, reported per query).
B = 1: one question per call over the first ``--single`` questions (median per call).

Usage: ``python scripts/bench/bench_iso.py --data-dir ../shared/data [--dataset hotpotqa_dev500]
[--device cpu] [--threads 1]``
"""

from __future__ import annotations

import torch

from georag.experiments.iso_multihop import DATASETS, prepare
from georag.geometry.diffusion import personalized_pagerank
from georag.perf.bench import bench_parser, data_root, start
from georag.resources import default_cache_dir
from georag.retrieval.encoder import TextEncoder
from georag.retrievers.iso import IsoRag, IsoRagConfig, fixed_radius
from georag.retrievers.ppr_global import GlobalPPR, GlobalPPRConfig


def main() -> None:
    parser = bench_parser(__doc__, repeats=5)
    parser.add_argument("--dataset", default="hotpotqa_dev500", choices=list(DATASETS))
    parser.add_argument("--single", type=int, default=50, help="questions timed at B=1")
    args = parser.parse_args()
    data_dir = data_root(args)
    bench = start(args, config={"dataset": args.dataset, "B=1 questions": args.single})
    device = torch.device(bench.device)
    p = prepare(args.dataset, data_dir, TextEncoder(show_progress=False), default_cache_dir())
    radius = fixed_radius(p.embeddings)
    config = IsoRagConfig()
    emb, queries = p.embeddings.to(device), p.queries.to(device)
    iso = IsoRag(config).fit_graph(emb, p.graph, radius.to(device))
    iso.csr, iso.strength, iso.volume = (
        iso.csr.to(device),
        iso.strength.to(device),
        iso.volume.to(device),
    )
    glob = GlobalPPR(
        GlobalPPRConfig(num_sources=config.num_sources, damping=0.5, topo_weight=config.topo_weight)
    ).fit_graph(emb, p.graph)
    glob.csr = glob.csr.to(device)
    b = queries.shape[0]
    print(
        f"dataset {args.dataset}: N={p.graph.num_nodes} passages, "
        f"{p.graph.counts()['edges']} undirected edges, B={b} questions"
    )
    print(f"ISO-RAG {config}")
    print(
        f"whole-graph PPR: sources={config.num_sources}, damping=0.5, tol={glob.config.tol}, "
        f"sparse CSR power iteration over all N nodes"
    )
    rows, results = [], {}

    def measure(label: str, batched_fn, single_fn) -> None:
        batched = bench.time(lambda i: batched_fn(), repeats=args.repeats, per=b)
        single = bench.time(single_fn, repeats=min(args.single, b))
        results[label.strip()] = {"batched": batched.as_dict(), "b1": single.as_dict()}
        rows.append((label, batched.median, single.median))

    for label, method in (("iso_rag local PPR", iso), ("whole-graph PPR", glob)):
        measure(
            label,
            lambda m=method: m.search(queries, top_k=10),
            lambda i, m=method: m.search(queries[i : i + 1], top_k=10),
        )
    # the PPR step alone, on the same personalization: local pruned graphs vs whole graph
    t = iso.trace(queries)
    local_p = t.personalization
    whole_p = torch.zeros(b, p.graph.num_nodes, dtype=emb.dtype, device=device)
    whole_p.scatter_(1, t.nodes[:, : config.num_sources], local_p[:, : config.num_sources])
    whole_p = whole_p.T.contiguous()

    def local_ppr(rows: slice) -> None:
        personalized_pagerank(
            t.pruned[rows],
            local_p[rows],
            damping=config.damping,
            tol=config.tol,
            max_iter=config.max_iter,
            mask=t.mask[rows],
        )

    def whole_ppr(rows: slice) -> None:
        personalized_pagerank(
            glob.csr, whole_p[:, rows], damping=0.5, tol=glob.config.tol, max_iter=glob.max_iter
        )

    for label, fn in (("  PPR step: local", local_ppr), ("  PPR step: whole", whole_ppr)):
        measure(label, lambda f=fn: f(slice(None)), lambda i, f=fn: f(slice(i, i + 1)))
    print(f"\n  {'method':<22} {'batched ms/query':>17} {'B=1 ms/query':>13}")
    for label, per_query, single in rows:
        print(f"  {label:<22} {per_query:17.3f} {single:13.3f}")
    for name, (_, iso_b, iso_1), (_, glob_b, glob_1) in (
        ("retrieval", rows[0], rows[1]),
        ("PPR step", rows[2], rows[3]),
    ):
        print(
            f"  {'speed-up ' + name:<22} {glob_b / iso_b:16.2f}x {glob_1 / iso_1:12.2f}x"
            "   (whole-graph time / ISO-RAG time)"
        )
    bench.finish(results)


if __name__ == "__main__":
    main()
