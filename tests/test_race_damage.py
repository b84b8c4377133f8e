"""A race folder after the accidents of real use (found by an audit of the workflow): a pilot stopped by Ctrl-C, a
finished pilot's evaluations cut at a line's end, a failing analysis, a validating run asked for on a stale
analysis, an unfinished race or a pilot with no checkpoint, and a runner interrupted by ``kill -INT``. Each must be
resumed or refused in one line, never read as something it is not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli, one_line_error
from test_race_run import races  # noqa: F401 - the finished quick demo race, built once per session

from flopplan.race.design import RaceDesign
from flopplan.race.pilots import pilot_done, pilot_folder, pilot_spending
from flopplan.race.results import load_analysis
from flopplan.race.runner import PROMOTIONS, recorded_promotions


def _copy(straight: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copytree(straight, copy)
    return copy


def _files(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_a_pilot_stopped_by_ctrl_c_is_not_done_and_one_resumed_to_its_budget_is(races, tmp_path):  # noqa: F811
    """Ctrl-C between steps leaves a summary that says "interrupted" and no ``interrupted`` record (that is written
    only for a step abandoned midway): it was read as a finished rung, and the race went on with a short pilot.
    A pilot resumed and finished after a Ctrl-C midway keeps its ``interrupted`` record: it was never done."""
    straight, _, _ = races
    copy = _copy(straight, tmp_path, "copy")
    design = RaceDesign.load(copy)
    arm, seed = design.arms[0], design.seeds[0]
    path = pilot_folder(copy, arm.name, seed) / "summary.json"
    finished = json.loads(path.read_text())
    budget = finished["budget_flops"]
    assert pilot_done(path.parent, budget)
    interrupted = {**finished, "stop_reason": "interrupted", "stop": {**finished["stop"], "reason": "interrupted"}}
    path.write_text(json.dumps(interrupted))
    assert not pilot_done(path.parent, budget)
    path.write_text(json.dumps({k: v for k, v in interrupted.items() if k != "stop"}))  # a summary of before `stop`
    assert not pilot_done(path.parent, budget)
    path.write_text(json.dumps({**finished, "interrupted": {"step": 4, "abandoned_flops": 1_000}}))
    assert pilot_done(path.parent, budget)
    # what interruptions cost the pilots: a kill's lost work and the steps a Ctrl-C abandoned, both
    before = pilot_spending(design, copy)["lost"] - finished["lost_flops"] - finished["abandoned_flops"]
    path.write_text(json.dumps({**finished, "abandoned_flops": 1_000, "lost_flops": 500}))
    assert pilot_spending(design, copy)["lost"] == before + 1_500


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_evaluations_cut_at_a_line_end_are_one_line_and_a_failing_analysis_keeps_the_promotions(races, tmp_path):  # noqa: F811
    straight, _, _ = races
    cut = _copy(straight, tmp_path, "cut")
    log = next(cut.glob("pilots/*/seed1/evaluations.jsonl"))
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:len(lines) // 2]))  # whole lines: no kill leaves this
    before = _files(cut)
    one_line_error(cli("race", "analyze", str(cut), "--no-plots"), "which its ledger charged")
    assert _files(cut) == before
    # a pilot whose summary is gone reads as unfinished: the analysis is refused, and the promotions decided on
    # the pilots as they were stay recorded (the runner reruns the pilot; a decision acted upon stands)
    gone = _copy(straight, tmp_path, "gone")
    next(gone.glob("pilots/*/seed1/summary.json")).unlink()
    promotions = (gone / PROMOTIONS).read_bytes()
    assert json.loads(promotions)["decisions"]
    one_line_error(cli("race", "analyze", str(gone), "--no-plots"), "has not finished the first rung")
    assert (gone / PROMOTIONS).read_bytes() == promotions


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_validate_refuses_a_stale_analysis_an_unfinished_race_and_a_pilot_without_checkpoints(races, tmp_path):  # noqa: F811
    """Each would have spent more than F: the validating run is given what the pilots left by race.json, so pilots
    that spent more since, or still have to run, or a pilot the run cannot continue (it starts over and spends the
    pilot's FLOPs again) would take the race past its budget."""
    straight, _, _ = races
    analysis = load_analysis(straight / "race.json")
    arm = next(r.arm for r in analysis.recommendations if r.arm)
    design = RaceDesign.load(straight)

    stale = _copy(straight, tmp_path, "stale")
    shutil.rmtree(stale / "validation")
    data = json.loads((stale / "race.json").read_text())
    (stale / "race.json").write_text(json.dumps({**data, "pilot_flops": data["pilot_flops"] - 1}))
    one_line_error(cli("race", "validate", str(stale)), "run `flopplan race analyze` again")

    unfinished = _copy(straight, tmp_path, "unfinished")
    shutil.rmtree(unfinished / "validation")
    summary = pilot_folder(unfinished, str(arm), design.seeds[-1]) / "summary.json"  # the pick reached the top rung
    data = json.loads(summary.read_text())  # stopped there by Ctrl-C: its first rung done, the top one not
    stop = {**data["stop"], "reason": "interrupted"}
    summary.write_text(json.dumps({**data, "stop_reason": "interrupted", "stop": stop}))
    top = len(design.rung_flops)
    one_line_error(cli("race", "validate", str(unfinished)), f"has not finished rung {top} of {top}")

    damaged = _copy(straight, tmp_path, "damaged")  # read before the copy: a damaged pilot leaves no stale copy
    shutil.rmtree(damaged / "validation")
    (pilot_folder(damaged, str(arm), design.seeds[0]) / "evaluations.jsonl").write_text("")
    one_line_error(cli("race", "validate", str(damaged)), "has no evaluation on")
    assert not (damaged / "validation").exists()

    bare = _copy(straight, tmp_path, "bare")
    shutil.rmtree(bare / "validation")
    shutil.rmtree(pilot_folder(bare, str(arm), design.seeds[0]) / "checkpoints")
    before = _files(bare)
    one_line_error(cli("race", "validate", str(bare)), "has no checkpoint to continue")
    assert _files(bare) == before

    edited = _copy(straight, tmp_path, "edited")  # race.json's F is not the race's: it gave a run 7.7x F
    shutil.rmtree(edited / "validation")
    data = json.loads((edited / "race.json").read_text())
    (edited / "race.json").write_text(json.dumps({**data, "budget_flops": data["budget_flops"] * 8}))
    one_line_error(cli("race", "validate", str(edited)), "race.json's budget")
    assert not (edited / "validation").exists()


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_the_validating_runs_copy_of_its_pilot_leaves_out_what_a_kill_left_half_written(races, tmp_path):  # noqa: F811
    """A kill during an atomic write leaves ``.NAME.XXXX.tmp`` beside the file; the copy the validating run
    continues is made without it (a review found one copied into the validating run's checkpoints)."""
    from flopplan.race.validate import continue_pilot

    straight, _, _ = races
    arm = next(r.arm for r in load_analysis(straight / "race.json").recommendations if r.arm)
    pilot = _copy(straight, tmp_path, "copy") / "pilots" / str(arm) / f"seed{RaceDesign.load(straight).seeds[0]}"
    (pilot / "checkpoints" / ".latest.wqdcouma.tmp").write_text("half")
    (pilot / ".summary.json.x1.tmp").write_text("half")
    continue_pilot(pilot, tmp_path / "run", (1,))
    assert (tmp_path / "run" / "checkpoints").is_dir() and (tmp_path / "run" / "summary.json").is_file()
    assert not list((tmp_path / "run").rglob("*.tmp"))


CHILD = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "a").write("SIGINT\\n")
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
open(sys.argv[1], "a").write("ready\\n")
time.sleep(60)
"""


RUNNER = """
import subprocess, sys, threading, time
from pathlib import Path
from flopplan.race.pilots import allow_children, interrupt_children, run_child
child, folder = sys.argv[1], Path(sys.argv[2])
logs = [folder / f"child{i}.log" for i in range(2)]
codes = []
threads = [threading.Thread(target=lambda log=log: codes.append(
    run_child([sys.executable, "-c", child, str(log)], stdin=subprocess.DEVNULL))) for log in logs]
for thread in threads:
    thread.start()
deadline = time.monotonic() + 60
while not all(log.is_file() and "ready" in log.read_text() for log in logs):
    assert time.monotonic() < deadline, "the children never started"
    time.sleep(0.05)
interrupt_children()
for thread in threads:
    thread.join(60)
assert not any(thread.is_alive() for thread in threads), "a child did not end on its SIGINT"
assert sorted(codes) == [130, 130], codes
assert all(log.read_text().count("SIGINT") == 1 for log in logs), [log.read_text() for log in logs]
late = folder / "late.log"
assert run_child([sys.executable, "-c", child, str(late)], stdin=subprocess.DEVNULL) == 130
assert not late.exists()  # never started
allow_children()  # the next race run starts pilots again
done = run_child([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('ran')", str(late)])
assert done == 0 and late.read_text() == "ran"
"""


def test_a_runner_interrupted_passes_one_ctrl_c_to_the_pilots_it_waits_for_and_starts_no_other(tmp_path):
    """``kill -INT`` of the runner alone reached no pilot: the runner waited for every running pilot to finish its
    rung. It now passes one SIGINT to each, and a pilot whose thread took its task before the interrupt is not
    started after it (it would run its whole rung while the runner waits). Run in a process of its own, as a
    runner is: in this test worker's process, once in about twenty full runs, a child logged a second SIGINT from
    a sender not found (the worker then also held another test's local Ray cluster and its threads)."""
    out = subprocess.run([sys.executable, "-c", RUNNER, CHILD, str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


SLEEPER = """
import json, os, signal, sys, time
folder, log, first, budget = sys.argv[1:5]
if first == "1":  # the first arm's pilot: done at once
    os.makedirs(folder)
    flops = dict.fromkeys(("rollout", "learning", "feedback", "evaluation", "total"), 0)
    json.dump({"flopplan_run_version": 1, "model": "tiny-s", "reward": "rule", "steps": 1, "flops": flops,
               "useful_flops": flops, "budget_flops": int(budget), "stop_reason": "budget",
               "stop": {"stop": True, "reason": "budget", "message": "budget"}},
              open(os.path.join(folder, "summary.json"), "w"))
    sys.exit(0)
def stop(signum, frame):
    open(log, "a").write("SIGINT\\n")
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
open(log, "a").write("ready\\n")
time.sleep(60)
"""


def test_a_ctrl_c_between_pilots_stops_the_running_ones_before_the_runner_returns(tmp_path, monkeypatch):
    """A Ctrl-C that lands in the runner's own loop, between two pilots it waits for (here raised by its progress
    callback after the first pilot ended), must stop the local pool's other pilots before the KeyboardInterrupt
    reaches the caller, not when the pool's generator happens to be collected (the CLI prints "interrupted" and
    exits while it still holds the exception): the running pilot has had one SIGINT and ended by then."""
    from flopplan.race import runner
    from flopplan.race.pilots import allow_children, interrupt_children

    race = tmp_path / "race"
    cli("race", "design", "--budget", "2e11", "--pilot-fraction", "0.5", "--models", "tiny-s", "--group-sizes", "4,8",
        "--seeds", "1", "--rungs", "2", "--evals", "2", "--eval-prompts", "30", "--out", str(race), check=True)
    design = RaceDesign.load(race)
    log = tmp_path / "second.log"
    first = pilot_folder(race, design.arms[0].name, design.seeds[0])
    monkeypatch.setattr(runner, "train_command", lambda design, folder, task: [
        sys.executable, "-c", SLEEPER, str(task.folder), str(log), "1" if task.folder == first else "0",
        str(task.budget)])

    def progress(done: int, total: int) -> None:
        deadline = time.monotonic() + 60
        while not (log.is_file() and "ready" in log.read_text()):
            assert time.monotonic() < deadline, "the second pilot never started"
            time.sleep(0.05)
        raise KeyboardInterrupt

    said = ""
    try:
        runner.run_race(race, jobs=2, log=lambda text: None, progress=progress)
    except KeyboardInterrupt:  # read while the exception (and whatever it keeps alive) is held, as the CLI does
        said = log.read_text()
    finally:
        interrupt_children()  # (a pilot still running)
        allow_children()
    assert said.count("SIGINT") == 1


PILOT = """
import os, signal, sys
folder, how, summary = sys.argv[1:4]
os.makedirs(folder, exist_ok=True)
open(os.path.join(folder, "config.json"), "w").write("{}")
if how in ("ctrl-c", "ctrl-c-launcher"):  # flopplan train (or a metered script) after a SIGINT: a checkpointed round
    open(os.path.join(folder, "summary.json"), "w").write(open(summary).read())
    sys.exit(130 if how == "ctrl-c" else 1)  # (torchrun reports a worker that ended on SIGINT as exit 1)
if how in ("sigterm", "sigkill"):
    os.kill(os.getpid(), signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
print("RuntimeError: reward server timed out", file=sys.stderr)
sys.exit(1)
"""


PILOT_ENDS = [  # how the pilot ended, the race run's exit code, what its last line says
    ("ctrl-c", 130, "interrupted by SIGINT (it stopped after its current phase, with a checkpoint), not a failure"),
    ("ctrl-c-launcher", 130, "interrupted by SIGINT (it stopped after its current phase, with a checkpoint)"),
    ("sigterm", 130, "interrupted by SIGTERM (it resumes from its last checkpoint"),
    ("sigkill", 2, "failed (killed by SIGKILL)"),
    ("crash", 2, "failed (exit 1): RuntimeError: reward server timed out"),
    ("crash-after-ctrl-c", 2, "failed (exit 1): RuntimeError: reward server timed out"),
]


@pytest.mark.parametrize(("how", "returncode", "said"), PILOT_ENDS, ids=[end[0] for end in PILOT_ENDS])
def test_a_pilot_sent_sigint_or_sigterm_alone_is_reported_interrupted_not_failed(tmp_path, monkeypatch, how,
                                                                                   returncode, said):
    """A held-out user's Ctrl-C sent to one pilot process alone, not to the race's runner, was reported as the
    failure of that pilot ("failed (exit 130): flopplan: interrupted; continue with ..."), exit code 2, though its
    checkpoint was sound and the next ``race run`` resumed it. A pilot ended by SIGINT (``flopplan train``'s 130,
    or a summary this attempt wrote that says so, whatever a launcher exits with) or SIGTERM is interrupted: one
    line naming the command that resumes it, exit code 130. A crash, a SIGKILL (the kernel's, out of memory) and a
    crash of a pilot an earlier Ctrl-C stopped (its summary not rewritten) are still failures."""
    from flopplan.race import runner
    from flopplan.runfile import RunSummary

    race = tmp_path / "race"
    cli("race", "design", "--budget", "2e11", "--pilot-fraction", "0.5", "--models", "tiny-s", "--group-sizes", "4,8",
        "--seeds", "1", "--rungs", "2", "--evals", "2", "--eval-prompts", "30", "--out", str(race), check=True)
    design = RaceDesign.load(race)
    budget = design.arms[0].pilot_budget(design, 0)
    buckets = dict.fromkeys(("rollout", "learning", "feedback", "evaluation", "total"), 0)
    stopped = RunSummary(model="tiny-s", reward="rule", steps=5, budget_flops=budget, flops=buckets,
                         useful_flops=buckets, stop_reason="interrupted during step 6",
                         stop={"stop": True, "reason": "interrupted"})
    summary = tmp_path / "interrupted.json"
    summary.write_text(json.dumps(stopped.to_data()))
    if how == "crash-after-ctrl-c":  # the summary an earlier attempt's Ctrl-C left, which this attempt never rewrites
        first = pilot_folder(race, design.arms[0].name, design.seeds[0])
        first.mkdir(parents=True)
        (first / "config.json").write_text("{}")
        shutil.copy(summary, first / "summary.json")
    child = "crash" if how == "crash-after-ctrl-c" else how
    monkeypatch.setattr(runner, "train_command", lambda design, folder, task: [  # flopplan train's place
        sys.executable, "-c", PILOT, str(task.folder), child, str(summary)])
    result = cli("race", "run", str(race))
    assert result.returncode == returncode, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"flopplan: pilot {design.arms[0].name} seed {design.seeds[0]} ") and said in lines[-1]
    if returncode == 130:
        assert lines[-1].endswith(f"`flopplan race run {race}` resumes it (log: {race}/logs/"
                                  f"{design.arms[0].name}.seed{design.seeds[0]}.rung1.log)")


@pytest.mark.parametrize("decisions", [[{"rung": [0]}], [{"rung": "0"}], ["rung 0"], [{"promoted": []}]])
def test_a_promotions_file_with_a_damaged_decision_holds_none(tmp_path, decisions):
    # a rung of [0] raised TypeError (unhashable list) in rung_arms: every decision is made again from the pilots
    (tmp_path / PROMOTIONS).write_text(json.dumps({"race_promotions_version": 1, "decisions": decisions}))
    assert recorded_promotions(tmp_path) == []
