"""The FLOP ledger of a run: every executed phase charged with the core's exact formulas (torch-free).

Each charge holds the FLOPs of the shapes actually executed, padding included (``executed``, what the hardware
did), the same work without padding (``useful``), and, when measured, torch FlopCounterMode's count of the same
call (``measured``). Charges are grouped by phase and bucket exactly as the planner groups its predictions
(:data:`flopplan.cost.BUCKET_OF`), so a run can be compared with its plan line by line.

The charging functions below only compute *shapes*; every FLOP comes from :mod:`flopplan.formulas`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.cost import BUCKET_OF, BUCKETS, head_positions
from flopplan.formulas import Conventions, LoRA, Training, forward_flops, generate_flops, train_flops

LEDGER_VERSION = 1


@dataclass
class PhaseCharge:
    """FLOPs of one executed phase unit, by sub-phase (e.g. ``rollout.prefill``, ``rollout.decode``)."""

    phase: str
    executed: dict[str, int]
    useful: dict[str, int]
    measured: int | None = None
    seconds: float = 0.0
    shapes: dict[str, Any] = field(default_factory=dict)

    @property
    def executed_total(self) -> int:
        return sum(self.executed.values())

    @property
    def useful_total(self) -> int:
        return sum(self.useful.values())

    def to_data(self) -> dict[str, Any]:
        return {"phase": self.phase, "executed": self.executed, "useful": self.useful, "measured": self.measured,
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


def _sequence_charge(phase: str, flops_of: Callable[[int, int, int], Any],
                     micro_batches: Iterable[tuple[int, int, int]], lengths: Iterable[tuple[int, int]]) -> PhaseCharge:
    """Passes over prompt + completion: ``flops_of(rows, prompt, completion)`` per padded micro-batch
    (executed) and per unpadded sequence (useful)."""
    batches = [list(b) for b in micro_batches]
    executed = sum(int(flops_of(rows, p, k)) for rows, p, k in batches)
    useful = sum(int(flops_of(1, p, k)) for p, k in lengths)
    return PhaseCharge(phase, {phase: executed}, {phase: useful}, shapes={"micro_batches": batches})


def scoring_charge(phase: str, spec: ArchSpec, lora: LoRA | None, conv: Conventions,
                   micro_batches: Iterable[tuple[int, int, int]], lengths: Iterable[tuple[int, int]],
                   completion_only: bool) -> PhaseCharge:
    """No-grad forwards (old logprobs, reference): micro-batches of (rows, padded prompt, padded completion)."""
    return _sequence_charge(phase, lambda rows, p, k: forward_flops(
        spec, rows, p + k, head_positions(p, k, completion_only), lora, conv).total, micro_batches, lengths)


def update_charge(spec: ArchSpec, training: Training, conv: Conventions, micro_batches: Iterable[tuple[int, int, int]],
                  lengths: Iterable[tuple[int, int]], completion_only: bool) -> PhaseCharge:
    """Forward + backward (+ recompute) of micro-batches of (rows, padded prompt, padded completion)."""
    return _sequence_charge("update", lambda rows, p, k: train_flops(
        spec, rows, p + k, head_positions(p, k, completion_only), training, conv).total, micro_batches, lengths)


def reward_charge(spec: ArchSpec, conv: Conventions, batches: Iterable[tuple[int, int]],
                  lengths: Iterable[int]) -> PhaseCharge:
    """Reward-model forwards: batches of (rows, padded tokens); the score head runs on every position."""
    executed = sum(int(forward_flops(spec, rows, t, t, None, conv).total) for rows, t in batches)
    useful = sum(int(forward_flops(spec, 1, t, t, None, conv).total) for t in lengths)
    return PhaseCharge("reward", {"reward": executed}, {"reward": useful})


# -- the ledger -------------------------------------------------------------------------------------------------

def _zero() -> dict[str, int]:
    return dict.fromkeys(BUCKET_OF, 0)


UNIT_BUCKET = {"rollout": "rollout", "old_logprobs": "learning", "reference": "learning", "update": "learning",
               "reward": "feedback", "eval": "evaluation"}
"""Bucket of each phase unit (a unit may charge several sub-phases, e.g. a rollout its prefill and decode)."""


@dataclass
class Ledger:
    """Running totals by sub-phase (executed, useful, measured) and the budget they are charged against."""

    budget_flops: int | None = None
    executed: dict[str, int] = field(default_factory=_zero)
    useful: dict[str, int] = field(default_factory=_zero)
    unit_executed: dict[str, int] = field(default_factory=dict)  # by phase unit, for comparison with measured
    unit_measured: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    steps_completed: int = 0
    abandoned: int = 0  # FLOPs of interrupted, rolled-back steps: not in the buckets, but spent
    interrupted: dict[str, Any] | None = None

    @property
    def spent(self) -> int:
        return sum(self.executed.values())

    @property
    def spent_with_abandoned(self) -> int:
        return self.spent + self.abandoned

    @property
    def remaining(self) -> float:
        """What the budget still allows: abandoned steps were real compute, so they count here too."""
        return float("inf") if self.budget_flops is None else self.budget_flops - self.spent_with_abandoned

    def fits(self, flops: int) -> bool:
        return flops <= self.remaining

    def charge(self, c: PhaseCharge) -> None:
        for key, value in c.executed.items():
            self.executed[key] += value
        for key, value in c.useful.items():
            self.useful[key] += value
        self.unit_executed[c.phase] = self.unit_executed.get(c.phase, 0) + c.executed_total
        if c.measured is not None:
            self.unit_measured[c.phase] = self.unit_measured.get(c.phase, 0) + c.measured
        self.seconds[c.phase] = self.seconds.get(c.phase, 0.0) + c.seconds

    @staticmethod
    def by_bucket(per_phase: dict[str, int]) -> dict[str, int]:
        out = dict.fromkeys(BUCKETS, 0)
        for phase, value in per_phase.items():
            out[BUCKET_OF[phase]] += value
        out["total"] = sum(out[b] for b in BUCKETS)
        return out

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ledger_version": LEDGER_VERSION,
            "budget_flops": self.budget_flops,
            "steps": self.steps_completed,
            "flops": self.by_bucket(self.executed),
            "useful_flops": self.by_bucket(self.useful),
            "phases": {p: {"executed": self.executed[p], "useful": self.useful[p]} for p in BUCKET_OF
                       if self.executed[p]},
            "seconds": {p: round(s, 3) for p, s in self.seconds.items()},
            "leftover_flops": None if self.budget_flops is None else self.budget_flops - self.spent_with_abandoned,
            "abandoned_flops": self.abandoned,
            "within_budget": self.budget_flops is None or self.spent_with_abandoned <= self.budget_flops,
        }
        if self.unit_measured:
            buckets = dict.fromkeys(BUCKETS, 0)
            for unit, value in self.unit_measured.items():
                buckets[UNIT_BUCKET[unit]] += value
            data["measured_flops"] = {**buckets, "total": sum(buckets.values())}
            data["measured_by_phase"] = {u: {"measured": self.unit_measured.get(u), "closed_form": v}
                                         for u, v in self.unit_executed.items()}
            data["measured_equals_closed_form"] = all(
                self.unit_measured.get(u) == v for u, v in self.unit_executed.items())
        if self.interrupted:
            data["interrupted"] = self.interrupted
        return data

    def to_state(self) -> dict[str, Any]:
        return {"budget_flops": self.budget_flops, "executed": self.executed, "useful": self.useful,
                "unit_executed": self.unit_executed, "unit_measured": self.unit_measured,
                "seconds": self.seconds, "steps_completed": self.steps_completed, "abandoned": self.abandoned,
                "interrupted": self.interrupted}

    @staticmethod
    def from_state(state: dict[str, Any]) -> Ledger:
        ledger = Ledger(state["budget_flops"])
        ledger.executed.update(state["executed"])
        ledger.useful.update(state["useful"])
        ledger.unit_executed = dict(state["unit_executed"])
        ledger.unit_measured = dict(state["unit_measured"])
        ledger.seconds = dict(state["seconds"])
        ledger.steps_completed = state["steps_completed"]
        ledger.abandoned = int(state.get("abandoned", 0))
        ledger.interrupted = state.get("interrupted")
        return ledger
