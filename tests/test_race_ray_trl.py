"""A race of TRL script pilots (:mod:`test_race_trl`'s example race) on a real local Ray cluster (2 CPUs, started
once for the module): its driver killed mid-rung, then a Ray worker killed mid-round in the rerun, ends complete,
repeating no finished pilot and recording the work each kill lost; a failing script pilot on Ray is the pool's one
line. Apart from :mod:`test_race_ray` (and in an xdist group of its own) so that it runs beside the session's
pool race rather than after it."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli, one_line_error
from test_race_trl import EXAMPLE, _design, _race, _script, in_progress

from flopplan.fileio import lock_holder
from flopplan.race.pilots import pilot_done
from flopplan.race.runner import recorded_promotions
from flopplan.train.runfolder import RunFolder


def _lost_now(pilot: Path) -> int:
    """What a kill of the pilot now loses: the work its logs record after its newest checkpoint."""
    ledgers = pilot.glob("checkpoints/checkpoint-*/flopplan_ledger.json")
    return RunFolder(pilot).lost_after(max(json.loads(p.read_text())["rounds"] for p in ledgers))


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _stop_pilot_when(driver: subprocess.Popen, pilots: list[Path], ready, timeout: float = 1200) -> tuple[Path, int]:
    """SIGSTOP the process of a pilot for which ``ready(pilot)`` holds, checked again once it is stopped (so it
    cannot move on between the check and a kill); returns the pilot and its process, a child of a Ray worker. The
    timeout guards against a hang, not a speed: 300 s was passed once on this 2-core VM with two benchmarks beside
    the test session."""
    deadline = time.monotonic() + timeout
    while True:
        assert driver.poll() is None, driver.stderr.read().decode()[-2000:] if driver.stderr else "ended"
        assert time.monotonic() < deadline, "the kill point never came"
        for pilot in pilots:
            holder = lock_holder(pilot)
            if holder is None or not ready(pilot):
                continue
            pid = int(holder.split()[-1])
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            if lock_holder(pilot) == holder and ready(pilot):
                assert "ray::" in Path(f"/proc/{_parent(pid)}/cmdline").read_text(), "the pilot's parent is not Ray's"
                return pilot, pid
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
@pytest.mark.xdist_group("ray-trl")
def test_a_trl_script_race_on_ray_killed_at_the_driver_and_at_a_worker_ends_complete(ray_address, tmp_path):
    """The example's race on Ray from the start (its two first-rung pilots at once on the 2 CPUs). Its driver is killed
    once a pilot has finished its rung and another is mid-round beyond a checkpoint (that pilot's process stopped
    first): Ray ends the dead driver's task, its worker and with it the pilot (its parent-death signal), within
    seconds, so the rerun finds the folder free (else it would wait at most ``LOCK_WAIT`` and refuse). The rerun on
    Ray has the worker of a pilot beyond a checkpoint of this run killed mid-round; Ray's retry resumes it and the
    race ends complete; a final rerun finds nothing to run. Checked: no finished pilot run again, every pilot
    within its rung's budget with its evaluations at the design's points, each kill's lost work recorded in the
    pilot's summary outside the budget, race.json of the built-in races' schema, the validating run continuing the
    winner's pilot. Not checked: that race.json equals an uninterrupted race's (the session's killed built-in
    race, on the pool and on Ray, is checked against its uninterrupted race in :mod:`test_race_protocol`; no
    uninterrupted TRL race of this design runs in the session, and one more race would not fit CI's time)."""
    pytest.importorskip("trl")
    from flopplan.race.results import load_analysis

    race = tmp_path / "race"
    design = _design(race)
    pilots = [race / "pilots" / arm.name / "seed0" for arm in design.arms]
    first = {p: arm.pilot_budget(design, 0) for arm, p in zip(design.arms, pilots, strict=True)}
    ray_options = ("--backend", "ray", "--address", ray_address, "--pilot-cpus", "1")
    lost: dict[Path, int] = {}  # the work each kill lost, read from the pilot's folder at the kill

    def mid_rung(pilot: Path) -> bool:  # another pilot done with rung 1, this one beyond a checkpoint, mid-round
        return any(pilot_done(p, first[p]) for p in pilots if p != pilot) and any(
            (pilot / "checkpoints").glob("checkpoint-*/flopplan_ledger.json")) and in_progress(pilot)

    driver = _race(race, "--pilot", f"{sys.executable} {EXAMPLE}", *ray_options)
    stopped, pid = _stop_pilot_when(driver, pilots, mid_rung)
    worker = _parent(pid)
    lost[stopped] = _lost_now(stopped)
    finished = {p: (p / "metrics.jsonl").read_text() for p in pilots if pilot_done(p, first[p])}
    os.kill(driver.pid, signal.SIGKILL)  # the driver alone: its tasks, workers and pilots are the cluster's
    driver.wait()
    assert _gone(worker, 60) and _gone(pid, 5), "a pilot outlived its killed driver"
    assert lock_holder(stopped) is None

    lines = {p: len((p / "metrics.jsonl").read_text().splitlines()) for p in pilots}
    rerun = _race(race, *ray_options)

    def past_a_checkpoint_of_this_run(pilot: Path) -> bool:
        return len((pilot / "metrics.jsonl").read_text().splitlines()) > lines[pilot] + 1 and in_progress(pilot)
    stopped, pid = _stop_pilot_when(rerun, pilots, past_a_checkpoint_of_this_run)
    lost[stopped] = lost.get(stopped, 0) + _lost_now(stopped)
    os.kill(_parent(pid), signal.SIGKILL)  # the Ray worker: Ray retries its task, which resumes the pilot
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err.decode()[-3000:]
    again = cli("race", "run", str(race), "--json", *ray_options)  # this process is on the cluster already
    assert again.returncode == 0 and json.loads(again.stdout) == {"complete": True, "ran": 0, "rung": 1}

    assert all(flops > 0 for flops in lost.values())
    for arm, pilot in zip(design.arms, pilots, strict=True):  # one process per pilot and rung finished training
        for log in (race / "logs").glob(f"{arm.name}.seed0.rung*.log"):
            assert log.read_text().count("train_runtime") == 1, log
        evaluations = [json.loads(line) for line in (pilot / "evaluations.jsonl").read_text().splitlines()]
        assert [e["step"] for e in evaluations].count(0) == 1  # the baseline once: the killed pilots resumed
        assert all(a["train_flops"] < b["train_flops"] for a, b in itertools.pairwise(evaluations))
    promoted = recorded_promotions(race)[0]["promoted"]
    assert len(promoted) == 1
    for arm, pilot in zip(design.arms, pilots, strict=True):
        s = json.loads((pilot / "summary.json").read_text())
        rung = 1 if arm.name in promoted else 0
        assert s["budget_flops"] == arm.pilot_budget(design, rung) and s["within_budget"]
        assert s["lost_flops"] == lost.get(pilot, 0) and not s["lost_charged"]  # recorded, outside the budget
        evaluated = [json.loads(line)["train_flops"] for line in (pilot / "evaluations.jsonl").read_text()
                     .splitlines()]
        for point in (p for p in design.eval_points if p <= s["flops"]["total"] - s["flops"]["evaluation"]):
            assert any(f >= point for f in evaluated)  # an evaluation at (just after) each point reached
        if pilot in finished:  # a pilot finished at the driver's kill: untouched since, or continued
            metrics = (pilot / "metrics.jsonl").read_text()
            assert metrics == finished[pilot] if rung == 0 else metrics.startswith(finished[pilot])

    assert cli("race", "analyze", str(race), "--no-plots").returncode == 0
    data = json.loads((race / "race.json").read_text())
    assert load_analysis(race / "race.json").to_data() == data  # the built-in races' reader and writer
    assert data["pilot_flops"] == sum(json.loads((p / "summary.json").read_text())["flops"]["total"]
                                      for p in pilots)
    validated = cli("race", "validate", str(race), "--json")
    assert validated.returncode == 0, validated.stderr[-3000:]
    validation = json.loads(validated.stdout)
    assert validation["within_budget"] and validation["steps"] > validation["continued"]["steps"]
    run = race / "validation" / validation["arm"]
    before = (race / "pilots" / validation["arm"] / "seed0" / "metrics.jsonl").read_text().splitlines()
    assert (run / "metrics.jsonl").read_text().splitlines()[:len(before)] == before  # continued, not restarted


@pytest.mark.slow
@pytest.mark.xdist_group("ray-trl")
def test_a_failing_script_pilot_on_ray_is_the_pools_one_line(ray_address, tmp_path):
    """A pilot command that fails, run as a Ray task: the same line, exit 2, as on the local pool; its folder kept."""
    arms = [arm.name for arm in _design(tmp_path / "race").arms]
    command = _script(tmp_path, "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    pool = one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", command), "boom")
    ray = one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--backend", "ray", "--address",
                                   ray_address))
    assert ray in {pool.replace(arms[0], name) for name in arms}  # Ray runs both pilots at once: either fails first
    assert any((tmp_path / "race" / "pilots").glob("*/seed0/pilot.log"))
