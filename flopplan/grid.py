"""Vectorized grids: plans for every (recipe, budget) pair of a grid at once, as numpy arrays.

A grid is one recipe's traits (policy, adapters, engine, reward system, conventions) with numeric fields given as
arrays: prompts per step, group size, prompt and completion length (fixed), iterations. Its step cost is the same
list of passes the scalar planner prices (:func:`flopplan.passes.step_passes`), evaluated on the arrays; batch
sizes are the recipe defaults (one generate call per step, micro-batches of G, one optimizer batch per round) and
there is no evaluation, so padding plays no part and every length is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from flopplan.errors import UserError
from flopplan.passes import BUCKETS, RoundLengths, RoundShape, old_logprobs_run, reward_extra_tokens, step_passes
from flopplan.recipe import Recipe

if TYPE_CHECKING:
    import numpy as np

GRID_FIELDS = ("prompts_per_step", "group_size", "prompt_len", "completion_len", "iterations")
"""The recipe fields a grid may give as arrays."""


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


def _arrays(recipe: Recipe, given: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    unknown = sorted(set(given) - set(GRID_FIELDS))
    if unknown:
        raise UserError(f"plan_grid takes arrays for {', '.join(GRID_FIELDS)}, not {', '.join(unknown)}")
    if recipe.generation_batch or recipe.micro_batch or recipe.optimizer_batch or recipe.eval_every is not None:
        raise UserError("plan_grid prices the default batch sizes and no evaluation: drop generation_batch, "
                        "micro_batch, optimizer_batch and eval_every from the recipe")
    values: dict[str, Any] = {}
    for name in GRID_FIELDS:
        if name in given:
            values[name] = given[name]
            continue
        value = getattr(recipe, name)
        if hasattr(value, "is_fixed"):
            if not value.is_fixed:
                raise UserError(f"plan_grid needs fixed lengths: give {name} as an array")
            value = value.support[0]
        values[name] = value
    shaped = np.broadcast_arrays(*(np.asarray(values[k], dtype=np.float64) for k in GRID_FIELDS))
    return {k: a.ravel() for k, a in zip(GRID_FIELDS, shaped, strict=True)}


def grid_step_flops(recipe: Recipe, **arrays: Any) -> dict[str, Any]:
    """Per-bucket FLOPs of one step for arrays of recipes (see the module docstring)."""
    import numpy as np

    a = _arrays(recipe, arrays)
    prompts, group, iterations = a["prompts_per_step"], a["group_size"], a["iterations"]
    rollouts = prompts * group
    # the recipe's traits; the grid's counts, each round in one generate call and micro-batches of a group. The
    # optimizer batch is the whole round, so a round has `iterations` optimizer steps.
    shape = replace(RoundShape.of(recipe), prompts=prompts, group=group, generation_batch=rollouts, micro_batch=group,
                    iterations=iterations, old_logprobs=old_logprobs_run(recipe.old_logprobs, iterations,
                                                                         recipe.engine), eval_prompts=0)
    prompt, completion = a["prompt_len"], a["completion_len"]
    extra = reward_extra_tokens(recipe.reward.kind, recipe.reward_overhead_tokens, recipe.prm_steps)
    lengths = RoundLengths(prompt, completion, prompt, extra)
    out = {b: np.zeros_like(rollouts) for b in BUCKETS}
    for p in step_passes(shape, lengths):
        out[p.bucket] = out[p.bucket] + p.call_flops(p.rows, p.prompt, p.completion).total * p.count * p.present
    return out


def plan_grid(recipe: Recipe, budgets: Any, **arrays: Any) -> Grid:
    """Plan every recipe of a grid (numpy arrays of equal shape for :data:`GRID_FIELDS`) under every budget."""
    import numpy as np

    a = _arrays(recipe, arrays)
    bucket_step = {b: np.asarray(v, dtype=np.float64) for b, v in grid_step_flops(recipe, **arrays).items()}
    step: np.ndarray = np.sum(np.stack(list(bucket_step.values())), axis=0)
    budgets = np.asarray(budgets, dtype=np.float64).ravel()
    steps = np.floor(budgets[None, :] / step[:, None])
    steps = np.where(steps * step[:, None] > budgets[None, :], steps - 1, steps)  # guard the float division
    flops = {b: steps * v[:, None] for b, v in bucket_step.items()}
    total = steps * step[:, None]
    flops["total"] = total
    rollouts = a["prompts_per_step"] * a["group_size"]
    update_tokens = rollouts * (a["prompt_len"] + a["completion_len"]) * a["iterations"]
    return Grid(step, bucket_step, budgets, steps, flops, budgets[None, :] - total, steps * rollouts[:, None],
                steps * (rollouts * a["completion_len"])[:, None], steps * update_tokens[:, None])
