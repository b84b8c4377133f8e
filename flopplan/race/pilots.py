"""RACE's pilots on disk: where each pilot's run folder is, whether it finished a rung, what all pilots spent, and
the analysis's input read from them (the runner's promotion and ``race analyze`` read the pilots the same way), and
the death signal their processes are started with."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.errors import UserError
from flopplan.race.analysis import RaceInput
from flopplan.race.design import PILOTS, RaceDesign
from flopplan.race.persistence import names_reward_model
from flopplan.race.pilot_data import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.results import ArmInfo
from flopplan.runfile import SUMMARY, load_evaluations, load_summary


def pilot_folder(folder: str | Path, arm: str, seed: int) -> Path:
    return Path(folder) / PILOTS / arm / f"seed{seed}"


def set_parent_death_signal() -> None:  # pragma: no cover - runs in the child
    """Children die with the runner (Linux), so a killed race leaves no pilot holding its folder's lock."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def pilot_done(folder: Path, budget: int) -> bool:
    """The pilot in ``folder`` finished a run to ``budget`` FLOPs, or has since been continued to a larger one (a
    pilot goes on only after its rung is done; killed while continuing, it is done with the rung before)."""
    if not (folder / SUMMARY).is_file():
        return False
    summary = load_summary(folder)
    reached = summary.budget_flops or 0
    return reached > budget or (bool(summary.stop_reason) and not summary.interrupted and reached >= budget)


def pilot_spending(design: RaceDesign, folder: Path) -> dict[str, int]:
    """FLOPs all pilots spent by their ledgers: in total, on training (evaluations excluded), on evaluations, and
    lost to interruptions (charged to the pilots' ledgers, not to their budgets)."""
    out = {"total": 0, "training": 0, "evaluation": 0, "lost": 0}
    for name, seed in design.pilots():
        path = pilot_folder(folder, name, seed)
        if not (path / SUMMARY).is_file():
            continue
        s = load_summary(path)
        out["total"] += s.flops["total"]
        out["evaluation"] += s.flops.get("evaluation", 0)
        out["lost"] += s.lost_flops
    out["training"] = out["total"] - out["evaluation"]
    return out


def pilot_input(design: RaceDesign, folder: Path, reached: dict[str, int], command: str) -> RaceInput:
    """The analysis's input from the pilots of the arms in ``reached`` (arm -> the rung all its seeds finished),
    each pilot's evaluations read up to that rung's budget, so a pilot already running its next rung does not
    change it. ``pilot_spend`` holds each arm's pilots' ledgers in seed order (the first is the one a validating
    run continues), ``trained_rewards`` the reward a pilot's ledger recorded where it disagrees with the design's
    (each pilot's summary read once for both)."""
    targets: dict[str, list[ArmPilots]] = {t: [] for t in design.targets}
    infos, spend, trained = [], {}, {}
    for arm in design.arms:
        if arm.name not in reached:
            continue
        limit = design.rung_flops[reached[arm.name]]
        runs: dict[str, list[SeedRun]] = {t: [] for t in design.targets}
        for seed in design.seeds:
            records = load_evaluations(pilot_folder(folder, arm.name, seed))
            for target in design.targets:
                points = tuple(EvalPoint(float(r.train_flops), np.asarray(r.scores, dtype=float))
                               for r in records if r.target == target and r.train_flops <= limit)
                if not points:
                    within = f" within its rung's {limit:.3g} training FLOPs" if any(r.target == target
                                                                                      for r in records) else ""
                    raise UserError(f"pilot {arm.name} seed {seed} has no evaluation on {target!r}{within}")
                runs[target].append(SeedRun(seed, points))
        for target in design.targets:
            targets[target].append(ArmPilots(arm.name, tuple(runs[target])))
        infos.append(ArmInfo(name=arm.name, axes=dict(arm.axes), params=arm.recipe.policy_spec.params,
                             split=_split(arm.split(reached[arm.name])), upfront_flops=arm.upfront_flops))
        folders = [pilot_folder(folder, arm.name, s) for s in design.seeds]
        summaries = [load_summary(p) if (p / SUMMARY).is_file() else None for p in folders]  # None: not written yet
        spend[arm.name] = tuple(0 if s is None else s.flops["total"] for s in summaries)  # lost work apart
        recorded = _trained_reward(str(arm.axes.get("reward", "rule")), [s.reward for s in summaries if s])
        if recorded is not None:
            trained[arm.name] = recorded
    return RaceInput(arms=tuple(infos), targets={t: PilotData(tuple(arms)) for t, arms in targets.items()},
                     fitted_targets=design.fit_targets, budget_flops=float(design.budget_flops),
                     rung_budgets=tuple(float(b) for b in design.rung_flops), reached=dict(reached),
                     pilot_flops=pilot_spending(design, folder)["total"], command=command or design.command,
                     pilot_spend=spend, trained_rewards=trained, one_seed_sd=design.one_seed_sd)


def _trained_reward(designed: str, recorded: list[str]) -> str | None:
    """The reward system a pilot's ledger ``recorded`` where it names a reward model and the design's does not, or
    the reverse: a user's script meters the reward functions its trainer holds (a reward model in
    ``reward_funcs`` is one, whatever the design says), and the analysis's learned-reward caveat reads it. Spelling
    (``RULE``, ``prm`` for its default model, a script's own copy of the design's model) is no difference."""
    return next((r for r in recorded if names_reward_model(r) != names_reward_model(designed)), None)


def _split(shares: dict[str, Any]) -> dict[str, float]:
    parts = {b: float(shares.get(b, 0.0)) for b in ("rollout", "learning", "feedback")}
    total = sum(parts.values()) or 1.0
    return {b: v / total for b, v in parts.items()}
