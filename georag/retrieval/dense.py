"""A faiss inner-product index: exact (Flat) or IVF-Flat; GPU with faiss-gpu and CUDA."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from georag._io import atomic_write, seal, unseal

__all__ = ["DenseIndex", "faiss_gpu_available"]

FORMAT = "georag-faiss"
VERSION = 1


def _faiss():
    try:
        import faiss
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("faiss is missing: pip install 'georag[cpu]' (or [gpu])") from err
    return faiss


def faiss_gpu_available() -> bool:
    """True when faiss was built with GPU support and a CUDA device is visible."""
    faiss = _faiss()
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _as_float32(name: str, x: torch.Tensor | np.ndarray, dim: int | None) -> np.ndarray:
    array = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N, D), got shape {array.shape}")
    if dim is not None and array.shape[1] != dim:
        raise ValueError(f"{name} has dimension {array.shape[1]}, the index has {dim}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or inf")
    return np.ascontiguousarray(array, dtype=np.float32)


class DenseIndex:
    """Maximum inner-product search over unit-norm embeddings.

    Parameters
    ----------
    dim : int
        Embedding dimension D.
    kind : {"flat", "ivf"}
        ``flat`` is exact; ``ivf`` is IVF-Flat (the diffusion paper uses nlist=128, nprobe=10).
    nlist, nprobe : int
        IVF lists and lists probed per query.
    use_gpu : bool, optional
        Default: GPU when available.
    """

    def __init__(
        self,
        dim: int,
        *,
        kind: str = "flat",
        nlist: int = 128,
        nprobe: int = 10,
        use_gpu: bool | None = None,
    ) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        if kind not in ("flat", "ivf"):
            raise ValueError(f"kind must be 'flat' or 'ivf', got {kind!r}")
        if nlist <= 0 or nprobe <= 0:
            raise ValueError(f"nlist and nprobe must be positive, got {nlist}, {nprobe}")
        faiss = _faiss()
        self.dim, self.kind, self.nlist, self.nprobe = dim, kind, nlist, nprobe
        if kind == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexIVFFlat(
                faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT
            )
        self._set_index(index, faiss_gpu_available() if use_gpu is None else use_gpu)

    def _set_index(self, cpu_index, use_gpu: bool) -> None:
        faiss = _faiss()
        if use_gpu and not faiss_gpu_available():
            raise ValueError("use_gpu=True but faiss has no GPU support or no CUDA device")
        self.on_gpu = use_gpu
        if use_gpu:
            self._resources = faiss.StandardGpuResources()
            cpu_index = faiss.index_cpu_to_gpu(self._resources, 0, cpu_index)
        self.index = cpu_index
        if self.kind == "ivf":
            faiss.ParameterSpace().set_index_parameter(self.index, "nprobe", self.nprobe)

    @property
    def size(self) -> int:
        """Number of indexed vectors."""
        return int(self.index.ntotal)

    def add(self, embeddings: torch.Tensor | np.ndarray) -> None:
        """Add vectors (N, D); an untrained IVF index is trained on them first."""
        array = _as_float32("embeddings", embeddings, self.dim)
        if not self.index.is_trained:
            if array.shape[0] < self.nlist:
                raise ValueError(
                    f"embeddings: IVF training needs at least nlist={self.nlist} "
                    f"vectors, got {array.shape[0]}"
                )
            self.index.train(array)
        self.index.add(array)

    def search(
        self, queries: torch.Tensor | np.ndarray, k: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-``k`` by inner product.

        Returns
        -------
        scores : torch.Tensor, shape (B, k'), float32
        indices : torch.Tensor, shape (B, k'), int64
            ``k' = min(k, size)``; IVF may return -1 (with score -inf) where fewer hits exist.
        """
        if self.size == 0:
            raise ValueError("the index is empty: add embeddings before searching")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        array = _as_float32("queries", queries, self.dim)
        scores, indices = self.index.search(array, min(k, self.size))
        scores = np.where(indices < 0, -np.inf, scores)
        return torch.from_numpy(scores.astype(np.float32)), torch.from_numpy(
            indices.astype(np.int64)
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the index atomically (a GPU index is copied to CPU first).

        The file is faiss' own serialization followed by a georag trailer (format, version,
        SHA-256), which ``faiss.read_index`` ignores and :meth:`load` checks.
        """
        faiss = _faiss()
        cpu_index = faiss.index_gpu_to_cpu(self.index) if self.on_gpu else self.index
        payload = faiss.serialize_index(cpu_index).tobytes()
        atomic_write(Path(path), seal(payload, format=FORMAT, version=VERSION))

    @classmethod
    def load(cls, path: str | os.PathLike, *, use_gpu: bool | None = None) -> DenseIndex:
        """Read an index written by :meth:`save`; a corrupt file raises ValueError naming it."""
        faiss = _faiss()
        if not Path(path).is_file():
            raise ValueError(f"path: no index file at {path}")
        payload, _ = unseal(Path(path).read_bytes(), where=path, format=FORMAT, version=VERSION)
        try:
            cpu_index = faiss.deserialize_index(np.frombuffer(payload, dtype=np.uint8))
        except RuntimeError as err:
            reason = str(err).strip().splitlines()[-1] if str(err).strip() else "unreadable"
            raise ValueError(f"path: {path} is not a readable faiss index ({reason})") from None
        self = cls.__new__(cls)
        self.dim = cpu_index.d
        if isinstance(cpu_index, faiss.IndexIVFFlat):
            self.kind, self.nlist, self.nprobe = "ivf", cpu_index.nlist, cpu_index.nprobe
        else:
            self.kind, self.nlist, self.nprobe = "flat", 0, 0
        self._set_index(cpu_index, faiss_gpu_available() if use_gpu is None else use_gpu)
        return self
