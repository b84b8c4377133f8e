"""flopplan: where RL post-training compute goes. Exact FLOP accounting and budget planning for GRPO.

The public, torch-free API (imported on first use, so ``import flopplan`` stays instant)::

    from flopplan import Recipe, RewardSystem, Length, Budget, plan, price_steps, solve, plan_grid, step_cost

A *step* is one generation round (see :mod:`flopplan.passes` for the glossary).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {
    "ArchSpec": "flopplan.arch", "resolve": "flopplan.arch",
    "Length": "flopplan.lengths",
    "Recipe": "flopplan.recipe", "RewardSystem": "flopplan.recipe",
    "Budget": "flopplan.budget",
    "StepCost": "flopplan.cost", "step_cost": "flopplan.cost", "worst_case_round": "flopplan.cost",
    "step_passes": "flopplan.passes", "RoundShape": "flopplan.passes", "RoundLengths": "flopplan.passes",
    "Plan": "flopplan.planner", "plan": "flopplan.planner", "price_steps": "flopplan.planner",
    "compare_models": "flopplan.planner", "compare_rewards": "flopplan.planner",
    "solve": "flopplan.solver", "solve_share": "flopplan.solver", "largest_model": "flopplan.solver",
    "plan_grid": "flopplan.grid", "Grid": "flopplan.grid",
    "PlanFile": "flopplan.planfile", "PlanEntry": "flopplan.planfile",
    "RunSummary": "flopplan.runfile", "load_run": "flopplan.runfile", "load_summary": "flopplan.runfile",
    "Profile": "flopplan.hardware", "resolve_profile": "flopplan.hardware", "load_profile": "flopplan.hardware",
}


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'flopplan' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_API[name]), name)


def __dir__() -> list[str]:
    return sorted([*_API, "__version__"])


__all__ = sorted(_API)
