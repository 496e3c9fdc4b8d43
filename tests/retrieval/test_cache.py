import numpy as np
import pytest
import torch

from georag.retrieval.cache import EmbeddingCache, content_hash


def test_key_depends_on_model_texts_and_settings():
    base = EmbeddingCache.key("m", ["a", "b"], window=None)
    assert base == EmbeddingCache.key("m", ["a", "b"], window=None)
    assert base != EmbeddingCache.key("m2", ["a", "b"], window=None)
    assert base != EmbeddingCache.key("m", ["ab"], window=None)
    assert base != EmbeddingCache.key("m", ["a", "b"], window=300)
    assert content_hash(["a", "b"]) != content_hash(["a b"])


def test_round_trip_and_second_call_does_no_work(tmp_path):
    cache = EmbeddingCache(tmp_path)
    x = torch.randn(5, 3)
    calls = []
    first, hit1 = cache.get_or_compute("k", 5, lambda: calls.append(1) or x)
    second, hit2 = cache.get_or_compute("k", 5, lambda: calls.append(1) or x)
    assert (hit1, hit2) == (False, True) and calls == [1]
    assert torch.equal(second, x)


def test_interrupted_write_leaves_no_entry(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path)

    def crash(handle, **arrays):
        handle.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.save("k", torch.randn(4, 2))
    assert list(tmp_path.iterdir()) == []
    assert cache.load("k") is None


def test_corrupt_entries_are_rejected(tmp_path):
    cache = EmbeddingCache(tmp_path)
    path = cache.save("k", torch.randn(6, 4))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    assert cache.load("k") is None
    cache.save("k", torch.randn(6, 4))
    assert cache.load("k", rows=7) is None  # row count mismatch
    path.rename(tmp_path / "other.npz")
    assert cache.load("other") is None  # header names another key


def test_checksum_detects_flipped_bytes(tmp_path):
    cache = EmbeddingCache(tmp_path)
    x = torch.zeros(50, 8)
    path = cache.save("k", x)
    raw = bytearray(path.read_bytes())
    offset = raw.index(b"\x00" * 64)  # inside the embedding payload (npz stores it uncompressed)
    raw[offset + 10] = 0x3F
    path.write_bytes(bytes(raw))
    assert cache.load("k") is None
