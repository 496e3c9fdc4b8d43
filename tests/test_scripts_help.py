"""Every script under scripts/ and its folders answers ``--help`` (its imports and its parser
work), and every one but those listed in ``OFF_HARNESS`` is built on georag.perf.bench.

Each script runs as ``__main__`` with ``--help`` inside the test process, its own folder first
on ``sys.path`` as ``python scripts/<folder>/<name>.py`` puts it: torch, Lightning and the
other heavy imports are those the suite has loaded already, so the cost is the scripts' own
imports. What a script could leave behind is put back after each one: ``sys.argv``,
``sys.path``, the environment, torch's thread count and the modules imported from scripts/.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
from pathlib import Path

import torch

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _help(path: Path) -> str | None:
    """Run ``path --help`` as ``__main__``; None when it exits 0 with a usage line, else why."""
    saved = (list(sys.argv), list(sys.path), dict(os.environ), torch.get_num_threads())
    before = set(sys.modules)
    out = io.StringIO()
    sys.argv, sys.path = [str(path), "--help"], [str(path.parent), *sys.path]
    code = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    except BaseException as err:  # noqa: BLE001 - every failure is reported by path
        code = repr(err)
    finally:
        sys.argv, sys.path = saved[0], saved[1]
        os.environ.clear()
        os.environ.update(saved[2])
        torch.set_num_threads(saved[3])
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin.startswith(str(SCRIPTS)):
                del sys.modules[name]
    if code not in (0, None) or "usage:" not in out.getvalue():
        return f"exit {code}: {out.getvalue()[-500:]}"
    return None


def test_every_script_answers_help():
    scripts = sorted(SCRIPTS.rglob("*.py"))
    assert len(scripts) >= 20
    failed = {str(path): why for path in scripts if (why := _help(path)) is not None}
    assert failed == {}, failed


# Not on the harness: the GraphRicciCurvature runner runs in .venv-peers, which has no torch
# (its parents print the header).
OFF_HARNESS = {"ricci_reference.py"}


def test_every_script_uses_the_harness():
    scripts = list(SCRIPTS.rglob("*.py"))
    assert OFF_HARNESS <= {p.name for p in scripts}
    off = {p.name for p in scripts if "georag.perf.bench" not in p.read_text()}
    assert off == OFF_HARNESS


def test_every_script_has_its_line_in_the_scripts_readme():
    """scripts/README.md names every script by its path (what it measures, output, duration)."""
    listed = (SCRIPTS / "README.md").read_text(encoding="utf-8")
    missing = [
        p.relative_to(SCRIPTS.parent).as_posix()
        for p in SCRIPTS.rglob("*.py")
        if f"`{p.relative_to(SCRIPTS.parent).as_posix()}" not in listed
    ]
    assert not missing, missing
