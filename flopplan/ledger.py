"""The FLOP ledger of a run: every executed phase charged with the core's exact formulas (torch-free).

A runtime *unit* (a ``generate`` call, a scoring pass, an update pass, a reward-model call) charges one or more
*phases* (a generate call: ``rollout.prefill`` and ``rollout.decode``). Each :class:`PhaseCharge` holds the FLOPs
of the shapes actually executed, padding included (``executed``, what the hardware did), the same work without
padding (``useful``), and, when measured, torch FlopCounterMode's count of the unit (``measured``). Charges are
grouped by phase and bucket exactly as the planner groups its predictions (:data:`flopplan.passes.BUCKET_OF`), so
a run can be compared with its plan line by line. The built-in trainer and the TRL meter charge into the same
ledger.

A unit is charged from the passes of :func:`flopplan.passes.step_passes` (which phases run, on which model, with
which adapters and head), filled with the lengths the runtime observed (:func:`ran`), by one function,
:func:`charge`; every FLOP comes from :func:`flopplan.passes.pass_flops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from flopplan import serial
from flopplan.lengths import Observed
from flopplan.passes import BUCKET_OF, BUCKETS, RoundPass, by_bucket, observed_calls, pass_flops


@dataclass
class PhaseCharge:
    """FLOPs of one executed unit, by phase (e.g. a rollout's ``rollout.prefill`` and ``rollout.decode``)."""

    unit: str  # rollout, old_logprobs, reference, update, reward, eval
    executed: dict[str, int]
    useful: dict[str, int]
    measured: int | None = None
    seconds: float = 0.0
    shapes: dict[str, Any] = field(default_factory=dict)

    @property
    def executed_total(self) -> int:
        return sum(self.executed.values())

    def to_data(self) -> dict[str, Any]:
        return {"unit": self.unit, "executed": self.executed, "useful": self.useful, "measured": self.measured,
                "seconds": round(self.seconds, 6), "shapes": self.shapes}


def unit_of(phase: str) -> str:
    """The runtime unit that charges ``phase``: a generate call charges ``rollout.*`` (unit ``rollout``) or
    ``eval.*`` (``eval``); every other phase is its own unit."""
    return phase.split(".", 1)[0]


def ran(template: RoundPass, lengths: Sequence[tuple[int, int]], width: tuple[int, int]) -> RoundPass:
    """One call of ``template``'s phase (a pass of :func:`flopplan.passes.step_passes`: its model, adapters,
    training and head) as the runtime ran it: rows of their own (prompt, completion) tokens, padded to ``width``.
    The lengths are what the model read: a reward model's rows hold its template and separators (``extra`` 0)."""
    prompts = tuple(int(p) for p, _ in lengths)
    completions = tuple(int(k) for _, k in lengths)
    n = len(lengths)
    return replace(template, calls=1, rows=n, prompt=Observed(prompts, (int(width[0]),) * n),
                   completion=Observed(completions, (int(width[1]),) * n), padded=True, extra=0, head_tokens=None,
                   present=True, repeats=1)


def charge(*passes: RoundPass, unit: str | None = None) -> PhaseCharge:
    """The charge of a unit that ran ``passes`` (at observed lengths): ``executed``, each pass as it ran, padding
    included; ``useful``, the same pass unpadded (:meth:`~flopplan.passes.RoundPass.unpadded`). ``unit``:
    default :func:`unit_of` the first pass's phase. Every FLOP is :func:`flopplan.passes.pass_flops`'."""
    executed: dict[str, int] = {}
    useful: dict[str, int] = {}
    for p in passes:
        executed[p.phase] = executed.get(p.phase, 0) + int(pass_flops(p).total)
        useful[p.phase] = useful.get(p.phase, 0) + int(pass_flops(p.unpadded()).total)
    return PhaseCharge(unit or unit_of(passes[0].phase), executed, useful, shapes=_shapes(passes))


def _shapes(passes: Sequence[RoundPass]) -> dict[str, Any]:
    """What the calls ran, for time models (:func:`flopplan.calibrate.runs.charge_calls` reads it back): a
    generate call's rows and widths; a reward model's batches of (rows, tokens); scoring and update micro-batches
    of (rows, padded prompt, padded completion, completion tokens held) with their head."""
    calls = [call for p in passes for call in observed_calls(p)]
    first = passes[0]
    if first.kind in ("prefill", "decode"):
        rows, prompt, completion, _ = calls[0]
        return {"batch": rows, "prompt_padded": prompt, "generated": completion}
    if first.phase == "reward":
        return {"batches": [[rows, prompt + completion] for rows, prompt, completion, _ in calls]}
    return {"micro_batches": [list(call) for call in calls], "head": first.head}


# -- the ledger -------------------------------------------------------------------------------------------------

def _zero() -> dict[str, int]:
    return dict.fromkeys(BUCKET_OF, 0)


def charged_flops(spent_in_total: int, lost: int, abandoned: int, charge_lost: bool) -> int:
    """What counts against a budget of everything a run spent (``spent_in_total``: its buckets, abandoned and lost
    work): all of it, but lost and abandoned work when they are recorded, not charged (``charge_lost`` False)."""
    return spent_in_total - (0 if charge_lost else lost + abandoned)


@dataclass
class Ledger:
    """Running totals by phase (executed, useful), by unit (executed and measured) and the budget they are
    charged against. ``abandoned``: FLOPs of interrupted, rolled-back steps; ``lost``: FLOPs of steps a kill
    lost after the last checkpoint. Neither is in the buckets, both were spent, both count against the budget
    (``charge_lost`` False: both are recorded but not charged, so a run resumed after a kill or a Ctrl-C does the
    steps of an uninterrupted one; RACE's pilots run so and report the lost work beside their spending)."""

    budget_flops: int | None = None
    executed: dict[str, int] = field(default_factory=_zero)
    useful: dict[str, int] = field(default_factory=_zero)
    unit_executed: dict[str, int] = field(default_factory=dict)  # by unit, for comparison with measured
    unit_measured: dict[str, int] = field(default_factory=dict)
    unit_bucket: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    steps_completed: int = 0
    abandoned: int = 0
    lost: int = 0
    interrupted: dict[str, Any] | None = None
    charge_lost: bool = True

    @property
    def spent(self) -> int:
        return sum(self.executed.values())

    @property
    def training_flops(self) -> int:
        """FLOPs executed outside the evaluation bucket (abandoned and lost work excluded): what a training cap
        (``--train-flops``) and the evaluation points read."""
        buckets = by_bucket(self.executed)
        return int(buckets["total"] - buckets["evaluation"])

    @property
    def spent_in_total(self) -> int:
        """Everything spent, abandoned and lost work included."""
        return self.spent + self.abandoned + self.lost

    @property
    def charged(self) -> int:
        """What counts against the budget: everything, lost and abandoned work only when it is charged."""
        return charged_flops(self.spent_in_total, self.lost, self.abandoned, self.charge_lost)

    @property
    def remaining(self) -> float:
        """What the budget still allows: abandoned and lost steps were real compute, so they count here too."""
        return float("inf") if self.budget_flops is None else self.budget_flops - self.charged

    def fits(self, flops: int) -> bool:
        return flops <= self.remaining

    def charge(self, c: PhaseCharge) -> None:
        for key, value in c.executed.items():
            self.executed[key] += value
        for key, value in c.useful.items():
            self.useful[key] += value
        self.unit_executed[c.unit] = self.unit_executed.get(c.unit, 0) + c.executed_total
        self.unit_bucket[c.unit] = BUCKET_OF[next(iter(c.executed))]
        if c.measured is not None:
            self.unit_measured[c.unit] = self.unit_measured.get(c.unit, 0) + c.measured
        self.seconds[c.unit] = self.seconds.get(c.unit, 0.0) + c.seconds

    def measured_differences(self) -> dict[str, int]:
        """Each measured unit whose FLOPs counted (FlopCounterMode and the named blind spots) differ from the FLOPs
        charged: measured - charged (the backward of a trainer subclass's own forward runs inside the update's)."""
        return {u: m - self.unit_executed.get(u, 0) for u, m in self.unit_measured.items()
                if m != self.unit_executed.get(u, 0)}

    def totals(self) -> dict[str, Any]:
        """The ledger's part of a run summary (:class:`flopplan.runfile.RunSummary` fields)."""
        data: dict[str, Any] = {
            "budget_flops": self.budget_flops,
            "steps": self.steps_completed,
            "flops": by_bucket(self.executed),
            "useful_flops": by_bucket(self.useful),
            "phases": {p: {"executed": self.executed[p], "useful": self.useful[p]} for p in BUCKET_OF
                       if self.executed[p]},
            "seconds": {u: round(s, 3) for u, s in self.seconds.items()},
            "abandoned_flops": self.abandoned,
            "lost_flops": self.lost,
            "lost_charged": self.charge_lost,
            "interrupted": self.interrupted,
        }
        if self.unit_measured:
            measured = dict.fromkeys(BUCKETS, 0)
            for unit, value in self.unit_measured.items():
                measured[self.unit_bucket[unit]] += value
            data["measured_flops"] = {**measured, "total": sum(measured.values())}
            data["measured_by_unit"] = {u: {"measured": self.unit_measured.get(u), "closed_form": v}
                                         for u, v in self.unit_executed.items()}
            data["measured_equals_closed_form"] = all(
                self.unit_measured.get(u) == v for u, v in self.unit_executed.items())
        return data

    def to_state(self) -> dict[str, Any]:
        """The ledger as a checkpoint keeps it (:data:`LEDGER_STATE`)."""
        return serial.write(LEDGER_STATE, self)

    @staticmethod
    def from_state(state: Any) -> Ledger:
        """A ledger from its checkpoint state, of any version :data:`LEDGER_STATE` reads; phases the state does not
        name (a state from before they existed) start at 0."""
        ledger: Ledger = serial.read(LEDGER_STATE, Ledger, state, "the checkpoint's ledger")
        ledger.executed, ledger.useful = {**_zero(), **ledger.executed}, {**_zero(), **ledger.useful}
        return ledger


LEDGER_STATE = serial.Layout("ledger state", "flopplan_ledger_version", 1, upgrades={0: dict}, unversioned=0)
"""Version 0: the state before it had a version key (the same fields; those added later default)."""
