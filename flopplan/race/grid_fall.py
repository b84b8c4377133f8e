"""A fall in one arm of the grid lowers the others' lower ends beyond their pilots.

Why. The arms of one grid share the policy, the prompts, the reward and the evaluation; they differ in how the
compute is spent (group size, prompts per step, update passes, model size, reward system). A fall below half the
start (:func:`flopplan.race.checks.fell`) often comes from the shared set-up: answers that outgrow the generation
limit and are cut until an overlong penalty teaches the policy to finish (Yu et al. 2025, "DAPO"), a format that
the training reward penalises before the required one is found (Liu et al. 2025, "Understanding R1-Zero-Like
Training"), entropy collapse (Cui et al. 2025). Such mechanisms run on optimizer updates or samples, which the arms
buy at different rates per FLOP, so an arm whose pilots did not fall may not yet have reached the point where
another arm fell, and nothing in its own pilots can show that. Round 40's blind ``lenblow`` family is the case
(benchmarks/race_blind_check_round40.py; docs/results.md): the large-group arms reach the cut eight times later
in FLOPs, after their pilots; their curves read a rise, and 24 of the 50 usable intervals at F (all but one of
the misses) lay above the truth.

What. When some arm's pilots fell, the lower end of every other arm's interval (its reward's and its gain's) at a
budget beyond its pilots (extrapolation above :data:`flopplan.race.checks.SUPPORT_TOL`) goes down to the lowest
reward a fallen arm's pilots ended at (the mean over its seeds of each one's last evaluation), where it lay above
that. The point, the upper end, the replicates and so the P(best) are the curves' own: the interval says that a
fall like the fallen arm's is not ruled out; the P(best) does not weigh one. A lower end read by the decision (the
promotion's leader, the naive pick's comparison, the tied arms) is the lowered one, so fewer arms are set aside and
fewer picks are called apart.

What it costs. Where the fall was the fallen arm's own (a learning rate or an update count the others do not
share), the others' lower ends are lower than their truths need: the intervals over-cover there, and "cannot tell"
is said more often. benchmarks/shapes_round41.py measures both cases (docs/results.md, round 41).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from flopplan.race.checks import SUPPORT_TOL, fell, seed_points
from flopplan.race.pilot_data import ArmPilots
from flopplan.race.results import BudgetResult


@dataclass(frozen=True)
class GridFall:
    """The arms whose pilots fell and the lowest reward one of them ended at (the mean over its seeds of each
    seed's last evaluation)."""

    arms: tuple[str, ...]
    floor: float


def grid_fall(arms: Sequence[ArmPilots]) -> GridFall | None:
    """The arms of ``arms`` (every arm of the target with pilots, its curve fitted or not: a fall is seen in the
    pilots) whose pilots fell (:func:`flopplan.race.checks.fell`) and the lowest of their end rewards; None when
    none fell."""
    fallen = [(a.name, float(np.mean([pts[-1].scores.mean() for pts in seed_points(a)]))) for a in arms if fell(a)]
    return GridFall(tuple(n for n, _ in fallen), min(r for _, r in fallen)) if fallen else None


def lowered(result: BudgetResult, fall: GridFall | None, still: Mapping[str, str]) -> BudgetResult:
    """``result`` with the lower ends of the module docstring: each arm bounded by its pilots (``still[arm]`` "":
    :func:`flopplan.race.checks.unbounded`) and read beyond them gets a lower end no higher than ``fall.floor``
    (its gain's: that less its R0)."""
    if fall is None:
        return result
    preds = tuple(replace(p, lo=min(p.lo, fall.floor), gain_lo=min(p.gain_lo, fall.floor - (p.reward - p.gain)))
                  if not still.get(p.arm, "") and p.extrapolation > SUPPORT_TOL else p for p in result.predictions)
    return replace(result, predictions=preds)


def warning(fall: GridFall | None) -> list[str]:
    """What the analysis says when some arm's pilots fell (empty otherwise)."""
    if fall is None:
        return []
    who = ", ".join(fall.arms)
    return [f"{who}: {'its' if len(fall.arms) == 1 else 'their'} pilots fell; a fall that comes from the shared set-up "
            "(answers cut at the length limit, a penalised format) reaches each arm after its own number of updates, "
            "possibly after its pilots, so every other arm's interval beyond its pilots runs down to "
            f"{fall.floor:.3f}, the lowest reward a fallen arm ended at (its point, upper end and P(best) are its "
            "curves')"]
