"""RACE's protocol: the design (ladder, successive halving, the worst case within phi x F), the manifest, bad input,
and a real race of tiny-s pilots run (the quick demo), then raced again killed at four points and rerun: mid-pilot
on the local pool, mid-rung-1 with its pilots as Ray tasks on a real local Ray cluster, mid-rung-2 on the pool
again, and mid-analysis. The killed race must end with the uninterrupted race's race.json, repeating no finished
pilot."""

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

from flopplan.errors import UserError
from flopplan.race.collect import race_input
from flopplan.race.design import MANIFEST, Grid, RaceDesign, design_race
from flopplan.race.pilots import pilot_done, pilot_folder
from flopplan.race.promotion import P_OPEN
from flopplan.race.results import load_analysis
from flopplan.race.runner import recorded_promotions
from flopplan.race.validate import predicted_at
from flopplan.recipe import Recipe

SMALL = ("--models", "tiny-s", "--group-sizes", "4,8", "--seeds", "2", "--rungs", "2", "--evals", "3",
         "--eval-prompts", "20", "--room", "1")
"""A race small enough to train in about a minute here: 2 arms x 2 seeds, 2 rungs, the budget for the halving's
count only (room for more: test_the_budget_leaves_room_for_arms_the_evidence_cannot_rule_out)."""


def _base() -> Recipe:
    from flopplan.cli.race import race_base

    return race_base()


def _eval_flops(recipe: Recipe, targets: tuple[str, ...]) -> int:
    from flopplan.train.targets import evaluation_flops

    return sum(evaluation_flops(recipe, targets).values())


@pytest.mark.parametrize("arms, seeds, rungs, eta", [(("tiny-s", "tiny", "tiny-l"), 2, 3, 2), (("tiny",), 3, 2, 3)])
def test_the_worst_case_of_every_pilot_fits_phi_f(arms, seeds, rungs, eta):
    grid = Grid(arms, (4, 8), (1,), ("rule",), seeds=seeds, targets=("heldout", "long"), rungs=rungs, eta=eta,
                evals=4, eval_prompts=20)
    design = design_race(_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)
    assert design.worst_case_flops <= design.pilot_cap == int(0.3 * 10**13)
    assert all(b * eta == c for b, c in zip(design.rung_flops, design.rung_flops[1:], strict=False))
    assert design.keep[0] == len(design.arms) == 2 * len(arms)
    assert all(-(-k // eta) == k2 for k, k2 in zip(design.keep, design.keep[1:], strict=False))
    for arm in design.arms:  # the planner's steps fit each rung's training budget; equal FLOPs across arms
        for entry, budget in zip(arm.rungs, design.rung_flops, strict=True):
            assert entry.flops["total"] <= budget < entry.flops["total"] + entry.step_flops
    assert design.worst_case_flops >= 0.99 * design.pilot_cap  # the first rung is as large as phi allows


def test_the_design_says_when_its_horizon_is_beyond_where_p_best_was_checked():
    """The horizon (F over the largest pilot, every arm's top-rung ledger budget) is stated before any pilot runs;
    beyond the 2x (with slack) at which the P(best) was checked, the note says the analysis will read it as a
    strength of preference and names the levers; a design with its largest pilot near F gets no such clause. A
    design of one seed says that the seeds' spread will be assumed, not measured; one of two seeds does not."""
    from flopplan.race.design import HORIZON_SLACK, MEASURED_HORIZON, horizon_note, one_seed_note

    def horizon_of(grid: Grid, phi: float) -> tuple[float, str]:
        design = design_race(_base(), grid, 10**13, phi, evaluation_flops=_eval_flops)
        top = max(a.pilot_budget(design, len(design.keep) - 1) for a in design.arms)
        note, *others = design.notes
        assert others == ([one_seed_note(0.05)] if grid.seeds == 1 else [])
        return 10**13 / top, note

    far, far_note = horizon_of(Grid(("tiny-s", "tiny"), (4, 8), (1,), ("rule",), seeds=2, evals=3,
                                    eval_prompts=20), 0.3)
    near, near_note = horizon_of(Grid(("tiny-s",), (4,), (1,), ("rule",), seeds=1, rungs=1, evals=3,
                                      eval_prompts=20), 0.6)
    assert far > MEASURED_HORIZON * HORIZON_SLACK >= near
    assert far_note.startswith(f"F is {far:.1f}x the largest pilot") and "how strongly" in far_note
    assert "--pilot-fraction" in far_note and "--rungs" in far_note and "seeds" not in far_note  # two seeds
    assert "fewer arms or seeds (two at least)" in horizon_note(far, 3)
    assert "assumes a seed sd of 5 % of the gain (--seed-sd" in one_seed_note(0.05)
    assert "a seed sd of 0.4 % of the gain" in one_seed_note(0.004)
    assert near_note == f"F is {near:.1f}x the largest pilot: predictions at F extrapolate that far"


def test_a_race_sets_the_seed_sd_its_one_seed_arms_assume_and_every_analysis_reads_it(tmp_path):
    """``race design --seed-sd``: the relative seed sd an arm of one seed is assumed to have (where no other arm
    shows one) is the design's, recorded in the manifest and said in the design's note; a manifest without it (before
    the option) reads the default; a value outside [0, 1] is one line, from the CLI and from an edited manifest."""
    grid = Grid(("tiny-s", "tiny"), (4,), (1,), ("rule",), seeds=1, rungs=1, evals=3, eval_prompts=20, one_seed_sd=0.2)
    design = design_race(_base(), grid, 10**13, 0.6, evaluation_flops=_eval_flops)
    assert design.one_seed_sd == 0.2 and "assumes a seed sd of 20 % of the gain" in design.notes[-1]
    data = design.to_data()
    assert RaceDesign.from_data(json.loads(json.dumps(data)), "m").one_seed_sd == 0.2
    assert RaceDesign.from_data({k: v for k, v in data.items() if k != "one_seed_sd"}, "m").one_seed_sd == 0.05
    for wrong in (5, 0, True, "0.2", float("nan")):
        with pytest.raises(UserError, match="one_seed_sd must be a number above 0 and at most 1"):
            RaceDesign.from_data({**data, "one_seed_sd": wrong}, "m")
    with pytest.raises(UserError, match="--seed-sd must be a relative sd above 0 and at most 1"):
        design_race(_base(), Grid(("tiny-s",), (4,), (1,), ("rule",), seeds=1, one_seed_sd=-0.1), 10**13, 0.6,
                    evaluation_flops=_eval_flops)
    one_line_error(cli("race", "design", "--budget", "1e13", "--models", "tiny-s", "--seeds", "1", "--seed-sd", "2",
                       "--out", str(tmp_path / "x")), "--seed-sd must be a relative sd above 0")
    assert not (tmp_path / "x" / MANIFEST).exists()


@pytest.mark.parametrize("room", [1, 1.5, 2, 3])
def test_the_budget_leaves_room_for_arms_the_evidence_cannot_rule_out(room):
    """room_r = min(room_(r-1), room x keep_r); the worst case pays for that many survivors at every rung, so the
    runner can promote them all; more room, smaller pilots."""
    from flopplan.race.runner import _affordable

    grid = Grid(("tiny-s", "tiny"), (4, 8), (1,), ("rule",), seeds=2, rungs=3, eta=2, room=room, evals=3,
                eval_prompts=20)
    design = design_race(_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)
    assert design.keep == (4, 2, 1)
    assert design.room == {1: (4, 2, 1), 1.5: (4, 3, 1), 2: (4, 4, 2), 3: (4, 4, 3)}[room]  # floor(room x keep)
    worst = 0
    for rung, most in enumerate(design.room):
        growth = sorted((a.pilot_budget(design, rung) - (a.pilot_budget(design, rung - 1) if rung else 0)
                         for a in design.arms), reverse=True)
        worst += 2 * sum(growth[:most])
    assert design.worst_case_flops == worst <= design.pilot_cap
    names = [a.name for a in design.arms]
    assert _affordable(design, [names], names) == design.room[1]
    if room > 1:
        tight = design_race(_base(), Grid(**{**grid.__dict__, "room": 1}), 10**13, 0.3, evaluation_flops=_eval_flops)
        assert tight.rung_flops[0] > design.rung_flops[0]
    old = {**design.to_data(), "race_manifest_version": 2}
    old.pop("room")
    assert RaceDesign.from_data(old, "v2").room == design.keep  # before the room: the halving's count only
    with pytest.raises(UserError, match="malformed"):
        RaceDesign.from_data({**design.to_data(), "room": [4, 1, 1]}, "m")  # room below the halving's count


def test_the_manifest_round_trips_and_a_corrupted_one_is_refused(tmp_path):
    out = cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path / "r"), *SMALL,
              "--json", check=True)
    data = json.loads(out.stdout)
    design = RaceDesign.load(tmp_path / "r")
    assert design.to_data() == data == json.loads((tmp_path / "r" / MANIFEST).read_text())
    assert {a.name for a in design.arms} == {"tiny-s.G4.mu1.rule", "tiny-s.G8.mu1.rule"}
    assert all(a.recipe.micro_batch == a.recipe.rollouts_per_step and not a.recipe.grad_ckpt for a in design.arms)
    one_line_error(cli("race", "design", "--budget", "6e10", "--out", str(tmp_path / "r"), *SMALL), "already holds")
    (tmp_path / "r" / MANIFEST).write_text('{"race_manifest_version": 1, "arms": [')
    for command in ("run", "analyze"):
        one_line_error(cli("race", command, str(tmp_path / "r")), "manifest")
    # values no design writes (hand edits) are refused before any pilot runs, each by what is wrong
    for key, value, fragment in (("rung_flops", "many", "malformed"), ("budget_flops", -6 * 10**12, "budget_flops"),
                                 ("pilot_fraction", 5, "pilot_fraction"), ("eta", 0, "eta"),
                                 ("rung_flops", [-1, -2], "rung_flops"), ("keep", [0, 0], "keep"),
                                 ("seeds", [-1], "seeds"), ("targets", [], "targets"),
                                 ("fit_targets", ["nosuch"], "fit_targets"), ("arms", [], "arms")):
        (tmp_path / "r" / MANIFEST).write_text(json.dumps({**data, key: value}))
        for command in ("run", "analyze"):
            one_line_error(cli("race", command, str(tmp_path / "r")), fragment)
    assert not list((tmp_path / "r").glob("pilots"))
    one_line_error(cli("race", "run", str(tmp_path / "none")), "no RACE manifest")


def test_a_design_into_a_folder_with_an_earlier_races_pilots_or_into_no_folder_is_refused(tmp_path):
    """Pilots left from a race whose manifest is gone would pass for the new design's (the runner finds them
    done); an empty --out would write the manifest where the command runs."""
    (tmp_path / "r" / "pilots" / "tiny-s.G4.mu1.rule").mkdir(parents=True)
    one_line_error(cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path / "r"),
                       *SMALL), "pilots of an earlier race")
    assert not (tmp_path / "r" / MANIFEST).exists()
    one_line_error(cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", "", *SMALL), "--out")


@pytest.mark.parametrize("args, fragment", [
    (("--models", ","), "without a name"),
    (("--group-sizes", "0"), "positive integers"),
    (("--group-sizes", "1,8"), "group size of 1 cannot race"),  # GRPO's advantage is 0: such an arm never learns
    (("--pilot-fraction", "0"), "between 0 and 1"),
    (("--pilot-fraction", "1"), "between 0 and 1"),
    (("--pilot-fraction", "-0.2"), "between 0 and 1"),
    (("--budget", "1e9"), "too small"),
    (("--budget", "-5"), "--budget"),
    (("--budget", "1e31"), "at most 1e30"),  # the planner's limit, as `flopplan plan` checks it
    (("--budget", "1e400"), "at most 1e30"),
    (("--seeds", "0"), "seeds"),
    (("--eta", "1"), "eta"),
    (("--room", "0"), "room"),
    (("--fit-targets", "long", "--eval-targets", "heldout"), "not an evaluation target"),
    (("--rewards", "orm:tiny-rm"), "reward model"),
    (("--rewards", "ORM:tiny-rm"), "reward model"),  # the recipe reads it as orm: its upfront FLOPs are needed
    (("--reward-model-path", "tests"), "no arm is orm"),  # recorded in the manifest, it would be used by none
    (("--rewards", "rule,RULE"), "one allocation"),  # twin arms would run the same pilots and split the P(best)
    (("--models", "tiny-s,TINY-S"), "one allocation"),
    (("--axis", "vllm_server_host=host:1,host/1"), "one name"),  # two arms, one pilots' folder
    (("--group-sizes", "8,08"), "one allocation"),
    (("--models", "qwen9"), "qwen9"),
])
def test_bad_designs_are_one_line_and_write_nothing(tmp_path, args, fragment):
    base = {"--budget": "6e10", "--pilot-fraction": "0.5"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = [x for k, v in {**base, **given}.items() for x in (k, v)]
    rest = [x for i, x in enumerate(SMALL) if not (x in given or (i and SMALL[i - 1] in given))]
    one_line_error(cli("race", "design", *argv, "--out", str(tmp_path / "r"), *rest), fragment)
    assert not (tmp_path / "r" / MANIFEST).exists()


def test_an_empty_grid_is_refused():
    from flopplan.errors import UserError

    with pytest.raises(UserError, match="the grid is empty: give at least one value for group sizes"):
        design_race(_base(), Grid(("tiny",), (), (1,), ("rule",)), 10**12, 0.5, evaluation_flops=_eval_flops)


def test_run_refuses_a_bad_shard_and_analyze_waits_for_a_rung(tmp_path):
    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    one_line_error(cli("race", "run", str(tmp_path), "--shard", "2/2"), "--shard")
    one_line_error(cli("race", "run", str(tmp_path), "--shard", "x"), "--shard")
    one_line_error(cli("race", "run", str(tmp_path), "--jobs", "0"), "--jobs")
    one_line_error(cli("race", "analyze", str(tmp_path)), "first rung")
    one_line_error(cli("race", "validate", str(tmp_path)), "race.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # the refusals wrote nothing


# -- a real race, uninterrupted and killed ------------------------------------------------------------------------

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
                log = folder / "logs" / f"{arm}.{metrics.parent.name}.rung1.log"
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
        log = f"{name}.seed{seed}.rung{rung}.log"
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
    for extra in promoted[0]["promoted"][design.keep[1]:]:  # beyond the halving's count: not ruled out at F
        assert predicted[extra]["p_best"] >= P_OPEN
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


def test_promotion_keeps_the_halving_then_every_arm_that_may_lead_at_f():
    from flopplan.race.promotion import Trend, keep
    from flopplan.race.results import ArmPrediction

    def pred(arm: str, reward: float, half: float, comparable: bool = True) -> ArmPrediction:
        return ArmPrediction(arm=arm, ledger_flops=1e12, reward=reward, lo=reward - half, hi=reward + half,
                             gain=reward, gain_lo=reward - half, gain_hi=reward + half,
                             p_best=0.2 if comparable else 0.0,
                             extrapolation=4.0, usable=comparable, comparable=comparable, note="", observed=None)

    leader, late, behind, unstable = pred("leader", 0.6, 0.05), pred("late", 0.4, 0.3), pred("behind", 0.3, 0.1), \
        pred("unstable", 0.9, 0.5, comparable=False)
    trends = {"leader": Trend(0.5, 0.55), "late": Trend(0.3, 0.6), "behind": Trend(0.35, 0.35),
              "unstable": Trend(0.2, 0.9)}
    # the best observed first; late's upper bound at F (0.7) reaches the leader's lower bound (0.55): it stays
    assert keep([behind, late, leader], 1, trends) == ["leader", "late"]
    # the halving's count: the observed leader, then by where the last slope leads (late 0.6 > behind 0.35)
    assert keep([behind, late, leader], 2, trends, limit=2) == ["leader", "late"]
    assert keep([behind, late, leader], 3, trends) == ["leader", "late", "behind"]
    # a non-comparable arm does not set the bar at F but competes on its trend
    assert keep([unstable, behind, leader], 2, trends, limit=2) == ["leader", "unstable"]
    # beyond the halving's count: an arm with a share of P(best) or a slope that reaches the leader's lower bound
    # (a non-comparable one has no share of P(best); unstable goes on by its slope)
    assert keep([unstable, behind], 1, trends) == ["behind", "unstable"]
    assert keep([unstable, behind], 1, {**trends, "unstable": Trend(0.2, 0.1)}) == ["behind"]
    assert keep([], 2) == []


def test_an_arm_with_no_curve_goes_on_first_when_it_shows_the_most():
    """The runner's promotion with arms the analysis could not fit (no prediction at F): the best observed arm goes
    on whatever its curve, so an arm at a pass rate of 1 from step 0 is not cut for having no curve; other unfitted
    arms only fill the halving's count."""
    from flopplan.race.promotion import Trend
    from flopplan.race.runner import with_unfitted

    trends: dict[str, Trend | None] = {"leader": Trend(0.5, 0.55), "late": Trend(0.3, 0.6)}
    assert with_unfitted(["leader", "late"], trends, {"solved": 1.0, "flat": 0.1}, 2) == ["solved", "leader", "late"]
    assert with_unfitted(["leader", "late"], trends, {"flat": 0.1}, 2) == ["leader", "late"]
    assert with_unfitted(["leader"], trends, {"flat": 0.1, "stuck": 0.2}, 2) == ["leader", "stuck"]
    assert with_unfitted(["leader"], trends, {"tied": 0.5}, 2) == ["leader", "tied"]  # not more: fills the count
    assert with_unfitted([], {}, {"a": None, "b": 0.3}, 1) == ["b"]


def test_a_second_runner_of_the_same_shard_is_refused(tmp_path):
    from flopplan.fileio import folder_lock

    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    with folder_lock(tmp_path / ".locks" / "shard-0-of-1", "race shard"):
        one_line_error(cli("race", "run", str(tmp_path)), "in use by process")
    assert not (tmp_path / "pilots").exists()


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
    assert cli("tables", "--race", str(straight), "--out", str(out), "--check").returncode == 1


def test_tables_of_a_race_without_an_analysis_is_one_line(tmp_path):
    one_line_error(cli("tables", "--race", str(tmp_path), "--out", str(tmp_path / "t")), "race.json")


def test_a_budget_the_pilots_and_reward_model_use_up_is_refused():
    from flopplan.errors import UserError

    grid = Grid(("tiny-s",), (8,), (1,), ("rule", "orm:tiny-rm"), seeds=2, targets=("heldout",), rungs=2,
                evals=2, eval_prompts=20, upfront={"orm:tiny-rm": 4 * 10**11})
    with pytest.raises(UserError, match="leaves no validating run"):
        design_race(_base(), grid, 8 * 10**11, 0.5, evaluation_flops=_eval_flops)
