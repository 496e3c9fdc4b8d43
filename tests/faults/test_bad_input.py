"""Hostile and broken inputs: every case is one line, ``georag: error: ...``, exit status 2.

One test per hostile loader input found by probing (a qrels score of inf, nested JSON,
Latin-1 bytes, all-empty texts, a title object, a YAML tag, foreign and crafted weights, a
crafted Lorentz index, zip entries under a file, zip bombs, links and ``..``), and the
Python API's ValueError for each.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
import torch

from georag._io import atomic_folder, atomic_write, safe_extract, seal
from georag.cli import main
from georag.data.bundled import DEMO_DIR


def _cli(argv, capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("georag: error: "), err
    return lines[0]


@pytest.fixture
def demo(tmp_path) -> Path:
    folder = tmp_path / "demo"
    shutil.copytree(DEMO_DIR, folder)
    return folder


def _corrupt_line(path: Path, line_no: int, raw: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = raw
    path.write_bytes(b"\n".join(lines))


CORPUS_CASES = {
    "nested JSON": (b"[" * 100_000 + b"]" * 100_000, "corpus.jsonl:3: JSON nested too deeply"),
    "Latin-1 bytes": (
        '{"_id": "x", "text": "caf\xe9"}'.encode("latin-1"),
        "corpus.jsonl:3: not UTF-8 (byte 0xe9",
    ),
    "title object": (
        b'{"_id": "x", "title": {"a": 1}, "text": "t"}',
        "corpus.jsonl:3: field 'title' must be a string, got dict",
    ),
}


@pytest.mark.parametrize("case", list(CORPUS_CASES))
def test_corpus_cases(case, demo, capsys):
    raw, message = CORPUS_CASES[case]
    _corrupt_line(demo / "corpus.jsonl", 3, raw)
    assert message in _cli(["eval", "--dataset", str(demo)], capsys)


def test_all_empty_texts(demo, capsys):
    docs = [json.loads(line) for line in (demo / "corpus.jsonl").read_text().splitlines()]
    (demo / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d["_id"], "title": "", "text": " "}) + "\n" for d in docs)
    )
    assert "every document's title and text are empty" in _cli(
        ["eval", "--dataset", str(demo)], capsys
    )
    from georag.retrieval.bm25 import BM25Index

    with pytest.raises(ValueError, match="texts: none of the 2 documents"):
        BM25Index.build(["", "the"])


@pytest.mark.parametrize("score", ["inf", "-inf", "nan", "1e400"])
def test_qrels_non_finite_score(score, demo, capsys):
    _corrupt_line(demo / "qrels" / "test.tsv", 2, f"q01\td001\t{score}".encode())
    line = _cli(["eval", "--dataset", str(demo)], capsys)
    assert "test.tsv:2: score" in line and "finite" in line


def test_yaml_python_tag(tmp_path, capsys):
    config = tmp_path / "eval.yaml"
    config.write_text("dataset: demo\nmethods: !!python/object/apply:os.system ['echo hi']\n")
    line = _cli(["eval", "--config", str(config)], capsys)
    assert f"{config}:2 is not valid YAML" in line


def test_yaml_not_a_mapping(tmp_path, capsys):
    config = tmp_path / "eval.yaml"
    config.write_text("- a\n- b\n")
    assert "must hold a mapping" in _cli(["eval", "--config", str(config)], capsys)


def test_mistyped_dataset_suggests_without_download(monkeypatch, tmp_path, capsys):
    def no_download(*args, **kwargs):
        raise AssertionError("a mistyped name must not be downloaded")

    monkeypatch.setattr("georag.data.beir.download_and_extract", no_download)
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GEORAG_DATA", raising=False)
    (tmp_path / "data" / "scifact").mkdir(parents=True)
    (tmp_path / "data" / "scifact" / "corpus.jsonl").write_text("")
    line = _cli(["eval", "--dataset", "scifcat", "--data-dir", str(tmp_path / "data")], capsys)
    assert "did you mean 'scifact'?" in line and "local sets: scifact" in line


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def _sealed_pickle(obj, fmt: str) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_module=pickle)
    return seal(buffer.getvalue(), format=fmt, version=1)


def test_foreign_and_crafted_weights(tmp_path, capsys):
    from georag.models.hyte import _FORMAT

    foreign = tmp_path / "foreign.pt"
    torch.save({"w": torch.ones(2)}, foreign)
    crafted = tmp_path / "crafted.pt"
    crafted.write_bytes(_sealed_pickle({"x": _Boom()}, _FORMAT))
    argv = ["index", "--hyperbolic", "--dataset", str(DEMO_DIR), "--out", str(tmp_path / "i")]
    assert "foreign.pt: no georag manifest" in _cli(argv + ["--weights", str(foreign)], capsys)
    line = _cli(argv + ["--weights", str(crafted)], capsys)
    assert "crafted.pt: not a loadable" in line
    assert not (tmp_path / "i").exists()


def test_crafted_lorentz_index(tmp_path, capsys):
    """A consistent index (sizes, SHA-256s, manifest checksum recomputed) with a pickle bomb."""
    from georag._io import dump_manifest, load_manifest, sha256_file
    from georag.models.hyte import _FORMAT, HyTEEncoder
    from georag.rerank.geometric.hyte import build_index
    from georag.retrieval.lorentz_index import FORMAT, VERSION

    encoder = HyTEEncoder.from_pretrained(max_tokens=32)
    build_index(["cats purr", "dogs bark"], tmp_path / "idx", encoder=encoder)
    manifest_path = tmp_path / "idx" / "manifest.json"
    manifest = load_manifest(manifest_path.read_bytes(), where="m", format=FORMAT, version=VERSION)
    proj = tmp_path / "idx" / "projection.pt"
    proj.write_bytes(_sealed_pickle({"x": _Boom()}, _FORMAT))
    manifest["files"]["projection.pt"].update(size=proj.stat().st_size, sha256=sha256_file(proj))
    manifest_path.write_bytes(dump_manifest(manifest))
    line = _cli(["search", "--index", str(tmp_path / "idx"), "cats"], capsys)
    assert "not a loadable" in line and proj.name in line


# ---------------------------------------------------------------------------- zip archives
def _zip(path: Path, entries: list[tuple[str, bytes]], *, link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc")
    return path


@pytest.mark.parametrize(
    "entries, link, message",
    [
        ([("../evil", b"x")], None, "points outside the folder"),
        ([("/abs", b"x")], None, "points outside the folder"),
        ([], "toy/link", "is a symbolic link"),
        ([("toy/a", b"x"), ("toy/a/b", b"y")], None, "is both a file and a folder"),
    ],
)
def test_zip_entries_refused(tmp_path, entries, link, message):
    archive = _zip(tmp_path / "a.zip", entries, link=link)
    with pytest.raises(ValueError, match=message):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_zip_bomb_and_limits(tmp_path):
    bomb = _zip(tmp_path / "bomb.zip", [("toy/zeros", bytes(64 << 20))])
    assert bomb.stat().st_size < 100_000
    with pytest.raises(ValueError, match="would inflate [0-9]+x, more than 200x"):
        safe_extract(bomb, tmp_path / "out")
    with pytest.raises(ValueError, match="would inflate to"):
        safe_extract(bomb, tmp_path / "out2", max_total_bytes=1 << 20, max_ratio=1e6)
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*"))  # nothing written
    many = _zip(tmp_path / "many.zip", [(f"toy/{i}", b"x") for i in range(20)])
    with pytest.raises(ValueError, match="20 entries, the limit is 10"):
        safe_extract(many, tmp_path / "out3", max_entries=10)


def test_download_refuses_a_symlinked_folder_zip(tmp_path, monkeypatch):
    from georag.data.download import download_and_extract

    archive = _zip(tmp_path / "toy.zip", [("toy/link/x", b"y")], link="toy/link")
    with pytest.raises(ValueError, match="is a symbolic link"):
        download_and_extract(archive.as_uri(), tmp_path / "cache", "toy")
    assert list((tmp_path / "cache").iterdir()) == []  # no temporary folder left


# ---------------------------------------------------------------------------- permissions
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_files_get_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "f.txt", "x")
        with atomic_folder(tmp_path / "folder", format="t") as tmp:
            (tmp / "a").write_text("y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "folder").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((tmp_path / "folder" / "a").stat().st_mode) == 0o666 & ~umask
