"""``georag serve --index`` refuses an index it cannot serve before anything binds: one
line, ``georag: error: ...`` naming the file or field, exit status 2."""

from __future__ import annotations

import json
import shutil

import pytest

from georag._io import dump_manifest
from georag.cli import main


def _manifest(folder):
    return next(folder.glob("gen-*")) / "manifest.json"


def _rewrite(folder, **fields) -> None:
    """Change manifest fields and reseal it (as another georag or encoder would write it)."""
    path = _manifest(folder)
    path.write_bytes(dump_manifest({**json.loads(path.read_text()), **fields}))


def _corrupt(folder) -> None:
    path = _manifest(folder).with_name("embeddings.npy")
    data = bytearray(path.read_bytes())
    data[-7] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "method, damage, message",
    [
        ("dense", lambda f: _rewrite(f, version=99), "manifest.json"),
        ("dense", lambda f: _rewrite(f, max_seq_length=512), "max_seq_length is 512"),
        ("dense", _corrupt, "embeddings.npy: checksum mismatch"),
        ("dense", lambda f: shutil.rmtree(next(f.glob("gen-*"))), "CURRENT"),
        ("iso", lambda f: None, "--graph passage"),
    ],
)
def test_an_index_that_cannot_serve_fails_in_one_line(
    method, damage, message, tiny_index, tmp_path, capsys
):
    folder = tmp_path / "index"
    shutil.copytree(tiny_index, folder)
    damage(folder)
    assert main(["serve", "--index", str(folder), "--method", method, "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("georag: error: ") and len(err.strip().splitlines()) == 1
    assert message in err


@pytest.mark.parametrize(
    "args, message",
    [
        (("--workers", "2"), "--workers"),
        (("--max-top-k", "0"), "--max-top-k"),
    ],
)
def test_bad_index_settings_fail_in_one_line(args, message, tiny_index, capsys):
    try:
        code = main(["serve", "--index", str(tiny_index), "--method", "dense", *args])
    except SystemExit as exit:  # the parser's own refusal
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("georag: error:") and message in err
    assert len(err.strip().splitlines()) == 1
