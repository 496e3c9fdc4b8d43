"""Why a graph retriever ranked what it ranked, for one query: seeds, paths and pruning.

:func:`explain` reads the public parts of a fitted ``hipporag2`` or ``iso_entity`` retriever
and returns an :class:`Explanation`:

* the **seeds**: the phrases linked to the query (link score, share of the reset mass) and
  the passage seeds;
* the **top passages**, each with its final score split into the part that does not come
  from the graph (``base``) and the graph's part, and the **path** by which PPR mass
  reached it. PPR's fixed point splits every node's mass ``x_v`` exactly into its teleport
  part ``(1 - d) r_v`` (plus the dangling mass restarting along ``r``) and what flows in from
  each neighbour, ``d x_u w_uv / s_u`` (``s_u`` the strength of ``u``); following the
  largest inflow back until the teleport part is larger gives a chain seed -> ... -> passage
  (passage <- phrase <- passage <- phrase on the entity graph), each hop with the fraction
  of the node's mass it brought;
* for ``iso_entity``, the **edges its pruning removed** from the query's local graph.

``hipporag2``: the reset is :meth:`HippoRAG2.reset`, the mass :meth:`HippoRAG2.ppr` over
its whole graph, the base :func:`~georag.retrievers.entity.fusion_base` (the graph's part
is ``scores - base``). ``iso_entity``: the local graph and its sources as
:meth:`IsoEntity.scores` builds them, its pruning recorded through the ``prune=`` hook, PPR
from the sources on the pruned local graph; without fusion the base is ISO-RAG's
``(1 - lam) * cosine``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import QueryBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.retrieval.passage_graph import local_candidate_graph
from georag.retrievers.entity import fusion_base, link_scores
from georag.retrievers.hipporag2 import HippoRAG2
from georag.retrievers.iso_entity import IsoEntity

__all__ = ["Explanation", "Hit", "Node", "Seed", "explain", "inflow_path"]

MAX_PATH = 6  # nodes in one path, seed and passage included


@dataclass(frozen=True)
class Node:
    """A node of the entity-passage graph: a passage (row < N) or a phrase (row >= N)."""

    row: int
    kind: str  # "passage" or "phrase"
    label: str  # the passage's title, or the phrase
    doc_id: str | None = None

    def name(self) -> str:
        """``doc_id title`` for a passage, the quoted phrase for a phrase."""
        return f"{self.doc_id} {self.label}" if self.kind == "passage" else f'"{self.label}"'


@dataclass(frozen=True)
class Seed:
    """A node the walk restarts from: its link score (a phrase) or cosine (a passage) and
    its share of the reset mass."""

    node: Node
    score: float
    weight: float


@dataclass(frozen=True)
class Hit:
    """One of the top passages.

    Attributes
    ----------
    rank : int
        1 for the best.
    score, base, graph : float
        The final score, its part that does not come from the graph and ``score - base``.
    path : tuple of Node
        How the walk reached the passage: the seed (or a node whose teleport part
        outweighs every inflow) first, the passage last.
    flows : tuple of float
        ``len(path) - 1`` fractions: of each node's mass, the part that flowed in from the
        node before it on the path.
    relevant : bool or None
        Whether the passage is a gold passage of the query (None: no labels given).
    """

    rank: int
    node: Node
    score: float
    base: float
    graph: float
    path: tuple[Node, ...]
    flows: tuple[float, ...]
    relevant: bool | None = None


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` found for one query (module docstring)."""

    method: str
    query: str
    seeds: tuple[Seed, ...]
    passage_seeds: int  # passages with a positive reset weight
    passage_share: float  # their share of the reset mass
    hits: tuple[Hit, ...]
    removed: tuple[tuple[Node, Node], ...] = ()
    local_nodes: int | None = None  # iso_entity: the local graph's size
    local_edges: int | None = None
    fallback: bool = False  # no phrase linked: ranked by the dense score alone

    def text(self) -> str:
        """The explanation as lines of plain text."""
        lines = [f'{self.method}: "{self.query}"']
        if self.fallback:
            lines.append("  no phrase of the graph is linked: ranked by the dense score alone")
        lines.append("seeds (share of the reset mass):")
        for seed in self.seeds:
            if seed.node.kind == "phrase":
                lines.append(
                    f"  phrase  {seed.node.name():32s} link {seed.score:.2f}  {seed.weight:6.1%}"
                )
        passages = [s for s in self.seeds if s.node.kind == "passage"]
        lines.append(
            f"  passages: {self.passage_seeds} seeded by cosine, {self.passage_share:.1%} of "
            f"the mass; largest: "
            + ", ".join(f"{s.node.name()} ({s.weight:.1%})" for s in passages)
        )
        if self.local_nodes is not None:
            lines.append(
                f"local graph: {self.local_nodes} nodes, {self.local_edges} edges; pruning "
                f"removed {len(self.removed)}" + (":" if self.removed else "")
            )
            lines += [f"  {a.name()} -- {b.name()}" for a, b in self.removed[:12]]
            if len(self.removed) > 12:
                lines.append(f"  ... and {len(self.removed) - 12} more")
        lines.append("top passages (score = base + graph part; path: share of each node's mass):")
        for hit in self.hits:
            gold = "  [gold]" if hit.relevant else ""
            lines.append(
                f"  {hit.rank:2d}. {hit.node.name():36s} {hit.score:7.3f} = {hit.base:.3f} + "
                f"{hit.graph:.3f}{gold}"
            )
            if not self.fallback:
                lines.append("      " + path_text(hit))
        return "\n".join(lines)


def path_text(hit: Hit) -> str:
    """``"a" -> B (62%) -> "c" (48%) -> D (71%)``: the path of ``hit``, each hop with the
    share of the node's mass that came along it."""
    parts = [hit.path[0].name()]
    for node, flow in zip(hit.path[1:], hit.flows):
        parts.append(f"{node.name()} ({flow:.0%})")
    text = " -> ".join(parts)
    return (
        text if len(hit.path) > 1 else f"{text} (a seed: its own reset mass outweighs every inflow)"
    )


def inflow_path(
    weights: torch.Tensor,
    mass: torch.Tensor,
    reset: torch.Tensor,
    damping: float,
    target: int,
    *,
    max_nodes: int = MAX_PATH,
) -> tuple[list[int], list[float]]:
    """The chain of largest inflows that brought PPR mass to ``target``.

    Parameters
    ----------
    weights : torch.Tensor, sparse CSR (M, M)
        The symmetric weights PPR walked.
    mass : torch.Tensor, shape (M,)
        The PPR fixed point over them.
    reset : torch.Tensor, shape (M,)
        The reset vector (normalized here).
    damping : float
    target : int
    max_nodes : int
        The longest chain returned.

    Returns
    -------
    path : list of int
        Node rows, the start first and ``target`` last: from ``target``, each step goes to
        the not yet visited neighbour ``u`` with the largest inflow ``d x_u w_uv / s_u``,
        and stops where the node's teleport part is at least that inflow.
    flows : list of float
        Per step, the inflow over the mass of the node it entered.
    """
    mass = mass.double()
    reset = reset.double() / reset.double().sum()
    crow, col, val = weights.crow_indices(), weights.col_indices(), weights.values().double()
    strength = torch.zeros(mass.shape[0], dtype=torch.float64).index_add_(
        0, torch.repeat_interleave(torch.arange(mass.shape[0]), crow.diff()), val
    )
    dangling = float(mass[strength == 0].sum())
    path, flows, here = [target], [], target
    while len(path) < max_nodes:
        lo, hi = int(crow[here]), int(crow[here + 1])
        sources, w = col[lo:hi], val[lo:hi]
        inflow = damping * mass[sources] * w / strength[sources]
        seen = torch.tensor([int(s) in path for s in sources], dtype=torch.bool)
        inflow = inflow.masked_fill(seen, -1.0)
        teleport = (1 - damping + damping * dangling) * float(reset[here])
        if inflow.numel() == 0 or float(inflow.max()) <= teleport:
            break
        best = int(inflow.argmax())
        flows.append(float(inflow[best] / mass[here]))
        here = int(sources[best])
        path.append(here)
    return path[::-1], flows[::-1]


def _node(retriever, row: int) -> Node:
    graph = retriever.graph
    n = graph.num_passages
    if row < n:
        return Node(row, "passage", graph.passages()[1][row], retriever.doc_ids[row])
    return Node(row, "phrase", graph.phrases[row - n])


def _check(retriever, query: QueryBatch, k: int) -> None:
    if not isinstance(retriever, (HippoRAG2, IsoEntity)):
        raise ValueError(
            f"retriever: explain reads hipporag2 or iso_entity, got "
            f"{getattr(retriever, 'name', type(retriever).__name__)!r}"
        )
    if getattr(retriever, "graph", None) is None:
        raise ValueError("retriever: fit it on a corpus first")
    if not isinstance(query, QueryBatch) or query.batch_size != 1:
        raise ValueError("query: expected a QueryBatch of one query")
    if k < 1:
        raise ValueError(f"k: need a positive integer, got {k}")


def explain(
    retriever: HippoRAG2 | IsoEntity,
    query: QueryBatch,
    *,
    k: int = 5,
    relevant: set[str] | None = None,
    passage_seeds: int = 3,
) -> Explanation:
    """Explain how a fitted graph retriever ranks one query (module docstring).

    Parameters
    ----------
    retriever : HippoRAG2 or IsoEntity
        Fitted (``fit(corpus)``).
    query : QueryBatch
        One query, embedded by the corpus' encoder.
    k : int
        The top passages explained.
    relevant : set of str, optional
        The query's gold passage ids, marked in the result.
    passage_seeds : int
        The largest passage seeds listed.

    Returns
    -------
    Explanation
    """
    _check(retriever, query, k)
    with torch.no_grad():
        if isinstance(retriever, HippoRAG2):
            return _explain_hipporag2(retriever, query, k, relevant, passage_seeds)
        return _explain_iso_entity(retriever, query, k, relevant)


def _seeds(retriever, reset: torch.Tensor, links: torch.Tensor, cosine, rows, passage_seeds):
    """Phrase seeds (every linked phrase) and the largest passage seeds, over local rows
    ``rows`` (graph rows of each reset entry)."""
    n = retriever.graph.num_passages
    share = reset.double() / reset.double().sum()
    phrase = [i for i in range(len(rows)) if rows[i] >= n and reset[i] > 0]
    passage = [i for i in range(len(rows)) if rows[i] < n and reset[i] > 0]
    passage.sort(key=lambda i: -float(share[i]))
    seeds = [
        Seed(_node(retriever, rows[i]), float(links[rows[i] - n]), float(share[i]))
        for i in sorted(phrase, key=lambda i: -float(share[i]))
    ]
    seeds += [
        Seed(_node(retriever, rows[i]), float(cosine[rows[i]]), float(share[i]))
        for i in passage[:passage_seeds]
    ]
    return seeds, len(passage), float(share[passage].sum()) if passage else 0.0


def _hits(retriever, final, base, k, relevant, trace) -> tuple[Hit, ...]:
    ranked = int(torch.isfinite(final).sum())  # iso_entity: -inf outside the local graph
    top = final.topk(min(k, ranked)).indices.tolist()
    hits = []
    for rank, row in enumerate(top, start=1):
        path, flows = trace(row)
        node = _node(retriever, row)
        score, part = float(final[row]), float(base[row])
        mark = None if relevant is None else node.doc_id in relevant
        hits.append(Hit(rank, node, score, part, score - part, tuple(path), tuple(flows), mark))
    return tuple(hits)


def _explain_hipporag2(retriever, query, k, relevant, passage_seeds) -> Explanation:
    dense = retriever.dense_scores(query)
    links = retriever.links(query)
    final = retriever.scores(query)[0]
    fallback = not bool((links > 0).any())
    base = fusion_base(dense, query.texts, retriever.bm25, retriever.config.fusion)
    base = torch.zeros_like(final) if base is None else base[0]
    if fallback:
        hits = _hits(
            retriever, final, final, k, relevant, lambda row: ([_node(retriever, row)], [])
        )
        return Explanation(retriever.name, query.texts[0], (), 0, 0.0, hits, fallback=True)
    reset = retriever.reset(query, dense)
    mass = retriever.ppr(reset)[0]
    rows = list(range(reset.shape[1]))
    seeds, count, share = _seeds(retriever, reset[0], links[0], dense[0], rows, passage_seeds)
    damping = float(retriever.config.damping)

    def trace(row):
        path, flows = inflow_path(retriever.csr, mass, reset[0], damping, row)
        return [_node(retriever, r) for r in path], flows

    hits = _hits(retriever, final, base, k, relevant, trace)
    return Explanation(retriever.name, query.texts[0], tuple(seeds), count, share, hits)


def _explain_iso_entity(retriever, query, k, relevant) -> Explanation:
    cfg, iso = retriever.config, retriever.config.iso
    n = retriever.graph.num_passages
    embedding = query.embeddings.to(retriever.embeddings.dtype)
    similarity = embedding @ retriever.nodes.T
    links = link_scores(
        embedding, query.texts, retriever.graph, top_k=cfg.link_top_k, linking=cfg.linking
    )
    passages = similarity[:, :n].topk(min(iso.num_sources, n), dim=1).indices
    phrases = links.topk(min(cfg.link_top_k, links.shape[1]), dim=1).indices + n
    sources = torch.cat([passages, phrases], dim=1)
    nodes, mask, _ = local_candidate_graph(
        retriever.csr, similarity, sources, max_nodes=iso.max_nodes, hops=cfg.hops
    )
    seen = {}

    def record(weights, scores):
        pruned, removed = retriever.prune(weights, scores)
        seen.update(weights=weights, pruned=pruned, removed=removed)
        return pruned, removed

    final = retriever.scores(query, prune=record)[0]
    local = nodes[0][mask[0]].tolist()
    m, s = len(local), sources.shape[1]
    pruned = seen["pruned"][0, :m, :m]
    cosine = similarity[0, local]
    reset = torch.cat([cosine[:s].clamp_min(1e-6), torch.zeros(m - s, dtype=cosine.dtype)])
    mass = personalized_pagerank(
        pruned[None], reset[None], damping=iso.damping, tol=iso.tol, max_iter=iso.max_iter
    )[0]
    if cfg.fusion == "none":  # ISO-RAG's own fusion: (1 - lam) * cosine is not the graph's
        base = (1 - iso.lam) * similarity[0, :n]
    else:
        base = fusion_base(similarity[:, :n], query.texts, retriever.bm25, cfg.fusion)[0]
    position = {row: i for i, row in enumerate(local)}
    sparse = pruned.to_sparse_csr()

    def trace(row):
        if row not in position:
            return [_node(retriever, row)], []
        path, flows = inflow_path(sparse, mass, reset, float(iso.damping), position[row])
        return [_node(retriever, local[i]) for i in path], flows

    removed = seen["removed"][0, :m, :m].triu(1).nonzero().tolist()
    seeds, count, share = _seeds(
        retriever, reset[:s], links[0], similarity[0], local[:s], passage_seeds=iso.num_sources
    )
    return Explanation(
        retriever.name,
        query.texts[0],
        tuple(seeds),
        count,
        share,
        _hits(retriever, final, base, k, relevant, trace),
        removed=tuple((_node(retriever, local[a]), _node(retriever, local[b])) for a, b in removed),
        local_nodes=m,
        local_edges=int((seen["weights"][0, :m, :m] > 0).triu(1).sum()),
    )
