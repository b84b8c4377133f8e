"""Solves: the largest group size, prompts per step or iterations that afford N steps of a budget; the iterations or
group size that reach a target learning share; the largest registry policy that affords N steps; and
:func:`plan_request`, the one entry point ``flopplan plan`` calls for every mode."""

from __future__ import annotations

from flopplan.arch import QWEN25_SIZES, REGISTRY
from flopplan.budget import Budget
from flopplan.cost import step_cost
from flopplan.errors import UserError
from flopplan.hardware import Profile
from flopplan.planner import Plan, compare_models, largest_true, plan, price_steps
from flopplan.recipe import Recipe
from flopplan.units import apart, eng, plural

# -- inverse modes ----------------------------------------------------------------------------------------------

FREE_QUANTITIES = ("steps", "group_size", "prompts_per_step", "iterations")


def with_free_value(recipe: Recipe, name: str, value: int) -> Recipe:
    """``recipe`` with ``name`` set, dropping explicit batch sizes the new value would make invalid."""
    try:
        return recipe.with_(**{name: value})
    except UserError:
        return recipe.with_(**{name: value, "generation_batch": None, "micro_batch": None, "optimizer_batch": None})


def valid_with(recipe: Recipe, name: str, value: int) -> Recipe | None:
    """``recipe`` with ``name`` set, or None when that value conflicts with the recipe's batch sizes."""
    try:
        return recipe.with_(**{name: value})
    except UserError:
        return None


SOLVE_UPPER = 1 << 40
"""The search for a free quantity stops here (a trillion prompts or samples per step); the step search has its own,
larger bound (:data:`flopplan.planner.MAX_STEPS`), since steps are counted over a whole budget."""


def solve(recipe: Recipe, budget: Budget, free: str, steps: int | None = None,
          profile: Profile | None = None) -> Plan:
    """Solve for one free quantity given the others and the budget.

    ``steps``: the plan itself. ``group_size``, ``prompts_per_step``, ``iterations``: the largest value for which
    ``steps`` steps fit the budget.
    """
    if free not in FREE_QUANTITIES:
        raise UserError(f"cannot solve for {free!r}: use one of {', '.join(FREE_QUANTITIES)}")
    if free == "steps":
        return plan(recipe, budget, profile)
    if steps is None or steps <= 0:
        raise UserError(f"solving for {free} needs the number of steps (--steps N > 0)")

    def fits(value: int) -> bool:
        return plan(with_free_value(recipe, free, value), budget, profile).steps >= steps

    bound = largest_true(fits, 1, SOLVE_UPPER)  # the costs rise with the value; batch sizes only shift them slightly
    if bound >= SOLVE_UPPER:
        raise UserError(f"{steps} step{'s' if steps > 1 else ''} of {recipe.policy} afford more than "
                        f"{SOLVE_UPPER:,} as {free}: "
                        "the budget is far beyond this recipe; solve for steps instead")
    best, result = 0, None
    for value in range(bound + 1, 0, -1):  # the largest value the recipe's own batch sizes allow that fits
        candidate = valid_with(recipe, free, value)
        if candidate is None:
            continue
        attempt = plan(candidate, budget, profile)
        if attempt.steps >= steps:
            best, result = value, attempt
            break
    if result is None:
        one = plan(with_free_value(recipe, free, 1), budget, profile)
        raise UserError(f"no {free} affords {plural(steps, 'step')} of {recipe.policy} with its batch sizes: "
                        f"one step costs at least {eng(one.cost.step_flops)}, {plural(steps, 'step')} "
                        f"{_beside_budget(one.cost.step_flops * steps, budget)}")
    result.notes.append(f"solved: largest {free} = {best} that affords {plural(steps, 'step')}")
    return result


def _beside_budget(need_flops: float, budget: Budget, what: str = "") -> str:
    """``need_flops`` (then ``what``) and the budget, each with the digits it takes not to read as the other does
    (2.0028e18 needed of a 2e18 budget is not "2 EFLOP, budget 2 EFLOP")."""
    if budget.flops is None:
        return f"{eng(need_flops)}{what}, budget {budget.describe()}"

    def show(value: float, digits: int) -> str:
        return eng(value, digits=digits)

    return f"{apart(need_flops, budget.flops, show)}{what}, budget {apart(budget.flops, need_flops, show)}"


def learning_share(recipe: Recipe) -> float:
    cost = step_cost(recipe)
    buckets = cost.buckets()
    step = cost.step_flops
    return float(buckets["learning"] / step) if step else 0.0


def solve_share(recipe: Recipe, target: float, free: str, upper: int = 256) -> tuple[Recipe, float, list[str]]:
    """The ``iterations`` or ``group_size`` whose per-step learning share is closest to ``target``.

    The learning share rises with iterations (each adds an update pass); with the group size it barely moves
    (rollouts, updates and rewards all scale with it), which the notes say when the target is out of reach.
    """
    if free not in ("iterations", "group_size"):
        raise UserError(f"a target learning share is solved for iterations or group_size, not {free!r}")
    if not 0 < target < 1:
        raise UserError(f"the target learning share must be between 0 and 1, not {target}")
    shares = {}
    candidates = range(1, upper + 1) if free == "iterations" else sorted({1, 2, 4, *range(8, upper + 1, 8)})
    for value in candidates:
        shares[value] = learning_share(with_free_value(recipe, free, value))
    if max(shares.values()) - min(shares.values()) <= 1e-9 * max(shares.values()):
        raise UserError(f"the learning share does not depend on {free} for this recipe ({min(shares.values()):.1%} "
                        f"at every value{' with a rule reward' if recipe.reward.kind == 'rule' else ''}): solve for "
                        "another quantity")
    best = min(shares, key=lambda v: (abs(shares[v] - target), v))
    notes = []
    low, high = min(shares.values()), max(shares.values())
    if not low <= target <= high:
        notes.append(f"target {target:.1%} is outside what {free} in [1, {upper}] reaches "
                     f"({low:.1%} to {high:.1%}); closest: {free}={best} at {shares[best]:.1%}")
    return with_free_value(recipe, free, best), shares[best], notes


def largest_model(recipe: Recipe, budget: Budget, steps: int, profile: Profile | None = None,
                  candidates: tuple[str, ...] = QWEN25_SIZES) -> Plan:
    """The largest registry policy that affords ``steps`` steps of ``recipe`` within the budget."""
    if steps <= 0:
        raise UserError("the number of steps must be positive")
    ordered = sorted(candidates, key=lambda name: REGISTRY[name].params)
    best = None
    for name in ordered:
        candidate = plan(recipe.with_(policy=name), budget, profile)
        if candidate.steps >= steps:
            best = candidate
    if best is None:
        smallest = plan(recipe.with_(policy=ordered[0]), budget, profile)
        raise UserError(f"no registry model affords {plural(steps, 'step')}: even {ordered[0]} needs "
                        f"{_beside_budget(smallest.cost.step_flops * steps, budget, ' for them')}")
    best.notes.append(f"largest registry model that affords {plural(steps, 'step')}")
    return best


def plan_request(base: Recipe, models: list[str], budget: Budget, profile: Profile | None = None, *,
                 free: str = "steps", steps: int | None = None, target_share: float | None = None,
                 largest: bool = False, budget_given: bool = True) -> list[Plan]:
    """The plans ``flopplan plan`` answers, one mode per request: what a budget buys (each model), what ``steps``
    steps cost (``free="steps"`` with ``steps``), the largest value of a free quantity that affords ``steps``, the
    value that reaches a target learning share, or the largest registry model that affords ``steps``."""
    if steps is not None and steps <= 0:
        raise UserError(f"--steps must be a positive integer, not {steps}")
    if target_share is not None:
        if largest or steps is not None:
            raise UserError("--target-learning-share solves for a share, not for steps: drop --largest-model and "
                            "--steps")
        if free not in ("iterations", "group_size"):
            raise UserError("--target-learning-share needs --solve iterations or --solve group_size")
        plans = []
        for name in models:
            solved, share, notes = solve_share(base.with_(policy=name), target_share, free)
            one = plan(solved, budget, profile)
            one.notes += [f"{free}={getattr(solved, free)} gives a learning share of {share:.1%}", *notes]
            plans.append(one)
        return plans
    if largest:
        if free != "steps":
            raise UserError("--largest-model searches the registry for the model: it takes no --solve")
        if steps is None:
            raise UserError("--largest-model needs --steps N")
        return [largest_model(base, budget, steps, profile)]
    if free != "steps":
        return [solve(base.with_(policy=name), budget, free, steps, profile) for name in models]
    if steps is not None:
        if budget_given:
            raise UserError("--steps N prices N steps (the budget they need): drop --budget/--gpu-hours/--dollars, "
                            "or add --solve to find what a budget affords at N steps")
        return [price_steps(base.with_(policy=name), steps, profile) for name in models]
    return compare_models(base, models, budget, profile)
