"""The files around the code agree with it: CITATION.cff's version, the pre-commit ruff pin."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import georag

ROOT = Path(__file__).resolve().parents[1]


def test_citation_is_cff_1_2_with_the_package_version():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert {"message", "title", "authors", "license", "version"} <= set(citation)
    assert citation["authors"] == [{"name": "georag contributors"}]
    assert citation["license"] == "Apache-2.0"
    assert str(citation["version"]) == georag.__version__


def test_pre_commit_runs_make_lint_with_the_pinned_ruff():
    dev = re.search(r"^dev = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    (pin,) = re.findall(r'"ruff==([^"]+)"', dev.group(1))
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    (repo,) = [r for r in config["repos"] if r["repo"].endswith("/ruff-pre-commit")]
    assert repo["rev"] == f"v{pin}"
    hooks = {hook["id"]: hook for hook in repo["hooks"]}
    assert set(hooks) == {"ruff-check", "ruff-format"}
    assert hooks["ruff-format"].get("args") == ["--check"]
    assert "--fix" not in hooks["ruff-check"].get("args", [])
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    linted = re.search(r"ruff check (.+)\n", makefile).group(1).split()
    for hook in hooks.values():  # the same folders as make lint, no others
        assert all(re.match(hook["files"], f"{folder}/x.py") for folder in linted)
        assert not re.match(hook["files"], "docs/x.py")
