"""The FLOP ledger of a run: every executed phase charged with the core's exact formulas (torch-free).

A runtime *unit* (a ``generate`` call, a scoring pass, an update pass, a reward-model call) charges one or more
*phases* (a generate call: ``rollout.prefill`` and ``rollout.decode``). Each :class:`PhaseCharge` holds the FLOPs
of the shapes actually executed, padding included (``executed``, what the hardware did), the same work without
padding (``useful``), and, when measured, torch FlopCounterMode's count of the unit (``measured``). Charges are
grouped by phase and bucket exactly as the planner groups its predictions (:data:`flopplan.passes.BUCKET_OF`), so
a run can be compared with its plan line by line. The built-in trainer and the TRL meter charge into the same
ledger.

The charging functions below only compute *shapes*; every FLOP comes from :mod:`flopplan.formulas`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flopplan import serial
from flopplan.arch import ArchSpec
from flopplan.formulas import (
    Conventions,
    LoRA,
    Pass,
    Training,
    forward_flops,
    generate_flops,
    pass_terms,
    prefill_pairs,
    train_terms,
)
from flopplan.passes import BUCKET_OF, BUCKETS, by_bucket, head_positions


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


def _split_generate(terms: dict[str, int], prefix: str) -> dict[str, int]:
    out = {f"{prefix}.prefill": 0, f"{prefix}.decode": 0}
    for key, value in terms.items():
        out[f"{prefix}.{key.split('/', 1)[0]}"] += int(value)
    return out


def generate_charge(spec: ArchSpec, lora: LoRA | None, conv: Conventions, batch: int, prompt_padded: int,
                    generated: int, lengths: Iterable[tuple[int, int]], prefix: str = "rollout") -> PhaseCharge:
    """One ``generate`` call: ``batch`` prompts left-padded to ``prompt_padded`` tokens, run for ``generated``
    new tokens (the longest completion); ``lengths`` are each sequence's own (prompt, completion) tokens."""
    executed = _split_generate(generate_flops(spec, batch, prompt_padded, generated, lora, conv), prefix)
    useful = dict.fromkeys(executed, 0)
    for p, k in lengths:
        for key, value in _split_generate(generate_flops(spec, 1, p, k, lora, conv), prefix).items():
            useful[key] += value
    return PhaseCharge("eval" if prefix == "eval" else "rollout", executed, useful,
                       shapes={"batch": batch, "prompt_padded": prompt_padded, "generated": generated})


MicroBatch = tuple[int, ...]
"""A scoring or update micro-batch as executed: (rows, padded prompt, padded completion), optionally followed by the
completion tokens its rows really hold (what a ``fused-compact`` head projects; default: rows x padded)."""


def sequence_pass(rows: int, prompt: int, completion: int, head: str, own_tokens: int | None = None,
                  conv: Conventions = Conventions()) -> Pass:
    """The pass of ``rows`` sequences of ``prompt + completion`` tokens with the log-prob head's positions: per
    row by the head's rule, or (``fused-compact``) the micro-batch's own completion tokens in total."""
    seq = prompt + completion
    if head == "fused-compact":
        positions = own_tokens if own_tokens is not None else rows * completion
    else:
        positions = rows * head_positions(prompt, completion, head)
    return Pass(rows * seq, rows * prefill_pairs(seq, conv.causal), positions)


def _sequence_charge(phase: str, flops_of: Callable[[Pass], Any], head: str, conv: Conventions,
                     micro_batches: Iterable[MicroBatch], lengths: Iterable[tuple[int, int]]) -> PhaseCharge:
    """Passes over prompt + completion: ``flops_of(pass)`` per padded micro-batch (executed) and per unpadded
    sequence (useful)."""
    batches = [list(b) for b in micro_batches]
    executed = sum(int(flops_of(sequence_pass(b[0], b[1], b[2], head, b[3] if len(b) > 3 else None, conv)))
                   for b in batches)
    useful = sum(int(flops_of(sequence_pass(1, p, k, head, k, conv))) for p, k in lengths)
    return PhaseCharge(phase, {phase: executed}, {phase: useful}, shapes={"micro_batches": batches, "head": head})


def scoring_charge(phase: str, spec: ArchSpec, lora: LoRA | None, conv: Conventions,
                   micro_batches: Iterable[MicroBatch], lengths: Iterable[tuple[int, int]], head: str) -> PhaseCharge:
    """No-grad forwards (old logprobs, reference): micro-batches of (rows, padded prompt, padded completion)."""
    return _sequence_charge(phase, lambda p: pass_terms(spec, p, lora, conv).total, head, conv, micro_batches,
                            lengths)


def update_charge(spec: ArchSpec, training: Training, conv: Conventions, micro_batches: Iterable[MicroBatch],
                  lengths: Iterable[tuple[int, int]], head: str) -> PhaseCharge:
    """Forward + backward (+ recompute) of micro-batches of (rows, padded prompt, padded completion)."""
    return _sequence_charge("update", lambda p: train_terms(spec, p, training, conv).total, head, conv,
                            micro_batches, lengths)


def reward_charge(spec: ArchSpec, conv: Conventions, batches: Iterable[tuple[int, int]],
                  lengths: Iterable[int]) -> PhaseCharge:
    """Reward-model forwards: batches of (rows, padded tokens); the score head runs on every position."""
    shapes = [[rows, t] for rows, t in batches]
    executed = sum(int(forward_flops(spec, rows, t, t, None, conv).total) for rows, t in shapes)
    useful = sum(int(forward_flops(spec, 1, t, t, None, conv).total) for t in lengths)
    return PhaseCharge("reward", {"reward": executed}, {"reward": useful}, shapes={"batches": shapes})


# -- the ledger -------------------------------------------------------------------------------------------------

def _zero() -> dict[str, int]:
    return dict.fromkeys(BUCKET_OF, 0)


@dataclass
class Ledger:
    """Running totals by phase (executed, useful), by unit (executed and measured) and the budget they are
    charged against. ``abandoned``: FLOPs of interrupted, rolled-back steps; ``lost``: FLOPs of steps a kill
    lost after the last checkpoint. Neither is in the buckets, both were spent, both count against the budget
    (``charge_lost`` False: lost work is recorded but not charged, so a resumed run does the steps of an
    uninterrupted one; RACE's pilots run so and report the lost work beside their spending)."""

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
    def spent_in_total(self) -> int:
        """Everything spent, abandoned and lost work included."""
        return self.spent + self.abandoned + self.lost

    @property
    def charged(self) -> int:
        """What counts against the budget: everything, lost work only when it is charged."""
        return self.spent_in_total - (0 if self.charge_lost else self.lost)

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
