"""``flopplan race demo``: the whole protocol on the built-in task, on this machine: train the feedback arm's reward
model, design the grid, run the pilots, analyse them, validate the recommendation.

Every stage leaves its result in the demo folder and is skipped when that result is there (the reward model's
card, the manifest) or continues what is there (the pilots, the validating run), so a killed demo run again
loses nothing and repeats nothing; the analysis is recomputed from the pilots each time (it is deterministic).

The grids are chosen for 2 CPU cores (:data:`DEMO`: about 20 minutes, estimated from its FLOPs and the 11.4
minutes its 6e12 predecessor took; :data:`QUICK`: the tests' one, 2.2 minutes on an idle 2-core VM). In the demo's
grid every axis the issue names is real (policy sizes of the tiny family spanning ~10x in parameters, the rule
reward against a learned reward model, a held-out second target), and the budget is large enough that the pilots
learn: tiny, 16 prompts x G=16, goes from 0 to 0.48 held-out accuracy in 80 steps (5.8e11 FLOPs, 31 s here); with
G=8 it reached 0.14, with 8 prompts x G=8 0.06 after 120 steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flopplan.errors import UserError, check_int
from flopplan.fileio import writable_folder
from flopplan.race.pilots import failure, log_size
from flopplan.recipe import Recipe
from flopplan.runfile import load_reward_model_card

REWARD_MODEL = "reward-model"


@dataclass(frozen=True)
class DemoGrid:
    """A demo's grid, budget and ladder (the design's inputs) and its reward model's training."""

    budget: int
    pilot_fraction: float
    policies: tuple[str, ...]
    group_sizes: tuple[int, ...]
    rewards: tuple[str, ...]
    seeds: int
    rungs: int
    evals: int
    eval_prompts: int
    reward_model_args: tuple[str, ...] = field(default=())
    room: float = 2.0  # the design's room (``race design --room``)


DEMO = DemoGrid(budget=10_000_000_000_000, pilot_fraction=0.21, policies=("tiny-s", "tiny", "tiny-l"),
                group_sizes=(16,), rewards=("rule", "orm:tiny-rm"), seeds=2, rungs=2, evals=5, eval_prompts=100,
                room=1.5)
"""Six arms x two seeds, the halving's 3 and room for a fourth at the second rung (``--room 1.5``): the pilot
budget (0.21 F) pays for 12 first-rung pilots and up to 4 x 2 second-rung growths of one first-rung budget each;
the validating run continues one two-rung pilot (2 of those 20 units). The pilots not continued cost at most
0.21 x 18/20 = 0.19 F, plus the reward model's training (0.05 F) when a rule arm wins: 0.24 F at worst, within
the 25 % the protocol aims for. (Room for all six, ``--room 2``, fits at phi = 0.21 too, with a smaller first rung:
F is then 50x the largest pilot.) The first rung buys tiny-l 3 steps (MIN_STEPS), evaluated after each
(:mod:`flopplan.race.eval_points`); the price is the horizon, F = 43x the largest pilot (17x at the earlier 6e12 and
phi = 0.5, where the pilots not continued cost 44 % of F)."""
QUICK = DemoGrid(budget=125_000_000_000, pilot_fraction=0.5, policies=("tiny-s",), group_sizes=(4,),
                 rewards=("rule", "orm:tiny-rm"), seeds=2, rungs=2, evals=2, eval_prompts=30,
                 reward_model_args=("--samples", "400", "--held-out", "200", "--validation", "100", "--steps", "40",
                                    "--batch", "32", "--target-agreement", "none"))
"""The tests' race: the protocol end to end (both reward systems, two rungs, the validating run), not learning:
G = 4 and the least budget whose first rung buys the reward-model arm the 3 steps a rung needs (as planned; it runs
more, its completions being shorter than the plan's bound)."""
REGRET = DemoGrid(budget=1_200_000_000_000, pilot_fraction=0.5, policies=("tiny-s",), group_sizes=(8, 16),
                  rewards=("rule", "orm:tiny-rm"), seeds=2, rungs=2, evals=3, eval_prompts=100,
                  reward_model_args=("--samples", "600", "--held-out", "300", "--validation", "150", "--steps", "80",
                                     "--batch", "32", "--target-agreement", "none"))
"""benchmarks/race_regret.py's default: search (G) and feedback on the smallest policy at a fifth of the demo's
budget, so that every arm can also be run to F (the exhaustive answer) in minutes; the demo grid's exhaustive
answer costs 12 runs of 6e12 FLOPs (hours on 2 cores)."""


def train_reward_model(folder: Path, grid: DemoGrid, echo: Callable[[str], None]) -> Path:
    """The feedback arm's reward model (``flopplan reward-model train``), unless the folder has it already."""
    path = folder / REWARD_MODEL
    if (path / "reward_model.json").is_file():
        return path
    if path.exists():  # a killed training leaves no card: start it again
        import shutil

        shutil.rmtree(path)
    command = [sys.executable, "-m", "flopplan", "reward-model", "train", "--out", str(path), *grid.reward_model_args]
    log = folder / "logs" / "reward-model.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    since = log_size(log)
    with open(log, "ab") as out:
        done = subprocess.run(command, stdout=out, stderr=out, env=dict(os.environ), check=False)
    if done.returncode != 0:
        how, last = failure(done.returncode, log, since)
        raise UserError(f"the reward model's training failed ({how}): {last} (log: {log})")
    card = load_reward_model_card(path)
    echo(f"reward model: {card.params:,} parameters, held-out agreement with the rule "
         f"{card.agreement['accuracy']:.3f}, {card.upfront_flops:.3g} FLOPs to train and check (charged upfront)")
    return path


def design(folder: Path, grid: DemoGrid, base: Recipe, reward_model: Path | None, command: str,
           first_seed: int = 0) -> Any:
    """The demo grid's manifest in ``folder`` (written unless it is there)."""
    from flopplan.race.design import MANIFEST, Grid, RaceDesign, design_race, orm_rewards
    from flopplan.train.targets import evaluation_flops

    if (folder / MANIFEST).is_file():
        return RaceDesign.load(folder)
    upfront = {}
    if reward_model is not None:
        upfront = dict.fromkeys(orm_rewards(grid.rewards), load_reward_model_card(reward_model).upfront_flops)
    spec = Grid(grid.policies, grid.group_sizes, (1,), grid.rewards, seeds=grid.seeds, targets=("heldout", "long"),
                fit_targets=("heldout",), rungs=grid.rungs, eta=2, evals=grid.evals, eval_prompts=grid.eval_prompts,
                upfront=upfront, first_seed=first_seed, room=grid.room)
    result = design_race(base, spec, grid.budget, grid.pilot_fraction,
                         evaluation_flops=lambda r, t: sum(evaluation_flops(r, t).values()), command=command,
                         reward_model_path=None if reward_model is None else os.path.relpath(reward_model, folder))
    result.save(folder)
    return result


def run_demo(out: str | Path, *, quick: bool = False, jobs: int = 2, base: Recipe, command: str = "",
             echo: Callable[[str], None] = print) -> dict[str, Any]:
    """design -> run -> analyze -> validate in ``out`` (continued where a previous call stopped); returns the
    analysis, the validation and each stage's wall seconds."""
    from flopplan.race.analysis import analyze
    from flopplan.race.collect import race_input
    from flopplan.race.report import write_outputs
    from flopplan.race.runner import run_race
    from flopplan.race.validate import run_validation

    check_int("--jobs", jobs)  # every option and the folder checked before the reward model's minutes of training
    folder = writable_folder(out, "race folder")
    grid = QUICK if quick else DEMO
    seconds: dict[str, float] = {}
    start = time.monotonic()
    from flopplan.race.design import orm_rewards

    uses_rm = bool(orm_rewards(grid.rewards))
    reward_model = train_reward_model(folder, grid, echo) if uses_rm else None
    seconds["reward model"] = time.monotonic() - start
    race = design(folder, grid, base, reward_model, command)
    echo(f"design: {len(race.arms)} arms x {len(race.seeds)} seeds, F = {race.budget_flops:.3g} FLOPs, pilots at "
         f"most {race.pilot_fraction:g} F (worst case {race.worst_case_flops:.3g})")
    mark = time.monotonic()
    run_race(folder, jobs=jobs, log=echo)
    seconds["pilots"] = time.monotonic() - mark
    mark = time.monotonic()
    analysis = analyze(race_input(race, folder, f"flopplan race analyze {out}"))
    write_outputs(analysis, folder, plots=not quick)
    seconds["analysis"] = time.monotonic() - mark
    mark = time.monotonic()
    validation = run_validation(folder, analysis, cores=os.cpu_count() or 1)
    seconds["validation"] = time.monotonic() - mark
    seconds["total"] = time.monotonic() - start
    return {"analysis": analysis, "validation": validation, "seconds": seconds}
