"""Budgets: exactly one of FLOPs, GPU-hours or dollars, within the limits flopplan plans (torch-free).

Shared by the planner, the training run's budget guard and RACE, so a budget means the same everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopplan.errors import UserError
from flopplan.units import eng

DEFAULT_BUDGET_FLOPS = 10**19
"""`flopplan plan` with no budget: 1e19 FLOPs (10 EFLOP)."""
BUDGET_LIMITS = {"flops": 1e30, "gpu_hours": 1e12, "dollars": 1e15}
UNIT_NAMES = {"flops": "FLOPs", "gpu_hours": "GPU-hours", "dollars": "dollars"}
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
        what = UNIT_NAMES[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"a budget in {what} must be a number, not {value!r}")
        if value <= 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise UserError(f"a budget in {what} must be a positive number, not {value!r}")
        if value > BUDGET_LIMITS[name]:
            shown = f"{float(value):.3g}" if value < 1e300 else "over 1e300"
            raise UserError(f"a budget of {shown} {what} is beyond what flopplan plans (at most "
                            f"{budget_cap(name)})")

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

    @staticmethod
    def from_data(data: Any, where: str = "budget") -> Budget:
        """A budget as plan files store it: ``{"flops": F, "gpu_hours": null, "dollars": null}``."""
        if not isinstance(data, dict) or not set(data) <= {"flops", "gpu_hours", "dollars"}:
            raise UserError(f"{where}: a budget must be an object with flops, gpu_hours or dollars")
        return Budget(**{k: v for k, v in data.items() if v is not None})
