"""The budget guard and run recorder every loop calls (torch-free): the stop decision is data, the message is rendered
from it, a stop is final, a commit charges the ledger and gives the metrics line's FLOP fields, the summary carries
the decision."""

from __future__ import annotations

import pytest

from flopplan.guard import Guard, StopDecision, metrics_line
from flopplan.ledger import Ledger, PhaseCharge
from flopplan.runfile import RunSummary


def unit(flops: int, useful: int | None = None) -> PhaseCharge:
    return PhaseCharge("update", {"update": flops}, {"update": flops if useful is None else useful})


def test_the_guard_stops_before_a_round_that_might_not_fit():
    guard = Guard(Ledger(1_000))
    assert guard.decide(600) == StopDecision(False, "", 1, 600, 1_000)
    guard.commit(1, [unit(600)])
    decision = guard.decide(401)
    assert (decision.stop, decision.reason, decision.round, decision.bound_flops, decision.remaining_flops) == (
        True, "budget", 2, 401, 400)
    assert decision.message == "budget: step 2 could cost up to 401 FLOPs, 400 left"
    assert guard.decide(1).stop  # a stop is never set back


def test_abandoned_and_lost_work_count_against_the_budget():
    ledger = Ledger(1_000)
    ledger.abandoned, ledger.lost = 300, 200
    assert Guard(ledger).decide(501).remaining_flops == 500 and Guard(ledger).decide(501).stop
    ledger.charge_lost = False  # lost and abandoned work recorded, not charged: a resumed run does every step
    assert not Guard(ledger).decide(1_000).stop and Guard(ledger).decide(1_001).stop


def test_without_a_budget_only_limits_and_interruptions_stop():
    guard = Guard(Ledger(None), noun="round")
    assert not guard.decide(10**30).stop and guard.decision.remaining_flops is None
    decision = guard.stop("steps", "reached 3 steps")
    assert decision.to_data() == {"stop": True, "reason": "steps", "round": 1, "bound_flops": None,
                                  "remaining_flops": None}
    assert decision.message == "reached 3 steps"
    with pytest.raises(ValueError):
        guard.stop("tired", "")


def test_resuming_lifts_an_interrupt_and_no_other_stop():
    guard = Guard(Ledger(None), noun="round")
    guard.stop("interrupted", "interrupted after round 0")
    guard.resume()
    assert not guard.decision.stop and not guard.decide(10).stop
    guard.stop("steps", "reached 3 steps")
    guard.resume()
    assert guard.decision.stop and guard.decision.reason == "steps"


def test_a_commit_charges_the_round_and_gives_the_lines_flop_fields():
    guard = Guard(Ledger(None))
    assert guard.commit(0, [unit(5)]) == {"flops": {"rollout": 0, "learning": 5, "feedback": 0, "evaluation": 0,
                                                    "total": 5}, "useful_flops": 5}
    assert guard.ledger.steps_completed == 0  # step 0: work before the first round
    flops = guard.commit(1, [unit(7, 4)])
    assert guard.ledger.steps_completed == 1 and flops["flops"]["total"] == 12 and flops["useful_flops"] == 9
    clock = {"time": 1.0, "cpu_seconds": 0.5, "threads": 2}
    assert metrics_line(1, {"reward": 0.5}, flops, clock) == {"step": 1, "reward": 0.5, **flops, **clock}


def test_the_summary_carries_the_decision_and_reads_back():
    guard = Guard(Ledger(100), noun="round")
    guard.commit(1, [unit(60)])
    guard.decide(50)
    summary = guard.summary(model="tiny", reward="rule")
    assert summary.stop == guard.decision.to_data() and summary.stop_reason.startswith("budget: round 2")
    assert summary.steps == 1 and summary.flops["total"] == 60
    back = RunSummary.from_data(summary.to_data())
    assert back.stop == summary.stop and back.stop_reason == summary.stop_reason
    going = Guard(Ledger(None))
    going.decide(1)
    assert going.summary(model="tiny", reward="rule").stop is None  # a run that did not stop records no decision
