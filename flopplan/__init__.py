"""flopplan: where RL post-training compute goes. Exact FLOP accounting and budget planning for GRPO.

The public, torch-free API (imported on first use, so ``import flopplan`` stays instant)::

    from flopplan import Recipe, RewardSystem, Length, Budget, plan, price_steps, solve, plan_grid, step_cost

A *step* is one generation round (see :mod:`flopplan.passes` for the glossary).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers read the name as the function too (see _Package)
    from flopplan.solve import solve as solve

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
    "solve": "flopplan.solve", "solve_share": "flopplan.solve", "largest_model": "flopplan.solve",
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


class _Package(ModuleType):
    """The package's module type, for one name: ``solve`` is both a module (flopplan/solve.py) and the function the
    API exports. The import system binds a loaded submodule as an attribute of its package, which would hide the
    function; this property keeps the name for the function and ignores that binding. Import from the module by its
    dotted name (``from flopplan.solve import plan_request``): ``import flopplan.solve as m`` binds the function."""

    @property
    def solve(self) -> Any:
        from flopplan.solve import solve

        return solve

    @solve.setter
    def solve(self, value: Any) -> None:
        pass


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted([*_API, "__version__"])


__all__ = sorted(_API)
