"""``georag index`` (--corpus, --graph), ``index add``, ``index delete`` and ``georag search
--method`` over a corpus index."""

from __future__ import annotations

import json

import pytest

from georag.cli import main


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_index_add_delete_search(tmp_path, cache_env, demo_docs, capsys):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in demo_docs[:30]))
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps({"id": "n1", "title": "Zebra", "text": "zebra xylophone"}) + "\n")
    index = str(tmp_path / "idx")
    code, out, _ = _run(
        ["index", "--corpus", str(corpus), "--out", index, "--graph", "passage"], capsys
    )
    assert code == 0 and "indexed 30 documents" in out and "graphs: passage" in out
    assert _run(["index", "add", "--index", index, str(new)], capsys)[0] == 0
    code, out, _ = _run(["search", "--index", index, "--method", "iso", "-k", "1", "zebra"], capsys)
    assert code == 0 and " n1 " in out.splitlines()[-1]
    code, out, _ = _run(
        ["search", "--index", index, "-k", "1", "--first-stage", "bm25", "zebra"], capsys
    )
    assert code == 0 and " n1 " in out.splitlines()[-1]
    ids = tmp_path / "ids.txt"
    ids.write_text("n1\n")
    code, out, _ = _run(["index", "delete", "--index", index, "--ids-file", str(ids)], capsys)
    assert code == 0 and "holds 30 documents" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["index", "--out", "X"], "--corpus or --dataset is required"),
        (["index", "--corpus", "/no/such.jsonl", "--out", "X"], "--corpus: no such file"),
        (["index", "--corpus", "C", "--out", "X", "--graph", "tree"], "unknown graph 'tree'"),
        (["index", "delete", "--index", "I", "nope"], "delete: unknown id(s) ['nope']"),
        (["index", "delete", "--index", "I"], "delete: give ids or --ids-file"),
        (["index", "add", "--index", "I", "C"], "add: id(s) already in the index"),
        (["search", "--index", "I", "--method", "hipporag2", "x"], "--graph passage entity:title"),
    ],
)
def test_bad_index_commands_exit_2_in_one_line(
    argv, message, tmp_path, cache_env, demo_docs, capsys
):
    from georag.retrievers.index import build_index

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in demo_docs[:5]))
    if "I" in argv:
        build_index(demo_docs[:5], tmp_path / "I", graphs=["passage"])
    paths = {"I": str(tmp_path / "I"), "C": str(corpus), "X": str(tmp_path / "X")}
    capsys.readouterr()  # the build's progress bars
    code, _, err = _run([paths.get(a, a) for a in argv], capsys)
    assert code == 2 and err.startswith("georag: error:") and message in err, err
    assert err.count("\n") == 1
