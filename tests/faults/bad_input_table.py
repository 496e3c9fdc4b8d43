"""The bad-input table: each hostile input -> message, exit status, line count.

``PYTHONPATH=. python tests/faults/bad_input_table.py`` prints it as Markdown. The cases
are those of test_bad_input.py (which asserts them), plus a 1 MB -> 1 GiB zip bomb.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(os.environ.get("TMPDIR", "/tmp")) / "georag-bad-input"
ROWS: list[tuple[str, str, str, int]] = []


def _short(text: str) -> str:
    return text.replace(f"{ROOT}/", "")


def cli(case: str, argv: list[str]) -> None:
    from georag.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    text = err.getvalue().strip()
    ROWS.append((case, _short(text), str(code), len(text.splitlines())))


def api(case: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except ValueError as err:
        ROWS.append((case, _short(f"ValueError: {err}"), "API", len(str(err).splitlines())))
    else:
        ROWS.append((case, "(no error)", "API", 0))


def demo(name: str) -> Path:
    from georag.data.bundled import DEMO_DIR

    folder = ROOT / name
    shutil.copytree(DEMO_DIR, folder)
    return folder


def set_line(path: Path, line_no: int, raw: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = raw
    path.write_bytes(b"\n".join(lines))


def make_zip(path: Path, entries: list[tuple[str, bytes]], link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc")
    return path


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def loader_cases() -> None:
    d = demo("inf")
    set_line(d / "qrels" / "test.tsv", 2, b"q01\td001\tinf")
    cli("qrels score inf", ["eval", "--dataset", str(d)])
    d = demo("nested")
    set_line(d / "corpus.jsonl", 3, b"[" * 100_000 + b"]" * 100_000)
    cli("deeply nested JSON line", ["eval", "--dataset", str(d)])
    d = demo("latin1")
    set_line(d / "corpus.jsonl", 3, '{"_id": "x", "text": "caf\xe9"}'.encode("latin-1"))
    cli("Latin-1 bytes in corpus", ["eval", "--dataset", str(d)])
    d = demo("empty")
    docs = [json.loads(line) for line in (d / "corpus.jsonl").read_text().splitlines()]
    (d / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": x["_id"], "title": "", "text": ""}) + "\n" for x in docs)
    )
    cli("all texts empty", ["eval", "--dataset", str(d)])
    d = demo("title")
    set_line(d / "corpus.jsonl", 3, b'{"_id": "x", "title": {"a": 1}, "text": "t"}')
    cli("title is a JSON object", ["eval", "--dataset", str(d)])
    config = ROOT / "evil.yaml"
    config.write_text("dataset: demo\nmethods: !!python/object/apply:os.system ['echo hi']\n")
    cli("YAML with !!python tag", ["eval", "--config", str(config)])
    cli("mistyped --dataset scifcat", ["eval", "--dataset", "scifcat"])


def weight_cases() -> None:
    from georag._io import dump_manifest, load_manifest, seal, sha256_file
    from georag.data.bundled import DEMO_DIR
    from georag.models.hyte import _FORMAT, HyTEEncoder
    from georag.rerank.geometric.hyte import build_index
    from georag.retrieval.lorentz_index import FORMAT, VERSION

    index = ["index", "--hyperbolic", "--dataset", str(DEMO_DIR)]
    foreign = ROOT / "foreign.pt"
    torch.save({"w": torch.ones(2)}, foreign)
    cli("foreign --weights", index + ["--out", str(ROOT / "i1"), "--weights", str(foreign)])
    buffer = io.BytesIO()
    torch.save({"x": _Boom()}, buffer)
    crafted = ROOT / "crafted.pt"
    crafted.write_bytes(seal(buffer.getvalue(), format=_FORMAT, version=1))
    cli(
        "crafted --weights (sealed pickle bomb)",
        index + ["--out", str(ROOT / "i2"), "--weights", str(crafted)],
    )
    encoder = HyTEEncoder.from_pretrained(max_tokens=32)
    build_index(["cats purr", "dogs bark"], ROOT / "idx", encoder=encoder)
    path = ROOT / "idx" / "manifest.json"
    manifest = load_manifest(path.read_bytes(), where=path, format=FORMAT, version=VERSION)
    proj = ROOT / "idx" / "projection.pt"
    proj.write_bytes(crafted.read_bytes())
    manifest["files"]["projection.pt"].update(size=proj.stat().st_size, sha256=sha256_file(proj))
    path.write_bytes(dump_manifest(manifest))
    cli(
        "crafted Lorentz index (consistent manifest, pickle bomb)",
        ["search", "--index", str(ROOT / "idx"), "cats"],
    )


def zip_cases() -> None:
    from georag._io import safe_extract
    from georag.data.download import download_and_extract

    linked = make_zip(ROOT / "toy.zip", [("toy/link/x", b"y")], link="toy/link")
    api(
        "zip entry under a symlinked folder (download)",
        lambda: download_and_extract(linked.as_uri(), ROOT / "cache", "toy"),
    )
    api(
        "zip entry ../evil",
        lambda: safe_extract(make_zip(ROOT / "e.zip", [("../evil", b"x")]), ROOT / "o1"),
    )
    api(
        "zip entry under a file",
        lambda: safe_extract(
            make_zip(ROOT / "f.zip", [("toy/a", b"x"), ("toy/a/b", b"y")]), ROOT / "o2"
        ),
    )
    bomb = ROOT / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("toy/zeros.bin", "w", force_zip64=True) as out:
            for _ in range(1024):
                out.write(bytes(1 << 20))
    api(
        f"zip bomb ({bomb.stat().st_size / 1e6:.2f} MB -> 1 GiB)",
        lambda: safe_extract(bomb, ROOT / "o3"),
    )


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    loader_cases()
    weight_cases()
    zip_cases()
    print("| case | message | exit | lines |\n|---|---|---:|---:|")
    for case, message, code, lines in ROWS:
        print(f"| {case} | `{message[:240]}` | {code} | {lines} |")
    shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
