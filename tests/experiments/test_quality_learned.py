"""The command line of scripts/quality/quality_learned.py (georag.experiments.selection.parse_args)
makes the run it names (roles, training
subset, fixed options), refuses what it cannot run, and ``--render`` rewrites the results
file from the saved sections, keeping the others, in Markdown and LaTeX.

The protocols themselves are tested in tests/experiments/.
"""

from __future__ import annotations

import json

import pytest

from georag.experiments.sections import write_learned
from georag.experiments.selection import ROLES, LearnedRun, selection_of
from georag.experiments.tables import learned_header, learned_markdown

HEADER = {"machine": "x86_64", "threads": 1, "torch_version": "2", "corpus_top_k": 100}


@pytest.fixture(scope="module")
def q():
    from georag.experiments import selection

    return selection


def _args(q, tmp_path, *extra):
    return q.parse_args(
        ["--methods", "learned_ricci", "--trials", "2", "--epochs", "1", "--patience", "1"]
        + ["--batch-size", "2", "--resamples", "200", "--work", str(tmp_path), *extra]
    )


def test_the_command_line_makes_the_run_it_names(q, tmp_path):
    run = LearnedRun.from_args(_args(q, tmp_path, "--roles", "map", "paper", "--jobs", "2"))
    assert run.methods == ("learned_ricci",) and run.roles == ("map", "paper") and run.jobs == 2
    assert run.trials == 2 and run.resamples == 200 and run.work == tmp_path
    assert (run.training.epochs, run.training.patience, run.training.batch_size) == (1, 1, 2)
    heading, stem, command = selection_of(run)
    assert heading == ": learned_ricci [roles paper map]"
    assert stem == "learned_ricci__roles-paper-map"
    assert "--roles paper map " in command and "--train-queries" not in command
    assert LearnedRun.from_args(_args(q, tmp_path)).roles == ROLES

    args = _args(q, tmp_path, "--train-queries", "4", "--roles", "paper", "learned")
    heading, stem, command = selection_of(LearnedRun.from_args(args))
    assert heading == ": learned_ricci [4 training queries, roles paper learned]"
    assert "--train-queries 4 " in command
    assert stem.endswith("__4-training-queries__roles-paper-learned")

    args = _args(q, tmp_path, "--method-option", "learned_ricci.fixed.alpha=0.3")
    run = LearnedRun.from_args(args)
    assert run.method_options == {"learned_ricci": {"fixed.alpha": 0.3}}
    heading, stem, command = selection_of(run)
    assert heading == ": learned_ricci [learned_ricci.fixed.alpha=0.3]"
    assert "--method-option learned_ricci.fixed.alpha=0.3 " in command


@pytest.mark.parametrize(
    "argv",
    [
        ["--roles", "learned", "geometry"],
        ["--method-option", "learned_ricci.alpha"],
        ["--jobs", "0"],
        ["--train-queries", "-1"],
    ],
)
def test_bad_options_stop_with_a_usage_error(q, argv, capsys):
    with pytest.raises(SystemExit) as stop:
        q.parse_args(argv)
    assert stop.value.code == 2 and "error:" in capsys.readouterr().err


def test_render_rewrites_the_file_from_the_saved_sections(tmp_path):
    work, out, tex = tmp_path / "work", tmp_path / "learned.md", tmp_path / "learned.tex"
    work.mkdir()
    rows = [{"method": "dense", "queries": 3, "train_s": 0.0}]
    rows[0].update({m: 0.5 for m in ("ndcg@10", "recall@10", "mrr@10")})
    rows[0].update({f"{m}_ci": [0.4, 0.6] for m in ("ndcg@10", "recall@10", "mrr@10")})
    saved = {
        "title": "cisi: learned_ricci",
        "metrics": ["ndcg@10", "recall@10", "mrr@10"],
        "rows": rows,
        "notes": {},
        "command": "python scripts/quality_learned.py --datasets cisi",
        "date": "today",
        "load": "1.0 -> 1.0",
        "protocol": "5-fold CV",
    }
    (work / "cisi__learned_ricci.json").write_text(json.dumps(saved))
    other = "### scifact: learned_diffusion (300 report queries)\n\nkept as it was"
    stale = "### cisi: learned_ricci (3 report queries)\n\nan older run"
    out.write_text("# old title\n\n" + stale + "\n\n" + other + "\n")
    write_learned(work, out, learned_header(**HEADER), tex)
    text = out.read_text()
    assert text.startswith("# Learned geometry: results\n\n")
    assert text.index(other) < text.index(learned_markdown(saved)) and "an older run" not in text
    assert tex.read_text().startswith("% cisi: learned_ricci\n\\begin{tabular}{lrrrrrrrr}\n")
