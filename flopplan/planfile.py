"""Plan files: the typed, versioned seam between the planner and every runner (the built-in trainer, TRL and verl
exports, RACE).

A plan file (``flopplan plan --out``, and what ``flopplan plan --format json`` prints) is a :class:`PlanFile`:
the command that made it, the budget, and one :class:`PlanEntry` per plan. An entry carries the recipe in full,
what it buys and its FLOPs by bucket and phase. Reading one is a single call (:meth:`PlanFile.load`,
:meth:`PlanEntry.from_data`) with one clear line for a bad file.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopplan import __version__
from flopplan.budget import Budget
from flopplan.errors import UserError, is_int, is_number
from flopplan.fileio import atomic_write_json, read_json
from flopplan.passes import BUCKET_OF, BUCKETS
from flopplan.recipe import Recipe
from flopplan.units import as_int

if TYPE_CHECKING:
    from flopplan.planner import Plan

PLAN_FILE_VERSION = 1
COUNTS = ("prompts", "rollouts", "generated_tokens", "generated_tokens_executed", "update_tokens",
          "update_tokens_executed", "optimizer_steps", "reward_evaluations")
"""What a plan buys over the whole run, as integers (expected values, rounded, for length distributions)."""


def bucket_flops(value: Any, where: str) -> dict[str, int]:
    """FLOPs by bucket as plans, ledgers and summaries store them: a non-negative integer per bucket and total."""
    keys = (*BUCKETS, "total")
    if not isinstance(value, dict) or not all(is_int(value.get(b)) and value[b] >= 0 for b in keys):
        raise UserError(f"{where} must map {', '.join(keys)} to non-negative integers")
    return {b: int(value[b]) for b in keys}


def _int(data: dict[str, Any], key: str, where: str, minimum: int = 0) -> int:
    value = data.get(key)
    if not is_int(value) or value < minimum:
        raise UserError(f"{where}: {key} must be a whole number >= {minimum}, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class PlanEntry:
    """One plan: a recipe, the steps it affords (or is priced for), what they buy, and the FLOPs they cost."""

    recipe: Recipe
    budget: Budget
    steps: int
    evaluations: int
    counts: dict[str, int]
    flops: dict[str, int]  # by bucket, and total
    phases: dict[str, int]  # FLOPs per phase over the run
    step_flops: int
    step_phases: dict[str, int]
    eval_flops: int
    leftover_flops: float | None = None
    exact: bool = True
    priced: bool = False  # "what do `steps` steps cost": the budget is what they need
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] | None = None
    gpu_hours: float | None = None
    dollars: float | None = None
    profile: dict[str, Any] | None = None
    overridden: tuple[str, ...] = ()  # recipe fields a run changed from the plan (set by the run, not the planner)

    @property
    def model(self) -> str:
        return self.recipe.policy

    @property
    def budget_flops(self) -> int | None:
        """The FLOP budget a run of this plan is held to (None for a budget in GPU-hours or dollars)."""
        return None if self.budget.flops is None else int(self.budget.flops)

    def shares(self) -> dict[str, float]:
        total = self.flops["total"]
        return {b: (self.flops[b] / total if total else 0.0) for b in BUCKETS}

    def with_overrides(self, run_recipe: Recipe) -> PlanEntry:
        """The entry a run of ``run_recipe`` validates: the recipe fields it changed are recorded."""
        import dataclasses

        changed = tuple(f.name for f in dataclasses.fields(run_recipe)
                        if getattr(run_recipe, f.name) != getattr(self.recipe, f.name))
        return replace(self, overridden=changed)

    @staticmethod
    def of(plan: Plan) -> PlanEntry:
        totals = plan.totals()
        cost = plan.cost
        profile = plan.profile.to_data() if plan.profile is not None and plan.seconds is not None else None
        return PlanEntry(
            recipe=plan.recipe, budget=plan.budget, steps=plan.steps, evaluations=plan.evaluations,
            counts={k: totals[k] for k in COUNTS}, flops=plan.flops, phases=dict(plan.phases),
            step_flops=as_int(cost.step_flops), step_phases={phase: as_int(v) for phase, v in cost.step_phases.items()},
            eval_flops=as_int(cost.eval_flops), leftover_flops=plan.leftover_flops,
            exact=plan.recipe.prompt_len.is_fixed and plan.recipe.completion_len.is_fixed, priced=plan.priced,
            notes=tuple(plan.notes), seconds=plan.seconds, gpu_hours=plan.gpu_hours, dollars=plan.dollars,
            profile=profile)

    def to_data(self) -> dict[str, Any]:
        total = self.flops["total"]
        data: dict[str, Any] = {"model": self.model, "reward": str(self.recipe.reward), "steps": self.steps}
        data.update(self.counts)
        data.update({
            "evaluations": self.evaluations,
            "flops": dict(self.flops),
            "shares": {b: round(s, 6) for b, s in self.shares().items()},
            "phases": {phase: {"flops": v, "share": round(v / total, 6) if total else 0.0,
                               "bucket": BUCKET_OF[phase]} for phase, v in self.phases.items()},
            "step_flops": self.step_flops,
            "step_phases": dict(self.step_phases),
            "eval_flops": self.eval_flops,
            "budget": self.budget.to_data(),
            "budget_flops": self.budget.flops,
            "leftover_flops": self.leftover_flops,
            "exact": self.exact,
            "priced": self.priced,
            "recipe": self.recipe.to_data(),
            "notes": list(self.notes),
        })
        if self.seconds is not None:
            data["seconds"] = {phase: _significant(s) for phase, s in self.seconds.items()}
            data["gpu_hours"] = None if self.gpu_hours is None else _significant(self.gpu_hours)
            data["dollars"] = None if self.dollars is None else round(self.dollars, 2)
            data["profile"] = self.profile
        if self.overridden:
            data["overridden"] = list(self.overridden)
        return data

    @staticmethod
    def from_data(data: Any, where: str = "plan entry", base_dir: Path | None = None) -> PlanEntry:
        """An entry as written by :meth:`to_data`; anything malformed is one line naming the field."""
        if not isinstance(data, dict):
            raise UserError(f"{where} is malformed: a plan must be an object")
        recipe = Recipe.from_data(data.get("recipe"), f"{where}: recipe", base_dir)
        if data.get("model", recipe.policy) != recipe.policy:
            raise UserError(f"{where} is malformed: model {data.get('model')!r} is not its recipe's policy")
        budget = Budget.from_data(data.get("budget"), f"{where} is malformed: budget")
        flops = bucket_flops(data.get("flops"), f"{where} is malformed: flops")
        phases = data.get("phases") or {}
        if not isinstance(phases, dict) or not all(
                phase in BUCKET_OF and isinstance(v, dict) and is_int(v.get("flops")) for phase, v in phases.items()):
            raise UserError(f"{where} is malformed: phases must map phase names to {{flops: integer}}")
        step_phases = data.get("step_phases") or {}
        if not isinstance(step_phases, dict) or not all(phase in BUCKET_OF and is_int(v)
                                                        for phase, v in step_phases.items()):
            raise UserError(f"{where} is malformed: step_phases must map phase names to integers")
        seconds = data.get("seconds")
        if seconds is not None and (not isinstance(seconds, dict) or not all(is_number(v) for v in seconds.values())):
            raise UserError(f"{where} is malformed: seconds must map phases to numbers")
        leftover = data.get("leftover_flops")
        if leftover is not None and not is_number(leftover):
            raise UserError(f"{where} is malformed: leftover_flops must be a number")
        overridden = data.get("overridden", [])
        notes = data.get("notes", [])
        if not isinstance(overridden, list) or not isinstance(notes, list):
            raise UserError(f"{where} is malformed: overridden and notes must be lists")
        return PlanEntry(
            recipe=recipe, budget=budget, steps=_int(data, "steps", where),
            evaluations=_int(data, "evaluations", where) if "evaluations" in data else 0,
            counts={k: _int(data, k, where) for k in COUNTS if k in data}, flops=flops,
            phases={phase: int(v["flops"]) for phase, v in phases.items()},
            step_flops=_int(data, "step_flops", where) if "step_flops" in data else 0,
            step_phases={phase: int(v) for phase, v in step_phases.items()},
            eval_flops=_int(data, "eval_flops", where) if "eval_flops" in data else 0,
            leftover_flops=leftover, exact=bool(data.get("exact", True)), priced=bool(data.get("priced", False)),
            notes=tuple(str(n) for n in notes), seconds=seconds, gpu_hours=data.get("gpu_hours"),
            dollars=data.get("dollars"), profile=data.get("profile"), overridden=tuple(str(o) for o in overridden))


@dataclass(frozen=True)
class PlanFile:
    """A versioned list of plans and the command that made them (``flopplan plan --out``)."""

    plans: tuple[PlanEntry, ...]
    command: str = ""
    budget: Budget | None = None
    created: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"))
    flopplan_version: str = __version__
    notes: tuple[str, ...] = ()  # what the request's source said (e.g. how an engine's config was read)

    @staticmethod
    def of(plans: list[Plan], command: str, notes: list[str] | tuple[str, ...] = ()) -> PlanFile:
        return PlanFile(tuple(PlanEntry.of(p) for p in plans), command, plans[0].budget if plans else None,
                        notes=tuple(notes))

    def to_data(self) -> dict[str, Any]:
        return {
            "flopplan_plan_version": PLAN_FILE_VERSION,
            "flopplan_version": self.flopplan_version,
            "created": self.created,
            "command": self.command,
            "budget": self.budget.to_data() if self.budget else None,
            "budget_flops": self.budget.flops if self.budget else None,
            "plans": [p.to_data() for p in self.plans],
            **({"notes": list(self.notes)} if self.notes else {}),
        }

    def save(self, path: str | Path) -> Path:
        return atomic_write_json(path, self.to_data())

    @staticmethod
    def from_data(data: Any, where: str) -> PlanFile:
        if not isinstance(data, dict) or "flopplan_plan_version" not in data or not isinstance(data.get("plans"), list):
            raise UserError(f"{where} is not a flopplan plan file (write one with `flopplan plan --out`)")
        version = data["flopplan_plan_version"]
        if not is_int(version) or version != PLAN_FILE_VERSION:
            raise UserError(f"{where}: flopplan_plan_version must be the integer {PLAN_FILE_VERSION} (the layout this "
                            f"flopplan reads), not {version!r}")
        plans = tuple(PlanEntry.from_data(p, f"{where}, plan {i + 1}") for i, p in enumerate(data["plans"]))
        budget = Budget.from_data(data["budget"], f"{where}: budget") if data.get("budget") else None
        notes = data.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise UserError(f"{where}: notes must be a list of strings")
        return PlanFile(plans, str(data.get("command", "")), budget, str(data.get("created", "")),
                        str(data.get("flopplan_version", "")), tuple(notes))

    @staticmethod
    def load(path: str | Path) -> PlanFile:
        """Read and check a plan file written by ``flopplan plan --out``."""
        return PlanFile.from_data(read_json(path, "plan"), f"plan file {str(path)!r}")

    def select(self, model: str | None = None) -> PlanEntry:
        """The one plan to run: the only one, or the one for ``model``."""
        if not self.plans:
            raise UserError("the plan file holds no plans")
        entries = [p for p in self.plans if model is None or p.model == model]
        if model is not None and not entries:
            raise UserError(f"the plan file has no plan for {model!r} (it has {_names(self.plans)})")
        if len(entries) != 1:
            raise UserError(f"the plan file holds {len(entries)} plans: choose one with --plan-model "
                            f"({_names(self.plans)})")
        return entries[0]


def _significant(value: float, digits: int = 6) -> float:
    """``value`` to ``digits`` significant digits (times of a tiny model are microseconds, of a run days)."""
    return float(f"{value:.{digits}g}")


def _names(plans: tuple[PlanEntry, ...]) -> str:
    return ", ".join(p.model for p in plans) or "none"
