"""The README's text-API example runs as written (its two-document and one-document calls
included: few documents are answered, not refused)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO_ROOT


def readme_blocks(language: str) -> list[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_the_text_api_example_runs_as_written():
    for module in ("langchain_core", "llama_index.core", "pyterrier"):
        pytest.importorskip(module)
    blocks = [b for b in readme_blocks("python") if "georag.Reranker(" in b]
    assert len(blocks) == 1
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    reranker = scope["reranker"]
    ranked = reranker.rank(
        "does vitamin D protect bones?", ["abstract one ...", {"id": "d2", "text": "..."}]
    )
    assert [d.id for d in ranked] in (["0", "d2"], ["d2", "0"]) and not ranked[0].fallback
    assert reranker.rank("does vitamin D protect bones?", ["a single abstract ..."])[0].fallback


def test_the_retrieval_example_runs_as_written(tmp_path, embedding_cache_dir, monkeypatch):
    blocks = [b for b in readme_blocks("python") if "georag.Retriever(" in b]
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    retriever = scope["retriever"]
    assert retriever.retrieve("why do tides rise?", k=1)[0].id in ("d1", "d3")
    assert retriever.size == 2 and (tmp_path / "runs" / "tiny-index" / "CURRENT").is_file()
