"""Learnable HippoRAG 2 retrieval: the graph's weights and the seeding and fusion knobs,
trained through the sparse PPR's implicit gradient; a corpus retriever.

The fixed method (:class:`~georag.retrievers.hipporag2.HippoRAG2`) takes HippoRAG 2's numbers
and the training files' choices. Here the continuous ones are parameters, initialised at
:class:`~georag.retrievers.hipporag2.HippoRAG2Config`'s defaults and kept valid by their
parameterisation (:mod:`georag.models.knobs`):

* ``damping`` (0.5) in (0, 1), through a sigmoid: PPR's probability of following an edge;
* ``passage_node_weight`` (0.05) > 0, through exp: the passage seeds' factor (or share,
  with ``teleport="share"``) in the reset vector;
* ``fusion_weight`` (20) > 0, through exp: the PPR score's weight on the fusion base;
* ``synonym_scale`` (1) > 0, through exp: the synonym edges' weight against the
  passage-phrase edges' (the graph's edge weights).

The discrete parts (the graph, the linked phrases, the dense and BM25 scores of the fusion's
base, the second hop's choice of pairs) are not differentiated. Training scores every
passage's first hop (:meth:`LearnedHippoRAG2.score`) with
:func:`~georag.retrievers.hipporag2.hipporag2_scores`, the function the fixed method calls
with numbers; inference (eval mode, :meth:`LearnedHippoRAG2.retrieve`) runs the fixed method
at the current knob values, so an untrained ``learned_hipporag2`` gives exactly
``hipporag2``'s scores, its second hop included. A learned map of the embeddings is the fixed
config's ``map`` (a trained ``learned_map`` file), not learned here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from georag.batch import QueryBatch
from georag.geometry.diffusion import edge_index_to_csr
from georag.models.knobs import Interval, Positive
from georag.rerank.learned import LearningOptions
from georag.rerank.registry import register
from georag.retrievers.entity import fusion_base
from georag.retrievers.hipporag2 import HippoRAG2, HippoRAG2Config, hipporag2_scores
from georag.retrievers.learned import LearnedRetriever

__all__ = ["LearnedHippoRAG2", "LearnedHippoRAG2Config"]

KNOBS = ("damping", "passage_node_weight", "fusion_weight", "synonym_scale")


@dataclass(frozen=True)
class LearnedHippoRAG2Config(LearningOptions):
    """The fixed method's config (its knobs: the initial values) and the learning settings.

    Parameters
    ----------
    fixed : HippoRAG2Config
        Everything of the fixed method; ``damping``, ``passage_node_weight``, ``fusion_weight``
        and ``synonym_scale`` are the initial knobs (strictly inside their domains).
    top_k : int
        Passages kept when the module is called on a :class:`QueryBatch` (validation).
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`; ``embedding_map`` is not
        supported (give the fixed config a trained ``map``).
    """

    fixed: HippoRAG2Config = field(default_factory=HippoRAG2Config)
    top_k: int = 10

    def __post_init__(self) -> None:
        if self.embedding_map:
            raise ValueError(
                "embedding_map: learned_hipporag2 learns no map; train learned_map and give "
                "its file as fixed.map"
            )
        if not 0.0 < self.fixed.damping < 1.0:
            raise ValueError(f"damping must lie in (0, 1), got {self.fixed.damping}")
        for name in ("passage_node_weight", "fusion_weight", "synonym_scale"):
            value = getattr(self.fixed, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and positive, got {value}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be positive, got {self.top_k}")


@register
class LearnedHippoRAG2(LearnedRetriever):
    """HippoRAG 2's retrieval with learned damping, seed and fusion weights and synonym edge
    weight (module docstring): a corpus-level retriever that is also a
    :class:`torch.nn.Module`."""

    name = "learned_hipporag2"
    config_class = LearnedHippoRAG2Config
    fixed_method = "hipporag2"
    fixed_class = HippoRAG2
    search_space = {
        "fixed.damping": (0.05, 0.95, False),
        "fixed.passage_node_weight": (0.005, 1.0, True),
        "fixed.fusion_weight": (0.5, 200.0, True),
        "fixed.synonym_scale": (0.05, 5.0, True),
    }

    def __init__(self, config: LearnedHippoRAG2Config | None = None) -> None:
        super().__init__(config or LearnedHippoRAG2Config())
        cfg = self.config.fixed
        self.damping = Interval(cfg.damping)
        self.passage_node_weight = Positive(cfg.passage_node_weight)
        self.fusion_weight = Positive(cfg.fusion_weight)
        self.synonym_scale = Positive(cfg.synonym_scale)
        self._load_if_given()

    def _index(self, fixed: HippoRAG2) -> LearnedHippoRAG2:
        """Take the corpus of ``fixed``, which checked it; number its edges so that a
        weight matrix can be assembled from differentiable edge weights."""
        self.base, self.doc_ids, self.graph = fixed, fixed.doc_ids, fixed.graph
        g, n = fixed.graph, fixed.graph.num_passages
        edges = torch.cat([g.contains + torch.tensor([[0], [n]]), g.synonym_index + n], dim=1)
        number = torch.arange(1, edges.shape[1] + 1, dtype=torch.float64)
        numbered = edge_index_to_csr(edges, g.num_nodes, number)
        self._crow, self._col = numbered.crow_indices(), numbered.col_indices()
        self._edge = numbered.values().long() - 1
        self._contains = g.contains.shape[1]
        self._fixed = None
        return self

    def weight_matrix(self) -> torch.Tensor:
        """The graph's weight matrix, sparse CSR, at the current ``synonym_scale`` (its values
        carry the gradient)."""
        dtype = self.base.embeddings.dtype
        edge = torch.cat(
            [
                torch.full((self._contains,), self.graph.config.edge_weight, dtype=dtype),
                self.synonym_scale().to(dtype) * self.graph.synonym_weight.to(dtype),
            ]
        )
        size = (self.graph.num_nodes,) * 2
        return torch.sparse_csr_tensor(
            self._crow, self._col, edge[self._edge], size, check_invariants=False
        )

    def _build_fixed(self) -> HippoRAG2:
        """:class:`HippoRAG2` at the current knob values, fitted on this corpus."""
        hippo = HippoRAG2(replace(self.config.fixed, **self.knobs()))
        return hippo.fit_graph(self.base.embeddings, self.graph, doc_ids=self.doc_ids)

    # --- training: the differentiable path ------------------------------------------------

    def score(self, batch: QueryBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable scores of every passage.

        Returns
        -------
        scores : torch.Tensor, shape (B, N)
        ranked : torch.Tensor, shape (B, N), bool
            Every passage.
        """
        self._check_fitted()
        cfg, base = self.config.fixed, self.base
        dtype = base.embeddings.dtype
        with torch.no_grad():
            dense = base.dense_scores(batch)
            links = base.links(batch)
            fusion = fusion_base(dense, batch.texts, base.bm25, cfg.fusion)
        scores = hipporag2_scores(
            self.weight_matrix(),
            dense,
            links,
            base.specificity,
            fusion,
            passage_node_weight=self.passage_node_weight().to(dtype),
            teleport=cfg.teleport,
            damping=self.damping().to(dtype),
            fusion_weight=self.fusion_weight().to(dtype),
            tol=cfg.tol,
            max_iter=cfg.max_iter,
            block_size=cfg.block_size,
        )
        return scores, torch.ones_like(scores, dtype=torch.bool)
