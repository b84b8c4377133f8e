"""RACE run end to end: a real race of tiny-s pilots (the quick demo), then raced again killed at four points and
rerun: mid-pilot on the local pool, mid-rung-1 with its pilots as Ray tasks on a real local Ray cluster, mid-rung-2
on the pool again, and mid-analysis. The killed race must end with the uninterrupted race's race.json, repeating no
finished pilot. Also: a second runner of a shard refused, the paper tables from race.json."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli, kill_group_when, one_line_error
from test_race_protocol import SMALL

from flopplan.race.collect import race_input
from flopplan.race.design import MANIFEST, RaceDesign
from flopplan.race.pilots import pilot_done, pilot_folder
from flopplan.race.promotion import FIT_RESIDUE, P_OPEN
from flopplan.race.results import load_analysis
from flopplan.race.runner import recorded_promotions, rung_arms
from flopplan.race.validate import predicted_at


def _flopplan(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flopplan", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _finish(*args: str, cwd: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "flopplan", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + out.stderr


def _kill_when(proc: subprocess.Popen, ready, folder: Path, timeout: float = 600) -> None:
    """SIGKILL the command and its pilots (its process group) once ``ready()`` holds while a pilot is in the middle
    of a step (its progress log holds a finished unit of a step not yet committed: work the kill loses)."""
    kill_group_when(proc, lambda: ready() and _mid_step(folder), timeout)


def _mid_step(folder: Path) -> bool:
    """A pilot's progress log holds a finished unit of a step not yet committed: what the trainer charges as lost
    when it resumes (``RunFolder.lost_after`` reads the same log)."""
    from flopplan.fileio import read_step_log
    from flopplan.train.runfolder import PROGRESS

    return any(read_step_log(path) for path in folder.glob(f"pilots/*/seed*/{PROGRESS}"))


def _metrics_lines(folder: Path) -> int:
    return max((len(p.read_text().splitlines()) for p in folder.glob("pilots/*/seed*/metrics.jsonl")), default=0)


def _promoted(folder: Path) -> list[str]:
    decisions = recorded_promotions(folder)
    return decisions[0]["promoted"] if decisions else []


def _rung_two_under_way(folder: Path):
    """True once a promoted pilot's rung-2 process has logged two steps beyond its first rung (its line count is
    taken when its rung-2 log appears, before that process can have trained)."""
    seen: dict[Path, int] = {}

    def ready() -> bool:
        for arm in _promoted(folder):
            for metrics in (folder / "pilots" / arm).glob("seed*/metrics.jsonl"):
                log = folder / "logs" / f"{arm}.{metrics.parent.name}.rung2.log"
                if not log.exists():
                    continue
                lines = len(metrics.read_text().splitlines())
                seen.setdefault(metrics, lines)
                if lines >= seen[metrics] + 2:
                    return True
        return False

    return ready


def _run_starts(log: Path) -> int:
    """How many runs a pilot's log holds: each ``flopplan train`` prints its policy line as it starts. Counted,
    not sized: a pilot whose summary is written (done) may still be printing its table, or flushing it as Ray
    ends the task, after the count is taken."""
    return sum(line.startswith("policy ") for line in log.read_text(errors="replace").splitlines())


def _done_pilots(design: RaceDesign, folder: Path, rung: int) -> dict[str, int]:
    """The pilots finished at ``rung``, with the runs that rung's log holds (a rerun of one would start another)."""
    out = {}
    for name, seed in design.pilots():
        log = f"{name}.seed{seed}.rung{rung + 1}.log"  # (rungs 0-based here, 1-based in the names)
        if pilot_done(pilot_folder(folder, name, seed), design.arm(name).pilot_budget(design, rung)):
            out[log] = _run_starts(folder / "logs" / log)
    return out


def _build_races(root: Path, ray_address: str) -> str:
    """The quick demo straight through in ``root/a/race``, and the same manifest raced again in ``root/b/race``:
    on the local pool killed mid-pilot; continued with its pilots as Ray tasks, the driver killed mid-rung-1 (the
    driver alone: its tasks, and with them the pilots, are the cluster's to end; Ray's share is kept this small
    because Ray's own processes slow the pilots on 2 cores, a third of a race's time); continued on the pool,
    killed mid-rung-2, and finished; its analysis killed and rerun. The logs of the pilots finished at the Ray
    kill, with the runs each holds, go in ``root/b/finished.json`` (a pilot run again would start another). Returns
    what the demo printed."""
    (root / "a").mkdir()
    started = time.monotonic()
    demo = _finish("race", "demo", "--quick", "--out", "race", cwd=root / "a")
    print(f"quick demo: {(time.monotonic() - started) / 60:.1f} min")
    _race_killed(root, ray_address)
    return demo


def _race_killed(root: Path, ray_address: str) -> None:
    """``root/a/race``'s manifest raced again in ``root/b/race``, killed as :func:`_build_races` says."""
    straight, killed = root / "a" / "race", root / "b" / "race"
    killed.mkdir(parents=True)
    shutil.copy(straight / MANIFEST, killed / MANIFEST)
    shutil.copytree(straight / "reward-model", killed / "reward-model")
    design = RaceDesign.load(killed)

    pool = ("--jobs", "2")  # as the demo ran them
    _kill_when(_flopplan("race", "run", "race", *pool, cwd=killed.parent), lambda: _metrics_lines(killed) >= 4,
               killed)
    ray = ("--backend", "ray", "--address", ray_address, "--pilot-cpus", "1")
    _kill_when(_flopplan("race", "run", "race", *ray, cwd=killed.parent),
               lambda: 0 < len(_done_pilots(design, killed, 0)) < len(design.pilots()), killed)
    (root / "b" / "finished.json").write_text(json.dumps(_done_pilots(design, killed, 0)))
    _kill_when(_flopplan("race", "run", "race", *pool, cwd=killed.parent), _rung_two_under_way(killed), killed)
    _finish("race", "run", "race", *pool, cwd=killed.parent)
    proc = _flopplan("race", "analyze", "race", cwd=killed.parent)
    time.sleep(2.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _finish("race", "analyze", "race", cwd=killed.parent)


@pytest.fixture(scope="module")
def races(tmp_path_factory, request):
    """``(straight, killed, what the demo printed)``, built once per test session: in a folder every xdist worker
    of this session shares, under a file lock, with a marker written last, so a worker that tears the module
    fixture down and sets it up again (xdist does, when its queue runs dry) finds the races already there. Both
    races run from a folder of their own as ``race``, so the commands they record are the same. The killed race
    needs Ray (a local cluster of 2 CPUs, started only to build the races)."""
    pytest.importorskip("torch")
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's folder under xdist
    root, done = shared / "races", shared / "races.done"
    with FileLock(str(shared / "races.lock")):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a build that failed part way is started again
            root.mkdir()
            done.write_text(_build_races(root, request.getfixturevalue("ray_address")))
    return root / "a" / "race", root / "b" / "race", done.read_text()


@pytest.mark.slow
@pytest.mark.xdist_group("race")  # one worker runs them: the demo test writes into the straight race
def test_a_race_killed_on_the_pool_and_on_ray_ends_with_the_uninterrupted_race_json(races):
    straight, killed, _ = races
    assert (killed / "race.json").read_bytes() == (straight / "race.json").read_bytes()
    for path in straight.glob("pilots/*/seed*/evaluations.jsonl"):  # every pilot's evaluations, score by score
        assert (killed / path.relative_to(straight)).read_text() == path.read_text()
    finished = json.loads((killed.parent / "finished.json").read_text())
    assert finished  # the Ray kill came after a pilot had finished its rung
    for log, runs in finished.items():  # and no pilot finished then was run again
        assert _run_starts(killed / "logs" / log) == runs
    lost = sum(json.loads(p.read_text())["lost_flops"] for p in killed.glob("pilots/*/seed*/summary.json"))
    assert lost > 0  # the kills did lose work (recorded, outside the pilots' budgets)


@pytest.mark.slow
@pytest.mark.xdist_group("race")  # one worker runs them: the demo test writes into the straight race
def test_the_pilots_spend_at_most_phi_f_and_evaluate_from_step_0_to_each_rung_end(races):
    straight, _, _ = races
    design = RaceDesign.load(straight)
    summaries = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())
                 for p in straight.glob("pilots/*/seed*/summary.json")}
    assert len(summaries) == len(design.arms) * len(design.seeds)
    assert all(s["within_budget"] and s["flops"]["total"] <= s["budget_flops"] for s in summaries.values())
    assert sum(s["flops"]["total"] for s in summaries.values()) <= design.pilot_cap
    report = json.loads((straight / "race.json").read_text())
    assert report["pilot_flops"] == sum(s["flops"]["total"] for s in summaries.values())
    promoted = recorded_promotions(straight)
    predicted, trends = promoted[0]["predictions"], promoted[0]["trends"]
    assert len(promoted) == 1 and design.keep[1] <= len(promoted[0]["promoted"]) <= design.room[1]
    comparable = [p for p in predicted.values() if p["comparable"]] or list(predicted.values())
    floor = max(comparable, key=lambda p: p["reward"])["lo"] - FIT_RESIDUE  # the leader's lower bound at F
    for extra in promoted[0]["promoted"][design.keep[1]:]:  # beyond the halving's count: not ruled out at F
        p = predicted[extra]  # by its P(best), its slope, or nothing bounds it (its pilots never rose: hi 1)
        assert p["hi"] >= floor and (p["p_best"] >= P_OPEN or trends[extra]["reach"] >= floor
                                     or (p["hi"] == 1.0 and not p["comparable"]))
    assert set(predicted) | set(promoted[0]["unfitted"]) == {a.name for a in design.arms}
    if trends:  # the best observed first, then by where the last slope leads at F
        assert promoted[0]["promoted"][0] == min(trends, key=lambda a: (-trends[a]["observed"], a))
    for name, s in summaries.items():
        arm = design.arm(name.split("/")[0])
        rung = 1 if arm.name in promoted[0]["promoted"] else 0
        assert s["budget_flops"] == arm.pilot_budget(design, rung)
        records = [json.loads(line) for line in (straight / "pilots" / name / "evaluations.jsonl").read_text()
                   .splitlines()]
        assert records[0]["step"] == 0 and records[0]["train_flops"] == 0
        assert records[-1]["step"] == s["steps"]  # the evaluation after the last step
        assert (s["flops"]["feedback"] > 0) == (arm.recipe.reward.kind == "orm")


@pytest.mark.slow
@pytest.mark.xdist_group("race")  # one worker runs them: the demo test writes into the straight race
def test_the_demo_reports_curves_regimes_the_recommendation_holdout_and_validation(races):
    straight, _, printed = races
    report = (straight / "report.md").read_text()
    design = RaceDesign.load(straight)
    for arm in design.arms:
        assert arm.name in report
    for word in ("regime", "P(best)", "holdout", "rollout", "feedback"):
        assert word in report
    assert "RACE recommendation" in printed and "RACE is a diagnostic" in printed
    validation = json.loads((straight / "validation" / "validation.json").read_text())
    assert validation["within_budget"] and {c["target"] for c in validation["checks"]} == {"heldout", "long"}
    assert [c["fitted"] for c in validation["checks"]] == [True, False]  # long: the target no fit saw
    card = json.loads((straight / "reward-model" / "reward_model.json").read_text())
    race = json.loads((straight / "race.json").read_text())
    # the validation's forecast is the analysis's own (the model average the decisions read): read at F, the
    # function that gives it returns the analysis's prediction at F, digit for digit
    arm = design.arm(validation["arm"])
    at_f = next(p for p in race["targets"][0]["budgets"][-1]["predictions"] if p["arm"] == arm.name)
    got = predicted_at(race_input(design, straight), load_analysis(straight / "race.json"), arm.name, "heldout",
                       design.budget_flops - arm.upfront_flops)
    assert got is not None
    assert (got.reward, got.lo, got.hi) == pytest.approx((at_f["reward"], at_f["lo"], at_f["hi"]), rel=1e-12)
    spent, rec = race["pilot_flops"], race["targets"][0]["recommendation"]
    # the validating run continues the recommended arm's first-seed pilot: a resume of a copy of its run folder
    pilot = straight / "pilots" / validation["arm"] / f"seed{design.seeds[0]}"
    run = straight / "validation" / validation["arm"]
    start = json.loads((pilot / "summary.json").read_text())
    assert validation["continued"] == {"pilot": str(pilot.relative_to(straight)), "steps": start["steps"],
                                       "flops": start["flops"]["total"]}
    assert validation["steps"] > start["steps"]
    for name in ("metrics.jsonl", "evaluations.jsonl"):  # the pilot's history is the run's start, line by line
        before = (pilot / name).read_text().splitlines()
        assert (run / name).read_text().splitlines()[:len(before)] == before
    assert validation["budget_flops"] == start["flops"]["total"] + design.budget_flops - spent - card["upfront_flops"]
    # what race.json says is left for the validating run is what it was given (the reward model's training too)
    assert race["budget_left_flops"] == rec["budget_left_flops"] == validation["budget_flops"] - start["flops"]["total"]
    # the pilots' cost: what was not continued (the reward model too, when the arm does not use it), the horizon
    ledgers = [json.loads((p / "summary.json").read_text())["flops"]["total"]
               for p in sorted(pilot.parent.glob("seed*"))]
    unused = 0 if design.arm(rec["arm"]).upfront_flops else card["upfront_flops"]
    assert rec["continued_flops"] == start["flops"]["total"]
    assert rec["overhead_flops"] == spent - start["flops"]["total"] + unused == validation["overhead_flops"]
    assert rec["overhead_share"] == pytest.approx(rec["overhead_flops"] / design.budget_flops)
    assert rec["horizon"] == pytest.approx(design.budget_flops / max(ledgers)) == validation["horizon"]
    again = _finish("race", "demo", "--quick", "--out", "race", cwd=straight.parent)  # nothing is run twice
    assert again.count("RACE recommendation") == 1
    assert not any(line.startswith("rung ") for line in again.splitlines())


@pytest.mark.slow
@pytest.mark.xdist_group("race")  # one worker runs them: the demo test writes into the straight race
def test_a_corrupted_pilot_summary_is_one_line_and_loses_nothing(races, tmp_path):
    straight, _, _ = races
    copy = tmp_path / "copy"
    shutil.copytree(straight, copy)
    victim = next(copy.glob("pilots/*/seed0/summary.json"))
    victim.write_text('{"flopplan_run_version": 1, "steps": -3')
    before = sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file())
    one_line_error(cli("race", "analyze", str(copy), "--no-plots"), "summary")
    assert sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file()) == before


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_the_analysis_input_carries_a_reward_the_pilots_trained_on_that_the_design_does_not_name(races, tmp_path):
    """A pilot's ledger records the reward its trainer held (a user's script may load a reward model in its
    ``reward_funcs`` under a design that says ``rule``): the analysis's input carries it for the learned-reward
    caveat; where every ledger agrees with the design, nothing."""
    straight, _, _ = races
    design = RaceDesign.load(straight)
    assert race_input(design, straight).trained_rewards == {}
    copy = tmp_path / "copy"
    shutil.copytree(straight, copy)
    arm = next(a for a in design.arms if a.axes["reward"] == "rule")
    summary = pilot_folder(copy, arm.name, design.seeds[-1]) / "summary.json"
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "reward": "orm:tiny-rm"}))
    assert race_input(design, copy).trained_rewards == {arm.name: "orm:tiny-rm"}
    # a promoted arm whose rung-2 pilot has not finished is running there, not eliminated (what a recommendation of
    # it says: naive.eliminated_pick); a finished race has none
    assert race_input(design, straight).running == frozenset()
    promoted = rung_arms(design, copy)[1][0]
    summary = pilot_folder(copy, promoted, design.seeds[0]) / "summary.json"
    data = json.loads(summary.read_text())  # stopped by Ctrl-C in rung 2: done with rung 1, not with rung 2
    summary.write_text(json.dumps({**data, "stop": {**data["stop"], "reason": "interrupted"}}))
    assert race_input(design, copy).running == frozenset({promoted})


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_an_arm_short_of_its_first_rung_or_a_damaged_evaluation_log_is_one_line(races, tmp_path):
    """An arm whose pilots are missing (or a shard still running) would be passed over without a word; a damaged
    line with lines after it is no kill's doing and would drop points from the analysis."""
    straight, _, _ = races
    missing = tmp_path / "missing"
    shutil.copytree(straight, missing)
    arm = sorted(p.name for p in (missing / "pilots").iterdir())[-1]
    shutil.rmtree(missing / "pilots" / arm / "seed1")
    one_line_error(cli("race", "analyze", str(missing), "--no-plots"), f"has not finished the first rung ({arm}")
    damaged = tmp_path / "damaged"
    shutil.copytree(straight, damaged)
    log = next(damaged.glob("pilots/*/seed0/evaluations.jsonl"))
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join([lines[0], lines[1][:20] + "\n", *lines[2:]]))
    one_line_error(cli("race", "analyze", str(damaged), "--no-plots"), "damaged at line 2")


@pytest.mark.slow
@pytest.mark.xdist_group("race")  # one worker runs them: the demo test writes into the straight race
def test_the_paper_tables_come_from_race_json_and_check_clean(races, tmp_path):
    straight, _, _ = races
    out = tmp_path / "tables"
    cli("tables", "--race", str(straight), "--out", str(out), check=True)
    design = RaceDesign.load(straight)
    arms = (out / "race_arms.md").read_text()
    assert all(arm.name in arms for arm in design.arms) and f"flopplan tables --race {straight}" in arms
    assert "\\begin{tabular}" in (out / "race_recommendation.tex").read_text()
    assert cli("tables", "--race", str(straight), "--out", str(out), "--check").returncode == 0
    (out / "race_arms.md").write_text(arms.replace("tiny-s", "tiny-x"))
    stale = cli("tables", "--race", str(straight), "--out", str(out), "--check")
    assert stale.returncode == 1 and f"(run `flopplan tables --race {straight} --out {out}`)" in stale.stderr


def test_a_second_runner_of_the_same_shard_is_refused(tmp_path):
    from flopplan.fileio import folder_lock

    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    with folder_lock(tmp_path / ".locks" / "shard-0-of-1", "race shard"):
        one_line_error(cli("race", "run", str(tmp_path)), "in use by process")
    assert not (tmp_path / "pilots").exists()




def test_the_validating_run_does_not_evaluate_again_a_step_after_the_pilot_it_continues():
    """A budget stops a pilot just short of its rung's end, where its last evaluation stands for the design's point
    there. The validating run that continues it kept that point and evaluated again one step later, out of its
    budget (a held-out user's race: steps 44 and 45, 0.56 % of F). Points more than a step away are kept."""
    from types import SimpleNamespace

    from flopplan.race.validate import _validation_points

    design = SimpleNamespace(eval_points=(1_000, 2_000, 2_580_939_092))
    arm = SimpleNamespace(eval_flops=1_000)
    points = _validation_points(design, arm, 10**10, 2_578_554_880, 44)  # type: ignore[arg-type]
    assert 2_580_939_092 not in points and points[:2] == (1_000, 2_000) and min(points[2:]) > 2_580_939_092
    earlier = _validation_points(design, arm, 10**10, 1_000_000_000, 44)  # type: ignore[arg-type]
    assert 2_580_939_092 in earlier  # (a pilot that stopped a rung before: the point is still due)
