"""The inverse modes: the largest value of a free recipe field, a learning share, the largest model, for a budget."""

from __future__ import annotations

import pytest

from flopplan.arch import QWEN25_SIZES
from flopplan.budget import Budget
from flopplan.errors import UserError
from flopplan.lengths import Length
from flopplan.planner import plan
from flopplan.recipe import Recipe
from flopplan.solver import largest_model, learning_share, solve, solve_share


def test_the_api_name_solve_is_the_function_once_its_module_is_loaded():
    """The solves live in flopplan/solver.py: loading that module must leave the API's ``flopplan.solve``."""
    import importlib

    import flopplan

    module = importlib.import_module("flopplan.solver")
    assert flopplan.solve is module.solve is solve


@pytest.mark.parametrize("flops", [10**19, 10**23])  # 1e23: the answer lies beyond 2^20
@pytest.mark.parametrize("free", ["group_size", "prompts_per_step", "iterations"])
def test_solve_finds_the_largest_value_that_affords_the_steps(free, flops):
    budget = Budget(flops=flops)
    solved = solve(Recipe(), budget, free, steps=300)
    value = getattr(solved.recipe, free)
    assert solved.steps >= 300
    assert plan(Recipe().with_(**{free: value + 1}), budget).steps < 300


def test_solve_share_and_largest_model():
    recipe, share, notes = solve_share(Recipe(), 0.9, "iterations")
    assert abs(share - 0.9) <= abs(learning_share(recipe.with_(iterations=recipe.iterations + 1)) - 0.9)
    assert abs(share - 0.9) <= abs(learning_share(recipe.with_(iterations=max(1, recipe.iterations - 1))) - 0.9)
    with pytest.raises(UserError, match="does not depend on group_size"):  # fixed lengths: G scales everything
        solve_share(Recipe(), 0.05, "group_size")
    _, _, notes = solve_share(Recipe(completion_len=Length.mean_max(300.0, 1024)), 0.05, "group_size")
    assert notes and "outside" in notes[0]  # padded batches: the share moves a little with G, not to 5 %
    best = largest_model(Recipe(), Budget(flops=10**19), steps=300)
    bigger = QWEN25_SIZES[QWEN25_SIZES.index(best.model) + 1]
    assert best.steps >= 300 and plan(Recipe(policy=bigger), Budget(flops=10**19)).steps < 300
    with pytest.raises(UserError):
        largest_model(Recipe(), Budget(flops=10**15), steps=300)


def test_solve_keeps_the_recipe_batch_sizes():
    recipe = Recipe(policy="qwen2.5-1.5b", generation_batch=128, micro_batch=16)
    solved = solve(recipe, Budget(flops=10**19), "group_size", steps=1600)
    assert solved.recipe.generation_batch == 128 and solved.recipe.micro_batch == 16
    assert solved.recipe.rollouts_per_step % 128 == 0 and solved.steps >= 1600


def test_a_solve_refusal_prints_the_need_and_the_budget_apart():
    """2.0028e18 FLOPs needed of a 2e18 budget read "2 EFLOP, budget 2 EFLOP": each side gets the digits it takes
    not to read as the other."""
    import re

    from flopplan.cost import step_cost

    with pytest.raises(UserError) as caught:
        solve(Recipe(policy="qwen3-1.7b"), Budget(flops=2e18), "iterations", steps=200)
    need, budget = re.search(r"200 steps ([^,]+), budget (.+)$", str(caught.value)).groups()
    assert need != budget and budget == "2 EFLOP", str(caught.value)
    step = int(step_cost(Recipe(policy="qwen2.5-0.5b")).step_flops)
    with pytest.raises(UserError) as caught:
        largest_model(Recipe(), Budget(flops=step * 300 * (1 - 1e-6)), steps=300)
    need, budget = re.search(r"needs (.+) for them, budget (.+)$", str(caught.value)).groups()
    assert need != budget, str(caught.value)
