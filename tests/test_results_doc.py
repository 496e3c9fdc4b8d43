"""docs/results.md must print exactly the numbers of docs/results.json."""

import json
from pathlib import Path

import pytest

from georag.eval.report import latex_table, markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_results_md_matches_results_json():
    if not (DOCS / "results.json").is_file():
        pytest.skip("docs/results.json not generated yet (python scripts/make_results.py)")
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    from make_results import BEIR_COLUMNS, MULTIHOP_COLUMNS

    results = json.loads((DOCS / "results.json").read_text())
    text = (DOCS / "results.md").read_text()
    assert results["beir"], "results.json holds no rows"
    assert markdown_table(results["beir"], BEIR_COLUMNS) in text
    if results["multihop"]:
        assert markdown_table(results["multihop"], MULTIHOP_COLUMNS) in text
    if (DOCS / "results.tex").is_file():
        assert (DOCS / "results.tex").read_text() == latex_table(results["beir"], BEIR_COLUMNS)
