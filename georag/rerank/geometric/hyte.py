r"""HyTE-H hybrid scoring: BM25 top-M candidates re-scored with Lorentz similarity.

Paper: *Real-Time Hybrid Retrieval in Hyperbolic Space for Retrieval-Augmented Generation
on Edge Devices* (the HyTE-H paper; no arXiv id in the source text).

.. math::

    \mathrm{score}(d, q) = \alpha\,\frac{\mathrm{BM25}(d, q)}{\max_{d'} \mathrm{BM25}(d', q)}
        + (1 - \alpha)\,\sigma\!\left(\langle p_d, p_q\rangle_{\mathcal{L}} + 2\right)

(paper eq. 10-12); ``alpha=1`` is pure BM25, ``alpha=0`` pure Lorentz similarity.
:func:`~georag.geometry.hyperbolic.hybrid_scores` is the batched kernel;
:class:`~georag.retrievers.hyte.HyTERetriever` (registry name ``hyte``) runs the paper's
pipeline over a corpus (BM25 top-50, then the hybrid score, through a
:class:`~georag.retrieval.lorentz_index.LorentzIndex`), and :class:`HyTEReranker`
(``hyte_rescore``) re-scores the top-M of a given pool that carries texts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.hyperbolic import hybrid_scores
from georag.models.hyte import HyTEEncoder
from georag.rerank.pool import top_m_mask
from georag.rerank.registry import register
from georag.resources import DEFAULT_MODEL
from georag.retrieval.lorentz_index import LorentzIndex, build_lorentz_index, check_search

__all__ = [
    "HyTEConfig",
    "HyTEReranker",
    "build_index",
    "hybrid_scores",
    "hyte_encoder",
]


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
    model: str = DEFAULT_MODEL
    weights: str | None = None
    k: float = 1.0
    power: float = 1.0

    def __post_init__(self) -> None:
        check_search(self.alpha, self.top_m)
        if not self.k > 0 or not self.power >= 0:
            raise ValueError(f"need k > 0 and power >= 0, got k={self.k}, power={self.power}")


def hyte_encoder(config: HyTEConfig) -> HyTEEncoder:
    """The HyTE-H encoder of ``config``: its model's word embeddings and tokenizer, its
    projection (``weights``; none = the seeded untrained one), curvature K and exponent P."""
    return HyTEEncoder.from_pretrained(
        config.model, weights=config.weights, k=config.k, power=config.power
    )


def build_index(
    texts_or_docs: Mapping[str, str] | Sequence[str],
    out_path: str | os.PathLike,
    config: HyTEConfig | None = None,
    *,
    encoder: HyTEEncoder | None = None,
    **chunking,
) -> LorentzIndex:
    """A Lorentz index of ``texts_or_docs`` with the encoder and search defaults of ``config``.

    Parameters
    ----------
    texts_or_docs, out_path
        As :func:`~georag.retrieval.lorentz_index.build_lorentz_index`.
    config : HyTEConfig, optional
        Its ``alpha``, ``top_m`` and ``offset`` are stored as the index's search defaults;
        the encoder is built from it unless ``encoder`` is given (defaults: ``HyTEConfig()``).
    encoder : HyTEEncoder, optional
        An already loaded encoder.
    **chunking
        ``window``, ``overlap``, ``bm25_tokenizer``, ``k1``, ``b`` of ``build_lorentz_index``.
    """
    config = config or HyTEConfig()
    return build_lorentz_index(
        texts_or_docs,
        out_path,
        encoder=encoder or hyte_encoder(config),
        alpha=config.alpha,
        top_m=config.top_m,
        offset=config.offset,
        **chunking,
    )


@register
class HyTEReranker:
    """Re-scores the top ``config.top_m`` candidates of a pool with the HyTE-H hybrid score.

    Encodes ``batch.query_texts`` and ``batch.cand_texts`` with the HyTE-H encoder (the
    batch's own embeddings come from another model and are not used); ``batch.scores`` is
    the lexical part, normalized by its per-query maximum, so the pool should come from
    BM25 (``--first-stage bm25``). Candidates past the first ``top_m`` are dropped. The
    paper's whole pipeline, with its own BM25 first stage, is
    :class:`~georag.retrievers.hyte.HyTERetriever`.

    Document points are computed once per distinct candidate text and kept, as the
    paper's index stores them: a later call encodes its query and only the texts it has
    not seen (the cache is dropped when the encoder's weights change). The scores equal
    those of encoding every text on every call.

    Parameters
    ----------
    config : HyTEConfig, optional
    encoder : HyTEEncoder, optional
        An already loaded encoder; by default one is built from ``config.model`` and
        ``config.weights``.
    """

    name = "hyte_rescore"
    config_class = HyTEConfig

    def __init__(self, config: HyTEConfig | None = None, *, encoder=None) -> None:
        self.config = config or HyTEConfig()
        self.encoder = encoder or hyte_encoder(self.config)
        self._points: dict[str, torch.Tensor] = {}
        self._points_key: tuple | None = None

    def clear_points(self) -> None:
        """Forget the cached document points (the next call encodes its texts again)."""
        self._points = {}

    def document_points(self, texts: list[str]) -> torch.Tensor:
        """Lorentz points of candidate texts, shape (N, d+1), from the cache where seen.

        Parameters
        ----------
        texts : list of str, length N
        """
        key = self.encoder.state_key()
        if key != self._points_key:
            self._points, self._points_key = {}, key
        missing = list(dict.fromkeys(t for t in texts if t not in self._points))
        if missing:
            self._points.update(zip(missing, self.encoder.encode(missing).unbind(0)))
        if not texts:
            return torch.zeros(0, self.encoder.dim + 1)
        return torch.stack([self._points[t] for t in texts])

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
        index = [i for i, keep in enumerate(real) if keep]
        if index:
            found = self.document_points([flat[i] for i in index])
            points[torch.tensor(index, device=device)] = found.to(device, query.dtype)
        scores = hybrid_scores(
            batch.scores,
            query,
            points.view(b, m, -1),
            mask,
            alpha=self.config.alpha,
            offset=self.config.offset,
        )
        return RerankResult.from_scores(scores, mask)
