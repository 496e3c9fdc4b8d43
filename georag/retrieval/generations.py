"""Generations of a live folder artifact: readers see one whole version, writers serialize.

A root folder holds numbered generation folders (``gen-000001``, ...), each written whole by
:func:`georag._io.atomic_folder` and never changed afterwards, and ``CURRENT``, a one-line
file naming the live one (replaced by :func:`georag._io.atomic_write`). An update writes
the next generation beside the live one, then switches ``CURRENT`` (the commit point), then
removes the older generations. A writer killed at any point leaves ``CURRENT`` naming a
complete generation; the next writer removes what the dead one left. Writers of one root
serialize on ``fcntl`` lock of ``.lock``; readers take no lock and retry when the
generation they were opening was removed under them (:func:`read_current`).

:func:`checkpoint` is a fault hook for tests: ``GEORAG_INDEX_FAULT=<step>`` makes the
process ``SIGKILL`` itself when it reaches that step of an update.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from georag._io import ArtifactError, atomic_write, sweep_stale

__all__ = [
    "FAULT_ENV",
    "POINTER",
    "checkpoint",
    "current_generation",
    "is_root",
    "next_generation",
    "prune",
    "read_current",
    "switch",
    "writer_lock",
]

POINTER = "CURRENT"
LOCK = ".lock"
FAULT_ENV = "GEORAG_INDEX_FAULT"
_GENERATION = re.compile(r"^gen-(\d{6,})$")
T = TypeVar("T")


def is_root(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds generations (has a ``CURRENT`` file)."""
    return (Path(folder) / POINTER).is_file()


def current_generation(root: str | os.PathLike) -> Path:
    """The live generation folder of ``root``.

    Raises
    ------
    ArtifactError
        No ``CURRENT`` file, or one that names no generation folder (naming the file).
    """
    pointer = Path(root) / POINTER
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ArtifactError(f"{root}: not a georag index ({POINTER} missing)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ArtifactError(f"{pointer}: unreadable ({err})") from None
    if not _GENERATION.match(name) or not (Path(root) / name).is_dir():
        raise ArtifactError(f"{pointer}: names {name!r}, which is not a generation folder")
    return Path(root) / name


def next_generation(root: str | os.PathLike) -> Path:
    """A generation folder path after every generation in ``root`` (not created)."""
    numbers = [int(m[1]) for p in Path(root).iterdir() if (m := _GENERATION.match(p.name))]
    return Path(root) / f"gen-{max(numbers, default=0) + 1:06d}"


@contextlib.contextmanager
def writer_lock(root: str | os.PathLike) -> Iterator[None]:
    """Hold the writers' lock of ``root`` (blocks while another writer holds it)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    with open(Path(root) / LOCK, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def switch(root: str | os.PathLike, generation: Path) -> None:
    """Make ``generation`` the live one (atomic replace of ``CURRENT``)."""
    atomic_write(Path(root) / POINTER, generation.name + "\n")


def prune(root: str | os.PathLike) -> list[Path]:
    """Remove every generation but the live one, and the temporary folders of dead
    writers (call under :func:`writer_lock`)."""
    live = current_generation(root).name
    removed = sweep_stale(root)
    for path in Path(root).iterdir():
        if _GENERATION.match(path.name) and path.name != live:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def read_current(root: str | os.PathLike, load: Callable[[Path], T], *, attempts: int = 5) -> T:
    """``load(generation)`` of the live generation, retried when a writer removed that
    generation while it was being read (a newer one is live then)."""
    for attempt in range(attempts):
        generation = current_generation(root)
        try:
            return load(generation)
        except (ArtifactError, OSError):
            if attempt == attempts - 1 or current_generation(root) == generation:
                raise
    raise AssertionError("unreachable")


def checkpoint(step: str) -> None:
    """The fault hook: ``SIGKILL`` this process when ``$GEORAG_INDEX_FAULT`` is ``step``."""
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
