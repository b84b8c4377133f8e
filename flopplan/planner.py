"""Budget -> plan: what a FLOP (or GPU-hour, or dollar) budget buys for a recipe, and what a number of steps costs.

A plan states the GRPO steps (generation rounds) the budget affords, everything they buy (prompts, rollouts,
generated and update tokens, optimizer steps, reward-model evaluations), the FLOPs by bucket and phase with
shares, the time where a hardware profile is given, and what is left over. Steps are the largest integer whose
cost fits: ``steps * step_cost + evaluations(steps) * eval_cost <= budget`` with ``evaluations(steps) = steps //
eval_every`` (+ 1 for the baseline evaluation before the first step, when enabled). :func:`price_steps` answers the
converse: the budget a given number of steps needs.

Costs are those of :func:`flopplan.cost.step_cost`, i.e. the exact formulas of :mod:`flopplan.formulas`. The
solves live in :mod:`flopplan.solver`, the vectorized grid in :mod:`flopplan.grid`, plan files in
:mod:`flopplan.planfile` (:meth:`flopplan.planfile.PlanEntry.of` turns a plan into its entry).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flopplan.budget import BUDGET_LIMITS, DEFAULT_BUDGET_FLOPS, UNIT_NAMES, Budget, budget_cap
from flopplan.cost import StepCost, step_cost
from flopplan.errors import UserError, check_int
from flopplan.hardware import Profile, resolve_profile
from flopplan.passes import EVAL_PHASES, PHASE_KIND, by_bucket
from flopplan.recipe import GROUP_OF_ONE, Recipe, RewardSystem
from flopplan.timing import phase_calls
from flopplan.units import apart, as_int, eng, plural

MAX_STEPS = 1 << 80
"""The step search gives up here: a 1e30-FLOP budget (the largest flopplan plans) over a step of under a MFLOP."""


@dataclass
class Plan:
    """What ``budget`` buys with ``recipe``. Totals are integers (expected values, rounded, for distributions).

    ``priced``: the plan answers "what do ``steps`` steps cost", and ``budget`` is the FLOPs they need."""

    recipe: Recipe
    cost: StepCost
    budget: Budget
    steps: int
    evaluations: int
    phases: dict[str, int]  # total FLOPs per phase over the run
    seconds: dict[str, float] | None = None  # per phase (and non-phase term of the profile), with a profile
    profile: Profile | None = None
    notes: list[str] = field(default_factory=list)
    shortfall: str | None = None  # with 0 steps: what one step costs, in the budget's unit
    priced: bool = False

    @property
    def model(self) -> str:
        return self.recipe.policy

    @property
    def flops(self) -> dict[str, int]:
        """FLOPs by bucket and in total (``total`` is the sum of the buckets)."""
        return by_bucket(self.phases)

    @property
    def total_flops(self) -> int:
        return self.flops["total"]

    @property
    def leftover_flops(self) -> float | None:
        return None if self.budget.flops is None else self.budget.flops - self.total_flops

    @property
    def gpu_hours(self) -> float | None:
        return None if self.seconds is None else sum(self.seconds.values()) / 3600

    @property
    def dollars(self) -> float | None:
        if self.gpu_hours is None or self.profile is None or self.profile.price_per_hour is None:
            return None
        return self.gpu_hours * self.profile.price_per_hour

    def shares(self) -> dict[str, float]:
        total = self.total_flops
        return {b: (v / total if total else 0.0) for b, v in self.flops.items() if b != "total"}

    def totals(self) -> dict[str, int]:
        """Counts over the whole run."""
        return {key: round(value * self.steps) for key, value in self.cost.counts.items()}



# -- budget -> steps --------------------------------------------------------------------------------------------

def phase_seconds(cost: StepCost, profile: Profile) -> dict[str, float]:
    """Seconds per phase of one step (eval phases: one evaluation): a calibrated time model prices the calls of
    the phase (their shapes matter: decode is bound by bandwidth), a datasheet profile the FLOPs."""
    phases = {**cost.step_phases, **cost.eval_phases}
    if profile.time_model is None:
        out = {phase: profile.seconds(PHASE_KIND[phase], flops) for phase, flops in phases.items()}
    else:
        calls = phase_calls(cost.recipe)
        out = {phase: profile.calls_seconds(PHASE_KIND[phase], calls.get(phase, [])) for phase in phases}
    bad = [phase for phase, seconds in out.items() if not math.isfinite(seconds)]
    if bad:
        raise UserError(f"the profile ({profile.source}) gives no finite time for {', '.join(bad)}: "
                        "its throughputs are too small")
    return out


def largest_true(predicate: Callable[[int], bool], lowest: int, upper: int) -> int:
    """The largest ``v`` in ``[lowest, upper]`` with ``predicate(v)``, for a predicate that holds up to some value
    and fails beyond it; ``lowest - 1`` when it fails at ``lowest``. Doubling, then bisection: exact in
    ``O(log v)`` calls."""
    if not predicate(lowest):
        return lowest - 1
    lo, hi = lowest, max(2 * lowest, lowest + 1)
    while hi <= upper and predicate(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, upper + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _step_and_limit(cost: StepCost, budget: Budget, profile: Profile | None,
                    seconds: dict[str, float] | None) -> tuple[Callable[[int], float], float]:
    """The run's total in the budget's unit as a function of steps, and the budget in that unit."""
    recipe = cost.recipe
    if budget.flops is not None:
        # the exact (per-phase rounded) FLOPs of a run of s steps, against the budget
        return (lambda s: sum(phase_totals(cost, s, recipe.evaluations(s)).values())), budget.flops
    if profile is None or seconds is None:
        raise UserError(f"a budget in {UNIT_NAMES[budget.unit]} needs a hardware profile (--device or "
                        "--profile)")
    step = sum(seconds[phase] for phase in cost.step_phases)
    evaluation = sum(seconds[phase] for phase in cost.eval_phases)
    if budget.gpu_hours is not None:
        limit = budget.gpu_hours * 3600
    else:
        if profile.price_per_hour is None:
            raise UserError("a budget in dollars needs a price per GPU-hour (--price-per-gpu-hour)")
        assert budget.dollars is not None
        limit = budget.dollars / profile.price_per_hour * 3600

    def run_seconds(s: int) -> float:
        evaluations = recipe.evaluations(s)
        return s * step + evaluations * evaluation + sum(profile.non_phase_seconds(recipe, s, evaluations).values())
    return run_seconds, limit


def plan(recipe: Recipe, budget: Budget, profile: Profile | None = None, cost: StepCost | None = None) -> Plan:
    """What ``budget`` buys with ``recipe`` (0 steps, with a note, when one step does not fit)."""
    cost = cost or step_cost(recipe)
    seconds = phase_seconds(cost, profile) if profile is not None else None
    run_total, limit = _step_and_limit(cost, budget, profile, seconds)
    steps = largest_true(lambda s: run_total(s) <= limit, 0, MAX_STEPS)
    if steps >= MAX_STEPS:
        raise UserError("the budget affords an unbounded number of steps (does a step cost nothing?)")
    nothing = steps < 0  # not even the baseline evaluation fits: nothing runs
    steps = max(steps, 0)
    result = _plan_of(cost, budget, profile, seconds, steps, 0 if nothing else recipe.evaluations(steps))
    if steps == 0:
        in_seconds = budget.flops is None
        result.shortfall = _one_step_cost(cost, seconds if in_seconds else None, profile if in_seconds else None,
                                          limit)
        result.notes.append(f"the budget ({budget_text(budget, profile)}) buys no step of {recipe.policy}: "
                            f"{result.shortfall}")
    return result


def price_steps(recipe: Recipe, steps: int, profile: Profile | None = None) -> Plan:
    """What ``steps`` steps (rounds) of ``recipe`` cost: FLOPs per bucket and phase, time with a profile; the plan's
    budget is the FLOPs they need."""
    steps = check_int("the number of steps (--steps)", steps, 1)
    cost = step_cost(recipe)
    evaluations = recipe.evaluations(steps)
    needed = sum(phase_totals(cost, steps, evaluations).values())
    if needed > BUDGET_LIMITS["flops"]:
        raise UserError(f"{plural(steps, 'step')} of {recipe.policy} need {eng(needed)}, beyond what flopplan "
                        f"plans (at most {budget_cap('flops')} FLOPs)")
    seconds = phase_seconds(cost, profile) if profile is not None else None
    result = _plan_of(cost, Budget(flops=needed), profile, seconds, steps, evaluations)
    result.priced = True
    return result


def _plan_of(cost: StepCost, budget: Budget, profile: Profile | None, per_step: dict[str, float] | None,
             steps: int, evaluations: int) -> Plan:
    recipe = cost.recipe
    seconds = None
    if per_step is not None:
        seconds = {phase: per * (evaluations if phase in EVAL_PHASES else steps) for phase, per in per_step.items()}
        if profile is not None:  # the time outside the FLOP phases, by term, when the profile models it
            seconds.update(profile.non_phase_seconds(recipe, steps, evaluations))
    notes = []
    context = recipe.policy_spec.max_position_embeddings
    if context and recipe.longest_sequence > context:
        notes.append(f"sequences of up to {recipe.longest_sequence:,} tokens exceed {recipe.policy}'s "
                     f"{context:,}-token context (max_position_embeddings): the FLOPs are counted, but the model "
                     "was not trained for such lengths")
    if recipe.group_size == 1:
        notes.append(f"G=1: {GROUP_OF_ONE}; the steps are counted")
    if profile is not None:
        note = profile.extrapolation_note(recipe.policy_spec.params)
        if note:
            notes.append(note)
        if per_step is not None and profile.fitted_shapes:
                    notes += profile.shape_notes(phase_calls(recipe), PHASE_KIND)
        if per_step is not None:
            notes += profile.non_phase_notes(recipe)
    return Plan(recipe, cost, budget, steps, evaluations, phase_totals(cost, steps, evaluations), seconds, profile,
                notes)


def hours_unit(profile: Profile | None) -> str:
    """What a profile's device-hours are called: CPU-hours on a CPU profile, else GPU-hours."""
    return "CPU-hours" if profile is not None and profile.device.strip().lower().startswith("cpu") else "GPU-hours"


def budget_text(budget: Budget, profile: Profile | None) -> str:
    """A budget as text: device-hours in ``profile``'s unit (``--gpu-hours`` on a CPU profile buys CPU-hours)."""
    return f"{budget.gpu_hours:g} {hours_unit(profile)}" if budget.gpu_hours is not None else budget.describe()


def _one_step_cost(cost: StepCost, seconds: dict[str, float] | None, profile: Profile | None,
                   limit: float) -> str:
    """What the first step of a run costs in the budget's unit (FLOPs, or seconds on ``profile``'s device), the
    evaluations a one-step run includes counted apart; the step with the digits it takes not to read as the budget
    (``limit``, in the same unit) does."""
    evals = cost.recipe.evaluations(1)
    if seconds is None:
        step, evaluation = float(cost.step_flops), float(cost.eval_flops)
    else:
        step = sum(seconds[phase] for phase in cost.step_phases)
        evaluation = sum(seconds[phase] for phase in cost.eval_phases)
        if profile is not None:  # a round's own time outside its phases (start-up and checkpoints apart)
            outside = profile.non_phase_seconds(cost.recipe, 1, 0)
            step += outside.get("round", 0.0) + outside.get("optimizer_step", 0.0)

    def unit(value: float, digits: int = 3) -> str:
        return eng(value, digits=digits) if profile is None else \
            f"{value / 3600:.{digits}g} {hours_unit(profile)} on {profile.device}"

    text = f"one step costs {apart(step, limit, unit)}"
    if evals and evaluation:
        text += (f", plus {unit(evals * evaluation)} for the {evals} evaluation{'s' if evals > 1 else ''} a "
                 "one-step run includes")
    return text


def phase_totals(cost: StepCost, steps: int, evaluations: int) -> dict[str, int]:
    """FLOPs per phase of a run of ``steps`` steps and ``evaluations`` evaluations (integers)."""
    out = {phase: as_int(v * steps) for phase, v in cost.step_phases.items()}
    out.update({phase: as_int(v * evaluations) for phase, v in cost.eval_phases.items()})
    return out


def require_steps(plans: list[Plan]) -> None:
    """Refuse a request in which no plan affords a single step (the message says what one step costs)."""
    if plans and all(p.steps == 0 for p in plans):
        what = budget_text(plans[0].budget, plans[0].profile)
        rewards = len({str(p.recipe.reward) for p in plans}) > 1  # (compare: each model with each reward system)
        costs = dict.fromkeys(f"{p.model}{f' with reward {p.recipe.reward}' if rewards else ''}: {p.shortfall}"
                              for p in plans)  # (once each: a compare row can repeat another's recipe)
        raise UserError(plans[0].notes[-1] if len(plans) == 1 else
                        f"the budget ({what}) buys no step of any model: " + "; ".join(costs))


# -- comparisons ------------------------------------------------------------------------------------------------

def compare_models(recipe: Recipe, models: list[str], budget: Budget, profile: Profile | None = None) -> list[Plan]:
    """Same recipe, same budget, one plan per policy size: what each size buys at equal FLOPs."""
    return [plan(recipe.with_(policy=m), budget, profile) for m in models]


def compare_rewards(recipe: Recipe, rewards: list[str], budget: Budget, models: list[str] | None = None,
                    profile: Profile | None = None) -> list[Plan]:
    """One plan per (policy, reward system) at the same budget."""
    return [plan(recipe.with_(policy=m, reward=RewardSystem.parse(r)), budget, profile)
            for m in (models or [recipe.policy]) for r in rewards]


__all__ = ["DEFAULT_BUDGET_FLOPS", "MAX_STEPS", "Budget", "Plan", "compare_models", "compare_rewards",
           "largest_true", "phase_totals", "plan", "price_steps", "require_steps"]


def budget_flops(budget: Any, recipe: Recipe, profile: Any = None, price_per_hour: float | None = None) -> int | None:
    """A budget in FLOPs: a number is FLOPs; a :class:`~flopplan.budget.Budget` in GPU-hours or dollars is what
    ``flopplan plan`` buys with it for ``recipe`` on ``profile`` (a name, a path, or a Profile): the FLOPs of the
    rounds it plans (a metered TRL run's budget)."""
    if budget is None:
        return None
    if not isinstance(budget, Budget):
        budget = Budget(flops=budget)
    if budget.flops is not None:
        return int(budget.flops)
    if profile is None:
        raise UserError(f"a budget in {budget.describe()} needs a hardware profile (profile=NAME or a file)")
    chosen = profile if isinstance(profile, Profile) else resolve_profile(str(profile), recipe.engine, price_per_hour)
    if budget.dollars is not None and chosen.price_per_hour is None:  # (plan's own line names the CLI's flag)
        raise UserError("a budget in dollars needs a price per GPU-hour (price_per_hour=...)")
    return int(plan(recipe, budget, chosen).total_flops)
