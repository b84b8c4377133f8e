"""flopplan.race.checks: what an arm's pilots showed at a budget (shown_at), where they ended (ended) and where a
seed that fell ended (seed_fall), read the same way: a seed's last evaluation at or below the budget, the later of
two at the same FLOPs."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.race.checks import ended, observed_near, seed_fall, shown_at
from flopplan.race.pilot_data import ArmPilots, EvalPoint, SeedRun


def scores(rate: float, n: int = 100) -> np.ndarray:
    return (np.arange(n) < round(rate * n)).astype(float)


def run(seed: int, *points: tuple[float, float]) -> SeedRun:
    return SeedRun(seed, tuple(EvalPoint(f, scores(r)) for f, r in points))


def test_shown_at_reads_each_seeds_last_evaluation_at_or_below_the_budget_and_ended_the_last():
    arm = ArmPilots("a", (run(0, (0, 0.4), (1e18, 0.3), (4e18, 0.1)), run(1, (0, 0.4), (2e18, 0.2), (4e18, 0.05))))
    assert shown_at(arm, 4e18) == pytest.approx((0.1 + 0.05) / 2) == observed_near(arm, 4e18)
    assert ended(arm) == shown_at(arm, 1e30) == pytest.approx(0.075)
    # between evaluations, where no evaluation lies within [0.8, 1.05] x the budget (an upfront cost moves a rung
    # there): the last one below it, not where the pilots ended (a review found the end read there)
    assert observed_near(arm, 3e18) is None and shown_at(arm, 3e18) == pytest.approx((0.3 + 0.2) / 2)
    assert shown_at(arm, 5e17) == pytest.approx(0.4)  # before any evaluation: the step-0 mean
    assert shown_at(arm, 0.0) == pytest.approx(0.4)


def test_two_evaluations_at_a_seeds_last_flops_are_read_as_the_later_one_everywhere():
    """PilotData accepts repeated FLOPs (a resumed run evaluating again); each reader took a different one (the
    mean, the first, the later) where they must agree."""
    seed = run(0, (0, 0.5), (1e18, 0.4), (2e18, 0.02), (2e18, 0.1))
    arm = ArmPilots("a", (seed,))
    assert seed_fall(seed) == pytest.approx(0.1) == ended(arm) == shown_at(arm, 2e18) == observed_near(arm, 2e18)
