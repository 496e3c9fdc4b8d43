r"""HyTE-H hybrid scoring: BM25 top-M candidates re-scored with Lorentz similarity.

.. math::

    \mathrm{score}(d, q) = \alpha\,\frac{\mathrm{BM25}(d, q)}{\max_{d'} \mathrm{BM25}(d', q)}
        + (1 - \alpha)\,\sigma\!\left(\langle p_d, p_q\rangle_{\mathcal{L}} + 2\right)

(paper eq. 10-12); ``alpha=1`` is pure BM25, ``alpha=0`` pure Lorentz similarity.
:func:`hybrid_scores` is the batched kernel; :class:`HyTEReranker` applies it to any
:class:`~georag.rerank.base.CandidateBatch` that carries texts, and
:class:`~georag.retrieval.lorentz_index.LorentzIndex` applies it to its stored points.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from georag.geometry.hyperbolic import lorentz_gram
from georag.rerank.base import CandidateBatch, Corpus, QueryBatch, RerankResult
from georag.rerank.diffusion import top_m_mask
from georag.retrieval.cache import content_hash

__all__ = ["HyTEConfig", "HyTEReranker", "HyTERetriever", "hybrid_scores"]

@dataclass(frozen=True)
class HyTEConfig:
    """HyTE-H defaults (paper: M = 50, K = 1, P = 1, sigmoid offset 2).

    Attributes
    ----------
    alpha : float
        Weight of the normalized BM25 score, in [0, 1]. The paper leaves the value used
        open; 0.5 weighs both signals equally.
    top_m : int
        BM25 candidates re-scored per query.
    offset : float
        The shift inside the sigmoid of eq. 12.
    model : str
        The checkpoint whose word embeddings and tokenizer the projection uses.
    weights : str, optional
        A trained projection (``HyTEEncoder.save``); ``None`` is the seeded, untrained one.
    k, power : float
        Curvature parameter K and OEM exponent P.
    """

    alpha: float = 0.5
    top_m: int = 50
    offset: float = 2.0
    model: str = "all-MiniLM-L6-v2"
    weights: str | None = None
    k: float = 1.0
    power: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {self.top_m}")
        if not self.k > 0 or not self.power >= 0:
            raise ValueError(f"need k > 0 and power >= 0, got k={self.k}, power={self.power}")


def hybrid_scores(
    bm25: torch.Tensor,
    query: torch.Tensor,
    cands: torch.Tensor,
    mask: torch.Tensor,
    *,
    alpha: float,
    offset: float = 2.0,
) -> torch.Tensor:
    r"""Hybrid score of every candidate (paper eq. 10-12).

    Parameters
    ----------
    bm25 : torch.Tensor, shape (B, M)
        First-stage (BM25) scores.
    query : torch.Tensor, shape (B, d+1)
        Query points on the hyperboloid.
    cands : torch.Tensor, shape (B, M, d+1)
        Candidate points.
    mask : torch.Tensor, shape (B, M), bool
        Real candidates. Padded ones score ``-inf``.
    alpha : float
        Weight of the normalized BM25 score.
    offset : float
        Shift inside the sigmoid.

    Returns
    -------
    torch.Tensor, shape (B, M)
        ``alpha * bm25 / max(bm25) + (1 - alpha) * sigmoid(<p_d, p_q>_L + offset)``; a query
        whose best BM25 score is not positive gets 0 for the lexical part.
    """
    if query.dim() != 2 or cands.dim() != 3 or cands.shape[::2] != query.shape:
        raise ValueError(
            f"query (B, d+1) and cands (B, M, d+1) disagree: {tuple(query.shape)}, "
            f"{tuple(cands.shape)}"
        )
    if bm25.shape != cands.shape[:2] or mask.shape != bm25.shape:
        raise ValueError(
            f"bm25 {tuple(bm25.shape)} and mask {tuple(mask.shape)} must have shape "
            f"{tuple(cands.shape[:2])}"
        )
    best = bm25.masked_fill(~mask, -torch.inf).amax(dim=1, keepdim=True)
    lexical = torch.where(best > 0, bm25 / best.clamp_min(torch.finfo(bm25.dtype).tiny), 0.0)
    lorentz = torch.sigmoid(lorentz_gram(query.unsqueeze(1), cands).squeeze(1) + offset)
    scores = alpha * lexical + (1.0 - alpha) * lorentz.to(lexical.dtype)
    return scores.masked_fill(~mask, -torch.inf)


class HyTEReranker:
    """Re-scores the top ``config.top_m`` candidates of a pool with the HyTE-H hybrid score.

    Encodes ``batch.query_texts`` and ``batch.cand_texts`` with the HyTE-H encoder (the
    batch's own embeddings come from another model and are not used); ``batch.scores`` is
    the lexical part, normalized by its per-query maximum, so the pool should come from
    BM25 (``--first-stage bm25``). Candidates past the first ``top_m`` are dropped. The
    paper's whole pipeline, with its own BM25 first stage, is :class:`HyTERetriever`.

    Parameters
    ----------
    config : HyTEConfig, optional
    encoder : HyTEEncoder, optional
        An already loaded encoder; by default one is built from ``config.model`` and
        ``config.weights``.
    """

    name = "hyte_rescore"

    def __init__(self, config: HyTEConfig | None = None, *, encoder=None) -> None:
        from georag.models.hyte import HyTEEncoder

        self.config = config or HyTEConfig()
        self.encoder = encoder or HyTEEncoder.from_pretrained(
            self.config.model, weights=self.config.weights, k=self.config.k,
            power=self.config.power)

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        if batch.query_texts is None or batch.cand_texts is None:
            raise ValueError("batch: HyTEReranker needs query_texts and cand_texts")
        b, m = batch.mask.shape
        device = batch.scores.device
        mask = top_m_mask(batch, self.config.top_m)
        query = self.encoder.encode(batch.query_texts).to(device)
        flat = [text for row in batch.cand_texts for text in row]
        real = mask.flatten().cpu().tolist()
        points = torch.zeros(b * m, query.shape[1], dtype=query.dtype, device=device)
        index = torch.tensor([i for i, keep in enumerate(real) if keep], dtype=torch.long)
        if len(index):
            points[index.to(device)] = self.encoder.encode([flat[i] for i in index]).to(device)
        scores = hybrid_scores(batch.scores, query, points.view(b, m, -1), mask,
                               alpha=self.config.alpha, offset=self.config.offset)
        return RerankResult.from_scores(scores, mask)


class HyTERetriever:
    """HyTE-H as the paper runs it: BM25 top-``top_m`` over the corpus, then the hybrid score.

    :meth:`fit` chunks the corpus (W=300, O=60 words), encodes every chunk into a Lorentz
    point once and builds the BM25 state: a :class:`~georag.retrieval.lorentz_index.LorentzIndex`
    kept under ``corpus.cache_dir/lorentz`` (keyed by the texts and the projection) or in a
    temporary folder. :meth:`retrieve` scores the index's chunks (MaxP per document in a run).

    Parameters
    ----------
    config : HyTEConfig, optional
    """

    name = "hyte"

    def __init__(self, config: HyTEConfig | None = None) -> None:
        self.config = config or HyTEConfig()
        self.index = None

    def fit(self, corpus: Corpus) -> HyTERetriever:
        """Build (or load from the cache) the Lorentz index of ``corpus``."""
        from georag.retrieval.lorentz_index import LorentzIndex, build_lorentz_index

        cfg = self.config
        docs = {doc_id: f"{title} {text}".strip() if title else text
                for doc_id, title, text in zip(corpus.doc_ids, corpus.titles, corpus.texts)}
        key = content_hash([*docs, *docs.values(), cfg.model, str(cfg.weights), str(cfg.k),
                            str(cfg.power), str(cfg.offset)])[:32]
        if corpus.cache_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="georag-hyte-")
            folder = Path(self._tmp.name)
        else:
            folder = Path(corpus.cache_dir) / "lorentz" / key
        try:
            self.index = LorentzIndex.load(folder)
        except (OSError, ValueError):
            folder.mkdir(parents=True, exist_ok=True)
            self.index = build_lorentz_index(docs, folder, config=cfg)
        self._row_ids = self.index.doc_ids
        return self

    @property
    def row_ids(self) -> list[str]:
        """The document id of each chunk row."""
        if self.index is None:
            raise ValueError("hyte: call fit(corpus) before retrieving")
        return self._row_ids

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Hybrid scores over the chunk rows; the best ``min(top_k, top_m)`` are kept."""
        rows = len(self.row_ids)
        scores, chunks = self.index.search(queries.texts, k=min(top_k, self.config.top_m),
                                           alpha=self.config.alpha, top_m=self.config.top_m)
        full = torch.full((len(queries.ids), rows), -torch.inf, dtype=scores.dtype)
        full.scatter_(1, chunks, scores)
        return RerankResult(scores=full, keep=full > -torch.inf)
