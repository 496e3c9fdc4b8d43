"""Batched reranking of a TREC run through Lightning's ``Trainer.predict``.

One CPU, one GPU or N GPUs with DDP run the same code. The input run is streamed in shards
of ``batch_size`` queries (file order); shard ``k`` goes to rank ``k % world_size``; each
shard's reranked run is written atomically to ``<out>.shards/shard-<k>.trec`` as soon as it
is done, so memory stays flat and an interrupted job resumes by skipping finished shards.
At the end, rank 0 concatenates the shards, in order, into ``out``.

Lightning is the ``train`` extra: nothing in georag imports this module at import time, and
importing it without Lightning installed raises an ImportError that says what to install.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils.data import DataLoader, IterableDataset

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import BasePredictionWriter
except ImportError as err:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "georag.eval.batch_predict needs Lightning: pip install 'georag[train]'"
    ) from err

from georag.batch import CandidateBatch
from georag.data.beir import BeirDataset
from georag.eval.trec import read_run, stream_run, write_run, write_run_text
from georag.rerank.base import PoolReranker
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import corpus_embeddings
from georag.retrieval.encoder import TextEncoder

__all__ = ["rerank_run_file", "shard_path"]


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
