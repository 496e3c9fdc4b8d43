"""The measurement of the latency benchmark (``scripts/bench/bench_latency.py``): SciFact
pools and corpus built once, then one child process per configuration (threads, wait
policy, quiet or next to busy neighbours), so that OpenMP reads its own environment.

* :func:`build_inputs`: SciFact test pools (dense top-100 with texts), the corpus and the
  queries, saved for the children; each corpus method fitted once so its index is cached;
* :func:`run_child`: start one child (``python script --child SPEC``) next to
  ``neighbours`` busy processes and read its JSON;
* :func:`child`: inside the child, every method at B=1 and batched, and the peers
  (networkx, GraphRicciCurvature) with the Ricci kept-set agreement.

The tables are :mod:`georag.perf.latency_tables`; georag.perf sits below the methods timed
here, so this lives in experiments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from georag.perf.bench import bench_parser, busy_neighbours, peer_python, start
from georag.perf.latency_tables import CORPUS_METHODS, LEARNED_METHODS, POOL_METHODS

#: The checkout whose georag the children import.
ROOT = Path(__file__).resolve().parents[2]


def _rerankers(methods: list[str]) -> dict:
    from georag.rerank.geometric.hyte import HyTEReranker
    from georag.rerank.registry import make_reranker

    out = {}
    for name in methods:
        if name.startswith("hyte_rescore"):
            out[name] = out.get("hyte_rescore") or HyTEReranker()
        elif name in POOL_METHODS + LEARNED_METHODS:
            out[name] = make_reranker(name)
    return out


def _ricci_kept(batch, count: int, single: bool, backend: str = "auto"):
    """Georag's kept mask in graph-node order (nodes 1..20) for the first ``count`` queries."""
    import torch

    from georag.rerank.geometric.ricci_filtration import RicciFiltration, RicciFiltrationConfig

    ricci = RicciFiltration(RicciFiltrationConfig(backend=backend))
    cfg = ricci.config
    parts = [batch.slice(i, i + 1) for i in range(count)] if single else [batch.slice(0, count)]
    kept = []
    for part in parts:
        out = ricci.filtrate(part)
        pooled = torch.gather(part.mask, 1, out.slots)
        kept.append(
            pooled
            & (out.flow.lengths[:, 0, 1:] <= cfg.eta + cfg.eta_atol)
            & out.flow.adjacency[:, 0, 1:]
        )
    return torch.cat(kept).numpy()


def _peers(pool, spec: dict, bench) -> dict:
    """networkx and GraphRicciCurvature per query, in this process's condition."""
    from georag.eval.references import networkx_diffusion, networkx_maniscope
    from georag.eval.synthetic import top_pool
    from georag.perf.peers import run_peer
    from georag.rerank.geometric.ricci_filtration import query_graphs

    n = spec["peer_queries"]
    rows = {}

    def diffusion(i: int) -> object:
        slots, emb = top_pool(pool, i, 50)
        return networkx_diffusion(emb, pool.scores[i].numpy()[slots])

    def maniscope(i: int) -> object:
        _, emb = top_pool(pool, i, 100)
        return networkx_maniscope(pool.query[i].numpy(), emb)

    rows["diffusion"] = bench.time(diffusion, repeats=n, warmup=1).as_dict()
    rows["maniscope"] = bench.time(maniscope, repeats=n, warmup=1).as_dict()
    graphs = spec["ricci_peer_graphs"]
    if peer_python() is not None and graphs:
        adjacency = query_graphs(pool.slice(0, graphs))[0].numpy()
        ref = run_peer(adjacency, "flow", 1)
        seconds = sorted(ref["seconds"] * 1e3)
        from georag.perf.timing import Timing

        rows["ricci"] = Timing(tuple(seconds)).as_dict()
        if spec.get("agreement"):
            real = adjacency[:, 0, 1:]
            theirs = (ref["lengths"][:, 0, 1:] <= 1.0 + 1e-5) & real & ref["adjacency"][:, 0, 1:]
            runs = (("B=1", True, "auto"), ("batched", False, "auto"))
            for label, single, backend in (*runs, ("batched, tensor backend", False, "tensor")):
                ours = _ricci_kept(pool, graphs, single, backend)
                rows[f"ricci_agreement_{label}"] = {
                    "equal_share": float((ours == theirs)[real].mean()),
                    "kept_mean": [float(ours.sum(1).mean()), float(theirs.sum(1).mean())],
                    "graphs": graphs,
                }
    return rows


def child(spec_path: str) -> None:
    """Measure one configuration (threads, wait policy, condition) and write JSON."""
    import torch

    spec = json.loads(Path(spec_path).read_text())
    args = bench_parser(None).parse_args(["--device", "cpu"])
    if spec["threads"] == "policy":
        args.threads = None
    elif spec["threads"] == "all":
        from georag.perf.threads import usable_cores

        args.threads = usable_cores()
    else:
        args.threads = spec["threads"]
    if spec["threads"] is None:  # torch's defaults: no policy at all
        from georag.perf.bench import Bench
        from georag.perf.threads import ThreadSettings, usable_cores

        bench = Bench(
            script="bench_latency.py (child)",
            device="cpu",
            config={},
            threads=ThreadSettings(
                torch.get_num_threads(),
                "torch default",
                torch.get_num_interop_threads(),
                os.environ.get("OMP_WAIT_POLICY", "unset"),
                usable_cores(),
                os.getloadavg(),
            ),
        )
    else:
        bench = start(args)
    pool, corpus, queries = torch.load(spec["pool"], weights_only=False)
    big = pool.slice(0, spec["batch"])
    rerankers = _rerankers(spec["methods"])
    results: dict = {
        "threads": torch.get_num_threads(),
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "methods": {},
    }
    q = spec["queries"]
    with torch.inference_mode():
        for name, reranker in rerankers.items():
            row = {}
            if name == "hyte_rescore-cold":

                def call(i: int, r=reranker) -> object:
                    r.clear_points()
                    return r(pool.slice(i, i + 1))

                row["b1"] = bench.time(call, repeats=min(q, 16), warmup=1).as_dict()
            else:
                if name == "hyte_rescore":
                    reranker(big)  # the index: document points computed ahead
                row["b1"] = bench.time(
                    lambda i, r=reranker: r(pool.slice(i, i + 1)), repeats=q, warmup=2
                ).as_dict()
                row["batched"] = bench.time(
                    lambda i, r=reranker: r(big),
                    repeats=spec["repeats"],
                    warmup=1,
                    per=big.batch_size,
                ).as_dict()
            results["methods"][name] = row
        k, several = pool.num_candidates, queries.slice(0, big.batch_size)
        for name in (m for m in spec["methods"] if m in CORPUS_METHODS):
            from georag.rerank.registry import make_reranker

            method = make_reranker(name).fit(corpus)  # the index, cached by the parent's fit

            def one(i: int, m=method) -> object:
                return m.retrieve(queries.slice(i, i + 1), top_k=k)

            def many(i: int, m=method) -> object:
                return m.retrieve(several, top_k=k)

            results["methods"][name] = {
                "b1": bench.time(one, repeats=q, warmup=2).as_dict(),
                "batched": bench.time(
                    many, repeats=spec["repeats"], warmup=1, per=big.batch_size
                ).as_dict(),
            }
        if spec.get("peers"):
            results["peers"] = _peers(pool, spec, bench)
    results["load_end"] = list(os.getloadavg())
    Path(spec["result"]).write_text(json.dumps(results))


def run_child(
    spec: dict,
    *,
    script: str,
    neighbours: int,
    tmp: Path,
    env_wait: str | None,
    threads_env: bool = False,
) -> dict:
    """Start a child (``python script --child SPEC``, which calls :func:`child`) with its
    own environment (no thread variables; ``OMP_WAIT_POLICY=env_wait`` when given), next to
    ``neighbours`` busy processes, and return the JSON it writes."""
    spec = dict(spec, result=str(tmp / f"r{len(list(tmp.iterdir()))}.json"))
    path = tmp / f"s{len(list(tmp.iterdir()))}.json"
    path.write_text(json.dumps(spec))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GEORAG_THREADS", "OMP_WAIT_POLICY")
    }
    if env_wait:
        env["OMP_WAIT_POLICY"] = env_wait
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with busy_neighbours(neighbours):
        subprocess.run(
            [sys.executable, script, "--child", str(path)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL if not threads_env else None,
        )
    return json.loads(Path(spec["result"]).read_text())


def build_inputs(data_dir: str | None, path: Path, corpus_methods: list[str]) -> int:
    """SciFact test pools (with texts), the corpus rows and the queries, saved for the
    children; each corpus method is fitted once so that its index is cached."""
    import torch

    from georag.batch import Corpus, QueryBatch
    from georag.data.beir import load_beir
    from georag.rerank.registry import make_reranker
    from georag.resources import default_cache_dir
    from georag.retrieval.candidates import FirstStage, FirstStageConfig

    dataset = load_beir("scifact", split="test", data_dir=data_dir)
    stage = FirstStage(dataset, FirstStageConfig(first_stage="dense", top_m=100))
    ids = list(dataset.queries)
    pool = stage.retrieve(ids, [dataset.queries[q] for q in ids], with_texts=True)
    docs = [dataset.corpus[d] for d in stage.units.doc_ids]
    corpus = Corpus(
        doc_ids=list(stage.units.doc_ids),
        titles=[d.title for d in docs],
        texts=[d.text for d in docs],
        embeddings=stage.embeddings,
        cache_dir=str(default_cache_dir()),
    )
    queries = QueryBatch(pool.query_ids, pool.query_texts, pool.query)
    for name in corpus_methods:
        make_reranker(name).fit(corpus)
    torch.save((pool, corpus, queries), path)
    return pool.batch_size
