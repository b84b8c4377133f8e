"""Vectorized grids: every point of a grid equals the scalar planner's step cost and steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import SMALL

from flopplan.budget import Budget
from flopplan.cost import step_cost
from flopplan.grid import plan_grid
from flopplan.lengths import Length
from flopplan.planner import plan
from flopplan.recipe import Recipe, RewardSystem


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 4, 16]), st.sampled_from([2, 8]), st.integers(1, 500),
                          st.integers(1, 3000), st.integers(1, 3)), min_size=1, max_size=8),
       st.sampled_from(SMALL), st.sampled_from(["rule", "prm:qwen2.5-math-prm-7b"]), st.booleans(),
       st.sampled_from([0.0, 0.04]))
def test_grid_equals_the_scalar_planner(rows, policy, reward, vllm, beta):
    """Default arguments on both sides: the grid follows the recipe's rules (old logprobs auto, beta)."""
    Q, G, P, K, mu = (np.array(col) for col in zip(*rows, strict=True))
    system = RewardSystem.parse(reward)
    budgets = [1e17, 3e19]
    engine = "vllm" if vllm else "hf"
    grid = plan_grid(Recipe(policy=policy, reward=system, engine=engine, beta=beta), budgets, prompts_per_step=Q,
                     group_size=G, prompt_len=P, completion_len=K, iterations=mu)
    for i, (q, g, p, k, m) in enumerate(rows):
        recipe = Recipe(policy=policy, prompts_per_step=q, group_size=g, prompt_len=Length.fixed(p),
                        completion_len=Length.fixed(k), iterations=m, reward=system, engine=engine, beta=beta)
        cost = step_cost(recipe)
        assert grid.step_flops[i] == pytest.approx(cost.step_flops, rel=1e-12)
        for b, value in cost.buckets().items():
            assert grid.bucket_step_flops[b][i] == pytest.approx(value, rel=1e-12)
        for j, budget in enumerate(budgets):
            assert grid.steps[i, j] == plan(recipe, Budget(flops=budget)).steps
            assert grid.flops["total"][i, j] <= budget
