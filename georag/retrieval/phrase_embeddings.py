"""Phrase embeddings for a phrase graph: reuse the known ones, encode the rest in chunks,
check what the encoder answers (:mod:`georag.retrieval.entity_graph`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tqdm.auto import tqdm

__all__ = ["Encoder", "embed_phrases"]

Encoder = Callable[[list[str]], torch.Tensor]
_ENCODE_CHUNK = 1024  # phrases per encode call


def embed_phrases(
    phrases: Sequence[str],
    encode: Encoder | None,
    known: tuple[Sequence[str], torch.Tensor] | None = None,
    *,
    progress: bool = False,
) -> torch.Tensor | None:
    """Embeddings (P, D) of ``phrases``: rows of ``known`` where it has them, else ``encode``'s.

    Parameters
    ----------
    phrases : sequence of str, length P
    encode : callable, optional
        ``encode(phrases) -> torch.Tensor`` of unit-norm rows, called on chunks of 1024.
    known : (phrases, embeddings (K, D)), optional
        Embeddings already computed (reused as they are).
    progress : bool

    Returns
    -------
    torch.Tensor, shape (P, D), float32, or None
        None without ``encode`` and ``known``.

    Raises
    ------
    ValueError
        A phrase to embed without ``encode``, or ``encode`` answering a wrong shape,
        non-finite or non-unit rows (naming ``encode``).
    """
    if encode is None and known is None:
        return None
    have = {} if known is None else {p: j for j, p in enumerate(known[0])}
    missing = [j for j, p in enumerate(phrases) if p not in have]
    if missing and encode is None:
        raise ValueError(f"encode: needed to embed {len(missing)} new phrases")
    dim = int(known[1].shape[1]) if known is not None and len(known[0]) else None
    new = []
    for start in tqdm(range(0, len(missing), _ENCODE_CHUNK), "encode", disable=not progress):
        part = missing[start : start + _ENCODE_CHUNK]
        out = encode([phrases[j] for j in part])
        ok = isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() == 2
        if not ok or out.shape[0] != len(part) or (dim is not None and out.shape[1] != dim):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"encode: expected float ({len(part)}, {dim or 'D'}), got {got}")
        new.append(out.detach().to("cpu", torch.float32))
        norms, dim = new[-1].norm(dim=1), out.shape[1]
        bad = ~torch.isfinite(norms) | ((norms - 1.0).abs() > 1e-3)
        if bad.any():
            first = int(bad.nonzero()[0])
            raise ValueError(
                f"encode: {int(bad.sum())} rows are not finite unit vectors (row "
                f"{start + first}: norm {float(norms[first]):.4g})"
            )
    out = torch.empty(len(phrases), dim or 0)
    reused = [(j, have[p]) for j, p in enumerate(phrases) if p in have]
    if reused:
        rows, old = torch.tensor(reused).T
        out[rows] = known[1][old].to(torch.float32)
    if new:
        out[torch.tensor(missing)] = torch.cat(new)
    return out
