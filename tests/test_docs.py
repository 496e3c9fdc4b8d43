"""Every test, script and config the docs name exists: a doc that cites a test vouches for it.

Scanned: README.md, scripts/README.md, docs/*.md and docs/methods/*.md. Cited forms:
``tests/<path>.py``, ``tests/<path>.py::test_name``, ``tests/<folder>/``, a test file by its
name (``test_ricci.py``), a test function by its name (``test_xxx``, found in any file under
tests/), ``scripts/<folder>/<name>.py`` (the path as written: a script that moved is a stale
citation) and ``configs/<path>.yaml``. The docs also name no issue, step or commit: they
describe the code as it is.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "scripts" / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs/methods").glob("*.md"),
    ]
)
# GraphRicciCurvature's own test file, named where its expectations are ported
EXTERNAL = {"tests/test_OllivierRicci.py", "test_OllivierRicci.py"}

TEST_PATH = re.compile(r"(?<![\w/.])tests/([\w/]+\.py)(?:::(\w+))?")
TEST_FOLDER = re.compile(r"(?<![\w/.])tests/([\w/]+)/(?![\w.])")
TEST_FILE = re.compile(r"(?<![\w/.])(test_\w+\.py)\b")
TEST_NAME = re.compile(r"(?<![\w/.])(test_\w+)\b(?!\.py)")
SCRIPT = re.compile(r"(?<![\w/.])scripts/([\w/]+\.py)\b")
CONFIG = re.compile(r"(?<![\w/.])(configs/[\w/]+\.yaml)\b")


def _citations(pattern: re.Pattern) -> list[tuple[str, tuple[str, ...]]]:
    found = []
    for doc in DOCS:
        for match in pattern.finditer(doc.read_text(encoding="utf-8")):
            if match.group(0) not in EXTERNAL:
                found.append((doc.relative_to(ROOT).as_posix(), match.groups()))
    return found


@cache
def _test_functions() -> dict[str, set[str]]:
    """Test function names defined in each file under tests/, by path relative to tests/."""
    names = {}
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names[path.relative_to(ROOT / "tests").as_posix()] = set(
            re.findall(r"^\s*(?:async\s+)?def (test_\w+)\(", text, re.MULTILINE)
        )
    return names


def test_the_scan_finds_citations():
    """The patterns match the docs as written (guards against a scan that checks nothing)."""
    assert len(_citations(TEST_PATH)) >= 5
    assert len(_citations(TEST_NAME)) >= 3
    assert len(_citations(SCRIPT)) >= 10
    assert len(_citations(CONFIG)) >= 5


def test_cited_test_files_and_functions_exist():
    tests = _test_functions()
    missing = []
    for doc, (path, name) in _citations(TEST_PATH):
        if path not in tests:
            missing.append(f"{doc}: tests/{path}")
        elif name and name not in tests[path]:
            missing.append(f"{doc}: tests/{path}::{name}")
    for doc, (folder,) in _citations(TEST_FOLDER):
        if not (ROOT / "tests" / folder).is_dir():
            missing.append(f"{doc}: tests/{folder}/")
    basenames = {Path(path).name for path in tests}
    for doc, (name,) in _citations(TEST_FILE):
        if name not in basenames:
            missing.append(f"{doc}: {name}")
    defined = set().union(*tests.values())
    for doc, (name,) in _citations(TEST_NAME):
        if name not in defined:
            missing.append(f"{doc}: {name}")
    assert not missing, "docs cite tests that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_cited_scripts_exist():
    missing = {
        f"{doc}: scripts/{path}"
        for doc, (path,) in _citations(SCRIPT)
        if not (ROOT / "scripts" / path).is_file()
    }
    assert not missing, "docs cite scripts that do not exist:\n" + "\n".join(sorted(missing))


def test_cited_configs_exist():
    missing = {
        f"{doc}: {path}" for doc, (path,) in _citations(CONFIG) if not (ROOT / path).is_file()
    }
    assert not missing, "docs cite configs that do not exist:\n" + "\n".join(sorted(missing))


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_docs_describe_the_code_not_its_history(doc):
    """No issue or step numbers, no paper named by its file number, no commit hashes."""
    text = doc.read_text(encoding="utf-8")
    pattern = re.compile(
        r"\bissues? \d+|\bthe issue\b|\bissue's|\bstops? \d+\b|\bseeds? 00\d\b|\bsessions?\b"
        r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b",  # a commit hash
        re.IGNORECASE,
    )
    hits = [
        f"{doc.name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in pattern.finditer(text)
    ]
    assert not hits, "\n".join(hits)
