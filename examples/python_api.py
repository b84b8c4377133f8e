"""The planning API from Python: a recipe, its step cost, a plan, an inverse solve and a vectorized grid.

    python examples/python_api.py
"""

from __future__ import annotations

import numpy as np

from flopplan import Budget, Length, Recipe, RewardSystem, plan, plan_grid, price_steps, solve, step_cost
from flopplan.units import eng

# A GRPO run as data (every field has a TRL-like default).
recipe = Recipe(policy="qwen2.5-1.5b", group_size=8, prompts_per_step=64,
                completion_len=Length.mean_max(600, 1024), reward=RewardSystem.parse("prm:qwen2.5-math-prm-7b"))

# One step, by phase (exact integers for fixed lengths, expectations for distributions).
cost = step_cost(recipe)
for phase, flops in cost.step_phases.items():
    print(f"{phase:<16} {eng(flops):>12}  {100 * flops / cost.step_flops:5.1f} %")

# What 1e19 FLOPs buy.
p = plan(recipe, Budget(flops=10**19))
print(f"{p.steps} steps, {p.totals()['rollouts']:,} rollouts, split {p.shares()}")

# The converse: what 400 steps cost, by bucket.
print("400 steps cost", {b: eng(v) for b, v in price_steps(recipe, 400).flops.items()})

# Inverse: the largest group size that still affords 400 steps.
solved = solve(recipe, Budget(flops=10**19), "group_size", steps=400)
print(f"largest G for 400 steps: {solved.recipe.group_size}")

# A vectorized grid: 4096 completion lengths x 3 budgets, one pass.
completion = np.arange(128, 128 + 4096)
grid = plan_grid(Recipe(policy="qwen2.5-1.5b"), [1e18, 1e19, 1e20], completion_len=completion)
print(f"grid of {grid.size:,} plans; steps at 1e19 for 512/1024/2048-token completions:",
      [int(grid.steps[c - 128, 1]) for c in (512, 1024, 2048)])
