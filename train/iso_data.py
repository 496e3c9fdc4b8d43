"""Question -> supporting-passage pairs and structural radius targets for the Poincare head.

The data is a multi-hop file (MuSiQue JSON or HotpotQA IRCoT jsonl, pooled as in
georag.data.multihop); the project trains on musique_train100 only. Sentence embeddings
(all-MiniLM-L6-v2, frozen) are computed once and cached; the passage graph gives each
passage a structural generality (log of its degree, or its corpus-level local Cheeger
ratio) that becomes a target hyperbolic radius (generic: near the centre).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from georag.data.multihop import load_multihop
from georag.geometry.cheeger import local_cheeger_ratio
from georag.models.poincare import generality_target_radius
from georag.resources import DEFAULT_MODEL, data_roots, default_cache_dir
from georag.retrieval.candidates import FirstStage, FirstStageConfig, query_batch
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.passage_graph import PassageGraph, build_passage_graph

__all__ = ["IsoDataModule", "structural_generality"]

GENERALITY = ("degree", "cheeger")


def structural_generality(
    graph: PassageGraph, *, kind: str = "degree", sweep_size: int = 8
) -> torch.Tensor:
    """Generality of each passage in the corpus graph, shape (N,); larger is more generic.

    ``degree``: ``log(1 + degree)``. ``cheeger``: ``log`` of the local Cheeger ratio with
    unit node volume (cut over the size of the best sweep set) on the whole graph (dense
    (N, N): meant for training corpora of a few thousand passages).
    """
    if kind not in GENERALITY:
        raise ValueError(f"kind must be one of {GENERALITY}, got {kind!r}")
    weight = graph.edge_weight()
    if kind == "degree":
        return torch.log1p(graph.degree(weight))
    dense = graph.to_csr(weight).to_dense()[None]
    ratio, _ = local_cheeger_ratio(dense, torch.ones(1, graph.num_nodes), sweep_size=sweep_size)
    return torch.log(ratio[0] + 1e-6)


class IsoDataModule(L.LightningDataModule):
    """Training pairs of one multi-hop file, with radius targets from the passage graph.

    Parameters
    ----------
    path : str
        A multi-hop file; relative paths resolve under ``data_dir``.
    data_dir : str, optional
        Defaults to ``$GEORAG_DATA``.
    model_path : str
        Frozen sentence encoder.
    max_questions : int, optional
        Use the first questions only (short runs, tests).
    val_fraction : float
        Share of the questions held out for the validation recall (of the same file).
    generality : {"degree", "cheeger"}
        Structural generality behind the radius targets.
    r_min, r_max : float
        Target radius of the most generic / most specific passage.
    batch_size : int
        Pairs per batch (in-batch negatives).
    radius_batch : int
        Passages per batch for the radius-alignment term.
    cache_dir : str, optional
        Embedding and graph cache (default ``$GEORAG_CACHE``).
    seed : int
    """

    def __init__(
        self,
        path: str = "musique_small/musique_train100_hipporag.json",
        data_dir: str | None = None,
        model_path: str = DEFAULT_MODEL,
        max_questions: int | None = None,
        val_fraction: float = 0.2,
        generality: str = "degree",
        r_min: float = 0.5,
        r_max: float = 3.0,
        batch_size: int = 32,
        radius_batch: int = 128,
        cache_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must lie in [0, 1), got {val_fraction}")
        if batch_size < 2 or radius_batch < 1:
            raise ValueError(
                f"need batch_size >= 2 and radius_batch >= 1, got {batch_size}, {radius_batch}"
            )
        if generality not in GENERALITY:
            raise ValueError(f"generality must be one of {GENERALITY}, got {generality!r}")
        self.save_hyperparameters()
        self._ready = False

    def setup(self, stage: str | None = None) -> None:
        if self._ready:
            return
        hp = self.hparams
        path = Path(hp.path)
        if not path.is_absolute():
            path = next(iter(data_roots(hp.data_dir)), Path(".")) / path
        data = load_multihop(path, max_questions=hp.max_questions)
        cache = Path(hp.cache_dir) if hp.cache_dir else default_cache_dir()
        encoder = TextEncoder(hp.model_path, show_progress=False)
        stage_ = FirstStage(
            data, FirstStageConfig(top_m=2), encoder=encoder, cache_dir=cache / "embeddings"
        )
        self.doc_ids = list(stage_.units.doc_ids)
        self.corpus = stage_.embeddings
        docs = [data.corpus[d] for d in self.doc_ids]
        graph = build_passage_graph(
            self.corpus, [d.title for d in docs], [d.text for d in docs], cache_dir=cache / "graphs"
        )
        self.generality = structural_generality(graph, kind=hp.generality)
        self.targets = generality_target_radius(self.generality, r_min=hp.r_min, r_max=hp.r_max)
        batch = query_batch(data, encoder, cache_dir=cache / "embeddings")
        qids, queries = batch.ids, batch.embeddings
        order = np.random.default_rng(hp.seed).permutation(len(qids))
        n_val = int(round(hp.val_fraction * len(qids)))
        val, train = sorted(order[:n_val].tolist()), sorted(order[n_val:].tolist())
        row = {d: i for i, d in enumerate(self.doc_ids)}
        self.queries = queries
        self.positives = [sorted(row[d] for d in data.qrels[q]) for q in qids]
        self.pairs = torch.tensor([(q, d) for q in train for d in self.positives[q]])
        self.val_queries = val
        self._ready = True

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            range(len(self.pairs)),
            batch_size=self.hparams.batch_size,
            shuffle=True,
            drop_last=True,
            collate_fn=self._collate,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_queries, batch_size=256, collate_fn=torch.tensor)

    def _collate(self, rows: list[int]) -> dict[str, torch.Tensor]:
        pairs = self.pairs[torch.tensor(rows)]
        q, d = pairs[:, 0], pairs[:, 1]
        known = torch.tensor([[dj in self.positives[qi] for dj in d.tolist()] for qi in q.tolist()])
        known.fill_diagonal_(False)
        sample = torch.randint(len(self.doc_ids), (self.hparams.radius_batch,))
        return {
            "query": self.queries[q],
            "positive": self.corpus[d],
            "false_negatives": known,
            "passages": self.corpus[sample],
            "targets": self.targets[sample],
        }
