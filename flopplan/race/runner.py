"""RACE's runs: each pilot is an ordinary metered run folder (``flopplan train`` in a process of its own), rung
after rung, with successive halving between rungs.

State lives only in the pilot folders: a pilot is done at a rung when its summary records that rung's budget and
a finished run; otherwise it is started, or resumed (``--resume --budget``) from its newest checkpoint, so a race
killed anywhere and run again continues where it was, and a pilot continued to the next rung is the same run,
not a new one. The promotion after a rung is a deterministic function of the pilots' evaluations (a lower
confidence bound, :func:`promote`), recomputed on every call, so every shard and every rerun agrees.

``jobs``: pilots in parallel processes (each with ``cores / jobs`` threads). ``shard = (i, n)``: this process runs
the pilots whose index in the rung is i mod n, for an executor that already exists (a Slurm array, Ray tasks, a
CI matrix) writing into one shared folder; a shard that finds another shard's pilots unfinished stops there and
says so. Nothing here schedules anything beyond a local pool of processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.budget import Budget
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, folder_lock
from flopplan.planfile import PlanEntry, PlanFile
from flopplan.planner import plan
from flopplan.race.design import RaceDesign
from flopplan.runfile import CONFIG, SUMMARY, RunSummary, load_evaluations, load_summary

PILOTS = "pilots"
PROMOTIONS = "promotions.json"
LCB_LEVEL = 0.9
"""Promotion ranks arms by the lower end of a one-sided 90 % paired-bootstrap bound on their last evaluation."""
LCB_REPLICATES = 400


def pilot_folder(folder: str | Path, arm: str, seed: int) -> Path:
    return Path(folder) / PILOTS / arm / f"seed{seed}"


@dataclass(frozen=True)
class PilotTask:
    arm: str
    seed: int
    rung: int
    budget: int
    folder: Path


def pilot_done(folder: Path, budget: int) -> bool:
    """The pilot in ``folder`` finished a run to ``budget`` FLOPs, or has since been continued to a larger one (a
    pilot goes on only after its rung is done; killed while continuing, it is done with the rung before)."""
    if not (folder / SUMMARY).is_file():
        return False
    summary = load_summary(folder)
    reached = summary.budget_flops or 0
    return reached > budget or (bool(summary.stop_reason) and not summary.interrupted and reached >= budget)


def _summary_or_none(folder: Path) -> RunSummary | None:
    try:
        return load_summary(folder) if (folder / SUMMARY).is_file() else None
    except UserError:
        return None


def last_scores(folder: Path, targets: Sequence[str]) -> np.ndarray:
    """[targets, prompts] 0/1 scores of the pilot's last evaluation on each target."""
    records = load_evaluations(folder)
    rows = []
    for target in targets:
        mine = [r for r in records if r.target == target]
        if not mine:
            raise UserError(f"pilot {str(folder)!r} has no evaluation on {target!r}")
        rows.append(np.asarray(mine[-1].scores, dtype=float))
    return np.vstack(rows)


def lower_bound(scores: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """(mean, lower 90 % bound) of the mean score over seeds and prompts, ``scores`` [seeds, prompts]: a paired
    bootstrap drawing seeds and prompts with replacement (the prompts shared by every arm are drawn by the
    caller's generator in the same order for every arm)."""
    s, q = scores.shape
    seeds = rng.integers(0, s, size=(LCB_REPLICATES, s))
    prompts = rng.integers(0, q, size=(LCB_REPLICATES, q))
    means = np.array([scores[seeds[i]][:, prompts[i]].mean() for i in range(LCB_REPLICATES)])
    return float(scores.mean()), float(np.quantile(means, 1 - LCB_LEVEL))


def promote(design: RaceDesign, folder: Path, rung: int, arms: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """The arms that go on from ``rung``: the best ``keep[rung + 1]`` by the lower bound of their last
    evaluation, averaged over the fitted targets (ties by mean, then name)."""
    bounds = {}
    for arm in arms:
        scores = np.stack([last_scores(pilot_folder(folder, arm, s), design.fit_targets).mean(axis=0)
                           for s in design.seeds])
        bounds[arm] = lower_bound(scores, np.random.default_rng(rung))  # same draws for every arm: paired
    order = sorted(arms, key=lambda a: (-bounds[a][1], -bounds[a][0], a))
    keep = order[:design.keep[rung + 1]]
    rule = (f"lower {LCB_LEVEL:.0%} bound of the last evaluation ({', '.join(design.fit_targets)}), paired "
            "bootstrap over seeds and prompts")
    return keep, {"rung": rung, "rule": rule, "promoted": keep,
                  "bounds": {a: {"mean": m, "lower": lo} for a, (m, lo) in bounds.items()}}


def rung_arms(design: RaceDesign, folder: Path) -> list[list[str]]:
    """The arms of every rung whose predecessor is complete (the first rung: all arms)."""
    arms = [[a.name for a in design.arms]]
    decisions = []
    for rung in range(len(design.rung_flops) - 1):
        if not all(pilot_done(pilot_folder(folder, a, s), design.arm(a).pilot_budget(design, rung))
                   for a in arms[-1] for s in design.seeds):
            break
        keep, decision = promote(design, folder, rung, arms[-1])
        arms.append(keep)
        decisions.append(decision)
    atomic_write_json(folder / PROMOTIONS, decisions)
    return arms


def train_command(design: RaceDesign, folder: Path, task: PilotTask,
                  eval_points: tuple[int, ...] | None = None) -> list[str]:
    """The ``flopplan train`` command of a pilot: new (from the arm's plan entry at the top rung, so the plan file
    is the same for every rung) or resumed with this rung's budget."""
    base = [sys.executable, "-m", "flopplan", "train", "--out", str(task.folder), "--budget", str(task.budget),
            "--no-progress"]
    if (task.folder / CONFIG).is_file():
        return [*base, "--resume"]
    arm = design.arm(task.arm)
    plan_path = folder / "plans" / f"{task.arm}.json"
    if not plan_path.is_file():  # the arm's recipe (its evaluations included) priced at its top-rung budget
        top = arm.pilot_budget(design, len(design.rung_flops) - 1)
        PlanFile((PlanEntry.of(plan(arm.recipe, Budget(flops=float(top)))),), design.command).save(plan_path)
    points = ",".join(str(p) for p in (eval_points or design.eval_points))
    command = [*base, "--plan", str(plan_path), "--seed", str(task.seed), "--eval-targets", ",".join(design.targets),
               "--eval-at-flops", points, "--checkpoint-every", "1", "--keep-checkpoints", "2", "--lost-outside-budget",
               "--eval-at-end"]
    if design.reward_model_path and arm.recipe.reward.kind == "orm":
        command += ["--reward-model-path", str(folder / design.reward_model_path)]  # an absolute path stays
    return command


def _clear_unstarted(task: PilotTask) -> None:
    """A folder a kill left before the run wrote its configuration holds no work: it is removed, the pilot starts
    anew. (A run killed after that, before its first checkpoint, is resumed by the trainer itself, which starts
    it again and records the lost work.)"""
    if task.folder.exists() and not (task.folder / CONFIG).is_file():
        shutil.rmtree(task.folder)


def _set_parent_death_signal() -> None:  # pragma: no cover - runs in the child
    """Children die with the runner (Linux), so a killed race leaves no pilot holding its folder's lock."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_pilot(design: RaceDesign, folder: Path, task: PilotTask, threads: int,
              eval_points: tuple[int, ...] | None = None) -> PilotTask:
    task.folder.parent.mkdir(parents=True, exist_ok=True)
    _clear_unstarted(task)
    command = train_command(design, folder, task, eval_points)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    what = f"rung{task.rung}" if task.rung >= 0 else "validation"
    log_path = folder / "logs" / f"{task.arm}.seed{task.seed}.{what}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        done = subprocess.run(command, stdout=log, stderr=log, env=env, preexec_fn=_set_parent_death_signal,
                              check=False)
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise UserError(f"pilot {task.arm} seed {task.seed} failed (exit {done.returncode}): {tail[0]} "
                        f"(log: {log_path})")
    return task


def run_race(folder: str | Path, *, jobs: int = 1, shard: tuple[int, int] = (0, 1),
             cores: int | None = None, log: Callable[[str], None] = print,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run (or continue) every rung of the race in ``folder``; returns what ran and whether the race is complete."""
    folder = Path(folder)
    design = RaceDesign.load(folder)
    index, count = shard
    if not (count >= 1 and 0 <= index < count):
        raise UserError(f"--shard must be I/N with 0 <= I < N, not {index}/{count}")
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {jobs}")
    threads = max(1, (cores or os.cpu_count() or 1) // jobs)
    with folder_lock(folder / ".locks" / f"shard-{index}-of-{count}", "race shard"):  # one runner per shard
        return _run_rungs(design, folder, jobs, threads, shard, log, progress)


def _run_rungs(design: RaceDesign, folder: Path, jobs: int, threads: int, shard: tuple[int, int],
               log: Callable[[str], None], progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    index, count = shard
    ran = 0
    while True:
        arms = rung_arms(design, folder)
        rung = len(arms) - 1
        tasks = [PilotTask(a, s, rung, design.arm(a).pilot_budget(design, rung), pilot_folder(folder, a, s))
                 for a in arms[-1] for s in design.seeds]
        mine = [t for i, t in enumerate(tasks) if i % count == index and not pilot_done(t.folder, t.budget)]
        if mine:
            log(f"rung {rung + 1} of {len(design.rung_flops)}: {len(mine)} pilot{'s' if len(mine) > 1 else ''} "
                f"of {len(tasks)} to run ({design.rung_flops[rung]:.3g} training FLOPs each)")
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for done, _task in enumerate(pool.map(lambda t: run_pilot(design, folder, t, threads), mine),
                                             1):
                    ran += 1
                    if progress:
                        progress(done, len(mine))
        waiting = [t for t in tasks if not pilot_done(t.folder, t.budget)]
        if waiting:
            log(f"waiting for {len(waiting)} pilot{'s' if len(waiting) > 1 else ''} of rung {rung + 1} run by other "
                "shards: run this again when they finish")
            return {"complete": False, "ran": ran, "rung": rung}
        if rung == len(design.rung_flops) - 1:
            return {"complete": True, "ran": ran, "rung": rung}
