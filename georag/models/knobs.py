"""Learnable method knobs whose parameterisation keeps them valid.

Each knob stores an unconstrained real parameter and maps it onto the knob's domain with
a smooth bijection, so that no optimizer step can drive it to an invalid value and no
clamp zeroes its gradient:

* :class:`Interval`: ``low + (high - low) * sigmoid(raw)``, for a damping in (0, 1) or a
  mixing weight;
* :class:`Positive`: ``exp(raw)``, for a length scale or an exponent (``exp(log 1) = 1``
  exactly, so a knob initialised at 1 reproduces the fixed method bit for bit);
* :class:`Real`: the raw value itself, for a fusion weight that may change sign;
* :class:`EmbeddingMap`: a square linear map of embeddings, the identity at start.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["Interval", "Positive", "Real", "EmbeddingMap"]


class Interval(nn.Module):
    """A knob in the open interval (``low``, ``high``), ``low + (high - low) sigmoid(raw)``.

    Parameters
    ----------
    value : float
        Initial value, strictly inside the interval.
    low, high : float
    """

    def __init__(self, value: float, low: float = 0.0, high: float = 1.0) -> None:
        super().__init__()
        if not low < value < high:
            raise ValueError(f"value must lie in ({low}, {high}), got {value}")
        self.low, self.high = low, high
        t = (value - low) / (high - low)
        self.raw = nn.Parameter(torch.tensor(math.log(t) - math.log1p(-t), dtype=torch.float64))

    def forward(self) -> torch.Tensor:
        """The knob's value, a 0-d float64 tensor."""
        return self.low + (self.high - self.low) * torch.sigmoid(self.raw)


class Positive(nn.Module):
    """A positive knob, ``exp(raw)``.

    Parameters
    ----------
    value : float
        Initial value, > 0.
    """

    def __init__(self, value: float) -> None:
        super().__init__()
        if not value > 0:
            raise ValueError(f"value must be positive, got {value}")
        self.raw = nn.Parameter(torch.tensor(math.log(value), dtype=torch.float64))

    def forward(self) -> torch.Tensor:
        """The knob's value, a 0-d float64 tensor."""
        return torch.exp(self.raw)


class Real(nn.Module):
    """An unconstrained knob (e.g. a fusion weight), initialised at ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.raw = nn.Parameter(torch.tensor(float(value), dtype=torch.float64))

    def forward(self) -> torch.Tensor:
        """The knob's value, a 0-d float64 tensor."""
        return self.raw


class EmbeddingMap(nn.Module):
    """``x -> x W^T``, a learned square map of the embeddings, the identity at start.

    Parameters
    ----------
    dim : int
        Embedding width D.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.weight = nn.Parameter(torch.eye(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map embeddings of shape (..., D) to shape (..., D)."""
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"x must end in dimension {self.weight.shape[0]}, got {tuple(x.shape)}"
            )
        return x @ self.weight.T.to(x.dtype)
