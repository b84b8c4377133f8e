"""RACE's runs: each pilot is an ordinary metered run folder (``flopplan train`` in a process of its own), rung
after rung, with successive halving between rungs.

State lives only in the pilot folders: a pilot is done at a rung when its summary records that rung's budget and
a finished run; otherwise it is started, or resumed (``--resume --budget``) from its newest checkpoint, so a race
killed anywhere and run again continues where it was, and a pilot continued to the next rung is the same run,
not a new one; where each rung's run of a pilot ended is recorded beside it once it has (``rung_ends.json``:
:func:`record_rung_end`), so the analysis reads a rung's evaluations as the rung's run made them. The promotion
after a rung is a deterministic function of the pilots' evaluations and the manifest: the analysis of the rung's
pilots (:mod:`flopplan.race.analysis`) predicts each arm's reward at the target budget F with its interval, and the
halving keeps the arms that may be best there, not the ones ahead now (:func:`promote`). Every shard and every
rerun computes the same decision; ``promotions.json`` records it with a digest of the evaluations it read, so a
rerun on the same evaluations reuses it instead of refitting.

Who runs a rung's pilots (an :data:`Executor`): a local pool of ``jobs`` processes (each with ``cores / jobs``
threads; :func:`local_pool`), or Ray tasks (:mod:`flopplan.race.ray_backend`); either way each pilot is the same
``flopplan train`` process (:func:`run_pilot`) and this driver promotes when the rung's last pilot lands.
``shard = (i, n)``: this process runs the pilots whose index in the rung is i mod n, for an executor that already
exists (a Slurm array, a CI matrix) writing into one shared folder; a shard that finds another shard's pilots
unfinished stops there and says so.

A pilot folder has one writer at a time (its run's lock): a pilot whose folder a live process still holds (a
pilot a killed driver left behind, until its parent-death signal or Ray's cleanup of the dead driver's tasks ends
it) is waited for, at most :data:`LOCK_WAIT` seconds, then refused with one line, before anything in the folder
is touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.budget import Budget
from flopplan.errors import UserError, is_int
from flopplan.fileio import atomic_write_json, folder_lock, lock_holder, read_json
from flopplan.planfile import PlanEntry, PlanFile
from flopplan.planner import plan
from flopplan.race import promotion
from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.axes import check_knobs, knob_options
from flopplan.race.checks import above, by_reward, observed_at_rung
from flopplan.race.design import RaceDesign, pilots_fit_the_cap
from flopplan.race.pilots import (
    allow_children,
    arm_done,
    children_stopped,
    interrupt_children,
    log_size,
    pilot_done,
    pilot_folder,
    pilot_input,
    run_child,
    summary_as_written,
    unfinished,
)
from flopplan.race.rung_ends import RungEnd, rung_end, write_end
from flopplan.race.seed_pooling import ONE_SEED_SD
from flopplan.race.user_pilot import record_command, recorded_command, run_script_pilot
from flopplan.runfile import CONFIG, SUMMARY, load_summary

PROMOTIONS = "promotions.json"
PROMOTIONS_VERSION = 1
LOCK_WAIT = 120.0
"""Seconds a pilot waits for its folder's lock to be released by a process a killed driver left running."""
PROMOTION_REPLICATES = 200
"""Bootstrap replicates of the analysis behind a promotion (its seed: 0, as ``race analyze``'s default)."""
PROMOTION_RULE = ("the arm with the best observed reward at the rung (fitted or not), then the others by that "
                  "reward carried to F along their last observed slope in ln F, to the halving's count; then every "
                  "arm whose upper bound at F (the model-averaged analysis of the rung's pilots, first fitted target) "
                  f"reaches the leader's lower bound and that is the best in at least {promotion.P_OPEN * 100:g} % "
                  "of the replicates or whose last slope carries it to that bound, by P(best), then those whose "
                  "pilots never rose above their start or fell below half of it, on that bound alone; at "
                  "most what the pilot budget affords (the design's room)")


@dataclass(frozen=True)
class PilotTask:
    arm: str
    seed: int
    rung: int
    budget: int
    folder: Path


Executor = Callable[[list[PilotTask]], Iterator[PilotTask]]
"""Runs a rung's pilots (:func:`run_pilot` each), yielding each as it finishes; a failed pilot raises (a UserError),
and so does one the user stopped alone (:class:`flopplan.errors.Interrupted`)."""


def _affordable(design: RaceDesign, history: Sequence[Sequence[str]], kept: Sequence[str]) -> int:
    """How many of ``kept`` (in order) the next rung can take, at least the halving's count: the pilot budgets of
    every rung so far, the next rung's growth for those arms and the worst case of the rungs after it (the
    design's counts) stay within phi x F. Budgets, not ledgers: the same on every rerun."""
    rung = len(history) - 1
    seeds = len(design.seeds)
    last = {a: r for r, names in enumerate(history) for a in names}
    committed = seeds * sum(design.arm(a).pilot_budget(design, r) for a, r in last.items())

    def growth(arm: str, r: int) -> int:
        a = design.arm(arm)
        return a.pilot_budget(design, r) - a.pilot_budget(design, r - 1)

    count = design.keep[rung + 1]
    for n in range(len(kept), count, -1):
        later = sum(sum(sorted((growth(a, r) for a in kept[:n]), reverse=True)[:design.room[r]])
                    for r in range(rung + 2, len(design.rung_flops)))
        if committed + seeds * (sum(growth(a, rung + 1) for a in kept[:n]) + later) <= design.pilot_cap:
            return n
    return count


def _digest(inp: RaceInput) -> str:
    """What a promotion depends on: the rule, the arms, every evaluation the analysis reads, and the seed sd a
    one-seed arm is assumed to have where the race sets its own (the default adds nothing, so the digests of races
    designed before ``--seed-sd`` stand)."""
    h = hashlib.sha256(f"{PROMOTION_RULE}|{PROMOTION_REPLICATES}|{sorted(inp.reached.items())}".encode())
    if inp.one_seed_sd != ONE_SEED_SD:
        h.update(f"one_seed_sd|{inp.one_seed_sd!r}|".encode())
    for target in inp.fitted_targets:
        for arm in inp.targets[target].arms:
            for run in arm.runs:
                for point in run.points:
                    h.update(f"{target}|{arm.name}|{run.seed}|{point.flops!r}|".encode())
                    h.update(np.ascontiguousarray(point.scores, dtype=float).tobytes())
    return h.hexdigest()


def promote(design: RaceDesign, folder: Path, history: Sequence[Sequence[str]],
            recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """The decision after the last rung of ``history`` (the arms of each rung so far): its arms analysed on their
    pilots, chosen by :func:`flopplan.race.promotion.keep`, as many kept as the pilot budget
    affords. ``recorded``: the decision an earlier call wrote, kept when it was made on the same evaluations, or
    when its arms have already gone on (a decision acted upon stands)."""
    rung, arms = len(history) - 1, list(history[-1])
    inp = pilot_input(design, folder, {a: rung for a in arms}, "")
    digest = _digest(inp)
    if recorded is not None and recorded.get("rung") == rung and isinstance(recorded.get("promoted"), list) and (
            recorded.get("input") == digest or _gone_on(design, folder, rung, arms)):
        return recorded
    target = design.fit_targets[0]
    result = analyze(inp, n_replicates=PROMOTION_REPLICATES, holdout=False).target(target)
    preds = result.budgets[-1].predictions if result.budgets else ()
    curves = {c.arm: c for c in result.curves}
    trends = {p.arm: promotion.trend(curves[p.arm].observations, p.ledger_flops) for p in preds}
    ranked = promotion.keep(preds, design.keep[rung + 1], trends)
    observed = {c.arm: observed_at_rung(c, rung, design.rung_flops[rung]) for c in result.curves
                if c.arm not in {p.arm for p in preds}}
    kept = with_unfitted(ranked, trends, observed, design.keep[rung + 1])
    promoted = kept[:_affordable(design, history, kept)]
    return {"rung": rung, "rule": PROMOTION_RULE, "target": target, "promoted": promoted,
            "held_back": [a for a in kept if a not in promoted], "input": digest,
            "predictions": {p.arm: {"reward": p.reward, "lo": p.lo, "hi": p.hi, "p_best": p.p_best,
                                    "comparable": p.comparable}
                            for p in preds},
            "trends": {a: {"observed": t.observed, "reach": t.reach} for a, t in trends.items() if t is not None},
            "unfitted": observed}


def with_unfitted(ranked: list[str], trends: dict[str, promotion.Trend | None], observed: dict[str, float | None],
                  n_keep: int) -> list[str]:
    """The arms that go on, ``ranked`` (:func:`flopplan.race.promotion.keep`'s, fitted arms only) with the arms
    that have no curve (``observed``: their reward observed at the rung): the best of those goes on first when it
    shows more than every fitted arm (an arm at a pass rate of 1 from step 0 has no curve to fit, and the best
    observed arm goes on whatever its curve); the others fill the halving's count when the fitted arms do not."""
    unfitted = by_reward({a: -1.0 if r is None else r for a, r in observed.items()})  # none seen: last
    shown = [t.observed for t in trends.values() if t is not None]
    lead = observed[unfitted[0]] if unfitted else None
    if lead is not None and above(lead, max(shown, default=-1.0)):  # more than a tie (checks.TIE)
        ranked = [unfitted.pop(0), *ranked]
    return ranked + unfitted[:max(0, n_keep - len(ranked))]


def _gone_on(design: RaceDesign, folder: Path, rung: int, arms: Sequence[str]) -> bool:
    """Some pilot of ``arms`` has been continued beyond ``rung``."""
    for arm in arms:
        budget = design.arm(arm).pilot_budget(design, rung)
        for seed in design.seeds:
            path = pilot_folder(folder, arm, seed)
            if (path / SUMMARY).is_file() and (load_summary(path).budget_flops or 0) > budget:
                return True
    return False


def recorded_promotions(folder: Path) -> list[Any]:
    """The promotion decisions of the race in ``folder``, rung by rung (``promotions.json``; files written before
    it carried ``race_promotions_version`` hold the bare list). A file that cannot be read holds none: each is
    decided again from the pilots' evaluations."""
    try:
        data = read_json(folder / PROMOTIONS, "promotions") if (folder / PROMOTIONS).is_file() else []
    except UserError:
        return []
    if isinstance(data, dict) and data.get("race_promotions_version") == PROMOTIONS_VERSION:
        data = data.get("decisions")
    readable = isinstance(data, list) and all(isinstance(d, dict) and is_int(d.get("rung")) for d in data)
    return data if readable else []  # a decision without a rung number (a list, text) is a damaged file too


def rung_arms(design: RaceDesign, folder: Path) -> list[list[str]]:
    """The arms of every rung whose predecessor is complete (the first rung: all arms)."""
    arms = [[a.name for a in design.arms]]
    recorded = recorded_promotions(folder)
    before = {d.get("rung"): d for d in recorded if isinstance(d, dict)}
    decisions = []
    for rung in range(len(design.rung_flops) - 1):
        if not all(arm_done(design, folder, a, rung) for a in arms[-1]):
            break
        decision = promote(design, folder, arms, before.get(rung))
        arms.append(list(decision["promoted"]))
        decisions.append(decision)
    # a decision of a later rung than the pilots now show finished stays recorded (a pilot deleted, damaged or
    # interrupted since is run again, and the decision acted upon stands); an unchanged record is not rewritten
    decisions += [before[r] for r in sorted(r for r in before if isinstance(r, int) and r >= len(decisions))]
    if decisions != recorded:  # a race with no rung finished leaves no record behind
        atomic_write_json(folder / PROMOTIONS, {"race_promotions_version": PROMOTIONS_VERSION,
                                                "decisions": decisions})
    return arms


def train_command(design: RaceDesign, folder: Path, task: PilotTask) -> list[str]:
    """The ``flopplan train`` command of a pilot: new (from the arm's plan entry at the top rung, so the plan file
    is the same for every rung) or resumed with this rung's budget and training cap (``--train-flops``: the rung's
    training FLOPs; its budget also holds every evaluation that can fall within the rung, and a step that passes
    several evaluation points runs one, so the budget alone let the evaluations that did not run buy more training,
    more for an arm of larger steps). The validating run (rung -1) has no cap: its budget ends it."""
    cap = ["--train-flops", str(design.rung_flops[task.rung])] if task.rung >= 0 else []
    base = [sys.executable, "-m", "flopplan", "train", "--out", str(task.folder.absolute()), "--budget",
            str(task.budget), *cap, "--no-progress"]
    if (task.folder / CONFIG).is_file():
        return [*base, "--resume"]
    arm = design.arm(task.arm)
    plan_path = folder / "plans" / f"{task.arm}.json"
    if not plan_path.is_file():  # the arm's recipe (its evaluations included) priced at its top-rung budget
        top = arm.pilot_budget(design, len(design.rung_flops) - 1)
        PlanFile((PlanEntry.of(plan(arm.recipe, Budget(flops=float(top)))),), design.command).save(plan_path)
    points = ",".join(str(p) for p in design.eval_points)
    command = [*base, "--plan", str(plan_path.absolute()), "--seed", str(task.seed), "--eval-targets",
               ",".join(design.targets), "--eval-at-flops", points, "--checkpoint-every", "1", "--keep-checkpoints",
               "2", "--lost-outside-budget", "--eval-at-end"]
    if design.reward_model_path and arm.recipe.reward.kind == "orm":
        command += ["--reward-model-path", str((folder / design.reward_model_path).absolute())]  # (one stays)
    return command + knob_options(arm.knobs)


def _clear_unstarted(task: PilotTask) -> None:
    """A folder a kill left before the run wrote its configuration holds no work: it is removed, the pilot starts
    anew. (A run killed after that, before its first checkpoint, is resumed by the trainer itself, which starts
    it again and records the lost work.)"""
    if task.folder.exists() and not (task.folder / CONFIG).is_file():
        shutil.rmtree(task.folder)


def wait_unlocked(path: Path, seconds: float = LOCK_WAIT) -> None:
    """Return once no live process holds ``path``'s folder lock, or refuse with one line after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (holder := lock_holder(path)) is not None:
        if time.monotonic() >= deadline:
            raise UserError(f"pilot folder {str(path)!r} is still in use by {holder} after {seconds:.0f} s: a "
                            "pilot runs once at a time; rerun when it has ended")
        time.sleep(0.5)


def run_pilot(design: RaceDesign, folder: Path, task: PilotTask, threads: int) -> PilotTask:
    """Run ``task``'s pilot to its budget (started, or resumed from its checkpoint) and return it. A pilot that
    fails raises a one-line UserError; one the user stopped alone (a SIGINT or SIGTERM sent to its process, not to
    this runner: :func:`flopplan.race.pilots.interruption`) raises :class:`flopplan.errors.Interrupted`, which
    names the command that resumes it."""
    task.folder.parent.mkdir(parents=True, exist_ok=True)
    wait_unlocked(task.folder)
    if task.rung < 0 or not pilot_done(task.folder, task.budget):  # (the process waited for may have finished it)
        _run_pilot(design, folder, task, threads)
    record_rung_end(task.folder, task.rung, task.budget)  # where the rung ended, for the analysis
    return task


def _run_pilot(design: RaceDesign, folder: Path, task: PilotTask, threads: int) -> None:
    _clear_unstarted(task)
    what = f"rung{task.rung + 1}" if task.rung >= 0 else "validation"  # rungs counted from 1, as the runner says
    log_path = folder / "logs" / f"{task.arm}.seed{task.seed}.{what}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if recorded_command(folder) is not None:  # the user's script (flopplan.race.user_pilot)
        run_script_pilot(design, folder, task, threads, log_path)
        return
    command = train_command(design, folder, task)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    since, before = log_size(log_path), summary_as_written(task.folder)
    with open(log_path, "ab") as log:
        returncode = run_child(command, stdout=log, stderr=log, env=env)
    if not pilot_done(task.folder, task.budget):  # (a pilot killed in its teardown is done)
        stage = f"rung {task.rung + 1}" if task.rung >= 0 else "validation"
        raise unfinished(f"pilot {task.arm} seed {task.seed} ({stage})", returncode, task.folder, before, folder,
                         task.rung, log_path, since)


def record_rung_end(path: Path, rung: int, budget: int) -> None:
    """Record where the pilot in ``path`` ended ``rung`` (its budget ``budget``) in its ``rung_ends.json``
    (:mod:`flopplan.race.rung_ends`), from its run summary, once the rung's run has finished (for its budget or
    its cap: :func:`pilot_done`) and while the summary is still that rung's (a pilot continued since shows its
    next rung's, and its record of this rung was written before it went on); a rung already recorded is left as
    it is. Not for the validating run (``rung`` -1)."""
    if rung < 0 or rung_end(path, rung, budget) is not None or not pilot_done(path, budget):
        return
    summary = load_summary(path)
    if summary.budget_flops == budget:
        write_end(path, RungEnd.of(summary, rung))


def record_finished_rungs(design: RaceDesign, folder: Path) -> None:
    """:func:`record_rung_end` for every pilot of the race in ``folder`` whose summary shows a rung's run finished:
    a driver killed after a pilot ended and before it recorded the end (or a pilot another shard or a lost Ray
    task finished) is recorded on the next ``race run``, before any promotion reads the rung or the pilot goes on."""
    for name, seed in design.pilots():
        path = pilot_folder(folder, name, seed)
        if not (path / SUMMARY).is_file():
            continue
        reached = load_summary(path).budget_flops
        arm = design.arm(name)
        for rung in range(len(design.rung_flops)):
            if arm.pilot_budget(design, rung) == reached:
                record_rung_end(path, rung, reached)


def local_pool(design: RaceDesign, folder: Path, jobs: int, threads: int) -> Executor:
    """``jobs`` pilots at a time in processes of this machine, ``threads`` threads each."""
    def attempt(task: PilotTask) -> PilotTask:
        if children_stopped():  # taken after a failure or a Ctrl-C: no folder or log made for a pilot never run
            raise _Stopped(f"pilot {task.arm} seed {task.seed} was not started")
        try:
            return run_pilot(design, folder, task, threads)
        except BaseException as exc:  # from the pilot's own thread, before it can take another task: none starts
            if children_stopped():  # stopped (or kept from starting) for another pilot's failure or a Ctrl-C
                raise _Stopped(str(exc)) from None
            interrupt_children()
            raise

    def execute(tasks: list[PilotTask]) -> Iterator[PilotTask]:
        allow_children()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            running = [pool.submit(attempt, t) for t in tasks]
            try:
                for done in as_completed(running):  # the first failure as it happens, whichever pilot it is
                    yield done.result()
            except BaseException as exc:  # Ctrl-C, or a pilot failed: the others stop after their current phase
                interrupt_children()  # (resumed by the next race run) and no other starts; the pool is shut down
                pool.shutdown(wait=True, cancel_futures=True)
                failed = [f.exception() for f in running if not f.cancelled() and f.exception() is not None]
                cause = next((e for e in failed if not isinstance(e, _Stopped)), None)
                if isinstance(exc, _Stopped) and cause is not None:  # the failure that stopped it, not its stop
                    raise cause from None
                raise

    return execute


class _Stopped(UserError):
    """A pilot the local pool stopped, or kept from starting, because another failed (or Ctrl-C was pressed)."""


def run_race(folder: str | Path, *, jobs: int = 1, shard: tuple[int, int] = (0, 1),
             cores: int | None = None, log: Callable[[str], None] = print,
             progress: Callable[[int, int], None] | None = None,
             executor: Callable[[RaceDesign, Path], Executor] | None = None,
             pilot: str | None = None) -> dict[str, Any]:
    """Run (or continue) every rung of the race in ``folder``; returns what ran and whether the race is complete.
    ``executor(design, folder)``: who runs the pilots (default: :func:`local_pool` of ``jobs``); ``pilot``: the
    user's command each pilot runs (recorded with the race; :mod:`flopplan.race.user_pilot`)."""
    folder = Path(folder)
    design = RaceDesign.load(folder)
    pilots_fit_the_cap(design, f"RACE manifest in {str(folder)!r}")
    index, count = shard
    if not (count >= 1 and 0 <= index < count):
        raise UserError(f"--shard must be I/N with 0 <= I < N, not {index}/{count}")
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {jobs}")
    record_command(folder, pilot)
    trl_only = next((a for a in design.arms if a.grpo), None)
    if trl_only is not None and recorded_command(folder) is None:
        name, value = next(iter(trl_only.grpo.items()))
        raise UserError(f"arm {trl_only.name} sets GRPOConfig {name}={value}, which flopplan's trainer does not "
                        "have: such an axis needs pilots that run TRL (race run --pilot COMMAND)")
    if recorded_command(folder) is None:
        _check_builtin_knobs(design)
        if design.eval_loop == "trl":
            raise UserError("the race was designed for TRL's evaluation loop (race design --eval-loop trl): its "
                            "pilots are your script's (race run --pilot COMMAND)")
    elif design.eval_loop != "trl":
        log("note: the design priced each evaluation as flopplan's greedy pass; TRL's evaluation loop samples, "
            "scores and runs the loss forward, so the pilots may stop short of their rungs (design with --eval-loop "
            "trl to price it)")
    threads = max(1, (cores or os.cpu_count() or 1) // jobs)
    with folder_lock(folder / ".locks" / f"shard-{index}-of-{count}", "race shard"):  # one runner per shard
        execute = executor(design, folder) if executor else local_pool(design, folder, jobs, threads)
        return _run_rungs(design, folder, execute, shard, log, progress)


def _check_builtin_knobs(design: RaceDesign) -> None:
    """Every arm's knobs as flopplan's trainer takes them, before any pilot starts (:func:`check_knobs`)."""
    for arm in design.arms:
        if arm.knobs:
            try:
                check_knobs(arm.recipe, arm.knobs, builtin=True)
            except UserError as exc:
                raise UserError(f"arm {arm.name} on flopplan's trainer: {exc}") from None


def _run_rungs(design: RaceDesign, folder: Path, execute: Executor, shard: tuple[int, int],
               log: Callable[[str], None], progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    index, count = shard
    ran = 0
    while True:
        record_finished_rungs(design, folder)  # (the ends a killed driver did not record) before any promotion
        arms = rung_arms(design, folder)
        rung = len(arms) - 1
        tasks = [PilotTask(a, s, rung, design.arm(a).pilot_budget(design, rung), pilot_folder(folder, a, s))
                 for a in arms[-1] for s in design.seeds]
        mine = [t for i, t in enumerate(tasks) if i % count == index and not pilot_done(t.folder, t.budget)]
        if mine:
            log(f"rung {rung + 1} of {len(design.rung_flops)}: {len(mine)} pilot{'s' if len(mine) > 1 else ''} "
                f"of {len(tasks)} to run ({design.rung_flops[rung]:.3g} training FLOPs each)")
            finished = execute(mine)
            try:
                for done, _task in enumerate(finished, 1):
                    ran += 1
                    if progress:
                        progress(done, len(mine))
            finally:  # a Ctrl-C (or a failing progress) here, between pilots: the executor stops the others now,
                close = getattr(finished, "close", None)  # not when its generator happens to be collected
                if close is not None:
                    close()
            record_finished_rungs(design, folder)  # (a Ray task's pilot: recorded by its worker, and here)
        waiting = [t for t in tasks if not pilot_done(t.folder, t.budget)]
        if waiting:
            log(f"waiting for {len(waiting)} pilot{'s' if len(waiting) > 1 else ''} of rung {rung + 1} run by other "
                "shards: run this again when they finish")
            return {"complete": False, "ran": ran, "rung": rung}
        if rung == len(design.rung_flops) - 1:
            return {"complete": True, "ran": ran, "rung": rung}
