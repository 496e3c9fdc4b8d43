"""ISO-RAG: Cheeger-pruned local personalized PageRank over a passage graph.

Paper: ISO-RAG, isoperimetric (local Cheeger-ratio) control of graph-based RAG for multi-hop
QA (read in a Japanese summary that names no title line, authors or arXiv id).

For a batch of B queries, all at once:

1. seeds: the top-``num_seeds`` passages by cosine similarity;
2. the local candidate graph: seeds plus their neighbours in the corpus passage graph
   (semantic k-NN and topological edges), at most ``max_nodes`` nodes (seeds first, then
   neighbours by cosine to the query), padded to (B, M, M);
3. a volume proxy per node: its hyperbolic radius in the Poincare ball (fixed projection
   or the trained :class:`~georag.models.poincare.PoincareHead`), computed once per corpus;
4. the local Cheeger ratio of each node (sweep over its heaviest neighbours; the cut counts
   the edges that leave the local graph too) and the pruning score of each edge,
   ``|log h_u - log h_v|``; edges scoring above ``prune_threshold`` (hub to periphery
   shortcuts) are removed;
5. deterministic personalized PageRank by power iteration from the seeds on the pruned
   local graph (networkx semantics, :func:`georag.geometry.diffusion.personalized_pagerank`);
6. the final score ``lam * PPR / max(PPR) + (1 - lam) * cosine``; the top-k local nodes
   are returned.

The baselines of the same harness are :class:`DenseRetriever` and :class:`GlobalPPR`
(HippoRAG-style PPR over the unpruned whole-corpus graph, damping 0.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from georag.batch import Corpus, QueryBatch, RerankResult, scores_to_run
from georag.geometry.cheeger import local_cheeger_ratio, prune_edges, pruning_scores
from georag.geometry.diffusion import personalized_pagerank
from georag.models.poincare import PoincareHead, fixed_projection
from georag.retrieval.passage_graph import PassageGraph, build_passage_graph

__all__ = [
    "IsoRagConfig",
    "IsoRag",
    "IsoRagOutput",
    "IsoRagTrace",
    "GlobalPPR",
    "GlobalPPRConfig",
    "DenseRetriever",
    "corpus_graph",
    "fixed_radius",
    "local_candidate_graph",
    "output_to_run",
]

VOLUMES = ("radius", "degree")


@dataclass(frozen=True)
class IsoRagConfig:
    """ISO-RAG settings. The paper's summary fixes none of the numbers; see
    docs/methods/iso_rag.md.

    Attributes
    ----------
    num_seeds : int
        s, seed passages per query (top-s by cosine).
    max_nodes : int
        M, the largest local candidate graph (seeds + neighbours by cosine to the query).
    topological : bool
        Use topological edges (False: the "without topological edges" ablation).
    topo_weight : float
        Weight of a topological edge (added to the cosine of a semantic edge).
    volume : {"radius", "degree"}
        Node volume in the Cheeger ratio: the hyperbolic radius (ISO-RAG) or the corpus
        degree (classic Cheeger; ablation).
    sweep_size : int
        Largest sweep set of the local Cheeger ratio.
    prune_threshold : float
        Edges whose pruning score exceeds this are removed; ``inf`` disables pruning.
    damping : float
        PPR damping (probability of following an edge), HippoRAG's 0.5.
    lam : float
        Weight of the (max-normalized) PPR score against the cosine similarity.
    tol, max_iter
        Power-iteration convergence (networkx semantics).
    head : str, optional
        A trained :class:`~georag.models.poincare.PoincareHead` (its ``save`` file) giving
        the radii; ``None`` uses the fixed projection (:func:`fixed_radius`).
    """

    num_seeds: int = 3
    max_nodes: int = 64
    topological: bool = True
    topo_weight: float = 0.5
    volume: str = "radius"
    sweep_size: int = 8
    prune_threshold: float = 1.0
    damping: float = 0.5
    lam: float = 0.9
    tol: float = 1e-6
    max_iter: int = 200
    head: str | None = None

    def __post_init__(self) -> None:
        if self.num_seeds < 1:
            raise ValueError(f"num_seeds must be at least 1, got {self.num_seeds}")
        if self.max_nodes < self.num_seeds:
            raise ValueError(
                f"max_nodes ({self.max_nodes}) must be >= num_seeds ({self.num_seeds})"
            )
        if self.volume not in VOLUMES:
            raise ValueError(f"volume must be one of {VOLUMES}, got {self.volume!r}")
        if not 0.0 <= self.lam <= 1.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need lam in [0, 1] and damping in [0, 1), got {self.lam}, {self.damping}"
            )
        if math.isnan(self.prune_threshold) or self.prune_threshold < 0:
            raise ValueError(f"prune_threshold must be >= 0, got {self.prune_threshold}")
        if self.topo_weight < 0 or self.sweep_size < 1:
            raise ValueError(
                f"need topo_weight >= 0 and sweep_size >= 1, got "
                f"{self.topo_weight}, {self.sweep_size}"
            )


@dataclass(frozen=True)
class IsoRagOutput:
    """Ranked passages and what the local graphs looked like.

    Attributes
    ----------
    scores : torch.Tensor, shape (B, K)
        Final scores, best first (``-inf`` past a short local graph).
    indices : torch.Tensor, shape (B, K), long
        Corpus rows (``-1`` where ``scores`` is ``-inf``).
    edges : torch.Tensor, shape (B,), long
        Undirected edges of each local graph before pruning (0 for the baselines).
    removed : torch.Tensor, shape (B,), long
        Undirected edges pruning removed.
    nodes : torch.Tensor, shape (B,), long
        Nodes of each local graph (N for a whole-graph method).
    """

    scores: torch.Tensor
    indices: torch.Tensor
    edges: torch.Tensor
    removed: torch.Tensor
    nodes: torch.Tensor


@dataclass(frozen=True)
class IsoRagTrace:
    """Intermediates of :meth:`IsoRag.trace`; local slots, seeds first.

    Attributes
    ----------
    nodes : torch.Tensor, shape (B, M), long
        Corpus rows of the local nodes (0 on padding).
    mask : torch.Tensor, shape (B, M), bool
    weights : torch.Tensor, shape (B, M, M)
        The local graph before pruning.
    ratio : torch.Tensor, shape (B, M)
        Local Cheeger ratios.
    scores : torch.Tensor, shape (B, M, M)
        Pruning scores.
    pruned : torch.Tensor, shape (B, M, M)
        The local graph after pruning.
    removed : torch.Tensor, shape (B, M, M), bool
    personalization : torch.Tensor, shape (B, M)
        Seed weights (their cosine, clamped to >= 1e-6), 0 elsewhere.
    ppr : torch.Tensor, shape (B, M)
        PageRank on the pruned graph.
    similarity : torch.Tensor, shape (B, M)
        Cosine to the query.
    final : torch.Tensor, shape (B, M)
        ``lam * ppr / max(ppr) + (1 - lam) * similarity``; ``-inf`` on padding.
    """

    nodes: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor
    ratio: torch.Tensor
    scores: torch.Tensor
    pruned: torch.Tensor
    removed: torch.Tensor
    personalization: torch.Tensor
    ppr: torch.Tensor
    similarity: torch.Tensor
    final: torch.Tensor


def _check_query(query: torch.Tensor, embeddings: torch.Tensor) -> None:
    if query.dim() != 2 or query.shape[1] != embeddings.shape[1] or query.shape[0] == 0:
        raise ValueError(
            f"query must have shape (B, {embeddings.shape[1]}) with B > 0, got {tuple(query.shape)}"
        )
    if not torch.isfinite(query).all():
        raise ValueError("query holds NaN or inf")


def _check_corpus(embeddings: torch.Tensor, graph: PassageGraph) -> None:
    if embeddings.dim() != 2 or embeddings.shape[0] != graph.num_nodes:
        raise ValueError(
            f"embeddings must have shape ({graph.num_nodes}, D), got {tuple(embeddings.shape)}"
        )
    if not torch.isfinite(embeddings).all():
        raise ValueError("embeddings hold NaN or inf")


def _seeds(similarity: torch.Tensor, num_seeds: int) -> torch.Tensor:
    n = similarity.shape[1]
    if num_seeds > n:
        raise ValueError(f"num_seeds ({num_seeds}) is larger than the corpus ({n} passages)")
    return similarity.topk(num_seeds, dim=1).indices


def _topk(scores: torch.Tensor, rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    k = min(k, scores.shape[1])
    best, at = scores.topk(k, dim=1)
    return best, torch.where(best > -torch.inf, rows.gather(1, at), -1)


def _csr_rows(
    csr: tuple[torch.Tensor, torch.Tensor, torch.Tensor], rows: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The entries of the CSR rows ``rows`` (flattened, shape (R,)) where ``valid``.

    ``csr`` is ``(crow_indices, col_indices, values)`` as plain tensors (indexing the views
    of a sparse tensor's members takes a much slower path). Returns ``(owner, col, value)``:
    for every stored entry of a valid row, the position of that row in ``rows``, its
    column and its value.
    """
    crow, cols, values = csr
    start = crow[rows]
    count = (crow[rows + 1] - start) * valid
    total = int(count.sum())
    owner = torch.repeat_interleave(
        torch.arange(rows.numel(), device=rows.device), count, output_size=total
    )
    first = (count.cumsum(0) - count)[owner]
    entry = start[owner] + torch.arange(total, device=rows.device) - first
    return owner, cols[entry], values[entry]


def local_candidate_graph(
    csr: torch.Tensor, similarity: torch.Tensor, seeds: torch.Tensor, *, max_nodes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeds and their neighbours, as padded dense local graphs.

    Parameters
    ----------
    csr : torch.Tensor, sparse CSR, shape (N, N)
        Symmetric corpus weight matrix.
    similarity : torch.Tensor, shape (B, N)
        Cosine of each query to each passage.
    seeds : torch.Tensor, shape (B, S), long
    max_nodes : int
        M; when seeds and neighbours exceed it, neighbours are kept by similarity.

    Returns
    -------
    nodes : torch.Tensor, shape (B, M), long
        Corpus rows of the local nodes, seeds first (``0`` in padded slots).
    mask : torch.Tensor, shape (B, M), bool
    weights : torch.Tensor, shape (B, M, M)
        The induced subgraph's weights (0 on padding).
    """
    b, n = similarity.shape
    s = seeds.shape[1]
    m = min(max_nodes, n)
    device = similarity.device
    parts = (csr.crow_indices().clone(), csr.col_indices().clone(), csr.values().clone())
    member = torch.zeros(b, n, dtype=torch.bool, device=device)
    owner, col, _ = _csr_rows(
        parts, seeds.reshape(-1), torch.ones(b * s, dtype=torch.bool, device=device)
    )
    member[owner // s, col] = True  # neighbours of a seed
    key = torch.where(member, similarity, -torch.inf)
    key.scatter_(1, seeds, similarity.gather(1, seeds) + 3.0)  # seeds first
    best, nodes = key.topk(m, dim=1)
    mask = best > -torch.inf
    nodes = nodes.masked_fill(~mask, 0)
    # local position of every corpus row, -1 when not in the local graph
    position = torch.full((b, n), -1, dtype=torch.long, device=device)
    local = torch.arange(m, device=device).expand(b, m)
    rows = torch.arange(b, device=device)[:, None].expand(b, m)
    position[rows[mask], nodes[mask]] = local[mask]
    # the CSR rows of every local node, keeping the columns that are local
    owner, col, val = _csr_rows(parts, nodes.reshape(-1), mask.reshape(-1))
    qb, qi = owner // m, owner % m
    qj = position[qb, col]
    keep = qj >= 0
    weights = torch.zeros(b, m, m, dtype=csr.dtype, device=device)
    weights[qb[keep], qi[keep], qj[keep]] = val[keep]
    return nodes, mask, weights


def corpus_graph(corpus: Corpus) -> PassageGraph:
    """The passage graph of ``corpus`` (cached under ``corpus.cache_dir/graphs``)."""
    cache = None if corpus.cache_dir is None else Path(corpus.cache_dir) / "graphs"
    return build_passage_graph(corpus.embeddings, corpus.titles, corpus.texts, cache_dir=cache)


def head_radius(corpus: Corpus, head: str | None) -> torch.Tensor | None:
    """Radius (N,) of each passage under the trained Poincare head saved at ``head``; None
    without a head (the fixed projection's radius is then used)."""
    if head is None:
        return None
    with torch.no_grad():
        radius = PoincareHead.load(head).radius(corpus.embeddings.float()).clamp_min(1e-6)
    return radius.to(corpus.embeddings.dtype)


def fixed_radius(embeddings: torch.Tensor) -> torch.Tensor:
    """Hyperbolic radius (c = 1) of the fixed Poincare projection of each embedding, (N,)."""
    import geoopt

    return geoopt.PoincareBall(c=1.0).dist0(fixed_projection(embeddings)).clamp_min(1e-6)


def _as_result(output: IsoRagOutput, num_rows: int) -> RerankResult:
    """Scatter the top-k of ``output`` into scores over all ``num_rows`` corpus rows."""
    b = output.indices.shape[0]
    scores = torch.full(
        (b, num_rows), -torch.inf, dtype=output.scores.dtype, device=output.scores.device
    )
    valid = output.indices >= 0
    scores.scatter_(1, output.indices.clamp_min(0), output.scores.masked_fill(~valid, -torch.inf))
    return RerankResult(scores=scores, keep=scores > -torch.inf)


class _CorpusRetriever:
    """What the corpus-level retrievers share: the config, the corpus rows and the
    Retriever contract."""

    name: str
    config_class: type | None = None  # the config dataclass; None: the method takes none
    embeddings: torch.Tensor
    doc_ids: list[str]

    def __init__(self, config=None) -> None:
        if self.config_class is None:
            if config is not None:
                raise ValueError(f"{self.name}: takes no config, got {config!r}")
        elif config is None:
            config = self.config_class()
        self.config = config

    def fit(self, corpus: Corpus):
        """Index ``corpus`` (its passage graph is built or loaded from the cache)."""
        self.fit_graph(corpus.embeddings, corpus_graph(corpus), doc_ids=corpus.doc_ids)
        return self

    @property
    def row_ids(self) -> list[str]:
        """The document id of each corpus row."""
        self._check_fitted()
        return self.doc_ids

    def _check_fitted(self) -> None:
        if not hasattr(self, "doc_ids"):
            raise ValueError(f"{self.name}: call fit(corpus) before retrieving")

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Scores over the corpus rows; the ``top_k`` best of each query are kept."""
        return _as_result(self.search(queries.embeddings, top_k=top_k), len(self.row_ids))


class IsoRag(_CorpusRetriever):
    """ISO-RAG retrieval over a corpus passage graph, batched over queries.

    ``IsoRag(config).fit(corpus)`` builds the corpus passage graph and the fixed Poincare
    radius of each passage; :meth:`fit_graph` takes a graph and radii of your own (e.g. a
    trained :class:`~georag.models.poincare.PoincareHead`).

    Parameters
    ----------
    config : IsoRagConfig, optional
    """

    name = "iso"
    config_class = IsoRagConfig

    def fit(self, corpus: Corpus) -> IsoRag:
        """Index ``corpus``: its passage graph (cached) and the radius of each passage."""
        radius = head_radius(corpus, self.config.head)
        return self.fit_graph(
            corpus.embeddings, corpus_graph(corpus), radius, doc_ids=corpus.doc_ids
        )

    def fit_graph(
        self,
        embeddings: torch.Tensor,
        graph: PassageGraph,
        radius: torch.Tensor | None = None,
        *,
        doc_ids: list[str] | None = None,
    ) -> IsoRag:
        """Index a corpus given as embeddings and its passage graph.

        Parameters
        ----------
        embeddings : torch.Tensor, shape (N, D)
            Unit-norm passage embeddings (cosine = inner product).
        graph : PassageGraph
            The corpus passage graph.
        radius : torch.Tensor, shape (N,), optional
            Hyperbolic radius of each passage in the Poincare ball (the volume proxy);
            default: :func:`fixed_radius` of the embeddings.
        doc_ids : list of str, length N, optional
            Row ids for :meth:`retrieve` (default ``"0"``, ``"1"``, ...).
        """
        _check_corpus(embeddings, graph)
        radius = fixed_radius(embeddings) if radius is None else radius
        if (
            radius.shape != (graph.num_nodes,)
            or not torch.isfinite(radius).all()
            or (radius <= 0).any()
        ):
            raise ValueError(
                f"radius must be finite, positive, of shape ({graph.num_nodes},); "
                f"got shape {tuple(radius.shape)}"
            )
        self.embeddings = embeddings
        self.doc_ids = _row_ids(doc_ids, graph.num_nodes)
        weight = graph.edge_weight(
            topo_weight=self.config.topo_weight, topological=self.config.topological
        )
        self.csr = graph.to_csr(weight.to(embeddings.dtype))
        self.strength = graph.strength(weight.to(embeddings.dtype))
        if self.config.volume == "radius":
            self.volume = radius.to(embeddings.dtype)
        else:
            self.volume = graph.degree(weight).to(embeddings.dtype).clamp_min(1.0)
        return self

    def trace(self, query: torch.Tensor) -> IsoRagTrace:
        """Every intermediate of the retrieval (local graphs, ratios, pruning, PPR, scores).

        Parameters
        ----------
        query : torch.Tensor, shape (B, D)
            Unit-norm query embeddings.
        """
        self._check_fitted()
        _check_query(query, self.embeddings)
        cfg = self.config
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        seeds = _seeds(similarity, cfg.num_seeds)
        nodes, mask, weights = local_candidate_graph(
            self.csr, similarity, seeds, max_nodes=cfg.max_nodes
        )
        volume = torch.where(mask, self.volume[nodes], 1.0)
        strength = torch.where(mask, self.strength[nodes], 0.0)
        ratio, _ = local_cheeger_ratio(
            weights, volume, sweep_size=cfg.sweep_size, strength=strength, mask=mask
        )
        scores = pruning_scores(weights, ratio, mask=mask)
        pruned, removed = self.prune(weights, scores)
        local_sim = similarity.gather(1, nodes)
        personalization = torch.zeros_like(local_sim)
        s = cfg.num_seeds  # seeds occupy the first s local slots
        personalization[:, :s] = local_sim[:, :s].clamp_min(1e-6)
        # an edgeless (fully pruned) graph is all dangling nodes: PPR = personalization
        ppr = personalized_pagerank(
            pruned,
            personalization,
            damping=cfg.damping,
            tol=cfg.tol,
            max_iter=cfg.max_iter,
            mask=mask,
        )
        top = ppr / ppr.amax(dim=1, keepdim=True)
        final = (cfg.lam * top + (1 - cfg.lam) * local_sim).masked_fill(~mask, -torch.inf)
        return IsoRagTrace(
            nodes,
            mask,
            weights,
            ratio,
            scores,
            pruned,
            removed,
            personalization,
            ppr,
            local_sim,
            final,
        )

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query, with the local graphs' sizes.

        Parameters
        ----------
        query : torch.Tensor, shape (B, D)
            Unit-norm query embeddings.
        top_k : int
            Passages returned per query (at most the local graph's size).
        """
        if top_k < 1:
            raise ValueError(f"top_k must be positive, got {top_k}")
        t = self.trace(query)
        best, indices = _topk(t.final, t.nodes, top_k)
        return IsoRagOutput(
            best,
            indices,
            (t.weights > 0).sum(dim=(1, 2)) // 2,
            t.removed.sum(dim=(1, 2)) // 2,
            t.mask.sum(dim=1),
        )

    def prune(
        self, weights: torch.Tensor, scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Remove the edges whose score exceeds ``prune_threshold`` (``inf``: none).

        Subclasses may override it (ablations).

        Parameters
        ----------
        weights, scores : torch.Tensor, shape (B, M, M)

        Returns
        -------
        pruned : torch.Tensor, shape (B, M, M)
        removed : torch.Tensor, shape (B, M, M), bool
        """
        return prune_edges(weights, scores, threshold=self.config.prune_threshold)


@dataclass(frozen=True)
class GlobalPPRConfig:
    """Whole-graph PPR (the HippoRAG-style baseline of ISO-RAG's harness).

    Attributes
    ----------
    num_seeds : int
        s, as in ISO-RAG.
    damping : float
        HippoRAG's 0.5.
    lam : float
        1 ranks by PPR alone (HippoRAG); otherwise ``lam * PPR / max + (1 - lam) * cosine``.
    topo_weight : float
        Weight of topological edges, as in ISO-RAG.
    tol, max_iter
        Power iteration (sparse CSR path of the diffusion module).
    """

    num_seeds: int = 3
    damping: float = 0.5
    lam: float = 1.0
    topo_weight: float = 0.5
    tol: float = 1e-6
    max_iter: int = 200

    def __post_init__(self) -> None:
        if self.num_seeds < 1:
            raise ValueError(f"num_seeds must be at least 1, got {self.num_seeds}")
        if not 0.0 <= self.lam <= 1.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(
                f"need lam in [0, 1] and damping in [0, 1), got {self.lam}, {self.damping}"
            )
        if self.topo_weight < 0:
            raise ValueError(f"topo_weight must be >= 0, got {self.topo_weight}")


class GlobalPPR(_CorpusRetriever):
    """HippoRAG-style baseline: PPR from the same seeds over the whole, unpruned graph.

    Parameters
    ----------
    config : GlobalPPRConfig, optional
    """

    name = "ppr_global"
    config_class = GlobalPPRConfig

    def fit_graph(
        self, embeddings: torch.Tensor, graph: PassageGraph, *, doc_ids: list[str] | None = None
    ) -> GlobalPPR:
        """Index a corpus given as embeddings (N, D) and its passage graph."""
        _check_corpus(embeddings, graph)
        self.embeddings = embeddings
        self.doc_ids = _row_ids(doc_ids, graph.num_nodes)
        weight = graph.edge_weight(topo_weight=self.config.topo_weight)
        self.csr = graph.to_csr(weight.to(embeddings.dtype))
        self.num_edges = int(self.csr.values().numel()) // 2
        return self

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query; see :meth:`IsoRag.search`."""
        self._check_fitted()
        _check_query(query, self.embeddings)
        cfg = self.config
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        seeds = _seeds(similarity, cfg.num_seeds)
        p = torch.zeros_like(similarity).scatter_(
            1, seeds, similarity.gather(1, seeds).clamp_min(1e-6)
        )
        ppr = personalized_pagerank(
            self.csr, p.T.contiguous(), damping=cfg.damping, tol=cfg.tol, max_iter=cfg.max_iter
        ).T
        if cfg.lam < 1.0:
            ppr = cfg.lam * ppr / ppr.amax(dim=1, keepdim=True) + (1 - cfg.lam) * similarity
        rows = torch.arange(similarity.shape[1]).expand_as(similarity)
        best, indices = _topk(ppr, rows, top_k)
        b = query.shape[0]
        return IsoRagOutput(
            best,
            indices,
            torch.full((b,), self.num_edges),
            torch.zeros(b, dtype=torch.long),
            torch.full((b,), similarity.shape[1]),
        )


class DenseRetriever(_CorpusRetriever):
    """Dense baseline: the top-k passages by cosine (no graph)."""

    name = "dense"

    def fit(self, corpus: Corpus) -> DenseRetriever:
        """Index ``corpus`` by its embeddings."""
        return self.fit_embeddings(corpus.embeddings, doc_ids=corpus.doc_ids)

    def fit_embeddings(
        self, embeddings: torch.Tensor, *, doc_ids: list[str] | None = None
    ) -> DenseRetriever:
        """Index unit-norm embeddings (N, D)."""
        if embeddings.dim() != 2 or not torch.isfinite(embeddings).all():
            raise ValueError(f"embeddings must be finite (N, D), got {tuple(embeddings.shape)}")
        self.embeddings = embeddings
        self.doc_ids = _row_ids(doc_ids, embeddings.shape[0])
        return self

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query by cosine."""
        self._check_fitted()
        _check_query(query, self.embeddings)
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        rows = torch.arange(similarity.shape[1]).expand_as(similarity)
        best, indices = _topk(similarity, rows, top_k)
        b = query.shape[0]
        zero = torch.zeros(b, dtype=torch.long)
        return IsoRagOutput(best, indices, zero, zero, torch.full((b,), similarity.shape[1]))


def _row_ids(doc_ids: list[str] | None, n: int) -> list[str]:
    if doc_ids is None:
        return [str(i) for i in range(n)]
    if len(doc_ids) != n:
        raise ValueError(f"doc_ids has {len(doc_ids)} ids for {n} passages")
    return list(doc_ids)


def output_to_run(
    output: IsoRagOutput, query_ids: list[str], doc_ids: list[str]
) -> dict[str, dict[str, float]]:
    """``{query id: {doc id: score}}`` for :func:`georag.eval.metrics.evaluate`, by the one
    rule of :func:`~georag.batch.scores_to_run`."""
    result = _as_result(output, len(doc_ids))
    return scores_to_run(result.scores, result.keep, query_ids, doc_ids)
