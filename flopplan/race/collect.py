"""From a race folder to the analysis's input: each arm's pilots' evaluations (exact training FLOPs, one score per
evaluation prompt) per target, how far each arm got, and what all pilots spent by their ledgers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from flopplan.errors import UserError
from flopplan.race.analysis import RaceInput
from flopplan.race.bootstrap import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.design import RaceDesign
from flopplan.race.results import ArmInfo
from flopplan.race.runner import pilot_done, pilot_folder, rung_arms
from flopplan.runfile import load_evaluations, load_summary


def reached_rungs(design: RaceDesign, folder: Path) -> dict[str, int]:
    """The highest rung each arm's pilots (all seeds) finished; -1 for none."""
    arms = rung_arms(design, folder)
    reached = {a.name: -1 for a in design.arms}
    for rung, names in enumerate(arms):
        for name in names:
            if all(pilot_done(pilot_folder(folder, name, s), design.arm(name).pilot_budget(design, rung))
                   for s in design.seeds):
                reached[name] = rung
    return reached


def pilot_spending(design: RaceDesign, folder: Path) -> dict[str, int]:
    """FLOPs all pilots spent by their ledgers: in total, on training (evaluations excluded), on evaluations, and
    lost to interruptions (charged to the pilots' ledgers, not to their budgets)."""
    out = {"total": 0, "training": 0, "evaluation": 0, "lost": 0}
    for name, seed in design.pilots():
        path = pilot_folder(folder, name, seed)
        if not (path / "summary.json").is_file():
            continue
        s = load_summary(path)
        out["total"] += s.flops["total"]
        out["evaluation"] += s.flops.get("evaluation", 0)
        out["lost"] += s.lost_flops
    out["training"] = out["total"] - out["evaluation"]
    return out


def race_input(design: RaceDesign, folder: str | Path, command: str = "") -> RaceInput:
    """The analysis's input from the finished pilots of ``folder`` (an arm counts from the rung its seeds all
    finished; a pilot's evaluations are read up to that rung's budget, so a pilot already running its next rung
    does not change the analysis)."""
    folder = Path(folder)
    reached = reached_rungs(design, folder)
    if all(r < 0 for r in reached.values()):
        raise UserError(f"no arm of the race in {str(folder)!r} has finished its first rung: run `flopplan race run`")
    targets: dict[str, list[ArmPilots]] = {t: [] for t in design.targets}
    infos = []
    for arm in design.arms:
        rung = reached[arm.name]
        if rung < 0:
            continue
        limit = design.rung_flops[rung]
        runs: dict[str, list[SeedRun]] = {t: [] for t in design.targets}
        for seed in design.seeds:
            records = load_evaluations(pilot_folder(folder, arm.name, seed))
            for target in design.targets:
                points = tuple(EvalPoint(float(r.train_flops), np.asarray(r.scores, dtype=float))
                               for r in records if r.target == target and r.train_flops <= limit)
                if not points:
                    raise UserError(f"pilot {arm.name} seed {seed} has no evaluation on {target!r}")
                runs[target].append(SeedRun(seed, points))
        for target in design.targets:
            targets[target].append(ArmPilots(arm.name, tuple(runs[target])))
        infos.append(ArmInfo(name=arm.name, axes=dict(arm.axes), params=arm.recipe.policy_spec.params,
                             split=_split(arm.split(rung)), upfront_flops=arm.upfront_flops))
    spent = pilot_spending(design, folder)
    return RaceInput(arms=tuple(infos), targets={t: PilotData(tuple(arms)) for t, arms in targets.items()},
                     fitted_targets=design.fit_targets, budget_flops=float(design.budget_flops),
                     rung_budgets=tuple(float(b) for b in design.rung_flops),
                     reached={k: v for k, v in reached.items() if v >= 0}, pilot_flops=spent["total"],
                     command=command or design.command)


def _split(shares: dict[str, Any]) -> dict[str, float]:
    parts = {b: float(shares.get(b, 0.0)) for b in ("rollout", "learning", "feedback")}
    total = sum(parts.values()) or 1.0
    return {b: v / total for b, v in parts.items()}
