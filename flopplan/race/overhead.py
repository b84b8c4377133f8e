"""What a recommendation's pilots cost beyond the run they lead to.

The validating run continues the recommended arm's first-seed pilot from its checkpoint
(:mod:`flopplan.race.validate`), so that pilot's ledger is part of the recommended run, not overhead. Overhead is
everything else the protocol spent before that run: every other pilot (the recommended arm's other seeds
included) and a learned reward model's training when the recommended arm does not use it. ``horizon`` = F / the
recommended arm's largest pilot (its ledger; the rung's training budget when the input records no ledgers): how
far the prediction at F extrapolates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from flopplan.race.results import Recommendation


def budget_left(budget_flops: float, pilot_flops: int, arms: Iterable[Any]) -> float:
    """What the validating run may spend: F less the pilots' ledgers and a learned reward model's training when the
    race trained one (the largest of ``arms``' ``upfront_flops``: one reward model serves every arm naming it)."""
    return float(budget_flops - pilot_flops - max((a.upfront_flops for a in arms), default=0))


def pilot_cost(rec: Recommendation, *, budget_flops: float, pilot_flops: int, spend: Mapping[str, Sequence[int]],
               upfront: Mapping[str, int], largest: Mapping[str, float]) -> Recommendation:
    """``rec`` with its pilot cost filled in. ``spend``: each arm's pilots' ledgers in seed order (the first is
    continued); ``upfront``: each arm's upfront FLOPs (one reward model, trained once, serves every arm naming
    it); ``largest``: each arm's largest pilot when ``spend`` has no ledgers for it."""
    trained = max(upfront.values(), default=0)
    if rec.arm is None:
        overhead = pilot_flops + trained
        return replace(rec, continued_flops=0, overhead_flops=overhead, overhead_share=overhead / budget_flops)
    ledgers = tuple(spend.get(rec.arm, ()))
    continued = int(ledgers[0]) if ledgers else 0
    overhead = pilot_flops - continued + trained - upfront.get(rec.arm, 0)
    top = float(max(ledgers, default=0)) or float(largest.get(rec.arm, 0.0))
    return replace(rec, continued_flops=continued, overhead_flops=overhead, overhead_share=overhead / budget_flops,
                   horizon=budget_flops / top if top > 0 else 0.0)
