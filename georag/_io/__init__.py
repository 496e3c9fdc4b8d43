"""Atomic, checked artifact I/O: the one place where georag writes files that hold work.

A bottom module (it imports nothing of georag). Every artifact is written so that a reader
sees the old version or the new one, never a mix, and carries a SHA-256 and a format
version that are checked on load:

* :func:`atomic_write`: one file, through a temporary file in the same folder, ``fsync``
  and :func:`os.replace`.
* :func:`seal` / :func:`unseal`: a single-file binary artifact carries its manifest inside
  the file. A zip (``torch.save``, ``np.savez``) keeps it in the archive comment, so the
  file stays a valid zip for every other reader; any other payload (a faiss index) gets a
  trailer, which faiss ignores.
* :func:`atomic_folder` / :func:`check_folder`: a folder artifact (BM25, a store) is
  built in a temporary folder, gets ``manifest.json`` (SHA-256 and size of every file)
  written last, and is swapped into place as a whole (``renameat2(RENAME_EXCHANGE)`` on
  Linux; elsewhere two renames, and a later write or read restores the previous folder
  when a writer died between them).
* :func:`write_file_set` / :func:`read_file_set`: several files that sit beside others in
  a user's folder (``results.json/md/csv``, a TREC run) are staged in a temporary folder,
  committed by renaming it to ``.<manifest>.pending``, then moved into place, manifest
  last; a reader or writer that finds a pending set rolls it forward first.
* :func:`sweep_stale`: temporary files and folders named ``.<name>.<pid>.<token>.tmp``
  whose writer is dead (or that are older than :data:`STALE_AFTER_S`) are removed the next
  time the same folder is written.
* Created files get the user's umask (``mkstemp`` alone would leave them 0600).
* :func:`safe_extract`: zip extraction that refuses absolute paths, ``..``, links and
  entries under a file, and enforces limits on total size, entry count and compression
  ratio.

The parts, each imported from here: :mod:`~georag._io.files` (one file, litter, umask),
:mod:`~georag._io.sealed` (manifests, sealed single files, torch files),
:mod:`~georag._io.folders` (folders and file sets) and :mod:`~georag._io.archives` (zip
extraction).

Errors are :class:`ArtifactError` (a ``ValueError``) naming the file. One writer per
target at a time is assumed: concurrent writers of the same artifact are not coordinated
(single files: each write is atomic and the last one wins; file sets and folders: a second
writer may fail with an ``OSError``), and temporary entries of a writer on another host
sharing the file system count as stale only by age.
"""

from georag._io.archives import safe_extract
from georag._io.files import (
    STALE_AFTER_S,
    ArtifactError,
    atomic_write,
    sha256_file,
    sweep_stale,
    temp_folder,
)
from georag._io.folders import MANIFEST, atomic_folder, check_folder, read_file_set, write_file_set
from georag._io.sealed import dump_manifest, load_manifest, load_torch, save_torch, seal, unseal

__all__ = [
    "ArtifactError",
    "MANIFEST",
    "STALE_AFTER_S",
    "atomic_write",
    "seal",
    "unseal",
    "atomic_folder",
    "check_folder",
    "write_file_set",
    "read_file_set",
    "sweep_stale",
    "safe_extract",
    "sha256_file",
    "dump_manifest",
    "load_manifest",
    "temp_folder",
    "save_torch",
    "load_torch",
]
