"""flopplan.race.promotion.keep: the halving by predicted reward at F with its interval."""

from __future__ import annotations

import pytest

from flopplan.errors import UserError
from flopplan.race.promotion import keep, ranked
from flopplan.race.results import ArmPrediction


def pred(arm: str, reward: float, lo: float, hi: float, comparable: bool = True) -> ArmPrediction:
    return ArmPrediction(arm=arm, ledger_flops=1e20, reward=reward, lo=lo, hi=hi, gain=reward - 0.2,
                         gain_lo=lo - 0.2, gain_hi=hi - 0.2, p_best=0.0, extrapolation=8.0, usable=comparable,
                         comparable=comparable, note="", observed=None)


def test_keeps_the_best_predicted_not_the_best_observed():
    preds = [pred("early", 0.50, 0.48, 0.52), pred("late", 0.70, 0.66, 0.74), pred("mid", 0.60, 0.58, 0.62),
             pred("low", 0.40, 0.38, 0.42)]
    assert keep(preds, 2) == ["late", "mid"]
    assert [p.arm for p in ranked(preds)] == ["late", "mid", "early", "low"]


def test_a_late_bloomer_whose_upper_bound_reaches_the_leaders_lower_bound_stays():
    """The halving ranks by the upper bound at F: the slow starter with the widest upside goes first."""
    preds = [pred("a", 0.70, 0.65, 0.75), pred("b", 0.66, 0.60, 0.72), pred("wide", 0.50, 0.30, 0.66),
             pred("wider", 0.45, 0.20, 0.90), pred("out", 0.55, 0.50, 0.64)]
    assert keep(preds, 2) == ["wider", "a", "b", "wide"]
    assert keep(preds, 2, limit=3) == ["wider", "a", "b"]
    assert keep(preds, 4) == ["wider", "a", "b", "wide"]  # out: hi 0.64 below a's lower bound 0.65
    assert keep(preds, 5) == ["wider", "a", "b", "wide", "out"]


def test_the_leader_is_comparable_when_one_is():
    """A non-comparable arm on top does not set the bar: the comparable leader's lower bound does."""
    preds = [pred("odd", 0.90, 0.89, 0.91, comparable=False), pred("a", 0.60, 0.50, 0.70), pred("b", 0.48, 0.45, 0.49)]
    assert keep(preds, 1) == ["odd", "a"]


def test_ties_and_bad_input():
    preds = [pred("b", 0.6, 0.5, 0.7), pred("a", 0.6, 0.5, 0.7)]
    assert keep(preds, 1, limit=1) == ["a"] and keep([], 2) == []
    for bad in (lambda: keep(preds, 0), lambda: keep(preds, 2, limit=1), lambda: keep([*preds, preds[0]], 1)):
        with pytest.raises(UserError):
            bad()
