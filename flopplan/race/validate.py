"""RACE's check of itself: run the recommended allocation with the budget the pilots left (under the hard budget
stop), then set what the pilots predicted beside what the run observed, on every target, the held-out one
included.

The validating run continues the recommended arm's pilot of the race's first seed: a copy of that pilot's run
folder (``validation/<arm>``, made whole or not at all) resumed from its last checkpoint, as ``flopplan train
--resume --budget`` resumes any run, with a budget of that pilot's ledger plus what all pilots and the reward
model left of F, and the evaluation points extended beyond the pilots'. The pilot's work is the run's start, not
overhead; the pilot itself is left as it was, so the analysis reads the same pilots before and after.

Prediction: what the analysis predicts for the recommended arm at the exact training FLOPs the validating run
reached at its last evaluation: the analysis redone on the same pilots, with the same seed, replicates and level,
and its budget there (:func:`predicted_at`), so the point and interval are the ones the decisions read (the model
average over curve families, calibrated, an accelerating arm's upper end raised), not ScaleRL's curve alone
(validation.json before version 3). A held-out target has no curve (no fit saw it): the run's value is set beside
the same arm's pilots at their largest budget and at step 0, so what transferred is visible without a forecast
pretending to exist.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.errors import UserError
from flopplan.fileio import TEMPORARY, atomic_write_json, atomic_write_text, folder_lock, writable_targets
from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.collect import race_input, unfinished_rung
from flopplan.race.design import RaceDesign
from flopplan.race.eval_points import log_points
from flopplan.race.overhead import budget_left
from flopplan.race.pilot_data import ArmPilots, EvalPoint, SeedRun
from flopplan.race.pilots import allow_children, pilot_done, pilot_folder, within_rung
from flopplan.race.results import ArmPrediction, RaceAnalysis
from flopplan.race.runner import PilotTask, run_pilot
from flopplan.race.user_pilot import continue_script_pilot, recorded_command
from flopplan.runfile import CONFIG, EvalRecord, load_evaluations, load_summary

VALIDATION = "validation"
VALIDATION_VERSION = 3  # 2: the run continues a pilot ("continued"); budget_flops includes that pilot's ledger;
# 3: the prediction is the analysis's (the model average), no longer ScaleRL's curve alone
DIAGNOSTIC = ("RACE is a diagnostic, not a guarantee: a value inside the interval shows that the pilots' curve "
              "forecast this run, at this budget and seed, as well as its stated uncertainty; it does not show "
              "that the recommended arm was the best one at this budget (only running the other arms shows that: "
              "benchmarks/race_regret.py), nor that the allocation carries to other tasks or models. A value "
              "outside it is evidence that the curve, its extrapolation or the seed noise was misjudged.")


@dataclass(frozen=True)
class TargetCheck:
    target: str
    fitted: bool
    observed: float
    train_flops: int
    predicted: float | None
    lo: float | None
    hi: float | None
    inside: bool | None
    pilots_best: float | None  # the arm's pilots: seed mean at their last evaluation
    pilots_start: float | None  # and at step 0

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _arm_data(design: RaceDesign, folder: Path, arm: str, target: str) -> ArmPilots:
    """An arm's pilots on ``target``: every evaluation within its top rung (:func:`within_rung`: up to its
    recorded end, or within its budget)."""
    top = len(design.rung_flops) - 1
    runs = []
    for seed in design.seeds:
        path = pilot_folder(folder, arm, seed)
        records = [r for r in within_rung(load_evaluations(path), design, arm, top, path)
                   if r.target == target]
        runs.append(SeedRun(seed, tuple(EvalPoint(float(r.train_flops), np.asarray(r.scores, dtype=float))
                                        for r in records)))
    return ArmPilots(arm, tuple(runs))


def _last(records: list[EvalRecord], target: str) -> EvalRecord:
    mine = [r for r in records if r.target == target]
    if not mine:
        raise UserError(f"the validating run has no evaluation on {target!r}")
    return mine[-1]


def predicted_at(inp: RaceInput, analysis: RaceAnalysis, arm: str, target: str, train_flops: float
                 ) -> ArmPrediction | None:
    """The analysis's prediction for ``arm`` on ``target`` at ``train_flops`` (the arm's ledger FLOPs): the analysis
    of the race's pilots ``inp`` (:func:`flopplan.race.collect.race_input`) redone with its target budget there (the
    arm's upfront FLOPs added back, as the analysis charges them), its seed, replicates and level; the temporal
    holdout, which feeds no prediction, left out. None when the arm's curve is not fitted (a 'best observed'
    recommendation of an arm at a pass rate of 1 from step 0, say): the run is checked against no prediction."""
    upfront = next(a.upfront_flops for a in inp.arms if a.name == arm)
    inp = replace(inp, budget_flops=float(train_flops) + upfront, fitted_targets=(target,))
    result = analyze(inp, n_replicates=analysis.n_replicates, level=analysis.level, seed=analysis.seed,
                     holdout=False).target(target)
    return next((p for p in result.budgets[-1].predictions if p.arm == arm), None) if result.budgets else None


def validation_budget(design: RaceDesign, analysis: RaceAnalysis) -> int:
    """What the pilots (and the learned reward model's training, when the race trained one) left of F
    (:func:`flopplan.race.overhead.budget_left`, which race.json's ``budget_left_flops`` states)."""
    return int(budget_left(design.budget_flops, analysis.pilot_flops, design.arms))


def _check_current(design: RaceDesign, folder: Path, analysis: RaceAnalysis, inp: RaceInput) -> None:
    """Refuse a validating run the budget would not cover: one planned from an analysis (race.json) older than the
    pilots' ledgers (``inp``: the pilots as they are now), or before every rung of the race has finished (the
    pilots still to run would spend what the validating run was given)."""
    if analysis.budget_flops != design.budget_flops:  # a hand edit, or another race's analysis
        raise UserError(f"race.json's budget ({analysis.budget_flops:,.0f} FLOPs) is not the manifest's "
                        f"({design.budget_flops:,}): run `flopplan race analyze` again, then validate")
    rung = unfinished_rung(design, folder)
    if rung is not None:
        raise UserError(f"the race in {str(folder)!r} has not finished rung {rung + 1} of {len(design.rung_flops)}: "
                        "finish it (`flopplan race run`), analyse it, then validate")
    if inp.pilot_flops != analysis.pilot_flops:
        raise UserError(f"race.json was written when the pilots had spent {analysis.pilot_flops:,} FLOPs; their "
                        f"ledgers now hold {inp.pilot_flops:,}: run `flopplan race analyze` again, then validate")


def _has_checkpoint(pilot: Path, script: bool) -> bool:
    """Whether the pilot in ``pilot`` left a checkpoint its validating run can resume: a TRL checkpoint written to
    the end (a script pilot), or a checkpoint file of flopplan's trainer."""
    if script:
        from flopplan.runfile import last_complete_checkpoint

        return last_complete_checkpoint(pilot / "checkpoints") is not None
    from flopplan.train.runfolder import RunFolder

    return RunFolder(pilot).has_checkpoint_files()


def run_validation(folder: str | Path, analysis: RaceAnalysis, *, cores: int | None = None,
                   command: str = "") -> dict[str, Any]:
    """Run (or continue) the validating run of the first fitted target's recommendation and check it; ``command``:
    the one that runs it (recorded; the analysis's when empty)."""
    folder = Path(folder)
    design = RaceDesign.load(folder)
    recs = [r for r in analysis.recommendations if r.arm]
    if not recs:
        raise UserError("the analysis recommends no arm (no arm it could fit or see at the largest pilot): nothing "
                        "to validate")
    rec = recs[0]
    arm = design.arm(str(rec.arm))
    inp = race_input(design, folder, analysis.command)  # every pilot read, and checked, before any is copied
    _check_current(design, folder, analysis, inp)
    left = validation_budget(design, analysis)
    if left <= arm.eval_flops * 2:
        raise UserError(f"the pilots left {left:,} FLOPs of the budget: too little for a validating run")
    seed = design.seeds[0]
    pilot = pilot_folder(folder, arm.name, seed)
    origin = load_summary(pilot)
    budget = origin.flops["total"] + left
    run = folder / VALIDATION / arm.name
    points = _validation_points(design, arm, budget, origin.training_flops, origin.steps)
    script = recorded_command(folder) is not None
    if not (run / CONFIG).is_file() and not _has_checkpoint(pilot, script):
        raise UserError(f"pilot {arm.name} seed {seed} has no checkpoint to continue ({pilot / 'checkpoints'} holds "
                        "none): the validating run would start over and spend its pilot's FLOPs again beyond the "
                        "budget; run that pilot again (delete its folder, then `flopplan race run`)")
    if not pilot_done(run, budget):
        allow_children()
        if script:  # a script pilot: its command resumes the copy
            continue_script_pilot(pilot, run, points)
        else:
            continue_pilot(pilot, run, points)
        run_pilot(design, folder, PilotTask(arm.name, seed, -1, budget, run), cores or 2)
    records = load_evaluations(run)
    summary = load_summary(run)
    fitted = _arm_data(design, folder, arm.name, design.fit_targets[0])
    pilot_max = max((p.flops for r in fitted.runs for p in r.points), default=0.0)
    checks = []
    for target in design.targets:
        last = _last(records, target)
        pilots = _arm_data(design, folder, arm.name, target)
        ends = [run.points[-1] for run in pilots.runs if run.points]
        starts = [run.points[0] for run in pilots.runs if run.points and run.points[0].flops == 0]
        best = float(np.mean([p.scores.mean() for p in ends])) if ends else None
        start = float(np.mean([p.scores.mean() for p in starts])) if starts else None
        if target in design.fit_targets:
            pred = predicted_at(inp, analysis, arm.name, target, float(last.train_flops))
            if pred is None:  # not fitted: what the run reached is reported beside its pilots, checked against none
                checks.append(TargetCheck(target, True, last.accuracy, last.train_flops, None, None, None, None, best,
                                          start))
                continue
            checks.append(TargetCheck(target, True, last.accuracy, last.train_flops, pred.reward, pred.lo, pred.hi,
                                      bool(pred.lo <= last.accuracy <= pred.hi), best, start))
        else:
            checks.append(TargetCheck(target, False, last.accuracy, last.train_flops, None, None, None, None, best,
                                      start))
    out = {"validation_version": VALIDATION_VERSION, "command": command or analysis.command, "arm": arm.name,
           "recommended_for": rec.target, "confidence": rec.confidence, "regime": rec.regime,
           "budget_flops": budget, "spent_flops": summary.flops["total"], "within_budget": summary.within_budget,
           "seed": seed, "continued": {"pilot": os.path.relpath(pilot, folder), "steps": origin.steps,
                                       "flops": origin.flops["total"]},
           "overhead_flops": rec.overhead_flops, "overhead_share": rec.overhead_share, "horizon": rec.horizon,
           "steps": summary.steps, "stop_reason": summary.stop_reason, "level": analysis.level,
           "extrapolation": last_train(records) / max(1.0, pilot_max),
           "checks": [c.to_data() for c in checks], "statement": DIAGNOSTIC}
    writable_targets(folder / VALIDATION / "validation.json", folder / VALIDATION / "validation.md")
    atomic_write_json(folder / VALIDATION / "validation.json", out)
    atomic_write_text(folder / VALIDATION / "validation.md", render(out))
    return out


def continue_pilot(pilot: Path, run: Path, points: tuple[int, ...]) -> None:
    """``run`` as a copy of the finished ``pilot`` (unless it is there), its evaluation points ``points``: copied
    aside under the pilot's lock and renamed into place, so a kill leaves the whole copy or none."""
    from flopplan.train.config import replace_config
    from flopplan.train.runfolder import RunFolder

    if (run / CONFIG).is_file():
        return
    aside = run.with_name(f".{run.name}.copy")
    shutil.rmtree(aside, ignore_errors=True)
    with folder_lock(pilot, "pilot run folder"):
        shutil.copytree(pilot, aside, ignore=shutil.ignore_patterns(".lock", TEMPORARY))
    copy = RunFolder(aside)
    copy.write_config(replace_config(copy.read_config(), out_dir=str(run), eval_at_flops=points,
                                     train_flops=None))  # its budget ends it, not its pilot's rung
    shutil.rmtree(run, ignore_errors=True)
    os.replace(aside, run)


def last_train(records: list[EvalRecord]) -> float:
    return float(max((r.train_flops for r in records), default=0))


def _validation_points(design: RaceDesign, arm: Any, budget: int, pilot_train: int, pilot_steps: int
                       ) -> tuple[int, ...]:
    """The pilots' evaluation points, then a few log-spaced ones up to the validating run's training budget. A
    point the continued pilot (``pilot_train`` training FLOPs in ``pilot_steps`` steps) stopped short of by less
    than a step of its own is left out: the evaluation at its end stands for it (a budget stops a pilot just short
    of its rung, and the run would evaluate again one step later, out of its budget)."""
    train = max(1, budget - arm.eval_flops * (2 + len(design.eval_points) + 4))
    top = max(design.eval_points)
    extra = (*log_points(top, train, 4)[1:], train) if train > top else ()  # four, a log step apart, the last at it
    covered = pilot_train + pilot_train / max(1, pilot_steps)
    points = {p for p in design.eval_points if p <= pilot_train or p > covered}
    return tuple(sorted(points | set(extra)))


def render(out: dict[str, Any]) -> str:
    level = f"{out['level']:.0%}"
    cont = out["continued"]
    lines = [f"<!-- {out['command']} -->", "", f"# RACE validation: {out['arm']}", "",
             f"Recommended for `{out['recommended_for']}` ({out['regime']}, confidence {out['confidence']}); the "
             f"arm's pilot of seed {out['seed']} ({cont['pilot']}: {cont['steps']} steps, {cont['flops']:,} FLOPs) "
             f"continued to {out['budget_flops']:,} FLOPs, its own plus what the pilots left: {out['steps']} steps, "
             f"{out['spent_flops']:,} FLOPs spent ({'within' if out['within_budget'] else 'OVER'} the budget); "
             f"{out['stop_reason']}. The last evaluation is at {out['extrapolation']:.1f}x the arm's largest pilot. "
             f"Pilot overhead (the pilots not continued, and a reward model this arm does not use): "
             f"{out['overhead_flops']:,} FLOPs, {out['overhead_share']:.1%} of F; F is {out['horizon']:.1f}x the "
             "arm's largest pilot.",
             "", f"| target | fitted | observed | predicted | {level} interval | inside | pilots (last) | step 0 |",
             "|---|---|---|---|---|---|---|---|"]
    for c in out["checks"]:
        def f(v: Any) -> str:
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"
        interval = "-" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"
        inside = "-" if c["inside"] is None else ("yes" if c["inside"] else "no")
        lines.append(f"| {c['target']} | {'yes' if c['fitted'] else 'held out'} | {f(c['observed'])} | "
                     f"{f(c['predicted'])} | {interval} | {inside} | {f(c['pilots_best'])} | {f(c['pilots_start'])} |")
    lines += ["", out["statement"], ""]
    return "\n".join(lines)
