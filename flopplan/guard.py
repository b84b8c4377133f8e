"""The budget guard and run recorder every training loop calls (torch-free): the built-in trainer and the TRL meter.

A loop prices its next round (an upper bound, :func:`flopplan.cost.worst_case_round`) and asks :meth:`Guard.decide`
whether it fits what the budget leaves; the answer is a :class:`StopDecision`, data from which the stop message is
rendered. When a round ends the loop hands its charges to :meth:`Guard.commit` and writes the one metrics line
(:func:`metrics_line`) every engine writes; at the end :meth:`Guard.summary` is the run summary. In flopplan a step
is one generation round (:mod:`flopplan.passes`); TRL's loop calls it a round, and the message says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flopplan.errors import UserError
from flopplan.ledger import Ledger, PhaseCharge
from flopplan.runfile import RunSummary

REASONS = ("budget", "steps", "interrupted", "stopped", "failed")
"""Why a loop stops: the next round might not fit the budget; the step (or round, or optimizer-step) limit was
reached; the user interrupted it; the script's own rule ended it short of its limit; the user's code (a reward
function) failed in a step, which was abandoned (like an interruption, the run resumes once it is fixed)."""


@dataclass(frozen=True)
class StopDecision:
    """Whether a loop stops before a round, and why: the data the stop message is rendered from."""

    stop: bool = False  # the loop ends before round ``round``; once True for a run, it is never set back
    reason: str = ""  # one of REASONS when stopping, "" to go on
    round: int = 0  # the round decided about: 1 + the rounds completed over the whole run (resumes included)
    bound_flops: int | None = None  # the guard's bound of that round's FLOPs (evaluation included); None: unpriced
    remaining_flops: int | None = None  # FLOPs the budget leaves before that round (charged work deducted); None:
    #                                     no budget
    detail: str = ""  # the message of a reason without numbers (steps, interrupted)
    noun: str = "step"  # what the loop calls a round in messages (TRL: "round")
    what: str = ""  # what the bound prices where it is more than that round (the evaluations the TRL meter keeps in
    #                 reserve with it, or an evaluation alone); "": the round alone

    @property
    def message(self) -> str:
        """The stop reason for people ("" while going on)."""
        if self.reason == "budget":
            return (f"budget: {self.what or f'{self.noun} {self.round}'} could cost up to {self.bound_flops:,} "
                    f"FLOPs, {self.remaining_flops:,} left")
        return self.detail

    def to_data(self) -> dict[str, Any]:
        return {"stop": self.stop, "reason": self.reason, "round": self.round, "bound_flops": self.bound_flops,
                "remaining_flops": self.remaining_flops}


class Guard:
    """The budget guard of one run over its :class:`~flopplan.ledger.Ledger` (which holds the budget, the charges
    and the rounds completed). ``decision``: the latest :class:`StopDecision`; a stop is final for the run, but for
    an ``interrupted`` one, which :meth:`resume` lifts when the same run goes on."""

    def __init__(self, ledger: Ledger, noun: str = "step") -> None:
        self.ledger, self.noun = ledger, noun
        self.decision = StopDecision(noun=noun)

    @property
    def next_round(self) -> int:
        """The round a decision now is about: the rounds completed, plus one."""
        return self.ledger.steps_completed + 1

    def decide(self, bound_flops: int, what: str = "") -> StopDecision:
        """Before the next round: stop (reason ``budget``) when its bound does not fit what the budget leaves.
        ``what``: what the bound prices, for the message, where it is more than the next round alone."""
        if self.decision.stop:
            return self.decision
        remaining = self.ledger.remaining
        fits = self.ledger.fits(bound_flops)
        self.decision = StopDecision(not fits, "" if fits else "budget", self.next_round, int(bound_flops),
                                     None if self.ledger.budget_flops is None else int(remaining), noun=self.noun,
                                     what=what)
        return self.decision

    def decide_cap(self, bound_flops: int, cap: int | None) -> StopDecision:
        """Before the next round, with :meth:`decide`: stop (reason ``budget``) when its training bound (evaluations
        excluded) could take the ledger's training FLOPs past ``cap`` (:func:`passes_cap`: a race pilot's rung, whose
        budget also holds evaluations that may not run); None: no cap."""
        trained = self.ledger.training_flops
        if self.decision.stop or not passes_cap(trained, bound_flops, cap):
            return self.decision
        self.decision = StopDecision(True, "budget", self.next_round, int(bound_flops), int(cap or 0) - int(trained),
                                     noun=self.noun, what=f"{self.noun} {self.next_round} (training FLOPs capped at "
                                     f"{cap:,})")
        return self.decision

    def stop(self, reason: str, detail: str) -> StopDecision:
        """Stop for a reason without numbers (``steps``, ``interrupted``, ``stopped``: the script's own rule, a TRL
        callback, ended its training short of its step limit; ``failed``: a reward function's error abandoned a
        step); ``detail`` is its message."""
        if reason not in REASONS:
            raise ValueError(f"unknown stop reason {reason!r}")
        self.decision = StopDecision(True, reason, self.next_round, detail=detail, noun=self.noun)
        return self.decision

    def resume(self, steps: bool = False) -> None:
        """The same run goes on after a Ctrl-C stopped it (TRL's ``train()`` called again on the trainer): the
        ``interrupted`` stop is lifted, and with ``steps`` a ``steps`` or ``stopped`` one (trained further: the loop
        checks its step limit again); a budget stop stays."""
        if self.decision.reason == "interrupted" or (steps and self.decision.reason in ("steps", "stopped")):
            self.decision = StopDecision(noun=self.noun)

    def commit(self, step: int, charges: Iterable[PhaseCharge]) -> dict[str, Any]:
        """Charge a completed round (``step`` 0: work before the first round, a baseline evaluation) and return
        the FLOP fields of its metrics line: the totals so far by bucket, and the useful total."""
        for charge in charges:
            self.ledger.charge(charge)
        if step > 0:
            self.ledger.steps_completed = step
        totals = self.ledger.totals()
        return {"flops": totals["flops"], "useful_flops": totals["useful_flops"]["total"]}

    def summary(self, **fields: Any) -> RunSummary:
        """The run summary: the ledger's totals and the stop reason, with the loop's own ``fields``."""
        return RunSummary(stop_reason=self.decision.message if self.decision.stop else "",
                          stop=self.decision.to_data() if self.decision.stop else None, **fields,
                          **self.ledger.totals())


def passes_cap(trained: int, bound_flops: int, cap: int | None) -> bool:
    """Whether a round whose training could cost up to ``bound_flops`` could take a run's training FLOPs (evaluations
    excluded), ``trained`` before it, past its training cap ``cap`` (``flopplan train --train-flops``; None: none)."""
    return cap is not None and trained + bound_flops > cap


def check_cap_buys_one(ledger: Ledger, bound_flops: int, cap: int | None, unit: str,
                       name: str = "--train-flops") -> None:
    """Refuse a training cap ``cap`` (what the message calls ``name``) that buys no first ``unit`` (step, round):
    its training bound, evaluations excluded, would take the ledger's training FLOPs past it (:func:`passes_cap`)."""
    if passes_cap(ledger.training_flops, bound_flops, cap):
        raise UserError(f"{name} {cap:,} buys no {unit}: the first could cost up to {bound_flops:,} training FLOPs "
                        "(evaluations excluded)")


def check_cap_extends(ledger: Ledger, cap: int | None, name: str = "--train-flops") -> None:
    """Refuse to resume a run whose training FLOPs (evaluations excluded) are past its training cap ``cap`` (what
    the message calls ``name``): the cap does not extend it. Equal passes: a run that trained to its cap and was
    killed before its summary, a race pilot run again, stops at once."""
    if cap is not None and (trained := ledger.training_flops) > cap:
        raise UserError(f"the run has already trained {trained:,} FLOPs (evaluations excluded): {name} {cap:,} does "
                        "not extend it")


def metrics_line(step: int, metrics: Mapping[str, Any], flops: Mapping[str, Any],
                 clock: Mapping[str, Any]) -> dict[str, Any]:
    """One line of ``metrics.jsonl``, the same for every engine: the step, the loop's metrics, the FLOP fields of
    :meth:`Guard.commit` and the process clock's fields (``time``, ``cpu_seconds``, ``threads``, and
    ``process_started`` on a process's first line), which time models read."""
    return {"step": step, **metrics, **flops, **clock}
