"""Budget -> plan: what a FLOP (or GPU-hour, or dollar) budget buys for a recipe, and the inverse questions.

A plan states the GRPO steps the budget affords, everything they buy (prompts, rollouts, generated and update
tokens, optimizer steps, reward-model evaluations), the FLOPs by bucket and phase with shares, the time where a
hardware profile is given, and what is left over. Steps are the largest integer whose cost fits:
``steps * step_cost + evaluations(steps) * eval_cost <= budget`` with ``evaluations(steps) = steps // eval_every``
(+ 1 for the baseline evaluation before the first step, when enabled).

Costs are those of :func:`flopplan.cost.step_cost`, i.e. the exact formulas of :mod:`flopplan.formulas`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from flopplan import __version__
from flopplan.arch import QWEN25_SIZES, REGISTRY, ArchSpec
from flopplan.cost import (
    BUCKET_OF,
    BUCKETS,
    EVAL_PHASES,
    PHASE_KIND,
    STEP_PHASES,
    StepCost,
    phase_calls,
    reward_flops,
    rollout_flops,
    scoring_flops,
    step_cost,
    update_flops,
)
from flopplan.errors import UserError
from flopplan.formulas import Conventions, LoRA, Training
from flopplan.hardware import Profile
from flopplan.recipe import Recipe, RewardSystem
from flopplan.report.units import eng

if TYPE_CHECKING:
    import numpy as np

PLAN_FILE_VERSION = 1
BUDGET_LIMITS = {"flops": 1e30, "gpu_hours": 1e12, "dollars": 1e15}
"""Budgets beyond these are refused: 1e30 FLOPs is a million times the largest training runs to date."""


def budget_cap(unit: str) -> str:
    """The largest budget in ``unit`` (flops, gpu_hours, dollars), as text: 1e30."""
    return f"{BUDGET_LIMITS[unit]:.0e}".replace("e+", "e")


@dataclass(frozen=True)
class Budget:
    """Exactly one of FLOPs, GPU-hours or dollars (the latter two need a profile, dollars also a price)."""

    flops: float | None = None
    gpu_hours: float | None = None
    dollars: float | None = None

    def __post_init__(self) -> None:
        given = [(n, v) for n, v in (("flops", self.flops), ("gpu_hours", self.gpu_hours),
                                     ("dollars", self.dollars)) if v is not None]
        if len(given) != 1:
            raise UserError("give exactly one budget: FLOPs, GPU-hours or dollars")
        name, value = given[0]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"the budget ({name}) must be a number, not {value!r}")
        if value <= 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise UserError(f"the budget ({name}) must be a positive number, not {value!r}")
        if value > BUDGET_LIMITS[name]:
            shown = f"{float(value):.3g}" if value < 1e300 else "over 1e300"
            raise UserError(f"a budget of {shown} {name.replace('_', '-')} is beyond what flopplan plans "
                            f"(at most {budget_cap(name)})")

    @property
    def unit(self) -> str:
        return "flops" if self.flops is not None else "gpu_hours" if self.gpu_hours is not None else "dollars"

    def describe(self) -> str:
        if self.flops is not None:
            return eng(self.flops)
        if self.gpu_hours is not None:
            return f"{self.gpu_hours:g} GPU-hours"
        return f"${self.dollars:g}"

    def to_data(self) -> dict[str, Any]:
        return {"flops": self.flops, "gpu_hours": self.gpu_hours, "dollars": self.dollars}


@dataclass
class Plan:
    """What ``budget`` buys with ``recipe``. Totals are integers (expected values, rounded, for distributions)."""

    recipe: Recipe
    cost: StepCost
    budget: Budget
    steps: int
    evaluations: int
    phases: dict[str, int]  # total FLOPs per phase over the run
    seconds: dict[str, float] | None = None  # per phase, when a profile is given
    profile: Profile | None = None
    notes: list[str] = field(default_factory=list)
    shortfall: str | None = None  # with 0 steps: what one step costs, in the budget's unit

    @property
    def model(self) -> str:
        return self.recipe.policy

    @property
    def flops(self) -> dict[str, int]:
        """FLOPs by bucket and in total (``total`` is the sum of the buckets)."""
        out = dict.fromkeys(BUCKETS, 0)
        for phase, value in self.phases.items():
            out[BUCKET_OF[phase]] += value
        out["total"] = sum(out[b] for b in BUCKETS)
        return out

    @property
    def total_flops(self) -> int:
        return self.flops["total"]

    @property
    def budget_flops(self) -> float | None:
        return self.budget.flops

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
        c = self.cost.counts
        return {key: round(value * self.steps) for key, value in c.items()}

    def to_data(self) -> dict[str, Any]:
        totals = self.totals()
        flops = self.flops
        total = flops["total"]
        data: dict[str, Any] = {
            "model": self.model,
            "reward": str(self.recipe.reward),
            "steps": self.steps,
            "prompts": totals["prompts"],
            "rollouts": totals["rollouts"],
            "generated_tokens": totals["generated_tokens"],
            "generated_tokens_executed": totals["generated_tokens_executed"],
            "update_tokens": totals["update_tokens"],
            "update_tokens_executed": totals["update_tokens_executed"],
            "optimizer_steps": totals["optimizer_steps"],
            "reward_evaluations": totals["reward_evaluations"],
            "evaluations": self.evaluations,
            "flops": flops,
            "shares": {b: round(s, 6) for b, s in self.shares().items()},
            "phases": {p: {"flops": v, "share": round(v / total, 6) if total else 0.0, "bucket": BUCKET_OF[p]}
                       for p, v in self.phases.items()},
            "step_flops": _as_int(self.cost.step_flops),
            "step_phases": {p: _as_int(v) for p, v in self.cost.step_phases.items()},
            "eval_flops": _as_int(self.cost.eval_flops),
            "budget": self.budget.to_data(),
            "budget_flops": self.budget.flops,
            "leftover_flops": self.leftover_flops,
            "exact": self.recipe.prompt_len.is_fixed and self.recipe.completion_len.is_fixed,
            "recipe": self.recipe.to_data(),
            "notes": self.notes,
        }
        if self.seconds is not None:
            data["seconds"] = {p: round(s, 3) for p, s in self.seconds.items()}
            data["gpu_hours"] = round(sum(self.seconds.values()) / 3600, 6)
            data["dollars"] = None if self.dollars is None else round(self.dollars, 2)
            data["profile"] = self.profile.to_data() if self.profile else None
        return data


def _as_int(value: Any) -> int:
    return round(float(value)) if not isinstance(value, int) else value


# -- budget -> steps --------------------------------------------------------------------------------------------

def _phase_seconds(cost: StepCost, profile: Profile) -> dict[str, float]:
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


def largest_affordable(total: Callable[[int], float], limit: float) -> int:
    """The largest ``steps >= 0`` with ``total(steps) <= limit`` for a nondecreasing ``total``; -1 when not even
    ``total(0)`` (the baseline evaluation) fits. Exact for integer totals: doubling, then bisection."""
    if total(0) > limit:
        return -1
    lo, hi = 0, 1
    while total(hi) <= limit:
        lo, hi = hi, hi * 2
        if hi > 1 << 80:
            raise UserError("the budget affords an unbounded number of steps (does a step cost nothing?)")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if total(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def plan(recipe: Recipe, budget: Budget, profile: Profile | None = None, cost: StepCost | None = None) -> Plan:
    """What ``budget`` buys with ``recipe`` (0 steps, with a note, when one step does not fit)."""
    cost = cost or step_cost(recipe)
    seconds_per = None
    limit: float
    if budget.flops is not None:
        step, evaluation, limit = cost.step_flops, cost.eval_flops, budget.flops
    else:
        if profile is None:
            raise UserError(f"a budget in {budget.unit.replace('_', '-')} needs a hardware profile (--device or "
                            "--profile)")
        seconds_per = _phase_seconds(cost, profile)
        step = sum(seconds_per[p] for p in cost.step_phases)
        evaluation = sum(seconds_per[p] for p in cost.eval_phases)
        if budget.gpu_hours is not None:
            limit = budget.gpu_hours * 3600
        else:
            if profile.price_per_hour is None:
                raise UserError("a budget in dollars needs a price per GPU-hour (--price-per-gpu-hour)")
            assert budget.dollars is not None
            limit = budget.dollars / profile.price_per_hour * 3600
    if budget.flops is not None:
        # the exact (per-phase rounded) FLOPs of a run of s steps, against the budget
        def run_total(s: int) -> float:
            return sum(_phase_totals(cost, s, recipe.evaluations(s)).values())
    else:
        def run_total(s: int) -> float:
            return s * float(step) + recipe.evaluations(s) * float(evaluation)
    steps = largest_affordable(run_total, limit)
    nothing = steps < 0  # not even the baseline evaluation fits: nothing runs
    steps = max(steps, 0)
    evaluations = 0 if nothing else recipe.evaluations(steps)
    phases = _phase_totals(cost, steps, evaluations)
    seconds = None
    if profile is not None:
        seconds_per = seconds_per or _phase_seconds(cost, profile)
        seconds = {p: s * (evaluations if p in EVAL_PHASES else steps) for p, s in seconds_per.items()}
    notes = []
    context = recipe.policy_spec.max_position_embeddings
    if context and recipe.longest_sequence > context:
        notes.append(f"sequences of up to {recipe.longest_sequence:,} tokens exceed {recipe.policy}'s "
                     f"{context:,}-token context (max_position_embeddings): the FLOPs are counted, but the model "
                     "was not trained for such lengths")
    if profile is not None:
        note = profile.extrapolation_note(recipe.policy_spec.params)
        if note:
            notes.append(note)
    shortfall = None
    if steps == 0:
        shortfall = _one_step_cost(recipe.evaluations(1), step, evaluation,
                                   None if budget.flops is not None else profile)
        notes.append(f"the budget ({budget.describe()}) buys no step of {recipe.policy}: {shortfall}")
    return Plan(recipe, cost, budget, steps, evaluations, phases, seconds, profile, notes, shortfall)


def _one_step_cost(evals: int, step: float, evaluation: float, profile: Profile | None) -> str:
    """What the first step of a run costs in the budget's unit (FLOPs, or seconds on ``profile``'s device), the
    evaluations a one-step run includes counted apart."""
    def unit(value: float) -> str:
        return eng(value) if profile is None else f"{value / 3600:.3g} GPU-hours on {profile.device}"

    text = f"one step costs {unit(step)}"
    if evals and evaluation:
        text += (f", plus {unit(evals * evaluation)} for the {evals} evaluation{'s' if evals > 1 else ''} a "
                 "one-step run includes")
    return text


def _phase_totals(cost: StepCost, steps: int, evaluations: int) -> dict[str, int]:
    out = {p: _as_int(v * steps) if not isinstance(v, int) else v * steps for p, v in cost.step_phases.items()}
    out.update({p: _as_int(v * evaluations) if not isinstance(v, int) else v * evaluations
                for p, v in cost.eval_phases.items()})
    return out


def require_steps(plans: list[Plan]) -> None:
    """Refuse a request in which no plan affords a single step (the message says what one step costs)."""
    if plans and all(p.steps == 0 for p in plans):
        raise UserError(plans[0].notes[-1] if len(plans) == 1 else
                        f"the budget ({plans[0].budget.describe()}) buys no step of any model: " + "; ".join(
                            f"{p.model}: {p.shortfall}" for p in plans))


# -- comparisons ------------------------------------------------------------------------------------------------

def compare_models(recipe: Recipe, models: list[str], budget: Budget, profile: Profile | None = None) -> list[Plan]:
    """Same recipe, same budget, one plan per policy size: what each size buys at equal FLOPs."""
    return [plan(recipe.with_(policy=m), budget, profile) for m in models]


def compare_rewards(recipe: Recipe, rewards: list[str], budget: Budget, models: list[str] | None = None,
                    profile: Profile | None = None) -> list[Plan]:
    """One plan per (policy, reward system) at the same budget."""
    return [plan(recipe.with_(policy=m, reward=RewardSystem.parse(r)), budget, profile)
            for m in (models or [recipe.policy]) for r in rewards]


# -- inverse modes ----------------------------------------------------------------------------------------------

FREE_QUANTITIES = ("steps", "group_size", "prompts_per_step", "iterations")


def _relaxed(recipe: Recipe, name: str, value: int) -> Recipe:
    """``recipe`` with ``name`` set, dropping explicit batch sizes the new value would make invalid."""
    try:
        return recipe.with_(**{name: value})
    except UserError:
        return recipe.with_(**{name: value, "generation_batch": None, "micro_batch": None, "optimizer_batch": None})


def _valid(recipe: Recipe, name: str, value: int) -> Recipe | None:
    """``recipe`` with ``name`` set, or None when that value conflicts with the recipe's batch sizes."""
    try:
        return recipe.with_(**{name: value})
    except UserError:
        return None


SOLVE_UPPER = 1 << 40  # the search for a free quantity stops here (a trillion prompts or samples per step)


def _largest(predicate: Callable[[int], bool], upper: int = SOLVE_UPPER) -> int:
    """The largest v in [1, upper] with predicate(v) true, for a predicate true up to some point (0 if none)."""
    if not predicate(1):
        return 0
    lo, hi = 1, 2
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
        return plan(_relaxed(recipe, free, value), budget, profile).steps >= steps

    bound = _largest(fits)  # the costs rise with the value; batch sizes only shift them slightly
    if bound >= SOLVE_UPPER:
        raise UserError(f"{steps} step{'s' if steps > 1 else ''} of {recipe.policy} afford more than "
                        f"{SOLVE_UPPER:,} as {free}: "
                        "the budget is far beyond this recipe; solve for steps instead")
    best, result = 0, None
    for value in range(bound + 1, 0, -1):  # the largest value the recipe's own batch sizes allow that fits
        candidate = _valid(recipe, free, value)
        if candidate is None:
            continue
        attempt = plan(candidate, budget, profile)
        if attempt.steps >= steps:
            best, result = value, attempt
            break
    if result is None:
        one = plan(_relaxed(recipe, free, 1), budget, profile)
        raise UserError(f"no {free} affords {steps} steps of {recipe.policy} with its batch sizes: "
                        f"one step costs at least {eng(one.cost.step_flops)}, {steps} steps "
                        f"{eng(one.cost.step_flops * steps)}, budget {budget.describe()}")
    result.notes.append(f"solved: largest {free} = {best} that affords {steps} steps")
    return result


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
        shares[value] = learning_share(_relaxed(recipe, free, value))
    best = min(shares, key=lambda v: (abs(shares[v] - target), v))
    notes = []
    low, high = min(shares.values()), max(shares.values())
    if not low <= target <= high:
        notes.append(f"target {target:.1%} is outside what {free} in [1, {upper}] reaches "
                     f"({low:.1%} to {high:.1%}); closest: {free}={best} at {shares[best]:.1%}")
    return _relaxed(recipe, free, best), shares[best], notes


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
        raise UserError(f"no registry model affords {steps} steps: even {ordered[0]} needs "
                        f"{eng(smallest.cost.step_flops * steps)} for them, budget {budget.describe()}")
    best.notes.append(f"largest registry model that affords {steps} steps")
    return best


# -- vectorized grids -------------------------------------------------------------------------------------------

@dataclass
class Grid:
    """Plans for every (recipe, budget) pair of a grid, as numpy arrays of shape (recipes, budgets).

    Computed in float64 (relative error ~1e-16); the scalar planner is the exact reference.
    """

    step_flops: np.ndarray  # (recipes,)
    bucket_step_flops: dict[str, np.ndarray]  # (recipes,)
    budgets: np.ndarray  # (budgets,)
    steps: np.ndarray  # (recipes, budgets)
    flops: dict[str, np.ndarray]  # bucket -> (recipes, budgets), plus "total"
    leftover: np.ndarray
    rollouts: np.ndarray
    generated_tokens: np.ndarray
    update_tokens: np.ndarray

    @property
    def size(self) -> int:
        return int(self.steps.size)


def grid_step_flops(policy: ArchSpec, reward: ArchSpec | None, reward_kind: str, *, prompts: Any, group: Any,
                    prompt: Any, completion: Any, iterations: Any, lora: LoRA | None = LoRA(64),
                    grad_ckpt: bool = True, engine: str = "hf", prefix_sharing: bool = False,
                    old_logprobs: bool | None = None, beta: float = 0.0, completion_only: bool = True,
                    overhead: int = 32, prm_steps: int = 8,
                    conv: Conventions = Conventions()) -> dict[str, Any]:
    """Per-bucket FLOPs of one step for arrays of recipes with fixed lengths (one generate call per step, so
    no padding): the same phase functions as :func:`flopplan.cost.step_cost`, on numpy arrays.

    ``old_logprobs=None`` follows the recipe's ``auto`` rule (recomputed when iterations > 1 or with vllm; the
    grid's optimizer batch is the whole round);
    ``beta > 0`` adds the reference forward, as in a :class:`Recipe`.
    """
    import numpy as np

    training = Training(lora, "non-reentrant" if grad_ckpt else "none")
    rollouts = prompts * group
    rollout_lora = lora if engine == "hf" else None
    rollout = rollout_flops(policy, conv, rollout_lora, engine, prefix_sharing, prompts, group, rollouts, prompt,
                            completion)
    learning = update_flops(policy, conv, training, rollouts, group, prompt, completion, completion_only,
                            iterations).total
    old = (np.asarray(iterations) > 1) | (engine == "vllm") if old_logprobs is None else old_logprobs
    if np.any(old):
        learning = learning + np.where(old, scoring_flops(policy, conv, lora, rollouts, group, prompt, completion,
                                                          completion_only).total, 0)
    if beta > 0:
        learning = learning + scoring_flops(policy, conv, None, rollouts, group, prompt, completion,
                                            completion_only).total
    feedback = reward_flops(reward, reward_kind, conv, rollouts, prompt, completion, overhead, prm_steps).total
    return {"rollout": rollout["rollout.prefill"].total + rollout["rollout.decode"].total,
            "learning": learning, "feedback": feedback + 0 * rollouts, "evaluation": 0 * rollouts}


def plan_grid(policy: ArchSpec, budgets: Any, reward: ArchSpec | None = None, reward_kind: str = "rule",
              **recipe_arrays: Any) -> Grid:
    """Plan every recipe of a grid (numpy arrays of equal shape, fixed lengths) under every budget at once."""
    import numpy as np

    numeric = ("prompts", "group", "prompt", "completion", "iterations")
    missing = [k for k in numeric if k not in recipe_arrays]
    if missing:
        raise UserError(f"plan_grid needs {', '.join(missing)}")
    shaped = np.broadcast_arrays(*(np.asarray(recipe_arrays[k], dtype=np.float64) for k in numeric))
    arrays: dict[str, Any] = {k: a.ravel() for k, a in zip(numeric, shaped, strict=True)}
    options: dict[str, Any] = {k: v for k, v in recipe_arrays.items() if k not in numeric}
    buckets = grid_step_flops(policy, reward, reward_kind, **arrays, **options)
    bucket_step = {b: np.broadcast_to(np.asarray(v, dtype=np.float64), arrays["prompts"].shape)
                   for b, v in buckets.items()}
    step: np.ndarray = np.sum(np.stack(list(bucket_step.values())), axis=0)
    budgets = np.asarray(budgets, dtype=np.float64).ravel()
    steps = np.floor(budgets[None, :] / step[:, None])
    steps = np.where(steps * step[:, None] > budgets[None, :], steps - 1, steps)  # guard the float division
    flops = {b: steps * v[:, None] for b, v in bucket_step.items()}
    total = steps * step[:, None]
    flops["total"] = total
    rollouts = arrays["prompts"] * arrays["group"]
    return Grid(step, bucket_step, budgets, steps, flops, budgets[None, :] - total,
                steps * rollouts[:, None], steps * (rollouts * arrays["completion"])[:, None],
                steps * (rollouts * (arrays["prompt"] + arrays["completion"]) * arrays["iterations"])[:, None])


# -- plan files -------------------------------------------------------------------------------------------------

def plans_file_data(plans: list[Plan], command: str) -> dict[str, Any]:
    """The versioned plan file: every plan with its full recipe, for ``flopplan train --plan``."""
    import datetime

    return {
        "flopplan_plan_version": PLAN_FILE_VERSION,
        "flopplan_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "budget": plans[0].budget.to_data() if plans else None,
        "budget_flops": plans[0].budget.flops if plans else None,
        "plans": [p.to_data() for p in plans],
    }


def load_plan_file(path: str) -> dict[str, Any]:
    """Read and check a plan file written by ``flopplan plan --out``."""
    from flopplan.fileio import read_json

    data = read_json(path, "plan")
    if not isinstance(data, dict) or "flopplan_plan_version" not in data or not isinstance(data.get("plans"), list):
        raise UserError(f"{path!r} is not a flopplan plan file (write one with `flopplan plan --out`)")
    if data["flopplan_plan_version"] != PLAN_FILE_VERSION:
        raise UserError(f"plan file {path!r} has version {data['flopplan_plan_version']}; this flopplan reads "
                        f"version {PLAN_FILE_VERSION}")
    return data


def recipe_of_plan(entry: dict[str, Any], where: str) -> Recipe:
    return Recipe.from_data(entry.get("recipe"), where)


__all__ = [
    "FREE_QUANTITIES",
    "STEP_PHASES",
    "Budget",
    "Grid",
    "Plan",
    "compare_models",
    "compare_rewards",
    "largest_model",
    "learning_share",
    "load_plan_file",
    "plan",
    "plan_grid",
    "plans_file_data",
    "recipe_of_plan",
    "replace",
    "require_steps",
    "solve",
    "solve_share",
]
