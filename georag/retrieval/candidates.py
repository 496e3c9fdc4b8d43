"""The first stage: dense, BM25 or hybrid retrieval into a :class:`CandidateBatch`."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, Corpus, QueryBatch
from georag.data.beir import BeirDataset
from georag.data.chunking import Chunks, chunk_documents
from georag.resources import default_cache_dir
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.cache import EmbeddingCache
from georag.retrieval.dense import DenseIndex
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.hybrid import fuse

__all__ = [
    "FirstStage",
    "FirstStageConfig",
    "build_candidate_pool",
    "corpus_units",
    "corpus_embeddings",
    "query_batch",
    "stage_corpus",
]

FIRST_STAGES = ("dense", "bm25", "hybrid")


@dataclass(frozen=True)
class FirstStageConfig:
    """How candidates are retrieved.

    Attributes
    ----------
    first_stage : {"dense", "bm25", "hybrid"}
    top_m : int
        Candidates per query (M).
    index_kind : {"flat", "ivf"}
        Dense index; ``ivf`` uses ``nlist``/``nprobe``.
    fusion, alpha, rrf_k
        Hybrid fusion (see :func:`georag.retrieval.hybrid.fuse`); alpha weighs dense.
    chunk_window, chunk_overlap : int or None
        Sliding-window chunking of documents (words); None indexes whole documents.
    bm25_tokenizer : str
        See :func:`georag.retrieval.bm25.tokenize`.
    """

    first_stage: str = "dense"
    top_m: int = 100
    index_kind: str = "flat"
    nlist: int = 128
    nprobe: int = 10
    fusion: str = "rrf"
    alpha: float = 0.5
    rrf_k: int = 60
    chunk_window: int | None = None
    chunk_overlap: int = 0
    bm25_tokenizer: str = "default"

    def __post_init__(self) -> None:
        if self.first_stage not in FIRST_STAGES:
            raise ValueError(f"first_stage must be one of {FIRST_STAGES}, got {self.first_stage!r}")
        if self.top_m < 2:
            raise ValueError(f"top_m must be at least 2, got {self.top_m}")


def corpus_units(dataset: BeirDataset, config: FirstStageConfig) -> Chunks:
    """The retrieval units: whole documents (title + text) or their chunks."""
    texts = {doc_id: doc.full_text for doc_id, doc in dataset.corpus.items()}
    if config.chunk_window is None:
        ids = list(texts)
        return Chunks(list(texts.values()), ids, ids)
    return chunk_documents(texts, window=config.chunk_window, overlap=config.chunk_overlap)


def corpus_embeddings(
    texts: list[str],
    encoder: TextEncoder,
    *,
    cache_dir: str | os.PathLike | None = None,
    window: int | None = None,
    overlap: int = 0,
) -> tuple[torch.Tensor, bool]:
    """Embeddings of ``texts`` (N, D), from the cache when present, else encoded and stored.

    The cache key covers the model, the texts, the model's max sequence length and the
    chunking. Returns ``(embeddings, cache_hit)``.
    """
    cache = EmbeddingCache(cache_dir or default_cache_dir() / "embeddings")
    key = EmbeddingCache.key(
        encoder.cache_name,
        texts,
        max_seq_length=encoder.max_seq_length,
        window=window,
        overlap=overlap,
    )
    return cache.get_or_compute(key, len(texts), lambda: encoder.encode(texts, desc="corpus"))


def query_batch(
    dataset: BeirDataset, encoder: TextEncoder, *, cache_dir: str | os.PathLike
) -> QueryBatch:
    """Every query of ``dataset`` with its embedding, from the cache in ``cache_dir`` when
    present, else encoded and stored (keyed by the model and the query texts)."""
    ids = list(dataset.queries)
    texts = [dataset.queries[q] for q in ids]
    key = EmbeddingCache.key(encoder.cache_name, texts, kind="queries")
    embedded, _ = EmbeddingCache(cache_dir).get_or_compute(
        key, len(texts), lambda: encoder.encode(texts)
    )
    return QueryBatch(ids, texts, embedded)


class FirstStage:
    """Indexes a corpus once and retrieves candidate batches for any queries.

    Parameters
    ----------
    dataset : BeirDataset
    config : FirstStageConfig
    encoder : TextEncoder, optional
        Defaults to all-MiniLM-L6-v2. Candidate embeddings always come from it, whatever
        the first stage, because the geometric rerankers work on embeddings.
    cache_dir : path, optional
        Embedding cache; defaults to ``$GEORAG_CACHE/embeddings``.
    """

    def __init__(
        self,
        dataset: BeirDataset,
        config: FirstStageConfig | None = None,
        *,
        encoder: TextEncoder | None = None,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        self.dataset = dataset
        self.config = config or FirstStageConfig()
        self.encoder = encoder or TextEncoder()
        self.units = corpus_units(dataset, self.config)
        self.embeddings, self.cache_hit = corpus_embeddings(
            self.units.texts,
            self.encoder,
            cache_dir=cache_dir,
            window=self.config.chunk_window,
            overlap=self.config.chunk_overlap,
        )
        self.dense: DenseIndex | None = None
        self.bm25: BM25Index | None = None
        if self.config.first_stage in ("dense", "hybrid"):
            self.dense = DenseIndex(
                self.embeddings.shape[1],
                kind=self.config.index_kind,
                nlist=self.config.nlist,
                nprobe=self.config.nprobe,
            )
            self.dense.add(self.embeddings)
        if self.config.first_stage in ("bm25", "hybrid"):
            self.bm25 = BM25Index.build(self.units.texts, tokenizer=self.config.bm25_tokenizer)

    def retrieve(
        self,
        query_ids: list[str],
        query_texts: list[str],
        *,
        query_embeddings: torch.Tensor | None = None,
        with_texts: bool = False,
    ) -> CandidateBatch:
        """Retrieve the top-M candidates of each query.

        Parameters
        ----------
        query_ids, query_texts : list of str, length B
        query_embeddings : torch.Tensor, shape (B, D), optional
            Precomputed query embeddings (encoded here otherwise).
        with_texts : bool
            Attach query and candidate texts (for text-based second stages).
        """
        if len(query_ids) != len(query_texts):
            raise ValueError(
                f"query_ids ({len(query_ids)}) and query_texts "
                f"({len(query_texts)}) differ in length"
            )
        if not query_ids:
            raise ValueError("query_ids: no queries to retrieve for")
        if query_embeddings is None:
            query_embeddings = self.encoder.encode(query_texts, desc="queries")
        m = self.config.top_m
        if self.config.first_stage == "dense":
            scores, indices = self.dense.search(query_embeddings, m)
        elif self.config.first_stage == "bm25":
            scores, indices = self.bm25.search(query_texts, m)
        else:
            scores, indices = fuse(
                self.dense.search(query_embeddings, m),
                self.bm25.search(query_texts, m),
                num_docs=len(self.units),
                top_m=m,
                method=self.config.fusion,
                alpha=self.config.alpha,
                rrf_k=self.config.rrf_k,
            )
        return self._batch(query_ids, query_texts, query_embeddings, scores, indices, with_texts)

    def _batch(
        self, query_ids, query_texts, query_embeddings, scores, indices, with_texts
    ) -> CandidateBatch:
        mask = indices >= 0
        safe = indices.clamp_min(0)
        cands = self.embeddings[safe]
        doc_ids = [
            [self.units.doc_ids[j] if ok else "" for j, ok in zip(row, valid)]
            for row, valid in zip(safe.tolist(), mask.tolist())
        ]
        cand_texts = None
        if with_texts:
            cand_texts = [
                [self.units.texts[j] if ok else "" for j, ok in zip(row, valid)]
                for row, valid in zip(safe.tolist(), mask.tolist())
            ]
        return CandidateBatch(
            query=query_embeddings.float(),
            cands=cands,
            scores=scores.masked_fill(~mask, 0.0),
            mask=mask,
            query_ids=list(query_ids),
            doc_ids=doc_ids,
            query_texts=list(query_texts) if with_texts else None,
            cand_texts=cand_texts,
        )


def stage_corpus(
    dataset: BeirDataset, stage: FirstStage, *, cache_dir: str | os.PathLike
) -> Corpus:
    """The corpus rows of ``stage`` (whole passages, in its row order) with its embeddings,
    for the corpus-level retrievers; they cache what they derive under ``cache_dir``."""
    docs = [dataset.corpus[d] for d in stage.units.doc_ids]
    return Corpus(
        doc_ids=list(stage.units.doc_ids),
        titles=[d.title for d in docs],
        texts=[d.text for d in docs],
        embeddings=stage.embeddings,
        cache_dir=str(cache_dir),
    )


def build_candidate_pool(
    dataset: BeirDataset,
    *,
    first_stage: str = "dense",
    top_m: int = 100,
    encoder: TextEncoder | None = None,
    cache_dir: str | os.PathLike | None = None,
    with_texts: bool = False,
    **config: object,
) -> CandidateBatch:
    """Candidates for every judged query of ``dataset`` in one :class:`CandidateBatch`.

    Extra keyword arguments go to :class:`FirstStageConfig`.
    """
    stage = FirstStage(
        dataset,
        FirstStageConfig(first_stage=first_stage, top_m=top_m, **config),
        encoder=encoder,
        cache_dir=cache_dir,
    )
    query_ids = list(dataset.queries)
    return stage.retrieve(query_ids, [dataset.queries[q] for q in query_ids], with_texts=with_texts)
