"""Vectorized grids: every point of a grid equals the scalar step cost and the scalar planner's steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import round_recipes

from flopplan.budget import Budget
from flopplan.cost import step_cost
from flopplan.grid import plan_grid
from flopplan.lengths import Length
from flopplan.planner import plan

BUDGETS = [1e17, 3e19]


@settings(max_examples=40, deadline=None)
@given(round_recipes(default_batches=True, evaluation=False), st.data())
def test_a_grid_equals_the_scalar_step_cost_and_planner_at_every_point(base, data):
    """One set of traits drawn at random (engine, LoRA, reward system, beta, heads, padding, old log-probs), a grid
    over prompts, G, lengths and mu: each point's buckets equal the scalar step cost, its steps the planner's."""
    points = data.draw(st.lists(st.tuples(st.sampled_from([1, 2, 5]), st.sampled_from([1, 2, 4]),
                                          st.integers(2, 500), st.integers(2, 3000), st.integers(1, 3)),
                                min_size=1, max_size=5))
    Q, G, P, K, M = (np.array(c) for c in zip(*points, strict=True))
    grid = plan_grid(base, BUDGETS, prompts_per_step=Q, group_size=G, prompt_len=P, completion_len=K, iterations=M)
    for i, (q, g, p, k, m) in enumerate(points):
        recipe = base.with_(prompts_per_step=q, group_size=g, prompt_len=Length.fixed(p),
                            completion_len=Length.fixed(k), iterations=m)
        cost = step_cost(recipe)
        assert grid.step_flops[i] == pytest.approx(cost.step_flops, rel=1e-12)
        for bucket, value in cost.buckets().items():
            assert grid.bucket_step_flops[bucket][i] == pytest.approx(value, rel=1e-12), bucket
        for j, budget in enumerate(BUDGETS):
            assert grid.steps[i, j] == plan(recipe, Budget(flops=budget)).steps
            assert grid.flops["total"][i, j] <= budget
