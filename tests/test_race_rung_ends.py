"""Where a pilot's rung ended, recorded by the runner (``rung_ends.json``, :mod:`flopplan.race.rung_ends`). In a
race of manifest version 5 a pilot's evaluations counted toward rung r when they lay within its budget and at
training FLOPs within the rung's; a TRL script pilot whose reward model reads another tokenizer can train its last
round past the cap (the meter's bound learns that model's extra tokens as rounds run), and that round's
evaluation was read as the next rung's: the rung lost its last evaluation. The runner now records where each
rung's run ended (its step and training FLOPs) and the analysis reads the rung up to there; a race run before the
record reads as before. The pilots here write what a real pilot writes (its evaluations and run summary) and
train their last step past the cap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli

from flopplan.race import runner
from flopplan.race.design import RaceDesign
from flopplan.race.pilots import pilot_folder, pilot_input, within_rung
from flopplan.race.rung_ends import RUNG_ENDS, RungEnd, recorded_ends, rung_end
from flopplan.runfile import RunSummary, load_evaluations

PAST = 1000
"""How far past its rung's training FLOPs a pilot's last step trains."""

PILOT = """
import json, os, sys
folder, budget, cap, prompts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(folder, exist_ok=True)
open(os.path.join(folder, "config.json"), "w").write("{}")
path = os.path.join(folder, "evaluations.jsonl")
lines = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
step, train = (lines[-1]["step"], lines[-1]["train_flops"]) if lines else (0, 0)
def evaluate():
    ones = min(prompts, len(lines) + 1)
    lines.append({"step": step, "target": "heldout", "train_flops": train, "flops": train + len(lines) + 1,
                  "accuracy": ones / prompts, "scores": [1] * ones + [0] * (prompts - ones)})
if not lines:
    evaluate()  # the baseline
start = train
for i in (1, 2, 3):  # three steps, the last past the rung's training FLOPs (by PAST)
    step += 1
    train = start + (cap - start) * i // 3 + (int(sys.argv[5]) if i == 3 else 0)
    evaluate()
open(path, "w").write("".join(json.dumps(x) + "\\n" for x in lines))
flops = {"rollout": train, "learning": 0, "feedback": 0, "evaluation": len(lines), "total": train + len(lines)}
json.dump({"flopplan_run_version": 1, "model": "tiny-s", "reward": "rule", "steps": step, "flops": flops,
           "useful_flops": flops, "budget_flops": budget, "stop_reason": "budget",
           "stop": {"stop": True, "reason": "budget", "message": "budget"}},
          open(os.path.join(folder, "summary.json"), "w"))
"""


def _design(tmp_path: Path, rungs: int) -> tuple[Path, RaceDesign]:
    race = tmp_path / "race"
    cli("race", "design", "--budget", "2e11", "--pilot-fraction", "0.5", "--models", "tiny-s", "--group-sizes",
        "4,8", "--seeds", "1", "--rungs", str(rungs), "--evals", "2", "--eval-prompts", "30", "--eval-targets",
        "heldout", "--fit-targets", "heldout", "--out", str(race), check=True)
    design = RaceDesign.load(race)
    assert design.manifest_version >= 5  # a capped race: read by the cap without a record
    return race, design


def _pilot(design: RaceDesign, path: Path, arm: str, rung: int) -> None:
    """A pilot's run of ``rung`` (continuing its earlier rungs), as :data:`PILOT` writes it."""
    budget = design.arm(arm).pilot_budget(design, rung)
    subprocess.run([sys.executable, "-c", PILOT, str(path), str(budget), str(design.rung_flops[rung]), "30",
                    str(PAST)], check=True)


def _last(inp, arm: str) -> float:
    target = next(iter(inp.targets))
    run = next(a for a in inp.targets[target].arms if a.name == arm).runs[0]
    return run.points[-1].flops


def _first_rung(tmp_path: Path) -> tuple[Path, RaceDesign, str, Path, list]:
    """A two-rung race whose first arm's seed-0 pilot ran its first rung, its last step past the rung's cap: the race
    folder, the design, the arm, the pilot folder and its evaluations."""
    race, design = _design(tmp_path, 2)
    arm = design.arms[0].name
    path = pilot_folder(race, arm, design.seeds[0])
    _pilot(design, path, arm, 0)
    return race, design, arm, path, load_evaluations(path)


def test_a_rung_whose_last_step_trained_past_its_cap_keeps_its_last_evaluation_with_the_record(tmp_path):
    race, design, arm, path, records = _first_rung(tmp_path)
    last = records[-1]
    assert last.train_flops == design.rung_flops[0] + PAST  # the pilot this test needs: past its rung's cap
    assert last.flops <= design.arm(arm).pilot_budget(design, 0)
    # without the record (a race before it): read as before, the last evaluation counted as the next rung's
    assert within_rung(records, design, arm, 0) == records[:-1]
    assert _last(pilot_input(design, race, {arm: 0}, ""), arm) < last.train_flops
    assert not (path / RUNG_ENDS).exists()
    runner.record_rung_end(path, 0, design.arm(arm).pilot_budget(design, 0))
    end = rung_end(path, 0, design.arm(arm).pilot_budget(design, 0))
    assert end == RungEnd(0, design.arm(arm).pilot_budget(design, 0), 3, last.train_flops, last.flops)
    assert within_rung(records, design, arm, 0, path) == records
    assert _last(pilot_input(design, race, {arm: 0}, ""), arm) == last.train_flops


def test_a_pilot_continued_to_its_next_rung_keeps_its_rungs_record_and_adds_the_next(tmp_path):
    race, design = _design(tmp_path, 2)
    arm = design.arms[0].name
    path = pilot_folder(race, arm, design.seeds[0])
    budgets = [design.arm(arm).pilot_budget(design, r) for r in (0, 1)]
    _pilot(design, path, arm, 0)
    runner.record_finished_rungs(design, race)
    first = (path / RUNG_ENDS).read_bytes()
    rung0 = load_evaluations(path)
    _pilot(design, path, arm, 1)  # continued: its summary is now the second rung's
    runner.record_rung_end(path, 0, budgets[0])  # (its first rung's summary is gone: nothing to change it by)
    assert (path / RUNG_ENDS).read_bytes() == first
    runner.record_finished_rungs(design, race)
    ends = recorded_ends(path)
    assert ends[0] == recorded_ends_of(first)[0] and ends[1].step == 6 and ends[1].budget == budgets[1]
    records = load_evaluations(path)
    assert within_rung(records, design, arm, 0, path) == rung0  # the next rung's evaluations left out
    assert within_rung(records, design, arm, 1, path) == records
    assert _last(pilot_input(design, race, {arm: 0}, ""), arm) == rung0[-1].train_flops
    assert _last(pilot_input(design, race, {arm: 1}, ""), arm) == records[-1].train_flops


def recorded_ends_of(data: bytes) -> dict[int, RungEnd]:
    return {e["rung"]: RungEnd(**e) for e in json.loads(data)["rungs"]}


def _summary(path: Path, budget: int, stop: dict | None, steps: int = 3) -> None:
    buckets = dict.fromkeys(("rollout", "learning", "feedback", "evaluation", "total"), 0)
    summary = RunSummary(model="tiny-s", reward="rule", steps=steps, budget_flops=budget, flops=buckets,
                         useful_flops=buckets, stop_reason=(stop or {}).get("message", ""), stop=stop)
    (path / "summary.json").write_text(json.dumps(summary.to_data()))


@pytest.mark.parametrize("stop", [None, {"stop": True, "reason": "interrupted", "message": "interrupted"}])
def test_no_record_is_written_for_a_rung_the_pilot_has_not_finished(tmp_path, stop):
    race, design = _design(tmp_path, 2)
    arm = design.arms[0].name
    path = pilot_folder(race, arm, design.seeds[0])
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    budget = design.arm(arm).pilot_budget(design, 0)
    _summary(path, budget, stop)  # still running (no stop), or stopped by a Ctrl-C: not done with the rung
    runner.record_rung_end(path, 0, budget)
    runner.record_finished_rungs(design, race)
    assert not (path / RUNG_ENDS).exists()


def test_a_race_folder_without_records_or_with_a_foreign_one_reads_by_its_manifest_version(tmp_path):
    race, design, arm, path, records = _first_rung(tmp_path)
    budget = design.arm(arm).pilot_budget(design, 0)
    before = [r for r in records if r.flops <= budget and r.train_flops <= design.rung_flops[0]]  # today's rule
    assert before == records[:-1]
    assert rung_end(path, 0, budget) is None
    assert within_rung(records, design, arm, 0, None) == before
    assert _last(pilot_input(design, race, {arm: 0}, ""), arm) == before[-1].train_flops
    for foreign in ("not json", json.dumps({"race_rung_ends_version": 99, "rungs": []}),
                    json.dumps({"race_rung_ends_version": 1, "rungs": [{"rung": 0, "step": "3"}]}),
                    json.dumps({"race_rung_ends_version": 1, "rungs": [
                        {"rung": 0, "budget": budget + 1, "step": 3, "train_flops": 0, "flops": 0}]})):
        (path / RUNG_ENDS).write_text(foreign)  # damaged, another version, or another budget's rung: none
        assert rung_end(path, 0, budget) is None
        assert _last(pilot_input(design, race, {arm: 0}, ""), arm) == before[-1].train_flops


def test_a_driver_killed_between_a_pilots_end_and_its_record_records_it_on_rerun_without_running_it(
        tmp_path, monkeypatch):
    race, design = _design(tmp_path, 1)
    monkeypatch.setattr(runner, "train_command", lambda design, folder, task: [
        sys.executable, "-c", PILOT, str(task.folder), str(task.budget), str(design.rung_flops[task.rung]), "30",
        str(PAST)])
    assert runner.run_race(race, log=lambda text: None)["complete"]
    arms = [a.name for a in design.arms]
    paths = [pilot_folder(race, a, design.seeds[0]) for a in arms]
    ends = [rung_end(p, 0, design.arm(a).pilot_budget(design, 0)) for p, a in zip(paths, arms, strict=True)]
    assert all(e is not None and e.train_flops == design.rung_flops[0] + PAST for e in ends)  # written as it ended
    inp = pilot_input(design, race, dict.fromkeys(arms, 0), "")
    assert all(_last(inp, a) == design.rung_flops[0] + PAST for a in arms)
    evaluations = [(p / "evaluations.jsonl").read_bytes() for p in paths]
    for path in paths:  # what a driver killed after the pilots ended and before it recorded them leaves
        (path / RUNG_ENDS).unlink()
    monkeypatch.setattr(runner, "train_command", lambda *args: pytest.fail("a finished pilot was run again"))
    assert runner.run_race(race, log=lambda text: None) == {"complete": True, "ran": 0, "rung": 0}
    assert [rung_end(p, 0, e.budget) for p, e in zip(paths, ends, strict=True)] == ends
    assert [(p / "evaluations.jsonl").read_bytes() for p in paths] == evaluations
    assert runner._digest(pilot_input(design, race, dict.fromkeys(arms, 0), "")) == runner._digest(inp)  # read alike
