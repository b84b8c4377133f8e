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


def test_tables_record_their_command_and_version():
    from flopplan import __version__

    for name, text in all_tables().items():
        assert "flopplan tables" in text.splitlines()[0] and __version__ in text.splitlines()[0], name
