"""A seed's fall lowers every arm's lower end beyond its pilots.

Why. The arms of one grid share the policy, the prompts, the reward and the evaluation; they differ in how the
compute is spent (group size, prompts per step, update passes, model size, reward system), and their seeds in
draws. A fall below half the start often comes from the shared set-up: answers that outgrow the generation limit
and are cut until an overlong penalty teaches the policy to finish (Yu et al. 2025, "DAPO"), a format that the
training reward penalises before the required one is found (Liu et al. 2025, "Understanding R1-Zero-Like
Training"), entropy collapse (Cui et al. 2025), a run that a training-inference mismatch blows up at a random
number of samples (Liu et al. 2025, "When speed kills stability"). Such mechanisms run on optimizer updates or
samples, which the arms buy at different rates per FLOP, and strike seeds at different times, so an arm, or a
seed, whose pilots did not fall may not yet have reached the point where another fell, and nothing in its own
pilots can show that. Round 40's blind ``lenblow`` family is the case (benchmarks/race_blind_check_round40.py;
docs/results.md): the large-group arms reach the cut eight times later in FLOPs, after their pilots; their curves
read a rise, and 24 of the 50 usable intervals at F (all but one of the misses) lay above the truth.

What. When some seed fell (:func:`flopplan.race.checks.seed_fall`: its last evaluation below half a step-0 reward of
at least 0.05; :func:`flopplan.race.checks.fell` asks it of every seed of an arm), the lower end of every arm's
interval (its reward's and its gain's) at a budget beyond its pilots (extrapolation above
:data:`flopplan.race.checks.SUPPORT_TOL`) goes down to where the fallen seeds ended (:func:`grid_fall`: the lowest,
over the arms, of the mean of an arm's fallen seeds' last evaluations), where it lay above that; arms whose pilots
bound nothing (:func:`flopplan.race.checks.unbounded`: every seed fell, or none rose) keep their own intervals, which
run to 1. The point, the upper end, the replicates and so the P(best) are the curves' own: the interval says that a
fall like the fallen seed's is not ruled out; the P(best) does not weigh one. A lower end read by the decision (the
promotion's leader, the naive pick's comparison, the tied arms) is the lowered one, so fewer arms are set aside and
fewer picks are called apart.

What it costs. Where the fall was one arm's own (a learning rate or an update count the others do not share), the
others' lower ends are lower than their truths need: the intervals over-cover there, and "cannot tell" is said
more often. benchmarks/shapes_round41.py measures both cases (docs/results.md, round 41).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from flopplan.race.checks import SUPPORT_TOL, UNBOUNDED, seed_fall
from flopplan.race.pilot_data import ArmPilots
from flopplan.race.results import BudgetResult


@dataclass(frozen=True)
class GridFall:
    """The arms with a seed whose pilots fell, how many seeds fell in all, and where they ended (:func:`grid_fall`)."""

    arms: tuple[str, ...]
    seeds: int
    floor: float


def fallen_seeds(arm: ArmPilots) -> list[float]:
    """Where ``arm``'s seeds that fell ended (:func:`flopplan.race.checks.seed_fall`)."""
    return [end for run in arm.runs if (end := seed_fall(run)) is not None]


def grid_fall(arms: Sequence[ArmPilots]) -> GridFall | None:
    """The seeds of ``arms`` (every arm of the target with pilots, its curve fitted or not: a fall is seen in the
    pilots) that fell (:func:`fallen_seeds`), their arms, and the floor: over those arms, the lowest mean of an arm's
    fallen seeds' end rewards (an arm's reward is a mean over its seeds, and where a fall reaches every seed the mean
    sits where the fallen seeds' does; the lowest single seed, a few 0/1 prompts near 0, lies below what a mean
    reaches); None when none fell."""
    fallen = {a.name: ends for a in arms if (ends := fallen_seeds(a))}
    if not fallen:
        return None
    return GridFall(tuple(fallen), sum(map(len, fallen.values())), min(float(np.mean(e)) for e in fallen.values()))


def lowered(result: BudgetResult, fall: GridFall | None) -> BudgetResult:
    """``result`` with the lower ends of the module docstring: each arm its pilots bound (its note not among
    :data:`flopplan.race.checks.UNBOUNDED`) and read beyond them gets a lower end no higher than ``fall.floor`` (its
    gain's: that less its R0)."""
    if fall is None:
        return result
    preds = tuple(replace(p, lo=min(p.lo, fall.floor), gain_lo=min(p.gain_lo, fall.floor - (p.reward - p.gain)))
                  if p.note not in UNBOUNDED and p.extrapolation > SUPPORT_TOL else p for p in result.predictions)
    return replace(result, predictions=preds)


def warning(fall: GridFall | None) -> list[str]:
    """What the analysis says when some seed's pilots fell (empty otherwise)."""
    if fall is None:
        return []
    who = ", ".join(fall.arms)
    seeds = "a seed" if fall.seeds == 1 else f"{fall.seeds} seeds"
    return [f"{who}: {seeds} fell below half {'its' if fall.seeds == 1 else 'their'} start; a fall that comes from the "
            "shared set-up (answers cut at the length limit, a penalised format, a run that blows up) reaches each "
            "seed after its own number of updates or samples, possibly after its pilots, so every arm's interval "
            f"beyond its pilots runs down to {fall.floor:.3f}, where the fallen seeds ended (its point, "
            "upper end and P(best) are its curves')"]
