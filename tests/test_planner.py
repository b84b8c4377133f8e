"""The planner: a budget buys whole steps and their evaluations, exactly; the seed paper's two observations at equal
FLOPs; budgets in GPU-hours and dollars; what a plan notes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import recipes

from flopplan.arch import QWEN25_SIZES
from flopplan.budget import Budget
from flopplan.cost import step_cost
from flopplan.errors import UserError
from flopplan.hardware import datasheet_profile
from flopplan.lengths import Length
from flopplan.passes import BUCKETS
from flopplan.planner import compare_models, compare_rewards, plan
from flopplan.recipe import Recipe, RewardSystem

budgets = st.floats(1e15, 1e21).map(lambda x: int(x))


# -- invariants -------------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(recipes(), budgets)
def test_plan_invariants(recipe, budget_flops):
    p = plan(recipe, Budget(flops=budget_flops))
    flops = p.flops
    assert flops["total"] == sum(flops[b] for b in BUCKETS)
    assert sum(p.phases.values()) == flops["total"]
    assert flops["total"] <= budget_flops
    assert p.leftover_flops == budget_flops - flops["total"] >= 0
    # one more step (and the evaluation it may bring) would not fit
    cost = p.cost
    nxt = p.steps + 1
    more = nxt * cost.step_flops + recipe.evaluations(nxt) * cost.eval_flops
    assert more > budget_flops - 1  # -1: totals of distributions are rounded per phase
    assert p.evaluations == (recipe.evaluations(p.steps) if p.total_flops else 0)
    for value in flops.values():
        assert isinstance(value, int)


@settings(max_examples=100, deadline=None)
@given(recipes(fixed=True), st.integers(1, 10_000))
def test_costs_are_linear_in_steps(recipe, steps):
    """With a budget of exactly k steps, every step phase is k times its per-step cost."""
    cost = step_cost(recipe)
    budget = steps * cost.step_flops + recipe.evaluations(steps) * cost.eval_flops
    p = plan(recipe, Budget(flops=budget))
    assert p.steps == steps
    assert p.leftover_flops == 0
    for phase, per_step in cost.step_phases.items():
        assert p.phases[phase] == steps * per_step
    for phase, per_eval in cost.eval_phases.items():
        assert p.phases[phase] == recipe.evaluations(steps) * per_eval


def test_evaluations_count_the_baseline():
    recipe = Recipe(eval_every=10, eval_prompts=20)
    assert [recipe.evaluations(s) for s in (0, 9, 10, 25)] == [1, 1, 2, 3]
    assert recipe.with_(eval_at_start=False).evaluations(25) == 2
    cost = step_cost(recipe)
    tiny = plan(recipe, Budget(flops=cost.eval_flops // 2))  # not even the baseline evaluation fits
    assert tiny.steps == 0 and tiny.total_flops == 0


def test_budget_too_small_says_what_a_step_costs():
    p = plan(Recipe(policy="qwen2.5-7b"), Budget(flops=10**12))
    assert p.steps == 0 and "one step costs" in p.notes[0]


def test_huge_budgets_are_planned_exactly_or_refused():
    p = plan(Recipe(policy="qwen2.5-0.5b"), Budget(flops=10**29))
    assert p.total_flops <= 10**29 < p.total_flops + p.cost.step_flops
    for bad in ({"flops": 10**31}, {"flops": 10**400}, {"gpu_hours": 1e300}, {"flops": float("nan")}):
        with pytest.raises(UserError):
            Budget(**bad)


def test_policy_must_be_a_language_model():
    with pytest.raises(UserError, match="score head"):
        plan(Recipe(policy="qwen2.5-math-prm-7b"), Budget(flops=10**19))


def test_sequences_beyond_the_model_context_are_noted():
    long = plan(Recipe(policy="qwen2.5-0.5b", completion_len=Length.fixed(40000)), Budget(flops=10**21))
    short = plan(Recipe(policy="qwen2.5-0.5b"), Budget(flops=10**21))
    assert any("32,768-token context" in n for n in long.notes)
    assert not any("context" in n for n in short.notes)


def test_a_group_of_one_completion_is_counted_and_noted_as_teaching_nothing():
    one = plan(Recipe(policy="qwen2.5-0.5b", group_size=1), Budget(flops=10**19))
    two = plan(Recipe(policy="qwen2.5-0.5b", group_size=2), Budget(flops=10**19))
    assert one.steps > two.steps > 0
    assert any(n.startswith("G=1:") and "advantage" in n for n in one.notes)
    assert not any("advantage" in n for n in two.notes)


# -- the seed paper's two observations --------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [10**18, 10**19, 10**20])
@pytest.mark.parametrize("reward", ["rule", "prm:qwen2.5-math-prm-7b"])
def test_larger_policies_get_fewer_updates_and_rollouts_at_equal_flops(budget, reward):
    plans = compare_models(Recipe(reward=RewardSystem.parse(reward)), list(QWEN25_SIZES), Budget(flops=budget))
    steps = [p.steps for p in plans]
    rollouts = [p.totals()["rollouts"] for p in plans]
    updates = [p.totals()["update_tokens"] for p in plans]
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]
    assert rollouts == sorted(rollouts, reverse=True) and updates == sorted(updates, reverse=True)
    per_token = [p.cost.step_flops for p in plans]
    assert per_token == sorted(per_token)


@pytest.mark.parametrize("policy", ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b"])
def test_rule_reward_leaves_non_update_compute_to_rollouts_prm_takes_a_visible_share(policy):
    budget = Budget(flops=10**19)
    rule, prm, small_prm = compare_rewards(Recipe(), ["rule", "prm:qwen2.5-math-prm-7b", "prm:qwen2.5-1.5b"],
                                           budget, [policy])
    rule_shares = rule.shares()
    assert rule.phases.get("reward", 0) == 0 and rule_shares["feedback"] == 0
    non_update = rule.total_flops - rule.flops["learning"]
    assert non_update == rule.phases["rollout.prefill"] + rule.phases["rollout.decode"] > 0
    assert prm.shares()["feedback"] > 0.10  # a visible part of the budget (Qwen2.5-Math-PRM-7B)
    assert 0 < small_prm.shares()["feedback"] < prm.shares()["feedback"]  # a smaller PRM takes less
    assert prm.steps < small_prm.steps <= rule.steps


# -- budgets in time and money ----------------------------------------------------------------------------------

def test_gpu_hour_and_dollar_budgets():
    profile = datasheet_profile("h100", "hf", price_per_hour=2.0)
    by_hours = plan(Recipe(), Budget(gpu_hours=100), profile)
    by_dollars = plan(Recipe(), Budget(dollars=200), profile)
    assert by_hours.steps == by_dollars.steps > 0
    assert by_hours.gpu_hours <= 100
    assert by_dollars.dollars == pytest.approx(by_hours.gpu_hours * 2.0)
    # decode is bound by the weights and KV cache it reads: each of its FLOPs takes longer than an update's
    per_flop = {ph: by_hours.seconds[ph] / by_hours.phases[ph] for ph in ("rollout.decode", "update")}
    assert per_flop["rollout.decode"] > 2 * per_flop["update"]
    with pytest.raises(UserError, match="profile"):
        plan(Recipe(), Budget(gpu_hours=1))
    with pytest.raises(UserError, match="price"):
        plan(Recipe(), Budget(dollars=1), datasheet_profile("a100"))
