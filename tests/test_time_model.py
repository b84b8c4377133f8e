"""The time model learned from runs: reading run folders, the fit (on synthetic runs timed by a known model), the
refusals (runs measured with the FLOP meter, bad folders), the planner and the run report pricing a run with the
fitted profile. The pricing's unit tests are in test_timing.py, the profile file's in test_hardware.py. No test
asserts on a measured duration."""

from __future__ import annotations

import ast
import json
import math
import statistics
from pathlib import Path

import pytest
from helpers import OUTSIDE, ROOT, cli, one_line_error, profile_with, tiny_recipe
from synthetic_runs import BYTES_PER_ELEMENT, TRUE_OUTSIDE, TRUE_PHASES, true_outside, write_run

from flopplan.calibrate.fit_runs import fit_non_phase, fit_phases, outside_seconds
from flopplan.calibrate.from_runs import fit_from_runs
from flopplan.calibrate.runs import read_runs
from flopplan.errors import UserError
from flopplan.hardware import load_profile
from flopplan.lengths import Length
from flopplan.passes import RoundShape
from flopplan.planner import Budget, plan, price_steps
from flopplan.recipe import Recipe, RewardSystem
from flopplan.timing import (
    NON_PHASE_TERMS,
    call_seconds,
)

FIT = {  # shapes, tuning and feedback vary, so that every fitted coefficient is identified
    "full-8x8": tiny_recipe(),
    "lora8-mu2": tiny_recipe(lora_rank=8, prompt_len=Length.fixed(14), completion_len=Length.fixed(4),
                             micro_batch=16, iterations=2, eval_prompts=20),
    "full-orm-beta": tiny_recipe(prompts_per_step=4, group_size=8, prompt_len=Length.fixed(12),
                                 completion_len=Length.fixed(3), micro_batch=16, optimizer_batch=16, beta=0.04,
                                 reward=RewardSystem.parse("orm:tiny"), reward_overhead_tokens=1),
    "lora16-wide": tiny_recipe(lora_rank=16, prompts_per_step=16, group_size=4, prompt_len=Length.fixed(18),
                               micro_batch=64, eval_every=3),
    "full-small": tiny_recipe(prompts_per_step=2, group_size=4, prompt_len=Length.fixed(8),
                              completion_len=Length.fixed(6), micro_batch=8, eval_prompts=60),
    "full-orm-wide": tiny_recipe(prompts_per_step=16, group_size=8, reward=RewardSystem.parse("orm:tiny"),
                                 reward_overhead_tokens=1, eval_every=None, eval_prompts=0,
                                 eval_completion_len=None),
    "lora4-long": tiny_recipe(lora_rank=4, prompts_per_step=8, group_size=4, prompt_len=Length.fixed(16),
                              completion_len=Length.fixed(8), micro_batch=16),
    "full-mu3": tiny_recipe(prompts_per_step=4, group_size=16, iterations=3, micro_batch=16, optimizer_batch=32),
}
HELD_OUT = tiny_recipe(lora_rank=4, prompts_per_step=6, group_size=8, prompt_len=Length.fixed(12),
                       completion_len=Length.fixed(3), micro_batch=24)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Eight fit runs (3 % log-normal noise on every time) and one held-out run (no noise: the truth)."""
    root = tmp_path_factory.mktemp("runs")
    fit = [write_run(root / name, r, 12, seed=i, noise=0.03) for i, (name, r) in enumerate(FIT.items())]
    held = write_run(root / "held-out", HELD_OUT, 10)
    return fit, held


def test_reading_runs_rebuilds_every_call_and_step(synthetic):
    fit, _ = synthetic
    runs, notes = read_runs([str(f) for f in fit])
    assert notes == [] and [r.name for r in runs] == list(FIT)
    for run, r in zip(runs, FIT.values(), strict=True):
        assert len(run.startups) == 1  # the first line (step 0, the baseline evaluation, or step 1) dates it
        assert len(run.rounds) == (12 if r.eval_every else 11)
        units = {u.unit for u in run.units}
        assert ("old_logprobs" in units) == RoundShape.of(r).old_logprobs and ("reward" in units) == (r.reward_spec
                                                                                               is not None)
        for step in run.rounds:
            assert step.features["round"][1] == r.rollouts_per_step
            assert step.features["optimizer_step"][0] == r.iterations * math.ceil(r.rollouts_per_step
                                                                                  / r.optimizer_batch_size)
            assert ("evaluation" in step.features) == bool(r.eval_every and step.step % r.eval_every == 0)
            assert ("checkpoint" in step.features) == (step.step - 1 > 0 and (step.step - 1) % 4 == 0)


def test_fit_recovers_a_known_time_model_on_held_out_shapes(synthetic):
    """Fitted on eight noisy synthetic runs, the profile prices the held-out run's calls, its steps outside the
    phases and its start-up within a few per cent of the model that timed them."""
    fit, held = synthetic
    runs, _ = read_runs([str(f) for f in fit])
    phases = fit_phases([u for r in runs for u in r.units], BYTES_PER_ELEMENT)
    outside = fit_non_phase(runs)
    (truth,), _ = read_runs([str(held)])
    errors = []
    for unit in truth.units:
        predicted = sum(call_seconds(phases.time_model[k]["form"], phases.time_model[k], c, BYTES_PER_ELEMENT)
                        for k, c in unit.calls)
        errors.append(predicted / unit.seconds - 1)
    assert statistics.median(abs(e) for e in errors) < 0.03 and max(abs(e) for e in errors) < 0.08, errors
    total = sum(r.outside_seconds for r in truth.rounds)
    modelled = sum(outside_seconds(r, outside.coefficients) for r in truth.rounds)
    assert abs(modelled / total - 1) < 0.05
    assert abs(outside.coefficients["startup"]["seconds"] / TRUE_OUTSIDE["startup"]["seconds"] - 1) < 0.05
    for name in ("round.seconds", "optimizer_step.seconds_per_byte", "checkpoint.seconds", "evaluation.seconds"):
        assert name in outside.fitted
        term, coefficient = name.split(".")
        assert outside.coefficients[term][coefficient] == pytest.approx(TRUE_OUTSIDE[term][coefficient], rel=0.3)


def test_a_coefficient_the_runs_do_not_vary_is_kept_not_guessed(synthetic):
    """Every fit run has the same number of trainable tensors per parameter count class: the per-tensor optimizer
    cost is not identified, so it keeps the base value (here 0.0123) and the fit says so."""
    fit, _ = synthetic
    runs, _ = read_runs([str(f) for f in fit[:1]])  # one run: nothing but constants can be told apart
    outside = fit_non_phase(runs, {"optimizer_step": {"seconds_per_tensor": 0.0123}})
    assert "optimizer_step.seconds_per_tensor" not in outside.fitted
    assert outside.coefficients["optimizer_step"]["seconds_per_tensor"] == 0.0123
    assert any("optimizer_step.seconds_per_tensor" in n for n in outside.notes)


def test_runs_measured_with_the_flop_meter_are_never_fitted(tmp_path, synthetic):
    fit, _ = synthetic
    measured = write_run(tmp_path / "measured", FIT["full-8x8"], 6, measured=True)
    runs, notes = read_runs([str(fit[0]), str(measured)])
    assert [r.name for r in runs] == ["full-8x8"]
    assert len(notes) == 1 and "--measure-flops" in notes[0] and "measured" in notes[0]
    data, _ = fit_from_runs([str(fit[0]), str(measured)])
    assert data["fitted_runs"] == ["full-8x8"]
    with pytest.raises(UserError, match="measure-flops"):
        fit_from_runs([str(measured)])
    one_line_error(cli("calibrate", "--from-runs", str(measured), "--out", str(tmp_path / "p")), "--measure-flops")


def test_from_runs_writes_a_profile_the_planner_prices_runs_with(tmp_path, synthetic):
    fit, held = synthetic
    out = tmp_path / "profile"
    result = cli("calibrate", "--from-runs", *map(str, fit), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data["non_phase"]) == set(NON_PHASE_TERMS) - {"shutdown"} and len(data["breakdown"]) == len(FIT)
    assert any("--probe-shutdown" in n for n in data["notes"])  # what no run folder dates is said, not guessed
    for row in data["breakdown"]:  # the split adds up: phases + outside (modelled) + remainder = wall
        assert row["phase_seconds"] + row["outside_modelled_seconds"] + row["remainder_seconds"] == \
            pytest.approx(row["wall_seconds"])
        assert abs(row["remainder_seconds"]) < 0.1 * row["wall_seconds"]
    profile = load_profile(out / "profile.json")
    assert profile.fitted_runs == tuple(FIT) and profile.non_phase and profile.fitted_shapes
    report = (out / "report.md").read_text()
    for fragment in ("Runs fitted on", "outside the FLOP phases", "remainder", "full-orm-beta"):
        assert fragment in report
    # the held-out run priced for the steps it ran: phase and whole-run time close to the truth it was timed by
    (truth,), _ = read_runs([str(held)])
    priced = price_steps(HELD_OUT, 10, profile)
    phase = sum(v for k, v in priced.seconds.items() if k in priced.phases)
    assert phase == pytest.approx(sum(u.seconds for u in truth.units), rel=0.05)
    wall = json.loads(held.joinpath("metrics.jsonl").read_text().splitlines()[-1])["time"] - \
        json.loads(held.joinpath("metrics.jsonl").read_text().splitlines()[0])["process_started"]
    last_checkpoint = true_outside(HELD_OUT, rollouts=0, evaluated=0, checkpoint=True, tokens=0)  # after the end
    assert sum(priced.seconds.values()) == pytest.approx(wall + last_checkpoint, rel=0.05)


@pytest.mark.parametrize("damage, fragment", [
    ("missing", "does not exist"),
    ("not a run", "not a flopplan run folder"),
    ("corrupt ledger", "corrupt"),
    ("bad shapes", "malformed shapes"),
    ("no config", "run config"),
])
def test_bad_run_folders_are_one_line_errors(tmp_path, synthetic, damage, fragment):
    import shutil

    folder = tmp_path / "run"
    if damage == "not a run":
        folder.mkdir()
    elif damage != "missing":
        shutil.copytree(synthetic[0][0], folder)
        ledger = folder / "ledger.jsonl"
        lines = ledger.read_text().splitlines()
        if damage == "corrupt ledger":
            lines[2] = "{not json"
        elif damage == "bad shapes":
            line = json.loads(lines[2])
            line["charges"][0]["shapes"] = {"batch": "x"}
            lines[2] = json.dumps(line)
        else:
            (folder / "config.json").unlink()
        ledger.write_text("\n".join(lines) + "\n")
    one_line_error(cli("calibrate", "--from-runs", str(folder), "--out", str(tmp_path / "p")), fragment)


def test_a_run_cut_short_by_a_kill_is_read_up_to_its_last_whole_line(tmp_path, synthetic):
    import shutil

    folder = tmp_path / "killed"
    shutil.copytree(synthetic[0][0], folder)
    for name in ("ledger.jsonl", "metrics.jsonl"):
        path = folder / name
        path.write_text(path.read_text() + '{"step": 13, "cha')
    (run,), notes = read_runs([str(folder)])
    assert len(run.rounds) == 12
    assert sorted(notes) == [f"killed: {name} ends in a line cut short (a kill?): read up to its last whole line"
                             for name in ("ledger.jsonl", "metrics.jsonl")]


def test_calibrate_options_that_do_not_go_together(tmp_path):
    for args, fragment in ((["some-dir"], "--from-runs"), (["--from-runs"], "at least one run folder"),
                           (["--from-runs", "x", "--for-plan", "p.json"], "give one"),
                           (["--from-runs", "x", "--quick"], "takes no --quick"),
                           (["--profile", "p.json"], "goes with"), (["--plan-model", "tiny"], "--for-plan"),
                           (["--from-runs", "x", "--repeats", "2"], "times nothing"),
                           (["--from-runs", "x", "--device", "cpu", "--probe-shutdown"], "takes no --device"),
                           (["--from-runs", "x", "--probe-shutdown", "--repeats", "0"], "positive integer"),
                           (["--for-plan", "p.json", "--repeats", "0"], "positive integer"),
                           (["--quick", "--repeats", "-1"], "positive integer"),
                           (["--probe-shutdown"], "goes with --from-runs")):
        one_line_error(cli("calibrate", *args), fragment)


# -- the profile and the planner --------------------------------------------------------------------------------

def test_the_planner_adds_the_time_outside_the_phases():
    r = tiny_recipe(micro_batch=16, optimizer_batch=16)  # 64 rollouts: 4 optimizer steps per round
    profile = profile_with(non_phase=OUTSIDE)
    priced = price_steps(r, 23, profile)
    s = priced.seconds
    assert s["round"] == pytest.approx(23 * (0.05 + 0.001 * 64))
    assert s["optimizer_step"] == pytest.approx(23 * 4 * 0.01)
    assert s["evaluation"] == pytest.approx(r.evaluations(23) * 0.2)  # 23 // 5 + the baseline
    assert s["checkpoint"] == pytest.approx((23 // 10 + 1) * 0.5)  # every 10 steps and the last
    assert s["startup"] == 7.0 and s["shutdown"] == 2.0
    plain = price_steps(r, 23, profile_with())
    assert priced.gpu_hours * 3600 == pytest.approx(plain.gpu_hours * 3600 + sum(
        s[t] for t in ("round", "optimizer_step", "evaluation", "checkpoint", "startup", "shutdown")))
    # a GPU-hour budget buys the steps whose time, start-up and checkpoints included, fits
    assert plan(r, Budget(gpu_hours=priced.gpu_hours * (1 + 1e-9)), profile).steps == 23
    assert plan(r, Budget(gpu_hours=priced.gpu_hours * (1 - 1e-4)), profile).steps == 22
    assert plan(r, Budget(gpu_hours=8.9 / 3600), profile).steps == 0  # not even start-up and shut-down fit


def test_a_plan_beyond_the_fitted_shapes_says_it_extrapolates():
    profile = profile_with(fitted_shapes={"train": {"tokens": [16.0, 400.0]}})
    inside = plan(tiny_recipe(micro_batch=32), Budget(flops=10**13), profile)  # 32 x 12 tokens per update call
    outside = plan(tiny_recipe(micro_batch=64, prompts_per_step=16, prompt_len=Length.fixed(30)), Budget(flops=10**13),
                   profile)
    assert not any("extrapolation" in n for n in inside.notes)
    assert any("train calls of 2,048 tokens" in n and "extrapolation" in n for n in outside.notes)


def test_the_fit_from_runs_is_torch_free():
    """Fitting from runs needs no torch: its modules import none (the calibrate package's torch modules apart)."""
    for name in ("runs.py", "fit_runs.py", "from_runs.py", "probe.py"):
        tree = ast.parse((ROOT / "flopplan" / "calibrate" / name).read_text())
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.split(".")[0] in ("torch", "transformers", "peft")], name
        assert not [m for m in imported if m.startswith(("flopplan.calibrate.run", "flopplan.calibrate.sweep",
                                                         "flopplan.calibrate.harness", "flopplan.measure",
                                                         "flopplan.grpo", "flopplan.train"))
                    and m != "flopplan.calibrate.runs"], name


def test_unit_seconds_are_the_true_model_on_the_synthetic_runs(synthetic):
    """The synthetic truth is what it says: the held-out run's units equal the true model's seconds (rounded to the
    ledger's microseconds), so the recovery test above measures the fit, not the generator."""
    _, held = synthetic
    (run,), _ = read_runs([str(held)])
    for unit in run.units:
        truth = sum(call_seconds(TRUE_PHASES[k]["form"], TRUE_PHASES[k], c, BYTES_PER_ELEMENT) for k, c in unit.calls)
        assert unit.seconds == pytest.approx(truth, abs=1e-6)


def test_paths_in_the_fitted_profile(tmp_path, synthetic):
    fit, _ = synthetic
    data, _ = fit_from_runs([str(f) for f in fit])
    assert data["fitted_runs"] == list(FIT)
    assert Path(fit[0]).name in data["fitted_runs"]


@pytest.mark.slow
def test_real_runs_plan_shapes_and_the_planner(tmp_path):
    """A real tiny run (the trainer records its process start), a run under the FLOP meter (refused), the plan's
    shapes swept with the first run's profile as base, and the planner pricing the recipe with the result. The two
    runs are processes of their own (a run records its process's start); the rest runs in this process."""
    from helpers import run

    recipe_args = ["--model", "tiny", "--full", "--prompts-per-step", "4", "--group-size", "4", "--prompt-len", "10",
                   "--completion-len", "2", "--micro-batch", "16", "--eval-every", "2", "--eval-prompts", "20"]
    plan_file = tmp_path / "plan.json"
    cli("plan", *recipe_args, "--steps", "4", "--out", str(plan_file), check=True)
    for name, extra in (("plain", []), ("metered", ["--measure-flops"])):
        run("train", "--plan", str(plan_file), "--out", str(tmp_path / name), "--no-progress", *extra, check=True)
    first = json.loads((tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()[0])
    assert first["time"] > first["process_started"] > first["time"] - 600
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["wall_seconds"] > 0
    one_line_error(cli("calibrate", "--from-runs", str(tmp_path / "metered"), "--out", str(tmp_path / "x")),
                   "--measure-flops")
    fitted = cli("calibrate", "--from-runs", str(tmp_path / "plain"), str(tmp_path / "metered"), "--out",
                 str(tmp_path / "runs"), "--probe-shutdown", "--repeats", "1", "--json", check=True)
    data = json.loads(fitted.stdout)
    assert [row["run"] for row in data["breakdown"]] == ["plain"] and data["breakdown"][0]["startup_seconds"] > 0
    assert any("metered" in n and "--measure-flops" in n for n in data["notes"])
    swept = cli("calibrate", "--for-plan", str(plan_file), "--profile", str(tmp_path / "runs" / "profile.json"),
                "--repeats", "1", "--device", "cpu", "--out", str(tmp_path / "plan-shapes"), "--json", check=True)
    swept_data = json.loads(swept.stdout)
    assert {p["unit"] for p in swept_data["points"]} == {"rollout", "update"}
    assert swept_data["non_phase"]["round"] == data["non_phase"]["round"]  # kept from the base profile
    profile = load_profile(tmp_path / "plan-shapes" / "profile.json")
    priced = price_steps(Recipe(policy="tiny", lora_rank=None, prompts_per_step=4, group_size=4,
                                prompt_len=Length.fixed(10), completion_len=Length.fixed(2), micro_batch=16,
                                eval_every=2, eval_prompts=20), 4, profile)
    assert {"round", "optimizer_step", "startup", "shutdown"} <= set(priced.seconds)
    assert data["non_phase"]["shutdown"]["seconds"] > 0
    out = cli("plan", *recipe_args, "--profile", str(tmp_path / "plan-shapes" / "profile.json"), "--gpu-hours",
              "0.01", check=True)
    assert "outside the phases" in out.stdout


def test_a_profile_without_a_term_the_run_incurs_says_the_plan_leaves_it_out():
    partial = profile_with(non_phase={t: c for t, c in OUTSIDE.items() if t not in ("evaluation", "shutdown")})
    notes = plan(tiny_recipe(), Budget(flops=10**13), partial).notes
    assert any("does not model" in n and "shutdown, evaluation" in n for n in notes)
    assert not any("does not model" in n for n in plan(tiny_recipe(), Budget(flops=10**13),
                                                       profile_with(non_phase=OUTSIDE)).notes)
    assert not any("does not model" in n for n in plan(tiny_recipe(), Budget(flops=10**13), profile_with()).notes)


def test_the_run_report_puts_the_plan_time_beside_the_measured_one():
    """Recorded timings (not measured here): per bucket, outside the phases, the wall; the plan's exit a note."""
    from flopplan.planfile import PlanEntry
    from flopplan.report.run_report import run_tables
    from flopplan.runfile import PlanReference, RunSummary

    priced = plan(tiny_recipe(), Budget(flops=10**12), profile_with(non_phase=OUTSIDE, core_share=0.8))
    reference = PlanReference.of(PlanEntry.of(priced))
    assert reference.seconds == priced.seconds and reference.profile and reference.profile.startswith("test")
    assert reference.core_share == 0.8
    flops = {b: 0 for b in ("rollout", "learning", "feedback", "evaluation", "total")}
    summary = RunSummary(model="tiny", reward="rule", steps=priced.steps, budget_flops=None, flops=flops,
                         useful_flops=flops, seconds={"rollout": 2.0, "old_logprobs": 0.5, "update": 1.5, "eval": 1.0},
                         plan=reference, wall_seconds=20.0, core_share=0.6)
    again = RunSummary.from_data(json.loads(json.dumps(summary.to_data())))
    assert again.wall_seconds == 20.0 and again.core_share == 0.6 and again.plan == reference
    tables, notes = run_tables(again)
    rows = {row[0]: row for row in tables[1].rows}
    assert tables[1].columns == ["time", "measured", "plan", "measured / plan"]
    assert rows["learning"][1] == "2 s" and rows["phases"][1] == "5 s"
    assert rows["outside the phases"][1] == "15 s" and rows["wall: start to summary"][1] == "20 s"
    s = priced.seconds
    wanted = sum(v for k, v in s.items() if k != "shutdown")
    assert rows["wall: start to summary"][3] == f"{20.0 / wanted:.2f}"
    assert any("exit after the summary" in n for n in notes)
    assert any("had 0.60 of its cores over its whole process, start-up included" in n
               and "assume 0.80 (its fit runs' typical share over their timed steps, start-up apart)" in n
               for n in notes)
    unpriced = RunSummary.from_data({**summary.to_data(), "plan": None, "measured_flops": flops})
    tables, notes = run_tables(unpriced)
    assert tables[1].columns == ["time", "measured"] and any("FLOP meter" in n for n in notes)
    with pytest.raises(UserError, match="wall_seconds"):
        RunSummary.from_data({**summary.to_data(), "wall_seconds": -1})


def test_runs_slowed_by_other_processes_are_put_at_the_typical_share(tmp_path):
    """The same run on a whole core and on half of one: each line's CPU seconds give its share, and the fit sees
    both at the typical share (their median), so the slowed run does not pass for slower work."""
    from flopplan.calibrate.runs import at_typical_share

    r = FIT["full-8x8"]
    whole, half = (write_run(tmp_path / name, r, 6, share=s) for name, s in (("whole", 1.0), ("half", 0.5)))
    runs, _ = read_runs([str(whole), str(half)])
    assert [round(run.core_share, 6) for run in runs] == [1.0, 0.5]
    assert [round(run.startups[0].core_share, 6) for run in runs] == [1.0, 0.5]
    scaled, typical = at_typical_share(runs)
    assert typical == pytest.approx(0.75)
    for a, b in zip(scaled[0].units, scaled[1].units, strict=True):
        assert a.seconds == pytest.approx(b.seconds, rel=1e-4, abs=2e-6)
    for a, b in zip(scaled[0].rounds, scaled[1].rounds, strict=True):
        assert a.wall_seconds == pytest.approx(b.wall_seconds, rel=1e-4)
    assert scaled[0].startups[0].seconds == pytest.approx(scaled[1].startups[0].seconds, rel=1e-4)
    data, notes = fit_from_runs([str(whole), str(half)])
    assert data["fit_from_runs"]["core_share"]["typical"] == pytest.approx(0.75)
    assert any("typical share of a core, 0.75" in n for n in notes)
    plain, _ = read_runs([str(write_run(tmp_path / "plain", r, 6))])  # no CPU seconds recorded: kept as it is
    assert plain[0].core_share is None and at_typical_share(plain) == (plain, None)
