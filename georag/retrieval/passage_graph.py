"""The corpus passage graph: semantic k-NN edges plus topological (title / entity) edges.

Built once per corpus and cached on disk (atomic write, validated read). Edges are
undirected and stored in both directions, coalesced, without self-loops. Each edge
carries its cosine similarity when it is a semantic k-NN edge (0 otherwise) and a flag
when it is topological, so that the retrieval can weigh the two kinds or drop one.

Topological edges (all undirected):

* **title mention**: passage ``j``'s text mentions passage ``i``'s title (word n-gram
  match, case-insensitive; a trailing parenthetical such as ``"Paris (band)"`` is dropped
  from the title first), ``i`` and ``j`` having different titles;
* **shared title**: two passages with the same (normalized) title;
* **shared entity**: two passages that both contain an entity string, here a run of two or
  more capitalized words (``"Shirley Temple"``, ``"United States"``); strings found in more
  than ``max_entity_df`` passages make no edges (they would make large cliques).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.utils import degree, to_undirected

from georag._io import atomic_write
from georag.batch import Corpus
from georag.geometry.diffusion import edge_index_to_csr
from georag.retrieval.cache import content_hash
from georag.retrieval.dense import DenseIndex

__all__ = [
    "PassageGraphConfig",
    "PassageGraph",
    "build_passage_graph",
    "corpus_graph",
    "local_candidate_graph",
    "entity_strings",
    "topological_edges",
    "semantic_edges",
]

FORMAT = "georag-passage-graph-v2"
_WORD = re.compile(r"\w+")
_ENTITY = re.compile(r"[A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_ARTICLES = frozenset({"the", "a", "an"})


@dataclass(frozen=True)
class PassageGraphConfig:
    """How the passage graph is built.

    Attributes
    ----------
    knn : int
        Semantic neighbours per passage (cosine, faiss flat index).
    min_similarity : float
        Semantic edges need a cosine above this.
    title_mentions, shared_titles, shared_entities : bool
        Which topological edges to add.
    max_title_words : int
        Longest title (in words) matched in passage texts.
    max_entity_df : int
        Entity strings in more passages than this make no edges.
    """

    knn: int = 10
    min_similarity: float = 0.0
    title_mentions: bool = True
    shared_titles: bool = True
    shared_entities: bool = True
    max_title_words: int = 8
    max_entity_df: int = 20

    def __post_init__(self) -> None:
        if self.knn < 0:
            raise ValueError(f"knn must be non-negative, got {self.knn}")
        if self.max_title_words < 1 or self.max_entity_df < 2:
            raise ValueError(
                f"need max_title_words >= 1 and max_entity_df >= 2, got "
                f"{self.max_title_words}, {self.max_entity_df}"
            )


@dataclass(frozen=True)
class PassageGraph:
    """An undirected passage graph held as an edge list (both directions).

    Attributes
    ----------
    num_nodes : int
        N passages.
    edge_index : torch.Tensor, shape (2, E), long
        Coalesced (sorted by source, then target), symmetric, no self-loops.
    semantic : torch.Tensor, shape (E,), float32
        Cosine similarity of semantic k-NN edges; 0 for purely topological edges.
    topological : torch.Tensor, shape (E,), bool
        True for topological edges.
    """

    num_nodes: int
    edge_index: torch.Tensor
    semantic: torch.Tensor
    topological: torch.Tensor

    def edge_weight(
        self, *, topo_weight: float = 1.0, semantic: bool = True, topological: bool = True
    ) -> torch.Tensor:
        """Weight of each edge: ``cosine * semantic + topo_weight * topological``.

        Returns
        -------
        torch.Tensor, shape (E,)
            Zero for an edge of a dropped kind.
        """
        if topo_weight < 0:
            raise ValueError(f"topo_weight must be non-negative, got {topo_weight}")
        weight = torch.zeros_like(self.semantic)
        if semantic:
            weight = weight + self.semantic
        if topological:
            weight = weight + topo_weight * self.topological.to(weight.dtype)
        return weight

    def to_csr(self, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """The weight matrix as sparse CSR (N, N); zero-weight edges are dropped."""
        weight = self.edge_weight() if edge_weight is None else edge_weight
        keep = weight > 0
        return edge_index_to_csr(
            self.edge_index[:, keep], self.num_nodes, weight[keep], undirected=False
        )

    def degree(self, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """Number of edges of each node with positive weight, shape (N,)."""
        keep = slice(None) if edge_weight is None else edge_weight > 0
        return degree(self.edge_index[0, keep], self.num_nodes)

    def strength(self, edge_weight: torch.Tensor) -> torch.Tensor:
        """Total edge weight of each node, shape (N,)."""
        return torch.zeros(self.num_nodes, dtype=edge_weight.dtype).index_add_(
            0, self.edge_index[0], edge_weight
        )

    def counts(self) -> dict[str, int]:
        """Undirected edge counts by kind."""
        both = (self.semantic > 0) & self.topological
        return {
            "edges": self.edge_index.shape[1] // 2,
            "semantic": int((self.semantic > 0).sum()) // 2,
            "topological": int(self.topological.sum()) // 2,
            "both": int(both.sum()) // 2,
        }


def _normalize_title(title: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(_PAREN.sub("", title).lower()))


def entity_strings(text: str) -> set[str]:
    """Runs of two or more capitalized words in ``text``, lower-cased.

    A leading article (``The``, ``A``, ``An``, capitalized at a sentence start) is dropped,
    and the run must still have two words.
    """
    out = set()
    for match in _ENTITY.finditer(text):
        words = match.group(0).lower().split()
        if words[0] in _ARTICLES:
            words = words[1:]
        if len(words) >= 2:
            out.add(" ".join(words))
    return out


def _pairs_within(groups: list[list[int]]) -> list[tuple[int, int]]:
    return [(a, b) for group in groups for i, a in enumerate(group) for b in group[i + 1 :]]


def topological_edges(
    titles: Sequence[str], texts: Sequence[str], *, config: PassageGraphConfig
) -> torch.Tensor:
    """Topological edges (see the module docstring), one direction each.

    Returns
    -------
    torch.Tensor, shape (2, E_t), long
    """
    n = len(titles)
    keys = [_normalize_title(t) for t in titles]
    by_title: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        if key:
            by_title[key].append(i)
    pairs: list[tuple[int, int]] = []
    if config.shared_titles:
        pairs += _pairs_within([g for g in by_title.values() if len(g) > 1])
    if config.title_mentions:
        longest = min(config.max_title_words, max((len(k) for k in by_title), default=0))
        for j in range(n):
            words = _WORD.findall(texts[j].lower())
            found = {
                tuple(words[s : s + m])
                for m in range(1, longest + 1)
                for s in range(len(words) - m + 1)
            }
            for key in found & by_title.keys():
                if key != keys[j]:
                    pairs += [(i, j) for i in by_title[key]]
    if config.shared_entities:
        by_entity: dict[str, list[int]] = defaultdict(list)
        for j in range(n):
            for entity in entity_strings(texts[j]):
                by_entity[entity].append(j)
        pairs += _pairs_within(
            [g for g in by_entity.values() if 1 < len(g) <= config.max_entity_df]
        )
    if not pairs:
        return torch.empty(2, 0, dtype=torch.long)
    return torch.tensor(pairs, dtype=torch.long).T


def semantic_edges(
    embeddings: torch.Tensor, *, knn: int, min_similarity: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """k-NN edges by inner product (cosine on unit rows) through a faiss flat index.

    Returns
    -------
    edge_index : torch.Tensor, shape (2, E_s), long
        ``i -> j`` for each of i's k nearest other passages with cosine > ``min_similarity``.
    weight : torch.Tensor, shape (E_s,), float32
    """
    n = embeddings.shape[0]
    if knn == 0 or n < 2:
        return torch.empty(2, 0, dtype=torch.long), torch.empty(0)
    index = DenseIndex(embeddings.shape[1], kind="flat", use_gpu=False)
    index.add(embeddings)
    scores, neighbours = index.search(embeddings, min(knn + 1, n))
    source = torch.arange(n).unsqueeze(1).expand_as(neighbours)
    keep = (neighbours != source) & (neighbours >= 0) & (scores > min_similarity)
    # a passage may miss itself among ties of duplicates: keep at most knn per row
    keep &= keep.cumsum(dim=1) <= knn
    return torch.stack([source[keep], neighbours[keep]]), scores[keep]


def _assemble(
    n: int, sem_index: torch.Tensor, sem_weight: torch.Tensor, topo_index: torch.Tensor
) -> PassageGraph:
    edge_index = torch.cat([sem_index, topo_index], dim=1)
    attr = torch.cat(
        [
            torch.stack([sem_weight, torch.zeros_like(sem_weight)], dim=1),
            torch.stack([torch.zeros(topo_index.shape[1]), torch.ones(topo_index.shape[1])], dim=1),
        ]
    )
    loops = edge_index[0] == edge_index[1]
    edge_index, attr = edge_index[:, ~loops], attr[~loops]
    edge_index, attr = to_undirected(edge_index, attr, num_nodes=n, reduce="max")
    return PassageGraph(n, edge_index, attr[:, 0].contiguous(), attr[:, 1] > 0)


def build_passage_graph(
    embeddings: torch.Tensor,
    titles: Sequence[str],
    texts: Sequence[str],
    *,
    config: PassageGraphConfig | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> PassageGraph:
    """Build (or load from ``cache_dir``) the passage graph of a corpus.

    Parameters
    ----------
    embeddings : torch.Tensor, shape (N, D)
        Unit-norm passage embeddings.
    titles, texts : sequence of str, length N
    config : PassageGraphConfig, optional
    cache_dir : path, optional
        Where the graph is cached, keyed by the config, the texts and the embeddings.
    """
    config = config or PassageGraphConfig()
    n = len(titles)
    if embeddings.dim() != 2 or embeddings.shape[0] != n or len(texts) != n:
        raise ValueError(
            f"embeddings {tuple(embeddings.shape)}, titles ({n}) and texts "
            f"({len(texts)}) must agree on N"
        )
    if n == 0:
        raise ValueError("titles: the corpus is empty")
    if not torch.isfinite(embeddings).all():
        raise ValueError("embeddings hold NaN or inf")
    embeddings = embeddings.detach().float().cpu().contiguous()
    path = None
    if cache_dir is not None:
        key = hashlib.sha256(
            json.dumps(
                {
                    "format": FORMAT,
                    "config": asdict(config),
                    "texts": content_hash([*titles, *texts]),
                    "embeddings": hashlib.sha256(embeddings.numpy().tobytes()).hexdigest(),
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()[:32]
        path = Path(cache_dir) / f"passage-graph-{key}.npz"
        cached = _load(path, n)
        if cached is not None:
            return cached
    sem_index, sem_weight = semantic_edges(
        embeddings, knn=config.knn, min_similarity=config.min_similarity
    )
    graph = _assemble(n, sem_index, sem_weight, topological_edges(titles, texts, config=config))
    if path is not None:
        _save(path, graph)
    return graph


def _save(path: Path, graph: PassageGraph) -> None:
    arrays = {
        "edge_index": graph.edge_index.numpy(),
        "semantic": graph.semantic.numpy(),
        "topological": graph.topological.numpy(),
    }
    digest = hashlib.sha256(b"".join(a.tobytes() for a in arrays.values())).hexdigest()
    header = json.dumps({"format": FORMAT, "num_nodes": graph.num_nodes, "sha256": digest})

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.savez(handle, header=np.frombuffer(header.encode(), dtype=np.uint8), **arrays)

    atomic_write(path, write)


def _load(path: Path, n: int) -> PassageGraph | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            header = json.loads(bytes(archive["header"]).decode())
            arrays = {k: archive[k] for k in ("edge_index", "semantic", "topological")}
    except (OSError, ValueError, KeyError, EOFError, RecursionError, zipfile.BadZipFile):
        return None
    digest = hashlib.sha256(b"".join(a.tobytes() for a in arrays.values())).hexdigest()
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("num_nodes") != n
        or header.get("sha256") != digest
    ):
        return None
    return PassageGraph(
        n,
        torch.from_numpy(arrays["edge_index"]),
        torch.from_numpy(arrays["semantic"]),
        torch.from_numpy(arrays["topological"]),
    )


def corpus_graph(corpus: Corpus) -> PassageGraph:
    """The passage graph of ``corpus`` (cached under ``corpus.cache_dir/graphs``)."""
    cache = None if corpus.cache_dir is None else Path(corpus.cache_dir) / "graphs"
    return build_passage_graph(corpus.embeddings, corpus.titles, corpus.texts, cache_dir=cache)


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
    csr: torch.Tensor,
    similarity: torch.Tensor,
    sources: torch.Tensor,
    *,
    max_nodes: int,
    hops: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sources and their neighbours, as padded dense local graphs.

    Parameters
    ----------
    csr : torch.Tensor, sparse CSR, shape (N, N)
        Symmetric corpus weight matrix.
    similarity : torch.Tensor, shape (B, N)
        Cosine of each query to each passage.
    sources : torch.Tensor, shape (B, S), long
    max_nodes : int
        M; when sources and neighbours exceed it, neighbours are kept by similarity.
    hops : int
        Neighbourhood depth: each hop after the first adds the neighbours of the local
        nodes chosen so far (at most M of them, by similarity), then chooses again.

    Returns
    -------
    nodes : torch.Tensor, shape (B, M), long
        Corpus rows of the local nodes, sources first (``0`` in padded slots).
    mask : torch.Tensor, shape (B, M), bool
    weights : torch.Tensor, shape (B, M, M)
        The induced subgraph's weights (0 on padding).
    """
    b, n = similarity.shape
    m = min(max_nodes, n)
    device = similarity.device
    parts = (csr.crow_indices().clone(), csr.col_indices().clone(), csr.values().clone())
    if hops < 1:
        raise ValueError(f"hops must be at least 1, got {hops}")
    member = torch.zeros(b, n, dtype=torch.bool, device=device)
    frontier = sources
    valid = torch.ones_like(sources, dtype=torch.bool)
    for _ in range(hops):
        width = frontier.shape[1]
        owner, col, _ = _csr_rows(parts, frontier.reshape(-1), valid.reshape(-1))
        member[owner // width, col] = True  # neighbours of a source or a chosen node
        key = torch.where(member, similarity, -torch.inf)
        key.scatter_(1, sources, similarity.gather(1, sources) + 3.0)  # sources first
        best, nodes = key.topk(m, dim=1)
        mask = best > -torch.inf
        frontier, valid = nodes.masked_fill(~mask, 0), mask
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
