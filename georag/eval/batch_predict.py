"""Batched reranking of a TREC run, and sharded corpus-graph kernels, through Lightning's
``Trainer.predict``.

One CPU, one GPU or N GPUs with DDP run the same code. The input run is streamed in shards
of ``batch_size`` queries (file order); shard ``k`` goes to rank ``k % world_size``; each
shard's reranked run is written atomically to ``<out>.shards/shard-<k>.trec`` as soon as it
is done, so memory stays flat and an interrupted job resumes by skipping finished shards.
At the end, rank 0 concatenates the shards, in order, into ``out``.

Corpus-graph kernels (:func:`curvature_shards`: the sparse Ollivier-Ricci curvature of a
graph's edges; :func:`ppr_shards`: whole-graph personalized PageRank from many source nodes)
split their edges / queries into ``shards`` contiguous blocks the same way: shard ``k``
on rank ``k % world_size`` (gloo on CPUs, NCCL on GPUs), each written as a sealed
``.npy`` (:func:`georag._io.seal`, SHA-256) under ``<out>.shards/`` when done; a rerun
after a killed rank recomputes only the missing or corrupt shards; rank 0 writes the
concatenation to ``out``. A shard's values depend on the graph and the shard only, so
any number of ranks gives the bytes of one. The graph is memory-mapped
(:func:`georag.retrieval.graph_store.load_graph`).

Lightning is the ``train`` extra: nothing in georag imports this module at import time, and
importing it without Lightning installed raises an ImportError that says what to install.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import BasePredictionWriter
except ImportError as err:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "georag.eval.batch_predict needs Lightning: pip install 'georag[train]'"
    ) from err

from georag._io import ArtifactError, atomic_write, seal, unseal
from georag.batch import CandidateBatch
from georag.data.beir import BeirDataset
from georag.eval.trec import read_run, stream_run, write_run, write_run_text
from georag.rerank.base import PoolReranker
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import corpus_embeddings
from georag.retrieval.encoder import TextEncoder

__all__ = ["curvature_shards", "ppr_shards", "read_array", "rerank_run_file", "shard_path"]


def shard_path(out: Path, shard: int) -> Path:
    return out.parent / f"{out.name}.shards" / f"shard-{shard:06d}.trec"


class _ShardStream(IterableDataset):
    """Candidate batches of this rank's unfinished shards."""

    def __init__(
        self,
        run_path,
        dataset: BeirDataset,
        doc_embeddings: torch.Tensor,
        doc_row: dict[str, int],
        encoder: TextEncoder,
        out: Path,
        batch_size: int,
        top_m: int,
    ) -> None:
        self.run_path, self.dataset, self.encoder = run_path, dataset, encoder
        self.doc_embeddings, self.doc_row = doc_embeddings, doc_row
        self.out, self.batch_size, self.top_m = out, batch_size, top_m

    def _shards(self) -> Iterator[tuple[int, list]]:
        chunk: list = []
        shard = 0
        for item in stream_run(self.run_path):
            chunk.append(item)
            if len(chunk) == self.batch_size:
                yield shard, chunk
                chunk, shard = [], shard + 1
        if chunk:
            yield shard, chunk

    def __iter__(self) -> Iterator[tuple[int, CandidateBatch]]:
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        rank = torch.distributed.get_rank() if distributed else 0
        world = torch.distributed.get_world_size() if distributed else 1
        for shard, chunk in self._shards():
            if shard % world != rank or shard_path(self.out, shard).is_file():
                continue
            yield shard, self._batch(chunk)

    def _batch(self, chunk: list) -> CandidateBatch:
        qids = [qid for qid, _ in chunk]
        unknown = [q for q in qids if q not in self.dataset.queries]
        if unknown:
            raise ValueError(f"run: query ids {unknown[:5]} are not in the data set")
        m = max(min(len(docs), self.top_m) for _, docs in chunk)
        b, d = len(chunk), self.doc_embeddings.shape[1]
        rows = torch.zeros(b, m, dtype=torch.long)
        scores = torch.zeros(b, m)
        mask = torch.zeros(b, m, dtype=torch.bool)
        doc_ids = [[""] * m for _ in range(b)]
        texts = [[""] * m for _ in range(b)]
        for i, (_, docs) in enumerate(chunk):
            ranked = sorted(docs, key=lambda item: -item[1])[:m]
            for j, (doc, score) in enumerate(ranked):
                if doc not in self.doc_row:
                    raise ValueError(f"run: document id {doc!r} is not in the corpus")
                rows[i, j], scores[i, j], mask[i, j] = self.doc_row[doc], score, True
                doc_ids[i][j] = doc
                texts[i][j] = self.dataset.corpus[doc].full_text
        query_texts = [self.dataset.queries[q] for q in qids]
        cands = self.doc_embeddings[rows].reshape(b, m, d)
        return CandidateBatch(
            query=self.encoder.encode(query_texts),
            cands=cands,
            scores=scores,
            mask=mask,
            query_ids=qids,
            doc_ids=doc_ids,
            query_texts=query_texts,
            cand_texts=texts,
        )


class _RerankModule(pl.LightningModule):
    def __init__(self, reranker: PoolReranker, top_k: int | None, encoder: TextEncoder) -> None:
        super().__init__()
        self.reranker, self.top_k, self.encoder = reranker, top_k, encoder

    def on_predict_start(self) -> None:
        # the shard stream encodes its queries with this encoder: on this rank's device
        self.encoder.to(self.device)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        shard, candidates = batch
        return shard, candidates.to(device)

    def predict_step(self, batch, batch_idx):
        shard, candidates = batch
        return shard, self.reranker(candidates).to_run(candidates, top_k=self.top_k)


class _ShardWriter(BasePredictionWriter):
    def __init__(self, out: Path, tag: str) -> None:
        super().__init__(write_interval="batch")
        self.out, self.tag = out, tag

    def write_on_batch_end(
        self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0
    ):
        shard, run = prediction
        path = shard_path(self.out, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_run(run, path, tag=self.tag)


def _merge(out: Path) -> int:
    shards = sorted(shard_path(out, 0).parent.glob("shard-*.trec"))
    for shard in shards:
        read_run(shard)  # checks each shard against its manifest
    write_run_text("".join(shard.read_text(encoding="utf-8") for shard in shards), out)
    return len(shards)


def rerank_run_file(
    run_path: str | os.PathLike,
    dataset: BeirDataset,
    reranker: PoolReranker,
    out: str | os.PathLike,
    *,
    batch_size: int = 256,
    top_m: int = 100,
    top_k: int | None = None,
    model: str = DEFAULT_MODEL,
    cache_dir: str | os.PathLike | None = None,
    accelerator: str = "auto",
    devices: int | str = 1,
    strategy: str = "auto",
) -> Path:
    """Rerank every query of a TREC run and write the result to ``out``.

    Parameters
    ----------
    run_path : path
        Input TREC run (the first stage); at most ``top_m`` candidates per query are used.
    dataset : BeirDataset
        Gives the query and document texts; document embeddings come from the cache.
    reranker : PoolReranker
    out : path
        Output TREC run; shards live in ``<out>.shards/``.
    devices, strategy, accelerator
        Passed to ``lightning.Trainer`` (``devices=2, strategy="ddp"`` for two processes).
        Each rank encodes its queries on its own device (fp16 on CUDA); the document
        embeddings come from the cache (encoded on the CPU when absent).
    """
    if batch_size <= 0 or top_m <= 0:
        raise ValueError(f"batch_size and top_m must be positive, got {batch_size}, {top_m}")
    out = Path(out)
    encoder = TextEncoder(model, show_progress=False, device="cpu")
    doc_ids = list(dataset.corpus)
    embeddings, _ = corpus_embeddings(
        [dataset.corpus[d].full_text for d in doc_ids], encoder, cache_dir=cache_dir
    )
    stream = _ShardStream(
        run_path,
        dataset,
        embeddings,
        {d: i for i, d in enumerate(doc_ids)},
        encoder,
        out,
        batch_size,
        top_m,
    )
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=devices,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        callbacks=[_ShardWriter(out, getattr(reranker, "name", "georag"))],
    )
    loader = DataLoader(stream, batch_size=None)
    trainer.predict(_RerankModule(reranker, top_k, encoder), loader, return_predictions=False)
    trainer.strategy.barrier()
    if trainer.is_global_zero:
        _merge(out)
    trainer.strategy.barrier()
    return out


# ------------------------------------------------------------------ sharded graph kernels
_ARRAY_FORMAT = "georag-array-shard"


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array))
    return buffer.getvalue()


def _read_array(path: Path) -> np.ndarray:
    payload, _ = unseal(path.read_bytes(), where=path, format=_ARRAY_FORMAT)
    return np.load(io.BytesIO(payload), allow_pickle=False)


def _array_shard(out: Path, shard: int) -> Path:
    return out.parent / f"{out.name}.shards" / f"shard-{shard:06d}.npy"


def _finished(out: Path, shard: int) -> bool:
    path = _array_shard(out, shard)
    if not path.is_file():
        return False
    try:
        _read_array(path)
    except ArtifactError:
        return False  # a corrupt shard is computed again
    return True


class _ArrayShards(IterableDataset):
    """The indices of this rank's unfinished shards."""

    def __init__(self, count: int, out: Path) -> None:
        self.count, self.out = count, out

    def __iter__(self) -> Iterator[int]:
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        rank = torch.distributed.get_rank() if distributed else 0
        world = torch.distributed.get_world_size() if distributed else 1
        for shard in range(self.count):
            if shard % world == rank and not _finished(self.out, shard):
                yield shard


class _ArrayModule(pl.LightningModule):
    def __init__(self, compute: Callable[[int], np.ndarray]) -> None:
        super().__init__()
        self.compute = compute

    def predict_step(self, batch, batch_idx):
        return batch, self.compute(int(batch))


class _ArrayWriter(BasePredictionWriter):
    def __init__(self, out: Path) -> None:
        super().__init__(write_interval="batch")
        self.out = out

    def write_on_batch_end(
        self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0
    ):
        shard, array = prediction
        path = _array_shard(self.out, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, seal(_npy(array), format=_ARRAY_FORMAT, version=1, shard=shard))


def _predict_arrays(
    compute: Callable[[int], np.ndarray],
    bounds: np.ndarray,
    out: str | os.PathLike,
    *,
    what: str,
    estimate: float,
    memory_limit: int | None,
    trainer: dict | None,
) -> Path:
    """Check a rank's ``estimate`` of bytes, then run ``compute(shard)`` for every
    unfinished shard (``len(bounds) - 1`` of them) over the ranks; rank 0 writes the
    shards concatenated along axis 0 to ``out`` (a sealed ``.npy``)."""
    from georag.retrieval.graph_store import check_memory

    count, out = len(bounds) - 1, Path(out)

    check_memory(int(estimate), what, limit=memory_limit)
    options = {"accelerator": "cpu", "devices": 1, **(trainer or {})}
    trainer = pl.Trainer(
        **options,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[_ArrayWriter(out)],
    )
    loader = DataLoader(_ArrayShards(count, out), batch_size=None)
    trainer.predict(_ArrayModule(compute), loader, return_predictions=False)
    trainer.strategy.barrier()
    if trainer.is_global_zero:
        parts = [_read_array(_array_shard(out, k)) for k in range(count)]
        atomic_write(out, seal(_npy(np.concatenate(parts)), format=_ARRAY_FORMAT, version=1))
    trainer.strategy.barrier()
    return out


def read_array(path: str | os.PathLike) -> np.ndarray:
    """The array a sharded kernel wrote (checked against its seal)."""
    return _read_array(Path(path))


def _blocks(total: int, shards: int) -> np.ndarray:
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return np.linspace(0, total, min(shards, max(total, 1)) + 1).astype(np.int64)


def curvature_shards(
    graph: str | os.PathLike,
    out: str | os.PathLike,
    *,
    shards: int = 8,
    memory_limit: int | None = None,
    trainer: dict | None = None,
    **options,
) -> Path:
    """Sparse Ollivier-Ricci curvature of every edge of a graph folder, edges in
    ``shards`` contiguous blocks over the ranks.

    ``options`` go to :func:`georag.geometry.ricci.sparse.sparse_ollivier_ricci`. Writes
    ``out`` (float64 (E,), sealed; read it with :func:`read_array`) and returns it. A
    rank's memory (the graph, a shard's neighbourhoods, a pass of cost entries) is
    estimated first and refused above ``memory_limit`` bytes (default: the memory
    available), before anything is allocated. ``trainer``: options of
    ``lightning.Trainer`` (default one CPU process; ``{"devices": 2, "strategy": "ddp"}``
    for two gloo ranks, ``{"accelerator": "gpu", "devices": N, "strategy": "ddp"}`` for NCCL).
    """
    from georag.geometry.ricci.sparse import sparse_ollivier_ricci
    from georag.retrieval.graph_store import load_graph

    corpus = load_graph(graph)
    e, n = corpus.edges.shape[1], corpus.num_nodes
    bounds = _blocks(e, shards)
    # the graph and its arcs (both directions, sorted), a shard's neighbourhoods, a pass
    per_edge = 1 + 2 * (2 * e) / max(n, 1)
    estimate = 200 * e + 100 * per_edge * int(np.diff(bounds).max(initial=0)) + 64 * n
    estimate += 40 * options.get("pairs_per_pass", 1 << 23)

    def compute(shard: int) -> np.ndarray:
        edge_index = torch.from_numpy(np.array(corpus.edges))
        lengths = torch.from_numpy(np.array(corpus.lengths))
        subset = torch.arange(int(bounds[shard]), int(bounds[shard + 1]))
        kappa = sparse_ollivier_ricci(
            edge_index, lengths, corpus.num_nodes, subset=subset, **options
        )
        return kappa.numpy()

    return _predict_arrays(
        compute,
        bounds,
        out,
        what=f"{corpus.folder}: sparse curvature of {e} edges ({shards} shards)",
        estimate=estimate,
        memory_limit=memory_limit,
        trainer=trainer,
    )


def ppr_shards(
    graph: str | os.PathLike,
    sources: np.ndarray,
    out: str | os.PathLike,
    *,
    shards: int = 8,
    damping: float = 0.85,
    tol: float = 1e-6,
    memory_limit: int | None = None,
    trainer: dict | None = None,
) -> Path:
    """Whole-graph personalized PageRank from each source node (sparse path of
    :func:`georag.geometry.diffusion.personalized_pagerank`), the sources in ``shards``
    contiguous blocks over the ranks.

    Edge weights are ``max(1 - length, 0)`` (the cosine of a k-NN graph whose lengths
    are ``1 - cos``), both directions. Writes ``out`` (float32 (Q, N), row ``q`` the
    scores of ``sources[q]``, sealed) and returns it. A rank's memory is estimated first and
    refused above ``memory_limit`` bytes; ``trainer`` as in :func:`curvature_shards`.
    """
    from georag.geometry.diffusion import personalized_pagerank
    from georag.retrieval.graph_store import load_graph

    corpus = load_graph(graph)
    e, n = corpus.edges.shape[1], corpus.num_nodes
    sources = np.asarray(sources, dtype=np.int64)
    if sources.ndim != 1 or (
        sources.size and (sources.min() < 0 or sources.max() >= corpus.num_nodes)
    ):
        raise ValueError(f"sources must be node ids in [0, {corpus.num_nodes}), shape (Q,)")
    bounds = _blocks(len(sources), shards)
    # the graph, its CSR both ways and the transposed transition, four (N, q) iterates
    estimate = 24 * e + 3 * 24 * e + 16 * n * int(np.diff(bounds).max(initial=0))

    def compute(shard: int) -> np.ndarray:
        edges = torch.from_numpy(np.array(corpus.edges))
        weight = torch.from_numpy(np.maximum(1.0 - np.array(corpus.lengths), 0.0)).float()
        both = torch.cat([edges, edges.flip(0)], 1)
        weights = torch.sparse_coo_tensor(
            both, torch.cat([weight, weight]), (n, n), check_invariants=True
        )
        block = torch.from_numpy(sources[bounds[shard] : bounds[shard + 1]])
        teleport = torch.zeros(n, len(block))
        teleport[block, torch.arange(len(block))] = 1.0
        scores = personalized_pagerank(
            weights.coalesce().to_sparse_csr(), teleport, damping=damping, tol=tol
        )
        return scores.T.contiguous().numpy()

    return _predict_arrays(
        compute,
        bounds,
        out,
        what=f"{corpus.folder}: PPR of {len(sources)} sources ({shards} shards)",
        estimate=estimate,
        memory_limit=memory_limit,
        trainer=trainer,
    )
