"""Passage-phrase graph: build time, size and phrase coverage of each extractor, per corpus.

For every multi-hop set and every extractor (``ngram``, ``yake``) of
:mod:`georag.retrieval.phrase_graph`: the build seconds (phrase extraction and assembly,
no k-NN edges), the phrases, passage-phrase edges and isolated passages, the size of the
saved artifact, and how well the phrases cover what multi-hop retrieval needs, from the
texts and the supporting-paragraph labels alone (no embeddings):

* ``q>=1``: share of questions with at least one graph phrase among their own n-grams;
* ``support hit``: share of supporting paragraphs that contain a phrase of their question
  (reached from a phrase seed in one step);
* ``bridged``: share of questions whose supporting paragraphs are all joined, through
  phrases they share, into one component (the hop a phrase graph can make);
* ``fan-out``: mean number of passages that hold some phrase of the question (the
  passages one step from the phrase seeds; the noise the walk spreads into).

The extractor is chosen on ``musique_train100`` (a training set); the other rows describe.
Usage: ``python scripts/bench/bench_phrase_graph.py --datasets musique_train100 hotpotqa_dev500``
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from georag.data.datasets import MULTIHOP_FILES, load_dataset
from georag.perf.bench import bench_parser, data_root, start
from georag.retrieval.phrase_graph import (
    EXTRACTORS,
    PhraseGraph,
    PhraseGraphConfig,
    build_phrase_graph,
    query_phrase_weights,
)


def coverage(graph: PhraseGraph, texts: list[str], support: list[list[int]]) -> dict:
    """The coverage figures of the module docstring for questions ``texts`` whose
    supporting passages are the rows ``support``."""
    seeds = query_phrase_weights(texts, graph) > 0  # (B, P)
    member = torch.zeros(graph.num_passages, len(graph.phrases))
    member[graph.contains[0], graph.contains[1]] = 1.0
    reached = (seeds.float() @ member.T) > 0  # (B, N): passages holding a query phrase
    hits, total, bridged = 0, 0, 0
    for b, rows in enumerate(support):
        hits += int(reached[b, rows].sum())
        total += len(rows)
        shared = (member[rows] @ member[rows].T) > 0  # supporting passages sharing a phrase
        component = {0}
        for _ in rows:
            component |= {j for i in component for j in shared[i].nonzero().flatten().tolist()}
        bridged += len(component) == len(rows)
    return {
        "queries_with_phrase": float(seeds.any(dim=1).float().mean()),
        "support_hit": hits / total,
        "bridged": bridged / len(support),
        "fan_out": float(reached.sum(dim=1).float().mean()),
    }


def measure(name: str, data_dir: Path, extractor: str) -> dict:
    data = load_dataset(name, data_dir=str(data_dir))
    ids = list(data.corpus)
    row = {d: i for i, d in enumerate(ids)}
    docs = [data.corpus[d] for d in ids]
    started = time.perf_counter()
    graph = build_phrase_graph(
        ids,
        [d.title for d in docs],
        [d.text for d in docs],
        config=PhraseGraphConfig(extractor=extractor),
    )
    seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        size = graph.save(Path(tmp) / "graph.pt").stat().st_size
    questions = list(data.queries)
    support = [[row[d] for d in data.qrels[q]] for q in questions]
    return {
        "dataset": name,
        "extractor": extractor,
        "build_s": seconds,
        "bytes": size,
        **graph.counts(),
        **coverage(graph, [data.queries[q] for q in questions], support),
    }


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--datasets", nargs="+", default=list(MULTIHOP_FILES))
    parser.add_argument("--extractors", nargs="+", default=list(EXTRACTORS), choices=EXTRACTORS)
    args = parser.parse_args()
    folder = data_root(args)
    bench = start(args, config={"graph": PhraseGraphConfig()}, device="cpu")
    rows = []
    print(
        f"{'dataset':<18} {'extractor':<8} {'build s':>8} {'MB':>6} {'phrases':>8} "
        f"{'edges':>8} {'isolated':>8} {'q>=1':>6} {'support hit':>11} {'bridged':>8} "
        f"{'fan-out':>8}"
    )
    for name in args.datasets:
        for extractor in args.extractors:
            r = measure(name, folder, extractor)
            rows.append(r)
            print(
                f"{name:<18} {extractor:<8} {r['build_s']:8.1f} {r['bytes'] / 1e6:6.2f} "
                f"{r['phrases']:8d} {r['phrase_edges']:8d} {r['isolated_passages']:8d} "
                f"{r['queries_with_phrase']:6.3f} {r['support_hit']:11.3f} "
                f"{r['bridged']:8.3f} {r['fan_out']:8.1f}",
                flush=True,
            )
    bench.finish(rows)


if __name__ == "__main__":
    main()
