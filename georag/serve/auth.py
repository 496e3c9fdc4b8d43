"""The optional API key: ``Authorization: Bearer KEY``, compared in constant time."""

from __future__ import annotations

import hmac
import os

__all__ = ["read_api_key", "authorized"]


def read_api_key(path: str | os.PathLike) -> bytes:
    """The key in ``path`` (surrounding whitespace stripped).

    Raises
    ------
    ValueError
        Naming ``--api-key-file`` when the file cannot be read or holds no key.
    """
    try:
        key = open(path, "rb").read().strip()
    except OSError as error:
        raise ValueError(f"--api-key-file: cannot read {str(path)!r}: {error.strerror}") from None
    if not key:
        raise ValueError(f"--api-key-file: {str(path)!r} holds no key")
    return key


def authorized(header: str | None, key: bytes) -> bool:
    """Whether an ``Authorization`` header carries ``key`` as a bearer token."""
    scheme, _, token = (header or "").partition(" ")
    # compare_digest on the token even for a wrong scheme: no early exit to time
    match = hmac.compare_digest(token.strip().encode("utf-8", "replace"), key)
    return match and scheme.lower() == "bearer"
