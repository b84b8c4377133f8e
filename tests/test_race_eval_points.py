"""Where a race's pilots evaluate (flopplan.race.eval_points) and what a pilot's budget pays for at each rung."""

from __future__ import annotations

import itertools
import math

import pytest

from flopplan.race.design import Grid, RaceDesign, design_race
from flopplan.race.eval_points import evaluated_steps, log_points, positions


def _eval_flops(recipe, targets) -> int:
    from flopplan.train.targets import evaluation_flops

    return sum(evaluation_flops(recipe, targets).values())


def _design(evals: int, rungs: int = 2) -> RaceDesign:
    from flopplan.cli.race import race_base

    grid = Grid(("tiny-s", "tiny"), (4, 8), (1,), ("rule",), seeds=2, rungs=rungs, evals=evals, eval_prompts=20)
    return design_race(race_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_evals_n_gives_n_points_every_one_below_the_top_rung(n):
    """A pilot's training stops at or before its rung, so a point at the top rung was never reached and --evals N
    gave N - 1 evaluations along the curve (a held-out engineer's count): all N now lie below the top rung, one
    log step apart, the first at the cheapest arm's first step."""
    points = log_points(1_000, 1_000_000, n)
    assert len(points) == n and points[0] == 1_000 and points[-1] < 1_000_000
    ratios = [b / a for a, b in itertools.pairwise(points)] + [1_000_000 / points[-1]]
    assert all(math.isclose(r, 1_000 ** (1 / n), rel_tol=1e-3) for r in ratios)
    design = _design(n)
    assert len([p for p in design.eval_points if p < design.rung_flops[-1]]) >= n


def test_evaluated_steps_count_each_point_once_and_every_rungs_end():
    """Points falling on one step evaluate once; each rung's end evaluates; a point beyond the rung does not."""
    assert evaluated_steps([5, 9, 10, 31, 55, 1000], 10, (3, 6), 60) == [1, 3, 4, 6]
    assert positions([5, 9, 10], 10, (3,), 30) == 2  # steps 1 and 3
    assert positions([5, 9, 10], 10, (0,), 30) == 0


def test_a_continued_pilots_budget_pays_for_the_evaluation_at_each_rungs_end():
    """A pilot continued to rung r evaluates after its last step at every rung so far; its budget held one such
    evaluation whatever the rung (a held-out engineer's recount), so a continued pilot ran a step or two short of
    its table where steps cost their worst case. Manifests before version 5 keep that price: their pilots ran at
    it, and a resumed race must find its pilots' budgets unchanged."""
    design = _design(4, rungs=3)

    def runs(d: RaceDesign, arm, rung: int) -> int:  # step 0's, and one per step evaluated up to the rung's end
        ends = [e.steps for e in arm.rungs[:rung + 1]]
        return 1 + len(evaluated_steps(d.eval_points, arm.rungs[rung].step_flops, ends, d.rung_flops[rung]))

    for arm in design.arms:  # steps at their worst case: the evaluations a continued pilot runs are paid for
        for rung, flops in enumerate(design.rung_flops):
            assert arm.pilot_budget(design, rung) >= flops + arm.eval_flops * runs(design, arm, rung)
    old = RaceDesign.from_data({**design.to_data(), "race_manifest_version": 4}, "m")
    assert old.to_data()["race_manifest_version"] == 4
    short = [(a.name, r) for a in old.arms for r, f in enumerate(old.rung_flops)
             if a.pilot_budget(old, r) < f + a.eval_flops * runs(old, a, r)]
    assert short and all(r >= 1 for _, r in short)  # the older price: continued pilots a step or more short
    assert design.worst_case_flops <= design.pilot_cap
