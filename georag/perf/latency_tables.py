"""The tables of the latency benchmark (``scripts/bench/bench_latency.py``): ms per query
at B=1 and batched per thread count and condition, the peers side by side, and the slowdown
each thread setting suffers next to busy neighbours.

The measurement itself is :mod:`georag.experiments.latency`; the tables read its JSON rows
(``{"threads", "methods": {name: {"b1", "batched"}}, "peers"}``, each timing a
:meth:`georag.perf.timing.Timing.as_dict`). Nothing of georag is imported here.
"""

from __future__ import annotations

POOL_METHODS = ("none", "diffusion", "maniscope", "ricci", "hyte_rescore", "hyte_rescore-cold")
# the learnable rerankers at their initial knobs (the fixed methods' defaults): inference
# costs the same at any knobs but learned_diffusion's damping (docs/methods/learned.md)
LEARNED_METHODS = ("learned_diffusion", "learned_maniscope", "learned_map", "learned_ricci")
CORPUS_METHODS = ("hyte", "iso", "ppr_global")
METHODS = POOL_METHODS + LEARNED_METHODS + CORPUS_METHODS
GOAL_MS = {"none": 1.0, "diffusion": 1.0, "maniscope": 1.0, "hyte_rescore": 1.0, "ricci": 3.0}
GOAL_MS.update({name: 1.0 for name in LEARNED_METHODS} | {"learned_ricci": 3.0})
POLICY_METHODS = ("diffusion", "maniscope", "ricci")
# name -> (threads, OMP_WAIT_POLICY); threads None: torch's default, "policy": georag's
POLICIES = {
    "torch default": (None, None),
    "1 thread": (1, "PASSIVE"),
    "all cores, PASSIVE": ("all", "PASSIVE"),
    "georag policy": ("policy", None),
}


def fmt(row: dict | None, key: str = "median_ms") -> str:
    """``row[key]`` with 4 decimals below 0.1, 3 below 10, else 1; empty when absent."""
    if not row or row.get(key) is None:
        return ""
    value = row[key]
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def print_latency(table: dict, cores: int, batch: int) -> None:
    """Every method's B=1 and batched ms per query, per ``(threads, condition)`` of ``table``."""
    print(
        f"\n## Latency, ms per query (B=1: one query per call; B={batch}: batched; CPU: "
        f"process CPU time of the B=1 calls, all threads)\n"
    )
    print(
        f"| method | goal B=1, 1 thread | threads | condition | B=1 median | B=1 p90 | "
        f"B=1 CPU | B={batch} median | B={batch} p90 |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name in METHODS:
        for (_, condition), res in table.items():
            row = res["methods"].get(name)
            if row is None:
                continue
            goal = GOAL_MS.get(name)
            print(
                f"| {name} | {'' if goal is None else f'< {goal:g} ms'} | {res['threads']} "
                f"| {condition} | {fmt(row['b1'])} | {fmt(row['b1'], 'p90_ms')} | "
                f"{fmt(row['b1'], 'cpu_median_ms')} | {fmt(row.get('batched'))} | "
                f"{fmt(row.get('batched'), 'p90_ms')} |"
            )


def print_peers(table: dict) -> None:
    """The peers' ms per query beside georag's, the speed-ups, and the Ricci kept-set
    agreement, for the configurations of ``table`` that ran the peers."""
    peers = [(cond, res) for (_, cond), res in table.items() if "peers" in res]
    if not peers:
        return
    print("\n## Peers, per query, 1 thread, same run\n")
    print(
        "| method | peer | condition | peer median ms | peer p90 ms | georag B=1 | "
        "georag batched | speed-up B=1 | speed-up batched |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    names = {
        "diffusion": "networkx pagerank (complete graph, per query)",
        "maniscope": "numpy k-NN + networkx Dijkstra (per query)",
        "ricci": "GraphRicciCurvature 0.6.1 OTD, proc=1 (per graph)",
    }
    for cond, res in peers:
        for name, label in names.items():
            peer = res["peers"].get(name)
            ours = res["methods"].get(name)
            if peer is None or ours is None:
                continue
            b1, bb = ours["b1"]["median_ms"], ours.get("batched", {}).get("median_ms")
            p = peer["median_ms"]
            print(
                f"| {name} | {label} ({peer['samples']} queries) | {cond} | {fmt(peer)} | "
                f"{fmt(peer, 'p90_ms')} | {fmt(ours['b1'])} | {fmt(ours.get('batched'))} | "
                f"{p / b1:.1f}x | {'' if bb is None else f'{p / bb:.1f}x'} |"
            )
    for cond, res in peers:
        for label in ("B=1", "batched", "batched, tensor backend"):
            agree = res["peers"].get(f"ricci_agreement_{label}")
            if agree:
                print(
                    f"\nRicci-Filtration kept set ({label} calls, {cond}) equal to "
                    f"GraphRicciCurvature's on {100 * agree['equal_share']:.2f}% of the "
                    f"pooled candidates of {agree['graphs']} SciFact graphs (goal >= 99%); "
                    f"mean kept of 20: georag {agree['kept_mean'][0]:.2f}, "
                    f"GraphRicciCurvature {agree['kept_mean'][1]:.2f}"
                )


def print_policy(policy: dict, batch: int) -> None:
    """Per kernel and thread setting, quiet and busy ms per query and the slowdown."""
    print("\n## Thread policy: slowdown next to the busy neighbour(s), ms per query\n")
    print(
        f"| kernel | setting | threads quiet / busy | B=1 quiet | B=1 busy | B=1 slowdown | "
        f"B={batch} quiet | B={batch} busy | B={batch} slowdown |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name in POLICY_METHODS:
        for setting, (quiet, busy) in policy.items():
            q, b = quiet["methods"][name], busy["methods"][name]
            s1 = b["b1"]["median_ms"] / q["b1"]["median_ms"]
            sb = b["batched"]["median_ms"] / q["batched"]["median_ms"]
            print(
                f"| {name} | {setting} | {quiet['threads']} / {busy['threads']} | "
                f"{fmt(q['b1'])} | {fmt(b['b1'])} | {s1:.1f}x | {fmt(q['batched'])} | "
                f"{fmt(b['batched'])} | {sb:.1f}x |"
            )
