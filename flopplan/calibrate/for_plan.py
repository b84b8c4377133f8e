"""``flopplan calibrate --for-plan PLAN.json``: time, briefly, the shapes a plan will execute, before its run.

The plan's recipe gives the passes of its rounds (:func:`flopplan.passes.step_passes`: every generate call, scoring
and update micro-batch at its batch and padded lengths, and the evaluation). Each is run through the training
run's own phase units on the recipe's policy (random init; LoRA or full as the recipe trains; its log-prob head),
at the plan's shape and at smaller neighbours (half and a quarter of the rows; a generate also with one new token,
which times its prefill alone), ``repeats`` times after a warm-up. The units are fitted with the same joint fit as
real runs (:func:`flopplan.calibrate.fit_runs.fit_phases`), so the profile's time model is learned on what the run
will do. An update's wall time beyond its forward and backward is its optimizer step: the optimizer term's fixed
cost is fitted on those; the rest of the time outside the phases (rounds, evaluations, checkpoints, start-up) is
not swept and comes from ``--profile BASE`` when given (a profile fitted on runs).
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.calibrate.fit import KIND_FORM, simple_rates
from flopplan.calibrate.fit_runs import fit_phases
from flopplan.calibrate.runs import TimedUnit, charge_calls
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, atomic_write_text, writable_folder
from flopplan.hardware import PROFILE_VERSION, Profile, load_profile, profile_from_data
from flopplan.lengths import mean_of
from flopplan.passes import RoundLengths, RoundShape, step_passes
from flopplan.planfile import PlanFile
from flopplan.recipe import Recipe
from flopplan.timing import (
    ADAMW_BYTES_PER_PARAMETER,
    NON_PHASE_TERMS,
    OPTIONAL_PARAMETERS,
    PARAMETERS,
    trainable_parameters,
)

NEIGHBOURS = (1.0, 0.5, 0.25)
"""Rows of each timed shape as shares of the plan's (at least one row)."""


@dataclass(frozen=True)
class Point:
    unit: str  # rollout (a generate: prefill and decode), score, update
    rows: int
    prompt: int
    completion: int


def plan_points(recipe: Recipe) -> tuple[list[Point], list[str]]:
    """The shapes to time: each pass of the plan's round (and evaluation) at its rows and expected padded lengths,
    with its neighbours; and a note per pass that is not swept."""
    points: list[Point] = []
    notes = []
    for p in step_passes(RoundShape.of(recipe), RoundLengths.of(recipe)):
        rows = round(float(mean_of(p.rows)))
        prompt, completion = round(float(mean_of(p.prompt))), max(1, round(float(mean_of(p.completion))))
        if p.phase == "reward":
            notes.append("reward: the reward model's forward is not swept (a different model); it is priced by the "
                         "forward model fitted on the policy's scoring passes")
            continue
        if p.kind == "decode":  # its generate is timed with the prefill
            continue
        unit = {"prefill": "rollout", "forward": "score", "train": "update"}[p.kind]
        shares = NEIGHBOURS if p.kind != "prefill" else NEIGHBOURS[:2]
        for share in shares:
            n = max(1, round(rows * share))
            points.append(Point(unit, n, prompt, completion))
            if unit == "rollout" and completion > 1:
                points.append(Point(unit, n, prompt, 1))  # the prefill alone
    return list(dict.fromkeys(points)), notes


def time_points(recipe: Recipe, points: list[Point], device: Any, repeats: int,
                progress: Callable[[str, int, int], None] = lambda *_: None) -> tuple[list[TimedUnit], list[float]]:
    """Every point through the phase units, ``repeats`` times after a warm-up: the timed units, and the seconds of
    each update's optimizer step (its wall time beyond the timed forward and backward)."""
    import torch

    from flopplan.calibrate.harness import PhaseHarness
    from flopplan.measure.device import DevicePolicy
    from flopplan.measure.models import recommended_threads

    policy = DevicePolicy(device)
    harness = PhaseHarness.for_recipe(recipe, device, policy.dtype, policy.attention)
    threads = recommended_threads(recipe.policy_spec.params) if device.type == "cpu" else None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    units, optimizer = [], []
    try:
        for i, point in enumerate(points):
            progress(f"{point.unit} B={point.rows} P={point.prompt} K={point.completion}", i, len(points))
            run = {"rollout": harness.generate, "score": harness.score, "update": harness.update}[point.unit]
            run(point.rows, point.prompt, point.completion)  # warm-up
            for _ in range(repeats):
                start = time.perf_counter()
                charge = run(point.rows, point.prompt, point.completion)
                wall = time.perf_counter() - start
                data = charge.to_data()
                calls, _ = charge_calls(data, recipe)
                units.append(TimedUnit("plan", i, str(data["unit"]), charge.seconds, tuple(calls)))
                if point.unit == "update":
                    optimizer.append(max(wall - charge.seconds, 0.0))
    finally:
        torch.set_num_threads(before)
    progress("done", len(points), len(points))
    return units, optimizer


def profile_for_plan(recipe: Recipe, units: list[TimedUnit], optimizer: list[float], device_name: str, dtype: str,
                     bytes_per_element: float, base: Profile | None, source: str) -> tuple[dict[str, Any], list[str]]:
    phases = fit_phases(units, bytes_per_element, base.time_model if base else None)
    notes = list(phases.notes)
    non_phase = {term: dict(c) for term, c in (base.non_phase or {}).items()} if base else {}
    if optimizer:
        params, tensors = trainable_parameters(recipe.policy_spec, recipe.lora)
        kept = non_phase.get("optimizer_step", {})
        rest = (kept.get("seconds_per_tensor", 0.0) * tensors
                + kept.get("seconds_per_byte", 0.0) * params * ADAMW_BYTES_PER_PARAMETER)
        non_phase["optimizer_step"] = {**dict.fromkeys(NON_PHASE_TERMS["optimizer_step"], 0.0), **kept,
                                       "seconds": max(statistics.median(optimizer) - rest, 0.0)}
    if set(non_phase) <= {"optimizer_step"}:
        notes.append("rounds, evaluations, checkpoints and the start-up are not swept: give --profile BASE (a profile "
                     "fitted on runs) to keep them")
    peak, efficiency = simple_rates(phases.time_model)  # (fitted rates, at most what a profile can state)
    data: dict[str, Any] = {
        "flopplan_profile_version": PROFILE_VERSION, "device": device_name, "dtype": dtype,
        "bytes_per_element": bytes_per_element, "flopplan_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "source": source,
        "models": [recipe.policy], "model_params": {recipe.policy: recipe.policy_spec.params},
        "peak_flops": peak, "efficiency": efficiency,
        "time_model": {k: {"form": m["form"], **{p: m[p] for p in (*PARAMETERS[m["form"]], *OPTIONAL_PARAMETERS)
                                                 if p in m}} for k, m in phases.time_model.items()},
        "non_phase": non_phase,
        "fitted_shapes": {k: {"tokens": v} for k, v in phases.tokens.items()},
        "for_plan": {"unit_errors": phases.unit_errors, "units": len(units), "notes": notes,
                     "base_profile": base.source if base else None},
    }
    missing = [k for k in KIND_FORM if k not in data["time_model"]]
    if missing:
        raise UserError(f"the plan runs no {', '.join(missing)} call to time and no base profile gives one: add "
                        "--profile BASE")
    return data, notes


@dataclass
class PlanCalibration:
    profile: dict[str, Any]
    profile_path: Path
    report_path: Path
    notes: list[str]


def run_for_plan(plan_path: str, plan_model: str | None, device_name: str, *, repeats: int, out_dir: str | None,
                 base_path: str | None, command: str,
                 progress: Callable[[str, int, int], None] = lambda *_: None) -> PlanCalibration:
    from flopplan.measure.device import DevicePolicy
    from flopplan.measure.device import hardware_name as describe_device

    entry = PlanFile.load(plan_path).select(plan_model)
    recipe = entry.recipe
    base = load_profile(base_path) if base_path else None
    policy = DevicePolicy.of(device_name)
    if out_dir:
        writable_folder(out_dir, "calibration folder")
    points, notes = plan_points(recipe)
    units, optimizer = time_points(recipe, points, policy.device, repeats, progress)
    name = describe_device(policy.device)
    data, fit_notes = profile_for_plan(recipe, units, optimizer, name, policy.dtype_name, policy.bytes_per_element,
                                       base, f"swept for plan {Path(plan_path).name} ({recipe.policy}) "
                                             f"{datetime.date.today().isoformat()}")
    notes += fit_notes
    data["for_plan"]["notes"] = notes
    data["for_plan"]["points"] = [vars(p) for p in points]
    import re

    folder = Path(out_dir) if out_dir else Path("calibration") / (
        re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] + f"-plan-{recipe.policy}")
    writable_folder(folder, "calibration folder")
    profile_from_data(data, "the fitted profile")  # the strict reader accepts it before it is written
    profile_path = atomic_write_json(folder / "profile.json", data)
    report_path = folder / "report.md"
    atomic_write_text(report_path, plan_report(data, points, command))
    return PlanCalibration(data, profile_path, report_path, notes)


def plan_report(data: dict[str, Any], points: list[Point], command: str) -> str:
    from flopplan.report.calibration_report import run_phase_table
    from flopplan.report.tables import to_markdown

    lines = [f"# Calibration for a plan: {data['device']}", "", f"- {data['source']}",
             f"- shapes timed: {', '.join(f'{p.unit} {p.rows}x{p.prompt}+{p.completion}' for p in points)}", ""]
    table = run_phase_table(data["time_model"], list(data["fitted_shapes"]), data["for_plan"]["unit_errors"],
                            "the plan's shapes, timed")
    text = "\n".join(lines) + to_markdown([table], command)
    if data["for_plan"]["notes"]:
        text += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in data["for_plan"]["notes"]) + "\n"
    return text
