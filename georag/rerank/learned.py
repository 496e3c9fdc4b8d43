"""The base of every learnable reranker: knobs as parameters, scores under autograd.

A learnable reranker is a :class:`torch.nn.Module` that is also a
:class:`~georag.rerank.base.PoolReranker`: called on a :class:`CandidateBatch` it returns a
:class:`RerankResult`. Its parameters are the knobs of a fixed method (parameterised by
:mod:`georag.models.knobs` so that they stay valid), initialised from the fixed method's
config (the learned config's ``fixed`` field) and passed to the same scoring function the
fixed method calls with numbers, so that an untrained learnable reranker gives the fixed
method's scores, plus a fusion
weight on the first-stage score (0 at start) and, optionally, a learned linear map of the
embeddings (the identity at start).

A new reranker is built in eval mode: called, it runs without autograd, as every
inference path expects; ``.train()`` (Lightning does it) records gradients.

A subclass implements :meth:`LearnableReranker.score`, the differentiable scores over the
candidates it ranks (the training target), and may narrow what inference keeps in
:meth:`LearnableReranker.keep` (e.g. a top-k cut, which is discrete and not trained).

Weights are saved with :meth:`LearnableReranker.save` (atomic write, sealed with a
SHA-256 manifest by :mod:`georag._io`) and loaded by giving the config field ``weights``;
through the registry that is
``make_reranker("learned_diffusion", {"learned_diffusion": {"weights": PATH}})``, i.e.
``georag eval --methods learned_diffusion --method-option learned_diffusion.weights=PATH``.
A saved file carries its config: when ``weights`` is given, every other field comes from
the file.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

import torch
from torch import nn

from georag._io import ArtifactError, load_torch, save_torch, sha256_file
from georag.batch import CandidateBatch, RerankResult
from georag.config import config_from_mapping

__all__ = ["LearnableReranker", "LearningOptions", "WEIGHTS_FORMAT", "load_weights"]

WEIGHTS_FORMAT = "georag-learned-reranker"


@dataclass(frozen=True)
class LearningOptions:
    """The options every learnable twin's config holds beside its fixed config and knobs.

    Parameters
    ----------
    embedding_map : bool
        Learn a linear map of the embeddings (identity at start).
    dim : int
        Embedding width D (for the map).
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    embedding_map: bool = False
    dim: int = 384
    weights: str | None = None


class LearnableReranker(nn.Module):
    """Base class; see the module docstring.

    Subclasses set ``name``, ``config_class``, ``fixed_method`` and ``search_space``
    (whose keys are config fields, dotted for the ``fixed`` config's: ``fixed.alpha``) and
    build their knobs in ``__init__`` after calling ``super().__init__(config)``, then call
    :meth:`_load_if_given`; they are registered with
    :func:`~georag.rerank.registry.register`.

    Parameters
    ----------
    config : dataclass
        The method's config; its ``weights`` field names a saved file or is None.
    """

    name: ClassVar[str]
    config_class: ClassVar[type]
    #: registry name of the fixed method whose knobs these are ("" for none)
    fixed_method: ClassVar[str] = ""
    #: the gradient-free baseline's search box: knob -> (low, high, log scale)
    search_space: ClassVar[dict[str, tuple[float, float, bool]]] = {}

    def __init__(self, config: Any) -> None:
        super().__init__()
        if config.weights is not None:
            saved = load_weights(config.weights, self.name)
            stored = config_from_mapping(self.config_class, saved["config"], where="weights")
            config = replace(stored, weights=config.weights)
            self._pending = saved["state_dict"]
        else:
            self._pending = None
        self.config = config

    def _load_if_given(self) -> None:
        """Load the saved state (when ``weights`` was given) and switch to eval mode; call
        at the end of a subclass's __init__."""
        if self._pending is not None:
            self.load_state_dict(self._pending)
            self._pending = None
        self.eval()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable scores and the candidates they rank.

        Returns
        -------
        scores : torch.Tensor, shape (B, M)
            Finite where ``ranked`` is True (any value elsewhere).
        ranked : torch.Tensor, shape (B, M), bool
        """
        raise NotImplementedError

    def keep(self, scores: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
        """Which ranked candidates inference keeps (all of them by default)."""
        return ranked

    def forward(self, batch: CandidateBatch) -> RerankResult:
        """Rerank ``batch``; in eval mode without autograd (inference)."""
        with torch.set_grad_enabled(self.training and torch.is_grad_enabled()):
            scores, ranked = self.score(batch)
        return RerankResult.from_scores(scores, self.keep(scores.detach(), ranked))

    def knobs(self) -> dict[str, float]:
        """The current value of every scalar knob, by name."""
        return {
            name: float(module().detach())
            for name, module in self.named_children()
            if isinstance(module, nn.Module) and hasattr(module, "raw")
        }

    def save(self, path: str | os.PathLike) -> str:
        """Write config and weights to ``path`` atomically (sealed with a SHA-256 manifest,
        :func:`georag._io.save_torch`); returns the file's SHA-256."""
        config = asdict(self.config)
        config["weights"] = None
        state = {k: v.detach().cpu() for k, v in self.state_dict().items()}
        save_torch(
            {"method": self.name, "config": config, "state_dict": state},
            path,
            format=WEIGHTS_FORMAT,
        )
        return sha256_file(path)


def load_weights(path: str | os.PathLike, method: str) -> dict:
    """Read and verify a file written by :meth:`LearnableReranker.save`.

    Raises
    ------
    ValueError
        Naming ``weights`` when the file is missing, not a weights file, corrupt (checksum
        mismatch) or saved by another method.
    """
    try:
        saved = load_torch(path, format=WEIGHTS_FORMAT)
    except ArtifactError as error:
        raise ValueError(f"weights: {error}") from None
    if saved["method"] != method:
        raise ValueError(
            f"weights: {str(path)!r} holds {saved['method']!r} weights, not {method!r}"
        )
    return saved
