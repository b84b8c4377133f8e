"""Successive halving by what an arm will reach at the target budget F, not by what it shows at the rung.

:func:`keep` takes the analysis' predictions at F (:class:`flopplan.race.results.ArmPrediction`, one per fitted arm,
read from the model-averaged, calibrated ensemble of :mod:`flopplan.race.ensemble`) and returns the arms that go on:

1. the ``n_keep`` arms with the highest upper bound of their interval at F (ties: the higher predicted reward,
   then the name): an optimistic rank (UCB-style, as in freeze-thaw and learning-curve halving), so a slow starter
   whose curve may still overtake is not cut for what it shows now; ranking by the point prediction dropped the
   true best in 38 % of repetitions where curves cross (docs/results.md);
2. and every other arm whose upper bound at F reaches the leader's lower bound (``hi >= leader.lo``): one the
   evidence cannot rule out (stop an arm only when it is unlikely to beat the best), by upper bound, up to
   ``limit`` arms in all (None: no limit; the caller's budget sets it).

The leader is the arm with the highest predicted reward among the comparable ones (:mod:`flopplan.race.regime`),
or among all when none is comparable. Arms without a prediction (not fitted) are not kept: the caller reports them.
"""

from __future__ import annotations

from collections.abc import Sequence

from flopplan.errors import UserError, check_int
from flopplan.race.results import ArmPrediction


def ranked(predictions: Sequence[ArmPrediction]) -> list[ArmPrediction]:
    """The predictions from the highest predicted reward at F down (ties: the higher upper bound, then the name)."""
    return sorted(predictions, key=lambda p: (-p.reward, -p.hi, p.arm))


def optimistic(predictions: Sequence[ArmPrediction]) -> list[ArmPrediction]:
    """The predictions from the highest upper bound at F down (ties: the higher predicted reward, then the name)."""
    return sorted(predictions, key=lambda p: (-p.hi, -p.reward, p.arm))


def keep(predictions: Sequence[ArmPrediction], n_keep: int, *, limit: int | None = None) -> list[str]:
    """The names of the arms promoted to the next rung (module docstring), best first."""
    check_int("n_keep", n_keep, minimum=1)
    if limit is not None:
        check_int("limit", limit, minimum=n_keep)
    names = [p.arm for p in predictions]
    if len(set(names)) != len(names):
        raise UserError("keep: one prediction per arm")
    if not predictions:
        return []
    by_reward = ranked(predictions)
    pool = [p for p in by_reward if p.comparable] or by_reward
    leader = pool[0]
    order = optimistic(predictions)
    out = [p.arm for p in order[:n_keep] + [p for p in order[n_keep:] if p.hi >= leader.lo]]
    return out if limit is None else out[:limit]
