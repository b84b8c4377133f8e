"""``flopplan calibrate --from-runs`` on run folders whose logs cannot be trusted, and what its profile says of
itself (synthetic run folders of chosen times: no training)."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import cli, one_line_error, tiny_recipe
from synthetic_runs import write_run

from flopplan.lengths import Length


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Two runs of different shapes that record their CPU seconds (at shares 0.5 and 0.8 of a core)."""
    root = tmp_path_factory.mktemp("runs")
    a = write_run(root / "a", tiny_recipe(), 8, seed=1, noise=0.02, share=0.5)
    b = write_run(root / "b", tiny_recipe(prompts_per_step=4, group_size=16, prompt_len=Length.fixed(12),
                                          micro_batch=32), 8, seed=2, noise=0.02, share=0.8)
    return a, b


def copy(run, tmp_path, name="run"):
    folder = tmp_path / name
    shutil.copytree(run, folder)
    return folder


def edit_metrics(folder, change):
    path = folder / "metrics.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line in lines:
        change(line)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def negate_time(line):
    line["time"] = -line["time"]


def backwards(line):  # step 5 dated a minute before the run began
    if line["step"] == 5:
        line["time"] -= 60.0


def started_late(line):
    if "process_started" in line:
        line["process_started"] = line["time"] + 5.0


def busy_cpu(line):  # more CPU seconds than one thread can spend in the wall time
    line["cpu_seconds"] *= 3.0


def words_for_time(line):  # (a re-check: a step dated "soon" or NaN was dropped from the fit without a word)
    if line["step"] == 4:
        line["time"] = "soon"


def nan_time(line):
    if line["step"] == 4:
        line["time"] = float("nan")


@pytest.mark.parametrize("damage, fragment", [
    (words_for_time, "is not a number of seconds"),
    (nan_time, "is not a number of seconds"),
    (negate_time, "negative start-up"),  # every time negated: the start-up is the first thing to go negative
    (backwards, "go backwards"),
    (started_late, "negative start-up"),
    (busy_cpu, "at most 1 is possible"),
])
def test_impossible_times_are_refused_in_one_line(tmp_path, shared, damage, fragment):
    folder = copy(shared[0], tmp_path)
    edit_metrics(folder, damage)
    out = tmp_path / "cal"
    one_line_error(cli("calibrate", "--from-runs", str(folder), str(shared[1]), "--out", str(out)), fragment)
    assert not out.exists()  # (a refused fit left the empty folder it had made)


@pytest.mark.parametrize("log", ["metrics.jsonl", "ledger.jsonl"])
def test_a_log_cut_short_of_its_summary_is_refused(tmp_path, shared, log):
    """Half a log (cut mid-line, as a copy that ran out of disk leaves it) beside a summary of all 8 steps."""
    folder = copy(shared[0], tmp_path)
    path = folder / log
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    out = tmp_path / "cal"
    error = one_line_error(cli("calibrate", "--from-runs", str(folder), str(shared[1]), "--out", str(out)),
                           f"run run: {log} ends at step")
    assert "records 8 steps" in error and "cut short" in error
    assert not (out / "profile.json").exists()


def test_a_last_line_cut_by_a_kill_is_noted_in_the_report(tmp_path, shared):
    folder = copy(shared[0], tmp_path, "killed")
    path = folder / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 9, "ti')
    out = tmp_path / "cal"
    result = cli("calibrate", "--from-runs", str(folder), str(shared[1]), "--out", str(out), check=True)
    note = "killed: metrics.jsonl ends in a line cut short (a kill?): read up to its last whole line"
    assert note in " ".join(result.stdout.split())
    assert note in (out / "report.md").read_text()


def test_a_file_given_as_a_run_folder_is_named_as_not_a_folder(tmp_path, shared):
    summary = shared[0] / "summary.json"
    error = one_line_error(cli("calibrate", "--from-runs", str(summary), "--out", str(tmp_path / "cal")),
                           "is not a folder")
    assert "does not exist" not in error


def test_the_start_up_is_put_at_the_share_the_profile_records(tmp_path):
    """Run a: steps at half a core, its start-up at a quarter (its span doubled, its CPU seconds kept); run b: a
    whole core throughout. The profile records the steps' typical share, 0.75; its start-up must be the true one
    (6 s on a whole core) at that share, not at the start-ups' own median (0.625)."""
    from synthetic_runs import TRUE_OUTSIDE

    a = write_run(tmp_path / "a", tiny_recipe(), 6, share=0.5)
    b = write_run(tmp_path / "b", tiny_recipe(), 6, share=1.0)

    def quarter(line):
        if "process_started" in line:
            line["process_started"] = line["time"] - 2 * (line["time"] - line["process_started"])

    edit_metrics(a, quarter)
    out = tmp_path / "cal"
    cli("calibrate", "--from-runs", str(a), str(b), "--out", str(out), check=True)
    profile = json.loads((out / "profile.json").read_text())
    assert profile["core_share"] == pytest.approx(0.75)
    true_startup = TRUE_OUTSIDE["startup"]["seconds"] / 0.75
    assert profile["non_phase"]["startup"]["seconds"] == pytest.approx(true_startup, rel=0.03)
    assert profile["fit_from_runs"]["core_share"]["startups"] == {"a": [pytest.approx(0.25)], "b": [1.0]}


def test_the_fit_report_says_its_core_shares_are_over_the_timed_steps(tmp_path, shared):
    out = tmp_path / "cal"
    cli("calibrate", "--from-runs", *map(str, shared), "--out", str(out), check=True)
    report = (out / "report.md").read_text()
    assert "(core: the run's own over its timed steps, start-up apart: CPU seconds per thread over wall seconds)" \
        in report


def test_the_phase_error_is_held_out_run_by_run_and_plans_state_it(tmp_path, shared):
    """Two runs: each one's calls are predicted by the model fitted on the other alone (priced here by the
    planner's own call_seconds, not the fit's code), and that figure, labelled held out, reaches the report, the
    notes and the plan's time table; a profile fitted on one run says its error is in-sample."""
    import statistics

    from flopplan.calibrate.fit_runs import fit_phases
    from flopplan.calibrate.runs import at_typical_share, read_runs
    from flopplan.timing import call_seconds

    out = tmp_path / "cal"
    result = cli("calibrate", "--from-runs", *map(str, shared), "--out", str(out), check=True)
    profile = json.loads((out / "profile.json").read_text())
    runs, _ = at_typical_share(read_runs([str(r) for r in shared])[0])  # as the fit sees them
    errors: dict[str, list[float]] = {}
    for held, other in ((runs[0], runs[1]), (runs[1], runs[0])):
        model = fit_phases(other.units, 4.0, hold_out=False).time_model
        for unit in held.units:
            seconds = sum(call_seconds(model[k]["form"], model[k], call, 4.0) for k, call in unit.calls)
            errors.setdefault(unit.unit, []).append(abs(seconds / unit.seconds - 1))
    held_out = profile["fit_from_runs"]["held_out_errors"]
    assert set(held_out) == set(errors)
    for unit, values in errors.items():
        assert held_out[unit]["median"] == pytest.approx(statistics.median(values), rel=1e-6)
        assert held_out[unit]["units"] == len(values) and held_out[unit]["runs"] == 2
    assert "held-out median abs. error per unit, each of the 2 runs predicted by a fit on the others" in \
        (out / "report.md").read_text()
    assert "in-sample median abs. error per unit, on the calls it was fitted on" in (out / "report.md").read_text()
    assert "phase calls' median abs. error held out" in " ".join(result.stdout.split())
    plan = cli("plan", "--model", "tiny", "--budget", "1e14", "--profile", str(out / "profile.json"), check=True)
    assert "median abs. error held out, each fit run predicted by a fit on the others" in " ".join(plan.stdout.split())

    one = tmp_path / "one"
    result = cli("calibrate", "--from-runs", str(shared[0]), "--out", str(one), check=True)
    assert "one run: nothing held out" in " ".join(result.stdout.split())
    plan = cli("plan", "--model", "tiny", "--budget", "1e14", "--profile", str(one / "profile.json"), check=True)
    assert "median abs. error in-sample, on the calls it was fitted on (none held out)" in \
        " ".join(plan.stdout.split())


def test_parameters_left_at_their_seed_are_not_reported_as_fitted(tmp_path, shared):
    """One run: its decode bandwidth cannot move from the seed (1e10 B/s) and the report must not call it
    fitted; its update calls all have one shape (its evaluations give prefill and decode a second), and the
    warning says so for train alone."""
    from flopplan.calibrate.fit_runs import SEED_BANDWIDTH

    out = tmp_path / "one"
    result = cli("calibrate", "--from-runs", str(shared[0]), "--out", str(out), check=True)
    profile = json.loads((out / "profile.json").read_text())
    at_seed = profile["time_model"]["decode"]["bandwidth"] == pytest.approx(SEED_BANDWIDTH, rel=1e-6)
    assert at_seed and profile["fit_from_runs"]["identified"]["decode"]["bandwidth"] == "at its start"
    row = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| decode |"))
    assert "bandwidth at its start" in row and "all identified" not in row
    text = " ".join(result.stdout.split())
    assert "train: every call fitted on had" in text and "(one shape)" in text
    assert "prefill: every call fitted on had" not in text and "decode: every call fitted on had" not in text


def _on(folder, machine):
    path = folder / "summary.json"
    summary = json.loads(path.read_text())
    if machine is None:
        summary.pop("hardware", None)
    else:
        summary["hardware"] = machine
    path.write_text(json.dumps(summary))
    return folder


def test_runs_of_different_machines_are_refused_and_unrecorded_ones_noted(tmp_path, shared):
    """Run folders recorded only "device": "cpu", so runs made on two CPU models were fitted into one profile
    without a word (a held-out user): the summary records the machine (the CPU's model and threads, or the GPU),
    runs of different machines are refused in one line, and folders older than the record are noted."""
    a = _on(copy(shared[0], tmp_path, "a"), "CPU AMD EPYC 7B13 (2 threads)")
    b = _on(copy(shared[1], tmp_path, "b"), "CPU Intel Xeon Platinum 8480+ (2 threads)")
    one_line_error(cli("calibrate", "--from-runs", str(a), str(b), "--out", str(tmp_path / "mixed")),
                   "different machines")
    assert not (tmp_path / "mixed").exists()
    _on(b, "CPU AMD EPYC 7B13 (2 threads)")
    same = cli("calibrate", "--from-runs", str(a), str(b), "--out", str(tmp_path / "same"), "--json")
    assert same.returncode == 0 and "record the machine" not in same.stdout, same.stderr
    profile = json.loads((tmp_path / "same" / "profile.json").read_text())
    assert profile["device"] == "CPU AMD EPYC 7B13 (2 threads) (float32)"  # (was "cpu (float32)": no machine)
    summary = json.loads((b / "summary.json").read_text())
    (b / "summary.json").write_text(json.dumps({**summary, "engine": "trl"}))  # (a re-check: pooled unsaid)
    loops = cli("calibrate", "--from-runs", str(a), str(b), "--out", str(tmp_path / "loops"), "--json")
    assert loops.returncode == 0 and "different loops (builtin, trl)" in loops.stdout, loops.stderr
    (b / "summary.json").write_text(json.dumps(summary))
    _on(b, None)
    older = cli("calibrate", "--from-runs", str(a), str(b), "--out", str(tmp_path / "older"), "--json")
    assert older.returncode == 0 and "b: its folder does not record the machine" in older.stdout, older.stdout
