"""What a metered TRL run's start refuses: a training cap or a budget that buys no first round
(:func:`check_first_round`, when the meter attaches and at TRL's ``on_train_begin``)."""

from __future__ import annotations

from typing import Any

from flopplan.engines.trl_boundaries import evaluations_before_next_round
from flopplan.engines.trl_meter import TRLMeter
from flopplan.errors import UserError
from flopplan.guard import check_cap_buys_one


def check_first_round(meter: TRLMeter, args: Any) -> None:
    """Refuse a training cap below the first round's training FLOPs (evaluations excluded), named as the caller
    names it (:attr:`TRLMeter.train_flops_cap_name`), and a budget that buys no first round (with the baseline
    evaluation and the next in reserve, when evaluating)."""
    if meter.train_flops_cap is not None:
        check_cap_buys_one(meter.ledger, meter.next_round_bound(), meter.train_flops_cap, "round",
                           meter.train_flops_cap_name)
    if not first_round_fits(meter, args):
        raise UserError(f"the budget ({meter.ledger.budget_flops:,} FLOPs) buys no round: "
                        f"{meter.guard.decision.message}")


def first_round_fits(meter: TRLMeter, args: Any) -> bool:
    """The first round with the evaluations before the second in reserve: the baseline (``eval_on_start``) and the
    first round's end's where due."""
    if not meter.eval_rows:
        return meter.fits_next_round(0)
    reserve = evaluations_before_next_round(args, 0, meter.run.optimizer_steps_per_round,
                                            args.max_steps if args.max_steps > 0 else None)
    return meter.fits_next_round(reserve if args.eval_on_start else reserve - 1)  # (step 0 is due: the baseline's)


__all__ = ["check_first_round", "first_round_fits"]
