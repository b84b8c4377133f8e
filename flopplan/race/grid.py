"""What a RACE design is asked for (:class:`Grid`: the axes' values, seeds, targets, the ladder's shape and how the
pilots evaluate) and the room ladder, checked before anything is priced (:mod:`flopplan.race.design` prices it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from flopplan.errors import UserError, check_int, is_number
from flopplan.race.axes import CLASSIC, Axis
from flopplan.race.pilot_data import MIN_PROMPTS
from flopplan.race.seed_pooling import ONE_SEED_SD, is_seed_sd
from flopplan.recipe import refuse_group_of_one

EVAL_LOOPS = ("flopplan", "trl")
"""How a race's pilots evaluate, and so what a design prices each evaluation at: flopplan's greedy pass over each
target (built-in pilots), or TRL's evaluation loop on a script's one ``eval_dataset`` (``race run --pilot``:
``num_generations_eval`` sampled completions per prompt, scored, and the loss forward;
:mod:`flopplan.engines.trl_evaluation`)."""
MAX_SEEDS, MAX_RUNGS, MAX_EVALS = 1000, 60, 10_000
MAX_SEED = 2**32 - 1
"""The largest seed a pilot takes: numpy's legacy seeding (and so the libraries a pilot seeds) stops at 2^32 - 1."""
MAX_ETA = 1_000_000
"""The largest halving factor: any eta above the number of arms keeps one arm per rung; the cap keeps a typo's
exponent out of the ladder's arithmetic."""
"""The most seeds per pilot, rungs and evaluation points a design takes: a pilot grid, not a sweep (60 rungs at
eta 2 already span 2^60 in budget, past the planner's 1e30 FLOPs)."""


@dataclass(frozen=True)
class Grid:
    """What a design is asked for: the axes' values (the classic four, and ``axes`` beyond them), the seeds and
    targets, the ladder's shape."""

    policies: tuple[str, ...]
    group_sizes: tuple[int, ...]
    iterations: tuple[int, ...]
    rewards: tuple[str, ...]
    seeds: int = 3
    targets: tuple[str, ...] = ("heldout",)
    fit_targets: tuple[str, ...] = ()
    rungs: int = 3
    eta: int = 2
    room: float = 2.0  # a rung's budget pays for up to room x its halving's count, rounded down (the first: every arm)
    evals: int = 8
    eval_prompts: int = 100
    upfront: dict[str, int] = field(default_factory=dict)  # reward system -> its upfront training FLOPs
    first_seed: int = 0  # the seeds are first_seed, first_seed + 1, ... (independent repetitions of a race)
    axes: tuple[Axis, ...] = ()
    one_seed_sd: float = ONE_SEED_SD  # --seed-sd: assumed for an arm of one seed (flopplan.race.seed_pooling)
    round_micro_batch: bool = True
    """Unless the base recipe sets a micro-batch: one scoring/update forward per round (every arm's rollouts at
    once), or the largest that divides a generation and an optimizer batch set below that. Small policies on CPU
    spend most of an update in per-micro-batch overheads otherwise (tiny-s, 8 x 4 rollouts: 10.4 s of update for
    20 steps in micro-batches of G, 1.1 s in one)."""
    eval_loop: str = "flopplan"  # EVAL_LOOPS (--eval-loop)
    eval_generations: int = 0  # trl: completions per evaluation prompt, num_generations_eval (--eval-generations)

    def check(self) -> None:
        for name in ("policies", "group_sizes", "iterations", "rewards", "targets"):
            if not getattr(self, name):
                raise UserError(f"the grid is empty: give at least one value for {name.replace('_', ' ')}")
        for name, most in (("seeds", MAX_SEEDS), ("rungs", MAX_RUNGS), ("evals", MAX_EVALS)):
            check_int(f"--{name}", getattr(self, name), 1, most)  # beyond these, tuples of them filled the memory
        check_int("--eval-prompts", self.eval_prompts, MIN_PROMPTS)  # the analysis resamples them
        check_int("--eta", self.eta, 2, MAX_ETA)
        for g in self.group_sizes:
            refuse_group_of_one(g, "race")
        if not (is_number(self.room) and 1 <= self.room <= 1e6):
            raise UserError(f"--room must be a number from 1 (the halving's count only) to 1e6, not {self.room!r}")
        check_int("first seed", self.first_seed, 0, MAX_SEED - self.seeds + 1)
        if not is_seed_sd(self.one_seed_sd):
            raise UserError(f"--seed-sd must be a relative sd above 0 and at most 1 (0.05: 5 % of the gain), not "
                            f"{self.one_seed_sd!r}")
        if self.eval_loop not in EVAL_LOOPS:
            raise UserError(f"--eval-loop must be one of {', '.join(EVAL_LOOPS)}, not {self.eval_loop!r}")
        if self.eval_loop == "trl":
            check_int("--eval-generations", self.eval_generations, 1)
            if len(self.targets) != 1:
                raise UserError("--eval-loop trl: a script pilot evaluates one target (its eval_dataset): give one "
                                f"--eval-targets, not {','.join(self.targets)}")
        elif self.eval_generations:
            raise UserError("--eval-generations is for TRL's evaluation loop (num_generations_eval): give "
                            "--eval-loop trl")
        unknown = [t for t in self.fit_targets if t not in self.targets]
        if unknown:
            raise UserError(f"fit target {unknown[0]!r} is not an evaluation target ({', '.join(self.targets)}): "
                            "give --fit-targets among --eval-targets")
        names = [*CLASSIC, *(a.name for a in self.axes)]
        twice = [n for n in names if names.count(n) > 1]
        if twice:
            raise UserError(f"the axis {twice[0]} is given twice")
        empty = [a.name for a in self.axes if not a.values]
        if empty:
            raise UserError(f"the grid is empty: give at least one value for {empty[0]}")


def room_ladder(keep: list[int] | tuple[int, ...], room: float) -> tuple[int, ...]:
    """The most arms each rung may take: every arm at the first, then min(the rung before's, floor(room x keep_r)),
    never fewer than keep_r."""
    out = [keep[0]]
    for count in keep[1:]:
        out.append(min(out[-1], max(count, math.floor(room * count + 1e-9))))
    return tuple(out)
