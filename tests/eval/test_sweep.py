"""georag sweep and the per-query W&B record of georag eval, on the bundled demo corpus."""

from __future__ import annotations

import json

import pytest

from georag.cli import main


@pytest.fixture
def demo(embedding_cache_dir, monkeypatch):
    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    monkeypatch.setenv("WANDB_MODE", "offline")
    return str(DEMO_DIR)


def _wandb_files(out, kind):
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    return list((runs[0] / "files" / "media" / kind).glob("*"))


def test_sweep_grid_table_plot_and_wandb(demo, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--dataset",
        demo,
        "--method",
        "ricci",
        "--top-m",
        "20",
        "--grid",
        "quantile=0.25,0.75",
        "iterations=1,3",
        "--out",
        str(out),
        "--wandb",
    ]
    assert main(argv) == 0
    payload = json.loads((out / "sweep.json").read_text())
    rows = payload["rows"]
    assert [r["method"] for r in rows] == ["none"] + [f"ricci#{i}" for i in range(4)]
    assert [(r["quantile"], r["iterations"]) for r in rows[1:]] == [
        (0.25, 1),
        (0.25, 3),
        (0.75, 1),
        (0.75, 3),
    ]
    for row in rows[1:]:
        assert row["spec"] == "ricci" and 0 < row["kept_mean"] <= 20
        assert row["ndcg@10_ci_low"] <= row["ndcg@10"] <= row["ndcg@10_ci_high"]
        assert 0 < row["ndcg@10_p_value"] <= 1
    # the grid points really differ: the kept counts are not all equal
    assert len({r["kept_mean"] for r in rows[1:]}) > 1
    per_query = json.loads((out / "per_query.json").read_text())
    assert set(per_query) == {r["method"] for r in rows}
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000
    assert "\\begin{tabular}" in (out / "sweep.tex").read_text()
    assert "| ricci#3 | 0.7500 | 3 |" in capsys.readouterr().out
    assert _wandb_files(out, "images") and _wandb_files(out, "table")


@pytest.mark.parametrize(
    "grid, message",
    [
        (["foo=1,2"], "--grid: ricci: unknown option 'foo'"),
        (["quantile=low"], "--grid: ricci: "),
        (["quantile="], "--grid: no values for 'quantile'"),
        (["quantile=0.5", "quantile=0.7"], "--grid: 'quantile' given twice"),
        (["bi.quantile=1"], "--grid: 'bi.quantile' names stage 'bi', not in 'ricci'"),
    ],
)
def test_bad_grid_is_one_line_naming_the_key(grid, message, capsys):
    argv = ["sweep", "--dataset", "x", "--method", "ricci", "--grid", *grid]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("georag: error:") and message in err and err.count("\n") == 1


def test_eval_wandb_per_query_table_and_flow_plot(demo, tmp_path):
    out = tmp_path / "eval"
    argv = [
        "eval",
        "--dataset",
        demo,
        "--top-m",
        "20",
        "--methods",
        "none,ricci",
        "--out",
        str(out),
        "--wandb",
    ]
    assert main(argv) == 0
    rows = json.loads((out / "results.json").read_text())
    assert rows[0]["ndcg@10_p_value"] is None and 0 < rows[1]["ndcg@10_p_value"] <= 1
    tables = {p.name.rsplit("_", 2)[0]: p for p in _wandb_files(out, "table")}
    table = json.loads(tables["per_query"].read_text())
    assert table["columns"][:4] == ["dataset", "method", "query_id", "kept"]
    ricci = [r for r in table["data"] if r[1] == "ricci"]
    lengths = [json.loads(r[-1]) for r in ricci]
    assert all(len(x) == 20 for x in lengths) and all(r[3] <= 20 for r in ricci)
    # the kept count is the number of final query-edge lengths within eta = 1 (+ slack)
    assert [r[3] for r in ricci] == [sum(v <= 1 + 1e-4 for v in x) for x in lengths]
    assert any("ricci_flow" in p.name for p in _wandb_files(out, "images"))
    assert (out / "flow.png").is_file() and "\\toprule" in (out / "results.tex").read_text()
