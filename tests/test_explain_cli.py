"""``georag explain``: a question of the bundled multi-hop corpus or of an index, as text
and as a PNG or an HTML page; bad input is one line and exit status 2."""

from __future__ import annotations

import pytest

from georag.cli import main
from georag.data.bundled import DEMO_MULTIHOP_DIR


def _error(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("georag: error:") and err.count("\n") == 1
    return err


def test_explain_a_demo_question_to_png_and_html(
    tmp_path, embedding_cache_dir, monkeypatch, capsys
):
    import matplotlib.image

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    base = ["explain", "--dataset", str(DEMO_MULTIHOP_DIR), "--query", "q05"]
    assert main([*base, "--out", str(tmp_path / "q05.png")]) == 0
    out = capsys.readouterr().out
    assert 'hipporag2: "Where was the director of Nine Bells for Ada born?"' in out
    assert '"lidia corvane"' in out and "[gold]" in out
    assert matplotlib.image.imread(tmp_path / "q05.png").shape[1] > 600
    assert main([*base, "--method", "iso_entity", "--html", str(tmp_path / "q.html")]) == 0
    assert "pruning removed" in capsys.readouterr().out
    assert "<svg" in (tmp_path / "q.html").read_text()


def test_explain_a_question_over_an_index(tmp_path, embedding_cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        '{"id": "f", "title": "Blue Kite", "text": "Blue Kite is a film directed by Ana Dorn."}\n'
        '{"id": "d", "title": "Ana Dorn", "text": "Ana Dorn is a director born in Velm."}\n'
        '{"id": "v", "title": "Velm", "text": "Velm is a river town."}\n'
    )
    index = tmp_path / "index"
    assert (
        main(["index", "--corpus", str(docs), "--out", str(index), "--graph", "entity:title"]) == 0
    )
    png = tmp_path / "x.png"
    question = "Where was the director of Blue Kite born?"
    assert main(["explain", "--index", str(index), question, "-k", "2", "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert '"blue kite" -> f Blue Kite' in out and png.is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--query", "q01"], "--dataset or --index: give exactly one"),
        (["explain", "--dataset", str(DEMO_MULTIHOP_DIR)], "--query: give the id"),
        (["explain", "--dataset", "d", "--index", "i"], "give exactly one"),
        (["explain", "--index", "i"], "question: give the question's text"),
        (["explain", "--dataset", "d", "--query", "q", "--method", "dense"], "--method"),
        (
            ["explain", "--dataset", "d", "--query", "q", "--out", "a.png", "--html", "a.html"],
            "--html: writes the picture instead of --out",
        ),
    ],
)
def test_bad_arguments_are_one_line(argv, message, capsys):
    assert message in _error(argv, capsys)


def test_an_unknown_query_id_is_one_line(embedding_cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["explain", "--dataset", str(DEMO_MULTIHOP_DIR), "--query", "q99"]
    assert "--query: no query 'q99' in demo_multihop" in _error(argv, capsys)
