"""Successive halving: which arms go on to the next rung, on what each has shown and where its last slope leads.

:func:`keep` takes the analysis' predictions at the target budget F (:class:`flopplan.race.results.ArmPrediction`,
one per fitted arm, from the model-averaged, calibrated ensemble of :mod:`flopplan.race.ensemble`) and each arm's
:class:`Trend` (its observed reward at its last evaluations and the slope there, :func:`trend`). The arms that go on:

1. the arm with the best observed reward at the rung (ties: the name): the lower-variance call, right most often
   when the curves cannot be told apart;
2. then, up to ``n_keep``, the others by where their last slope leads at F: the observed reward plus the gain per
   unit of ln F over each seed's last two evaluations times ln(F / the last evaluation's FLOPs) (a straight line in
   ln F, no bend assumed): a slow starter still rising steeply is not cut for what it shows now. Ranking by the
   ensemble's upper bound at F (8x beyond the rung in benchmarks/race_halving.py) dropped the true best in 27 %
   of repetitions on average over five truth families (51 % where curves cross) and 21 % over four held-out
   shapes; this rule 24 % (49 %) and 12 % (docs/results.md);
3. and every other arm the evidence cannot rule out at F: its upper bound at F reaches the leader's lower bound
   (``hi >= leader.lo``), and it is the best comparable arm in at least :data:`P_OPEN` of the analysis'
   replicates (``p_best``) or its own last slope carries it to the leader's lower bound (``reach >= leader.lo``:
   a late bloomer), by P(best), up to ``limit`` arms in all (None: no limit; the caller's budget sets it: the
   design leaves room for them, :attr:`flopplan.race.design.RaceDesign.room`). The leader is the arm with the
   highest predicted reward among the comparable ones (:mod:`flopplan.race.regime`), or among all when none is
   comparable. At 8x beyond the rung the intervals are honest about the shape and rarely rule an arm out: in
   benchmarks/race_halving.py (4 arms, 200 repetitions per truth family) this kept 3.0-3.8 arms on average and
   dropped the true best in at most 16.5 % of the repetitions (where curves cross; 0-3.5 % in the eight other
   families), against 49 % where curves cross with the halving's 2 alone. The upper bound alone (before the
   P(best) and slope conditions) kept 3.7-3.9 arms. An arm whose pilots never rose above their start or fell
   (:func:`flopplan.race.checks.unbounded`: its interval at F runs to 1, it is not comparable, so its P(best) is 0,
   and its slope is 0 or falls) has nothing the evidence could rule it out with, nor anything that speaks for it:
   it goes on when its upper bound reaches the leader's lower bound alone, after every arm the two conditions keep
   (in the held-out shape of benchmarks/shapes_round39.py, where half the arms fall to 0 and take off near the
   largest pilot, the halving dropped the true best in 65 % of repetitions without this and 7.5 % with it:
   docs/results.md, round 39). Where the room is short of such arms, they take it in rule 2's order (reach, then
   observed), the name breaking exact ties only: by the name alone, the demo's room went to the first three of four
   arms that had not risen, and the arm second best at F was set aside (docs/results.md, "RACE against the
   exhaustive answer").

An arm without a trend is read at its predicted reward at F for both ranks. Arms without a prediction (not fitted)
are not kept: the caller reports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flopplan.errors import UserError, check_int
from flopplan.race.checks import UNBOUNDED, by_reward
from flopplan.race.results import ArmPrediction, Observation

P_OPEN = 0.05
"""The least share of the replicates in which an arm beyond the halving's count must be the best at F to go on."""
FIT_RESIDUE = 1e-9
"""How far below the leader's lower bound an arm's upper bound or reach may fall and still reach it: what the fits
leave where the pilots do not vary (arms that scored 0 on every prompt were read at 7.7e-11 and 8.4e-11, and the
room the design paid for went to the first by name)."""


@dataclass(frozen=True)
class Trend:
    """An arm at its last evaluations: the mean over seeds of each seed's last observed reward, and ``reach``: that
    reward carried to the budget along the seeds' mean last slope in ln F."""

    observed: float
    reach: float


def trend(observations: Sequence[Observation], budget: float) -> Trend | None:
    """The :class:`Trend` of an arm's observations (step-0 points, at 0 FLOPs, are not used) at ledger FLOPs
    ``budget``; a seed with one evaluation has slope 0; None when no seed has one."""
    by_seed: dict[str, list[Observation]] = {}
    for o in observations:
        if o.flops > 0:
            by_seed.setdefault(o.seed, []).append(o)
    if not by_seed:
        return None
    last, slopes, where = [], [], []
    for points in by_seed.values():
        points.sort(key=lambda o: o.flops)
        a, b = points[-2:] if len(points) > 1 else (points[-1], points[-1])
        last.append(b.reward)
        slopes.append((b.reward - a.reward) / math.log(b.flops / a.flops) if b.flops > a.flops else 0.0)
        where.append(math.log(b.flops))
    n = len(last)
    ahead = max(0.0, math.log(budget) - sum(where) / n) if budget > 0 else 0.0
    return Trend(sum(last) / n, sum(last) / n + sum(slopes) / n * ahead)


def ranked(predictions: Sequence[ArmPrediction]) -> list[ArmPrediction]:
    """The predictions from the highest predicted reward at F down (ties: the higher upper bound, then the name)."""
    return sorted(predictions, key=lambda p: (-p.reward, -p.hi, p.arm))


def keep(predictions: Sequence[ArmPrediction], n_keep: int, trends: Mapping[str, Trend | None] | None = None, *,
         limit: int | None = None) -> list[str]:
    """The names of the arms promoted to the next rung (module docstring), in the order they were chosen."""
    check_int("n_keep", n_keep, minimum=1)
    if limit is not None:
        check_int("limit", limit, minimum=n_keep)
    names = [p.arm for p in predictions]
    if len(set(names)) != len(names):
        raise UserError("keep: one prediction per arm")
    if not predictions:
        return []
    seen = {p.arm: (trends or {}).get(p.arm) or Trend(p.reward, p.reward) for p in predictions}
    first = by_reward({a: seen[a].observed for a in names})[0]  # a tie by name, not by a float's last bit
    rest = sorted((a for a in names if a != first), key=lambda a: (-seen[a].reach, -seen[a].observed, a))
    out = [first, *rest[:n_keep - 1]]
    by_prediction = ranked(predictions)
    leader = ([p for p in by_prediction if p.comparable] or by_prediction)[0]
    floor = leader.lo - FIT_RESIDUE
    open_ = [p for p in predictions if p.arm not in out and p.hi >= floor
             and (p.p_best >= P_OPEN or seen[p.arm].reach >= floor or p.note in UNBOUNDED)]
    out += [p.arm for p in sorted(open_, key=lambda p: (p.note in UNBOUNDED, -p.p_best, -p.hi, -seen[p.arm].reach,
                                                        -seen[p.arm].observed, p.arm))]
    return out if limit is None else out[:limit]
