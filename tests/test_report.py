"""`flopplan report` on a run folder: a summary it cannot read is one line, the plot's options and a folder it cannot
write to; the committed tables (`flopplan tables`) regenerate identically and name their command."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import ROOT, ROOT_ONLY, cli, one_line_error

from flopplan.report.generate import all_tables, stale_tables

# -- run reports ------------------------------------------------------------------------------------------------

def _summary(**changes) -> dict:
    buckets = {"rollout": 1, "learning": 1, "feedback": 0, "evaluation": 0, "total": 2}
    return {"flopplan_run_version": 1, "model": "tiny", "reward": "rule", "steps": 1, "budget_flops": 10,
            "flops": buckets, "useful_flops": buckets, **changes}


@pytest.mark.parametrize(("change", "fragment"), [({"chance": "x"}, "chance"), ({"abandoned_flops": "x"}, "abandoned"),
                                                 ({"budget_flops": -5}, "budget_flops"),
                                                 ({"flopplan_run_version": "1"}, "version")])
def test_a_malformed_summary_is_one_line(tmp_path, change, fragment):
    (tmp_path / "summary.json").write_text(json.dumps(_summary(**change)))
    one_line_error(cli("report", str(tmp_path), "--no-plot"), fragment)


@pytest.mark.parametrize("summary", [{}, [], {"flops": "many"}, {"flops": {"total": 1}}])
def test_report_refuses_what_is_not_a_run(tmp_path, summary):
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = cli("report", str(tmp_path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = cli("report", str(tmp_path / "nothing"))
    assert out.returncode == 2 and "not a flopplan run" in out.stderr


def test_report_json_writes_no_plot_and_a_plot_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    out = cli("report", str(tmp_path), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["plot"] is None and not (tmp_path / "report.png").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(cli("report", str(tmp_path), "--plot", str(blocker / "x.png")), "cannot write the plot")
    one_line_error(cli("report", str(tmp_path), "--no-plot", "--plot", "x.png"), "contradict")


def test_a_run_that_logs_a_reward_and_no_accuracy_is_plotted_without_a_warning(tmp_path):
    """A metered TRL script without evaluations logs a reward and no accuracy: its report plotted neither and
    matplotlib printed "No artists with labels found to put in legend" on stderr (a held-out user). The reward is
    plotted; a run that logged neither is plotted with no legend, and nothing is printed on stderr."""
    import warnings

    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    flops = {"rollout": 1, "learning": 1, "feedback": 0, "evaluation": 0, "total": 2}
    for metrics in ("", json.dumps({"step": 1, "reward": 0.25, "flops": flops}) + "\n"):
        (tmp_path / "metrics.jsonl").write_text(metrics)
        (tmp_path / "report.png").unlink(missing_ok=True)
        with warnings.catch_warnings(record=True) as caught:  # (in this process: what python -m prints on stderr)
            warnings.simplefilter("always")
            out = cli("report", str(tmp_path))
        assert out.returncode == 0 and out.stderr == "" and (tmp_path / "report.png").is_file(), out.stderr
        assert [str(w.message) for w in caught] == []


@ROOT_ONLY
def test_report_on_a_read_only_folder_still_reports(tmpfs):
    (tmpfs / "summary.json").write_text(json.dumps(_summary()))
    assert subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)]).returncode == 0
    out = cli("report", str(tmpfs))
    assert out.returncode == 0 and "no plot: cannot write the plot" in out.stdout
    one_line_error(cli("report", str(tmpfs), "--plot", str(tmpfs / "x.png")), "cannot write the plot")


# -- committed tables -------------------------------------------------------------------------------------------

def test_committed_tables_regenerate_identically():
    assert stale_tables(ROOT / "tables") == [], "run `flopplan tables` and commit the result"


def test_each_paper_tables_recipe_line_names_the_conventions_of_its_own_models():
    """The feedback table (dense Qwen2.5 policies and reward models) took the sizes table's recipe line, which names
    the experts implementation because qwen3-30b-a3b is among the sizes: each table's line is now its own."""
    tables = all_tables()
    assert ", experts " in tables["same_flop_sizes.md"] and ", experts " in tables["phase_breakdown.md"]
    assert "- recipe: " in tables["feedback_systems.md"] and ", experts " not in tables["feedback_systems.md"]


def test_tables_record_their_command_and_version():
    from flopplan import __version__

    for name, text in all_tables().items():
        assert "flopplan tables" in text.splitlines()[0] and __version__ in text.splitlines()[0], name


def test_a_table_wider_than_the_console_wraps_arm_names_and_cuts_none(capsys):
    """At 180 columns (any output that is not a terminal) the recommendation table cut its arm names to
    ``tiny-s.G4.mu1.rule.beta0.0…``, so the winner could not be told from the runner-up. Every cell now wraps:
    each arm name is found whole in its column once the column's lines are joined."""
    from flopplan.report.console import print_tables
    from flopplan.report.tables import Table

    arms = [f"tiny-s.G4.mu1.rule.beta{beta}.temperature{t}" for beta in ("0.0", "0.04") for t in ("0.7", "1.0")]
    table = Table("RACE recommendation", ["target", "arm", "regime", "P(best)", "runner-up", "margin"])
    table.rows = [["heldout", arms[0], "temperature-bound", "0.540", arms[1], "0.031 [0.000, 0.960]"],
                  ["long", arms[2], "temperature-bound", "0.410", arms[3], "0.012 [0.000, 0.500]"]]
    print_tables([table], width=60)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert len(lines) > len(table.rows)  # the table is wider than 60 columns: its rows wrapped
    assert all(len(line) <= 60 for line in lines) and "…" not in "".join(lines)
    for column in (1, 4):
        joined = "".join(line.split("│")[column + 1].strip() for line in lines)
        assert joined == "".join(row[column] for row in table.rows)


def test_latex_notes_are_separate_sentences_escaped_like_the_cells():
    """``flopplan tables --race`` joined the recommendation's notes with nothing between them ("...by their ledgers
    tiny-s.G4...: F is 16.7x ..."): each note now ends as a sentence, and is escaped as the cells are."""
    from flopplan.report.tables import Table, to_latex, to_markdown

    notes = ["pilots spent 44.4 GFLOP = 35.5% of F by their ledgers",
             "tiny-s.G4.mu1.rule.beta0.0: F is 16.7x its largest pilot. Read it as how strongly the pilots favour it",
             "heldout: 30 evaluation prompts."]
    table = Table("RACE recommendation", ["target", "arm"], [["heldout", "tiny-s.G4.mu1.rule.beta0.0"]], notes)
    footnote = to_latex([table], "cmd").split("\\footnotesize\n", 1)[1].split("\n", 1)[0]
    assert footnote == ("pilots spent 44.4 GFLOP = 35.5\\% of F by their ledgers. tiny-s.G4.mu1.rule.beta0.0: F is "
                        "16.7x its largest pilot. Read it as how strongly the pilots favour it. heldout: 30 "
                        "evaluation prompts.")
    assert all(f"- {note}\n" in to_markdown([table], "cmd") for note in notes)  # Markdown: one item each


def test_a_run_interrupted_by_ctrl_c_is_reported_in_a_sentence():
    """The step a Ctrl-C abandoned was printed as a raw dict ("interrupted: {'step': 6, ...}")."""
    from flopplan.report.run_report import run_tables
    from flopplan.runfile import RunSummary

    zero = {"rollout": 0, "learning": 0, "feedback": 0, "evaluation": 0, "total": 0}
    summary = RunSummary("tiny", "rule", 5, 10**12, zero, zero, abandoned_flops=2288123904,
                         stop_reason="interrupted", interrupted={"step": 6, "abandoned_flops": 2288123904})
    notes = run_tables(summary)[1]
    assert "interrupted in step 6 before its first update: the step is abandoned and redone on resume; abandoned " \
        "steps have spent 2,288,123,904 FLOPs, charged to the budget" in notes
    assert not any("{" in note for note in notes)
