"""Ricci-Filtration speed and kept set: this tree against an earlier one, in one run.

Times the filter's flow (``RicciFiltrationConfig`` defaults: 20 iterations of
warm-started Sinkhorn over the SciFact dense top-20 graphs) with the code of this tree
and of ``--base-tree`` (e.g. ``git archive main | tar -x -C /tmp/base``), each in its
own process with the harness's thread count, alternating A, B, A, B, ... (``--repeats``
rounds; each child times itself, as the earlier tree may have no harness); prints the median
seconds, their ratio, and the share of candidates whose keep decision agrees between
the two and with GraphRicciCurvature 0.6.1 (exact flow, ``.venv-peers``)::

    python scripts/bench/bench_ricci_ab.py --base-tree /tmp/base --batch 256 --repeats 5

``--one-by-one`` flows the graphs one at a time (the B=1 latency; ``--batch`` is then the
number of graphs). Each side reports wall and thread CPU time, and which georag it imported.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from georag.experiments.ricci_bench import scifact_graphs
from georag.perf.bench import bench_parser, non_negative_int, positive_int, start
from georag.perf.peers import run_peer

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
import georag
from georag.geometry.ricci import ricci_flow
from georag.rerank.geometric.ricci_filtration import RicciFiltrationConfig, RicciFiltration
adjacency = torch.load(sys.argv[1])
cfg = RicciFiltrationConfig()
lengths = adjacency.float()
options = dict(iterations=cfg.iterations, step=cfg.step, alpha=cfg.alpha,
               exp_power=cfg.exp_power, method=cfg.method, epsilon=cfg.epsilon,
               max_iter=cfg.max_iter, tol=cfg.tol)
import inspect, warnings
if "accuracy" in inspect.signature(ricci_flow).parameters:
    options["accuracy"] = None  # what RicciFiltration passes in this tree
warnings.simplefilter("ignore")
ricci_flow(lengths[:8], adjacency[:8], **options)
start, cpu = time.perf_counter(), time.thread_time()
if sys.argv[3] == "1":  # one graph at a time (B=1)
    final = torch.cat([ricci_flow(lengths[g : g + 1], adjacency[g : g + 1], **options).lengths
                       for g in range(len(adjacency))])
else:
    final = ricci_flow(lengths, adjacency, **options).lengths
seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
keep = (final[:, 0, 1:] <= cfg.eta + cfg.eta_atol).tolist()
print(json.dumps({"seconds": seconds, "cpu": cpu, "keep": keep, "georag": georag.__file__}))
"""


def run(tree: Path, path: Path, threads: int, one_by_one: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads)}
    # run inside the tree: ``python -c`` puts the working directory first on sys.path, so
    # from any other checkout the child would import that checkout's georag
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(threads), str(int(one_by_one))],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = bench_parser(__doc__, repeats=5, device=False)
    parser.add_argument("--base-tree", required=True, type=Path)
    parser.add_argument("--batch", type=positive_int, default=256)
    parser.add_argument(
        "--one-by-one", action="store_true", help="flow each graph alone (B=1 latency)"
    )
    parser.add_argument(
        "--peer-graphs",
        type=non_negative_int,
        default=64,
        help="graphs also flowed by GraphRicciCurvature (0: none)",
    )
    args = parser.parse_args()
    bench = start(
        args,
        config={
            "graphs": f"SciFact dense top-20, B={args.batch}",
            "rounds": args.repeats,
            "base tree": str(args.base_tree),
        },
        device="cpu",
    )
    threads = bench.threads.threads
    adjacency = scifact_graphs(args.data_dir, ["test", "train"], args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.pt"
        torch.save(adjacency, path)
        times = {"this tree": [], "base tree": []}
        cpus = {"this tree": [], "base tree": []}
        keeps, imported = {}, {}
        for _ in range(args.repeats):
            for name, tree in (("this tree", ROOT), ("base tree", args.base_tree)):
                out = run(tree, path, threads, args.one_by_one)
                times[name].append(out["seconds"])
                cpus[name].append(out["cpu"])
                keeps[name] = np.array(out["keep"])
                imported[name] = out["georag"]
    real = adjacency[:, 0, 1:].numpy()
    print(
        f"# SciFact dense top-20 graphs: {args.batch}, "
        f"{'one at a time (B=1)' if args.one_by_one else 'one batch'}, "
        f"{args.repeats} alternating rounds"
    )
    for name, module in imported.items():
        print(f"{name}: {module}")
    print("\n| code | median s | ms/query | thread CPU ms/query | runs (s) |")
    print("|---|---:|---:|---:|---|")
    for name, values in times.items():
        med = statistics.median(values)
        cpu = statistics.median(cpus[name])
        print(
            f"| {name} | {med:.3f} | {med / args.batch * 1e3:.2f} | "
            f"{cpu / args.batch * 1e3:.2f} | {', '.join(f'{v:.2f}' for v in values)} |"
        )
    ratio = statistics.median(times["this tree"]) / statistics.median(times["base tree"])
    cpu_ratio = statistics.median(cpus["this tree"]) / statistics.median(cpus["base tree"])
    print(f"\nthis / base time ratio: {ratio:.3f} (thread CPU: {cpu_ratio:.3f})")
    same = (keeps["this tree"] == keeps["base tree"])[real].mean()
    print(f"keep decisions equal between the trees: {same:.4f}")
    n_peer = min(args.peer_graphs, args.batch)
    agree = {}
    if n_peer:  # --peer-graphs 0: no GraphRicciCurvature run
        ref = run_peer(adjacency[:n_peer].numpy(), "flow", 1)
        kept_ref = (ref["lengths"][:, 0, 1:] <= 1 + 1e-5) & real[:n_peer]
    for name, keep in keeps.items() if n_peer else ():
        agree[name] = ((keep[:n_peer] & real[:n_peer]) == kept_ref)[real[:n_peer]].mean()
        print(
            f"kept set equal to GraphRicciCurvature's ({n_peer} graphs), {name}: {agree[name]:.4f}"
        )
    bench.finish({"seconds": times, "ratio": ratio, "keep_equal": same, "peer_agreement": agree})


if __name__ == "__main__":
    main()
