"""One `georag eval` run: each method's options are checked once, the first stage runs
once and its time per query comes from that run."""

from __future__ import annotations

import json

from georag.cli import main


def test_options_checked_once_and_first_stage_run_once(tmp_path, embedding_cache_dir, monkeypatch):
    import georag.config
    from georag.data.bundled import DEMO_DIR
    from georag.eval import runner
    from georag.rerank import registry
    from georag.retrieval.candidates import FirstStage

    checked, retrieved = [], []
    real_check, real_retrieve = georag.config.config_from_mapping, FirstStage.retrieve

    def counting_check(cls, values, **kwargs):
        checked.append(cls.__name__)
        return real_check(cls, values, **kwargs)

    def counting_retrieve(self, ids, *args, **kwargs):
        retrieved.append(len(ids))
        return real_retrieve(self, ids, *args, **kwargs)

    for module in (georag.config, runner, registry):
        monkeypatch.setattr(module, "config_from_mapping", counting_check)
    monkeypatch.setattr(FirstStage, "retrieve", counting_retrieve)
    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--out", str(tmp_path)]
    options = ["--method-option", "maniscope.k=3", "--method-option", "diffusion.top_k=5"]
    assert main([*argv, "--methods", "none,maniscope,diffusion+maniscope", *options]) == 0
    assert sorted(checked) == ["DiffusionConfig", "ManiscopeConfig"]
    assert len(retrieved) == 1  # all queries at once, once
    rows = json.loads((tmp_path / "results.json").read_text())
    assert all(row["first_stage_ms_per_query"] > 0 for row in rows)
    assert {row["method"]: row["kept_mean"] for row in rows}["diffusion+maniscope"] <= 5
