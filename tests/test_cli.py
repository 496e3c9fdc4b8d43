import subprocess
import sys
from pathlib import Path

import pytest

from georag.cli import main


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: command"),
        (["eval", "--top-m", "0", "--dataset", "x"], "--top-m: must be a positive integer"),
        (["eval", "--first-stage", "sparse"], "invalid choice: 'sparse'"),
        (["eval"], "--dataset is required"),
        (["eval", "--dataset", "/no/such/folder"], "folder '/no/such/folder' does not exist"),
        (["search", "--index", "/nonexistent", "cats"], "not a georag-store folder"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("georag: error:") and message in err
    assert err.count("\n") == 1


def test_console_script_help():
    out = subprocess.run(
        [sys.executable, "-m", "georag.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("demo", "eval", "index", "search"):
        assert command in out


def test_eval_on_demo_writes_results(tmp_path, embedding_cache_dir, monkeypatch, capsys):
    import json

    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    monkeypatch.setenv("WANDB_MODE", "offline")
    out = tmp_path / "out"
    argv = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--methods", "none"]
    code = main(argv + ["--first-stage", "bm25", "--out", str(out), "--wandb"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    assert rows[0]["method"] == "none" and rows[0]["dataset"] == "demo"
    for key in ("ndcg@10", "recall@10", "recall@100", "mrr@10", "ms_per_query"):
        assert 0 <= rows[0][key] and key in (out / "results.md").read_text()
    assert (out / "demo.none.trec").is_file()
    assert "| demo | none |" in capsys.readouterr().out
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb"))
    png = out / "scatter.png"
    assert main(["plot", "scatter", "--results", str(out / "results.json"), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_plot_flow_on_demo(tmp_path, embedding_cache_dir, monkeypatch):
    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["plot", "flow", "--dataset", str(DEMO_DIR), "--query", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    for name in ("flow.png", "query_edges.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert main(argv[:-4] + ["--query", "999"]) == 2


@pytest.mark.parametrize("hyperbolic", [False, True])
def test_index_then_search(tmp_path, embedding_cache_dir, monkeypatch, capsys, hyperbolic):
    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["index", "--dataset", str(DEMO_DIR), "--out", str(tmp_path / "idx")]
    assert main(argv + (["--hyperbolic"] if hyperbolic else [])) == 0
    assert (
        main(
            [
                "search",
                "--index",
                str(tmp_path / "idx"),
                "-k",
                "3",
                "why",
                "do",
                "tides",
                "rise",
                "and",
                "fall",
            ]
        )
        == 0
    )
    hits = capsys.readouterr().out.strip().splitlines()[-3:]
    assert [int(line.split()[0]) for line in hits] == [1, 2, 3]
    assert any("tide" in line.lower() for line in hits)


def test_eval_runs_corpus_methods_beside_rerankers(tmp_path, embedding_cache_dir, monkeypatch):
    import json

    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--out", str(tmp_path)]
    assert main(argv + ["--methods", "none,diffusion+maniscope,iso,ppr_global"]) == 0
    rows = {r["method"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    assert list(rows) == ["none", "diffusion+maniscope", "iso", "ppr_global"]
    assert all(0.3 < rows[m]["ndcg@10"] <= 1 for m in rows)  # real retrievers on easy data
    assert rows["iso"]["ndcg@10"] != rows["ppr_global"]["ndcg@10"]


def test_eval_method_config_and_options_change_the_result(
    tmp_path, embedding_cache_dir, monkeypatch, capsys
):
    """--method-config NAME=PATH and --method-option NAME.KEY=VALUE reach the method."""
    import json

    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    root = Path(__file__).resolve().parents[1] / "configs" / "rerank"
    changed = tmp_path / "ricci.yaml"
    changed.write_text(
        (root / "ricci_filtration.yaml").read_text().replace("quantile: 0.5", "quantile: 0.9")
    )
    assert "quantile: 0.9" in changed.read_text()
    base = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--methods", "ricci,hyte"]

    def kept(out, *extra):
        assert main([*base, "--out", str(tmp_path / out), *extra]) == 0
        rows = json.loads((tmp_path / out / "results.json").read_text())
        return {r["method"]: r for r in rows}

    same = kept("same", "--method-config", f"ricci={root / 'ricci_filtration.yaml'}")
    other = kept("other", "--method-config", f"ricci={changed}", "--method-option", "hyte.top_m=5")
    assert same["ricci"]["kept_mean"] != other["ricci"]["kept_mean"]
    assert same["hyte"]["kept_mean"] > 5 and other["hyte"]["kept_mean"] <= 5
    capsys.readouterr()
    assert main([*base, "--method-option", "hyte.nope=1", "--out", str(tmp_path / "x")]) == 2
    assert "hyte: unknown option 'nope'" in capsys.readouterr().err
    assert main([*base, "--method-config", f"ricci={tmp_path / 'absent.yaml'}"]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_threads_option_and_environment_errors(capsys, monkeypatch):
    try:
        code = main(["--threads", "0", "demo"])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "--threads: must be a positive integer" in err and err.count("\n") == 1
    monkeypatch.setenv("GEORAG_THREADS", "many")
    assert main(["plot", "scatter", "--results", "/no/such/results.json"]) == 2
    err = capsys.readouterr().err
    assert err == "georag: error: $GEORAG_THREADS must be a positive integer, got 'many'\n"
