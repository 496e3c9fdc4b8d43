"""Lightning checkpoints with a checksum: sealed on save, checked on load.

Every checkpoint the trainers write is a ``torch.save`` zip whose archive comment holds a
georag manifest (format, version, SHA-256; :func:`georag._io.seal`), written atomically, so
``torch.load`` still reads it and a flipped byte or a torn file is an error naming the file
when training resumes or a projection is exported.
"""

from __future__ import annotations

import os
from pathlib import Path

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from georag._io import save_torch, unseal

__all__ = ["SealedCheckpointIO", "check_checkpoint", "FORMAT"]

FORMAT = "georag-lightning-checkpoint"


def check_checkpoint(path: str | os.PathLike) -> None:
    """Raise ``ValueError`` naming ``path`` unless it is an intact sealed checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint: no file at {path}")
    unseal(path.read_bytes(), where=path, format=FORMAT)


class SealedCheckpointIO(TorchCheckpointIO):
    """:class:`TorchCheckpointIO` that seals what it saves and checks what it loads."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError("SealedCheckpointIO takes no storage_options")
        save_torch(checkpoint, path, format=FORMAT)

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        check_checkpoint(path)
        if map_location is None:
            return super().load_checkpoint(path, weights_only=weights_only)
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)
