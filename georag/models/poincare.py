"""Poincare-ball maps of sentence embeddings: a fixed projection and a trained head.

Both map frozen (unit-norm) sentence embeddings into ``geoopt.PoincareBall(c)``; the
hyperbolic radius ``d(0, x)`` of a passage is ISO-RAG's volume proxy (generic passages
near the centre, specific ones at the periphery).

* :func:`fixed_projection` centres the embeddings on the corpus mean and applies
  ``expmap0(scale * (e - mean))``; its radius is ``2 * scale * ||e - mean||`` (for c = 1), so
  passages close to the corpus centroid (generic) sit near the centre of the ball.
* :class:`PoincareHead` is the Cheeger-aware encoder: a two-layer MLP, then ``expmap0``,
  trained (``train/iso_module.py``) with a hyperbolic contrastive loss plus a term that
  aligns each passage's radius with its structural generality in the passage graph.
"""

from __future__ import annotations

import os

import geoopt
import torch
from torch import nn

from georag._io import load_torch, save_torch

__all__ = ["PoincareHead", "fixed_projection", "generality_target_radius"]

_FORMAT = "georag-poincare-head"


def _check_embeddings(name: str, x: torch.Tensor) -> None:
    if x.dim() != 2 or x.shape[0] == 0:
        raise ValueError(f"{name} must have shape (N, D) with N > 0, got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or inf")


def fixed_projection(
    embeddings: torch.Tensor, *, scale: float = 1.0, c: float = 1.0, max_norm: float = 1 - 1e-5
) -> torch.Tensor:
    """Map embeddings into the Poincare ball by ``expmap0(scale * (e - mean(e)))``.

    Parameters
    ----------
    embeddings : torch.Tensor, shape (N, D)
    scale : float
        Tangent-space scale at the origin.
    c : float
        Ball curvature (radius ``1 / sqrt(c)``).
    max_norm : float
        Points are kept within ``max_norm / sqrt(c)`` of the origin.

    Returns
    -------
    torch.Tensor, shape (N, D)
        Points strictly inside the ball.
    """
    _check_embeddings("embeddings", embeddings)
    if scale <= 0 or c <= 0:
        raise ValueError(f"scale and c must be positive, got {scale}, {c}")
    ball = geoopt.PoincareBall(c=c)
    centred = embeddings - embeddings.mean(dim=0, keepdim=True)
    return _clip(ball.expmap0(scale * centred), c, max_norm)


def _clip(x: torch.Tensor, c: float | torch.Tensor, max_norm: float) -> torch.Tensor:
    limit = max_norm / torch.as_tensor(c, dtype=x.dtype).sqrt()
    norm = x.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    return torch.where(norm > limit, x * (limit / norm), x)


def generality_target_radius(
    generality: torch.Tensor, *, r_min: float = 0.5, r_max: float = 3.0
) -> torch.Tensor:
    """Target hyperbolic radius: ``r_max - (r_max - r_min) * rank(generality)``.

    Parameters
    ----------
    generality : torch.Tensor, shape (N,)
        Larger is more generic (e.g. log degree or local Cheeger ratio in the passage graph).

    Returns
    -------
    torch.Tensor, shape (N,)
        The most generic passage gets ``r_min`` (near the centre), the most specific
        ``r_max``; ranks (ties averaged) make it insensitive to the scale of ``generality``.
    """
    if generality.dim() != 1 or generality.numel() == 0:
        raise ValueError(f"generality must have shape (N,), got {tuple(generality.shape)}")
    if not 0 <= r_min < r_max:
        raise ValueError(f"need 0 <= r_min < r_max, got {r_min}, {r_max}")
    n = generality.numel()
    order = generality.argsort()
    ranks = torch.empty(n, dtype=torch.float64)
    ranks[order] = torch.arange(n, dtype=torch.float64)
    _, inverse = torch.unique(generality, return_inverse=True)
    summed = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).index_add_(0, inverse, ranks)
    counts = torch.bincount(inverse).to(torch.float64)
    quantile = (summed / counts)[inverse] / max(n - 1, 1)
    return (r_max - (r_max - r_min) * quantile).to(
        generality.dtype if generality.is_floating_point() else torch.float32
    )


class PoincareHead(nn.Module):
    """Cheeger-aware projection head: ``expmap0(W2 tanh(W1 e + b1) + b2)``.

    Parameters
    ----------
    in_dim : int
        Sentence embedding size (384 for all-MiniLM-L6-v2).
    out_dim : int
        Dimension of the ball.
    hidden : int
        Hidden width.
    c : float
        Ball curvature.
    max_norm : float
        Outputs are kept within ``max_norm / sqrt(c)`` of the origin.
    """

    def __init__(
        self,
        in_dim: int = 384,
        out_dim: int = 64,
        hidden: int = 256,
        *,
        c: float = 1.0,
        max_norm: float = 1 - 1e-5,
    ) -> None:
        super().__init__()
        if min(in_dim, out_dim, hidden) < 1 or c <= 0 or not 0 < max_norm < 1:
            raise ValueError(
                f"bad PoincareHead sizes/curvature: {in_dim}, {out_dim}, {hidden}, "
                f"c={c}, max_norm={max_norm}"
            )
        self.ball = geoopt.PoincareBall(c=c)
        self.max_norm = max_norm
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, out_dim))

    @property
    def c(self) -> float:
        return float(self.ball.c)

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Points in the ball.

        Parameters
        ----------
        embeddings : torch.Tensor, shape (..., in_dim)

        Returns
        -------
        torch.Tensor, shape (..., out_dim)
        """
        if embeddings.shape[-1] != self.mlp[0].in_features:
            raise ValueError(
                f"embeddings must end in dimension {self.mlp[0].in_features}, "
                f"got {tuple(embeddings.shape)}"
            )
        tangent = self.mlp(embeddings)
        return _clip(self.ball.expmap0(tangent), self.ball.c, self.max_norm)

    def radius(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Hyperbolic distance to the origin of each mapped embedding, shape (...)."""
        return self.ball.dist0(self(embeddings))

    def distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Poincare distance between points (broadcasting)."""
        return self.ball.dist(x, y)

    def save(self, path: str | os.PathLike) -> None:
        """Write the weights and sizes (a sealed ``torch.save``, atomically)."""
        first, last = self.mlp[0], self.mlp[2]
        save_torch(
            {
                "in_dim": first.in_features,
                "out_dim": last.out_features,
                "hidden": first.out_features,
                "c": self.c,
                "max_norm": self.max_norm,
                "state_dict": self.state_dict(),
            },
            path,
            format=_FORMAT,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> PoincareHead:
        """Read a head written by :meth:`save` (checksum checked; ValueError naming the file)."""
        blob = load_torch(path, format=_FORMAT)
        if not isinstance(blob, dict) or not {
            "in_dim",
            "out_dim",
            "hidden",
            "c",
            "max_norm",
            "state_dict",
        } <= set(blob):
            raise ValueError(f"path: {path} is not a saved Poincare head")
        head = cls(
            blob["in_dim"], blob["out_dim"], blob["hidden"], c=blob["c"], max_norm=blob["max_norm"]
        )
        head.load_state_dict(blob["state_dict"])
        return head.eval()
