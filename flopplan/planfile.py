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
from typing import TYPE_CHECKING, Any, ClassVar

from flopplan import __version__, serial
from flopplan.budget import BUDGET_LIMITS, Budget, budget_cap
from flopplan.errors import UserError, first_problem, is_int, is_number
from flopplan.fileio import atomic_write_json, read_json
from flopplan.passes import BUCKET_OF, BUCKETS, by_bucket
from flopplan.recipe import Recipe
from flopplan.units import as_int

if TYPE_CHECKING:
    from flopplan.planner import Plan

PLAN_FILE_VERSION = 1
PLAN_LAYOUT = serial.Layout("plan file", "flopplan_plan_version", PLAN_FILE_VERSION,
                            hint="write one with `flopplan plan --out`")
COUNTS = ("prompts", "rollouts", "generated_tokens", "generated_tokens_executed", "update_tokens",
          "update_tokens_executed", "optimizer_steps", "reward_evaluations")
"""What a plan buys over the whole run, as integers (expected values, rounded, for length distributions)."""


def bucket_flops(value: Any, where: str) -> dict[str, int]:
    """FLOPs by bucket as plans, ledgers and summaries store them: a non-negative integer per bucket and total."""
    keys = (*BUCKETS, "total")
    if not isinstance(value, dict) or not all(is_int(value.get(b)) and value[b] >= 0 for b in keys):
        raise UserError(f"{where} must map {', '.join(keys)} to non-negative integers")
    return {b: int(value[b]) for b in keys}


def _phase_flops(value: Any, where: str) -> dict[str, int]:
    """A plan's phases as written ({phase: {flops, share, bucket}}): the FLOPs of each."""
    if not isinstance(value, dict) or not all(
            phase in BUCKET_OF and isinstance(v, dict) and is_int(v.get("flops")) for phase, v in value.items()):
        raise UserError(f"{where} must map phase names to {{flops: integer}}")
    return {phase: int(v["flops"]) for phase, v in value.items()}


_COUNT = serial.spec(check=serial.NON_NEGATIVE)
_COUNT_MAP = serial.spec(check=serial.Check(lambda d: all(v >= 0 for v in d.values()), "counts >= 0"))
_PHASES = serial.Check(lambda d: all(phase in BUCKET_OF for phase in d), "a map of phase names to integers")
_DERIVED = ("model", "reward", "shares", "budget_flops")  # written for readers, recomputed when read


@dataclass(frozen=True)
class PlanEntry:
    """One plan: a recipe, the steps it affords (or is priced for), what they buy, and the FLOPs they cost."""

    recipe: Recipe
    budget: Budget
    steps: int = field(metadata=_COUNT)
    flops: dict[str, int] = field(metadata=serial.spec(read=bucket_flops))  # by bucket, and total
    evaluations: int = field(default=0, metadata=_COUNT)
    counts: dict[str, int] = field(default_factory=dict, metadata=_COUNT_MAP)  # written at the top level
    # FLOPs per phase over the run (written with each one's share and bucket)
    phases: dict[str, int] = field(default_factory=dict, metadata=serial.spec(read=_phase_flops))
    step_flops: int = field(default=0, metadata=_COUNT)
    step_phases: dict[str, int] = field(default_factory=dict, metadata=serial.spec(check=_PHASES))
    eval_flops: int = field(default=0, metadata=_COUNT)
    leftover_flops: int | float | None = None
    exact: bool = True
    priced: bool = False  # "what do `steps` steps cost": the budget is what they need
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] | None = field(default=None, metadata=serial.spec(
        omit=True, write=lambda v: {phase: _significant(s) for phase, s in v.items()}))
    gpu_hours: float | None = field(default=None, metadata=serial.spec(omit=True, write=lambda v: _significant(v)))
    # (significant digits, as gpu_hours: to the cent, $0.99996 of a $1 budget was written 1.0 and $0.004 as 0.0)
    dollars: float | None = field(default=None, metadata=serial.spec(omit=True, write=lambda v: _significant(v)))
    profile: dict[str, Any] | None = field(default=None, metadata=serial.spec(omit=True))
    # recipe fields a run changed from the plan (set by the run, not the planner)
    overridden: tuple[str, ...] = field(default=(), metadata=serial.spec(omit=True))

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

    def check_priced_as_written(self, what: str) -> None:
        """Refuse an entry whose recipe no longer prices to the step it records: the recipe edited by hand, or a
        plan of a flopplan whose count has changed since. An export runs the recipe for the entry's steps, so it
        would spend other FLOPs than the plan says (and verl has no meter to stop it)."""
        from flopplan.cost import step_cost  # (the cost model imports the recipe, as this module does)

        now = as_int(step_cost(self.recipe).step_flops)
        if now != self.step_flops:
            raise UserError(f"{what}: the plan of {self.model} records {self.step_flops:,} FLOPs a step, and its "
                            f"recipe prices at {now:,} (edited by hand, or planned by another flopplan version): plan "
                            "it again (flopplan plan --recipe FILE, or the plan's command)")

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
        """The entry's fields (:mod:`flopplan.serial`) laid out as plan files have them: the counts at the top
        level, each phase with its share and bucket, and the derived keys readers use."""
        total = self.flops["total"]
        data: dict[str, Any] = {"model": self.model, "reward": str(self.recipe.reward), **serial.to_data(self)}
        data.update(data.pop("counts"))
        data["phases"] = {phase: {"flops": v, "share": round(v / total, 6) if total else 0.0,
                                  "bucket": BUCKET_OF[phase]} for phase, v in self.phases.items()}
        data["shares"] = {b: round(s, 6) for b, s in self.shares().items()}
        data["budget_flops"] = self.budget.flops
        if self.seconds is not None:  # a priced plan states its hours, price and profile, null when unknown
            data.update({k: data.get(k) for k in ("gpu_hours", "dollars", "profile")})
        return data

    @staticmethod
    def from_data(data: Any, where: str = "plan entry") -> PlanEntry:
        """An entry as written by :meth:`to_data`; anything malformed is one line naming the field."""
        if not isinstance(data, dict):
            raise UserError(f"{where} is malformed: a plan must be an object")
        fields = {k: v for k, v in data.items() if k not in COUNTS and k not in _DERIVED}
        fields["counts"] = {k: v for k, v in data.items() if k in COUNTS}
        entry: PlanEntry = serial.from_data(PlanEntry, fields, where)
        if data.get("model", entry.model) != entry.model:
            raise UserError(f"{where} is malformed: model {data.get('model')!r} is not its recipe's policy")
        problem = entry._inconsistency(data)
        if problem:
            raise UserError(f"{where} is malformed: {problem} (a plan file flopplan writes has it so)")
        return entry

    def _inconsistency(self, data: dict[str, Any]) -> str:
        """What in a read entry no planner would have written, '' when nothing: the FLOPs past the planner's cap,
        the buckets, the phases and the steps that disagree, a budget_flops that is not its budget's, the other
        derived keys of the wrong type."""
        total, budget = self.flops["total"], self.budget.flops
        step_phases, slack = sum(self.step_phases.values()), len(self.step_phases)  # each phase rounded apart
        expected_evaluations = {self.recipe.evaluations(self.steps)} | ({0} if self.steps == 0 else set())
        huge = [k for k, v in self.counts.items() if v > BUDGET_LIMITS["flops"]]
        shares = data.get("shares", self.shares())
        return first_problem((
            (max(total, self.step_flops, self.eval_flops) <= BUDGET_LIMITS["flops"],
             f"flops.total, step_flops and eval_flops must be within what flopplan plans ({budget_cap('flops')})"),
            (by_bucket(self.phases) == self.flops, "phases must be given and add up to flops by bucket"),
            (all(v >= 0 for v in self.step_phases.values()), "step_phases must be FLOPs >= 0"),
            (abs(step_phases - self.step_flops) <= slack + self.step_flops * 1e-12,
             "step_phases must add up to step_flops"),
            # every phase's run total is its step's FLOPs (a float) times steps (or evaluations), rounded once
            # per phase: they agree to the rounding and to a float's precision
            (abs(self.steps * self.step_flops + self.evaluations * self.eval_flops - total)
             <= self.steps + self.evaluations + len(self.phases) + slack + total * 1e-12,
             "steps x step_flops + evaluations x eval_flops must be flops.total"),
            (self.evaluations in expected_evaluations, f"evaluations must be {min(expected_evaluations)} for "
                                                       f"{self.steps} steps of its recipe"),
            (self.counts.get("prompts", self.steps * self.recipe.prompts_per_step)
             == self.steps * self.recipe.prompts_per_step, "prompts must be steps x prompts_per_step"),
            (not huge, f"{', '.join(huge)} must be at most {budget_cap('flops')} (each costs FLOPs)"),
            (budget is None or total <= budget, "flops.total must be within its budget"),
            (budget is None or self.leftover_flops in (None, budget - total),
             "leftover_flops must be the budget less flops.total"),
            (data.get("budget_flops", budget) == budget and type(data.get("budget_flops", budget)) is type(budget),
             "budget_flops must be its budget's flops"),
            # the other derived keys are recomputed when read: of their type
            (isinstance(data.get("reward", ""), str), "reward must be its recipe's reward system, a string"),
            (isinstance(shares, dict) and set(shares) == set(BUCKETS) and all(
                is_number(v) and 0 <= v <= 1 for v in shares.values()),
             "shares must map each bucket to its share of flops.total, from 0 to 1"),
        ))


@dataclass(frozen=True)
class PlanFile:
    """A versioned list of plans and the command that made them (``flopplan plan --out``)."""

    DERIVED: ClassVar = ("budget_flops",)

    plans: tuple[PlanEntry, ...]
    command: str = ""
    budget: Budget | None = None
    created: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"))
    flopplan_version: str = __version__
    # what the request's source said (e.g. how an engine's config was read)
    notes: tuple[str, ...] = field(default=(), metadata=serial.spec(omit=True))

    @staticmethod
    def of(plans: list[Plan], command: str, notes: list[str] | tuple[str, ...] = ()) -> PlanFile:
        return PlanFile(tuple(PlanEntry.of(p) for p in plans), command, plans[0].budget if plans else None,
                        notes=tuple(notes))

    @property
    def budget_flops(self) -> float | None:
        return self.budget.flops if self.budget else None

    def to_data(self) -> dict[str, Any]:
        """The file's data: what made it and the budget first, the plans last (a reader sees the header)."""
        data = serial.write(PLAN_LAYOUT, self)
        data["plans"] = data.pop("plans")
        return data

    def save(self, path: str | Path) -> Path:
        return atomic_write_json(path, self.to_data())

    @staticmethod
    def from_data(data: Any, where: str) -> PlanFile:
        plan_file: PlanFile = serial.read(PLAN_LAYOUT, PlanFile, data, where)
        derived, budget = data.get("budget_flops"), plan_file.budget_flops
        if "budget_flops" in data and (derived != budget or type(derived) is not type(budget)):
            raise UserError(f"{where} is malformed: budget_flops must be its budget's flops, not {derived!r:.60}")
        return plan_file

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
