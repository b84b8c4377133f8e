"""flopplan.race.promotion: the halving by the observed leader, then by where each arm's last slope leads at F."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from flopplan.errors import UserError
from flopplan.race.promotion import Trend, keep, ranked, trend
from flopplan.race.results import ArmPrediction, Observation


def pred(arm: str, reward: float, lo: float, hi: float, comparable: bool = True, p_best: float = 0.25
         ) -> ArmPrediction:
    return ArmPrediction(arm=arm, ledger_flops=1e20, reward=reward, lo=lo, hi=hi, gain=reward - 0.2,
                         gain_lo=lo - 0.2, gain_hi=hi - 0.2, p_best=p_best, extrapolation=8.0, usable=comparable,
                         comparable=comparable, note="", observed=None)


def test_the_observed_leader_then_the_steepest_slope():
    """The fast starter seen best stays; the second place goes to the arm whose last slope leads highest at F,
    not to the one seen second."""
    preds = [pred(a, 0.5, 0.45, hi, p_best=pb)
             for a, hi, pb in (("fast", 0.55, 0.3), ("second", 0.56, 0.1), ("steep", 0.55, 0.4), ("flat", 0.55, 0.2))]
    trends = {"fast": Trend(0.55, 0.56), "second": Trend(0.50, 0.52), "steep": Trend(0.40, 0.70),
              "flat": Trend(0.30, 0.30)}
    assert keep(preds, 2, trends) == ["fast", "steep", "flat", "second"]  # then the rest by P(best) at F
    assert keep(preds, 2, trends, limit=2) == ["fast", "steep"]
    assert keep(preds, 3, trends, limit=3) == ["fast", "steep", "second"]


def test_an_arm_the_evidence_cannot_rule_out_at_f_stays_within_the_limit():
    preds = [pred("a", 0.70, 0.65, 0.75), pred("b", 0.66, 0.60, 0.72), pred("wide", 0.50, 0.30, 0.66, p_best=0.06),
             pred("out", 0.55, 0.50, 0.64), pred("rare", 0.50, 0.30, 0.70, p_best=0.04),
             pred("bloomer", 0.45, 0.25, 0.68, p_best=0.01)]
    trends = {"a": Trend(0.5, 0.7), "b": Trend(0.6, 0.6), "wide": Trend(0.2, 0.3), "out": Trend(0.3, 0.4),
              "rare": Trend(0.2, 0.3), "bloomer": Trend(0.2, 0.66)}
    # out: hi 0.64 below a's lower bound 0.65; rare: the best in under 5 % of the replicates, its slope short of
    # 0.65; bloomer: as rarely the best, but its own slope carries it to 0.66
    assert keep(preds, 2, trends) == ["b", "a", "wide", "bloomer"]
    assert keep(preds, 2, trends, limit=3) == ["b", "a", "wide"]
    assert keep(preds, 2, trends, limit=2) == ["b", "a"]
    assert [p.arm for p in ranked(preds)] == ["a", "b", "out", "rare", "wide", "bloomer"]


def test_the_leader_at_f_is_comparable_when_one_is():
    """A non-comparable arm on top does not set the bar: the comparable leader's lower bound does."""
    preds = [pred("odd", 0.90, 0.89, 0.91, comparable=False), pred("a", 0.60, 0.50, 0.70), pred("b", 0.48, 0.45, 0.49)]
    trends = {"odd": Trend(0.5, 0.5), "a": Trend(0.4, 0.4), "b": Trend(0.3, 0.3)}
    assert keep(preds, 1, trends) == ["odd", "a"]


def test_without_trends_arms_are_read_at_their_prediction():
    preds = [pred("b", 0.6, 0.5, 0.7), pred("a", 0.6, 0.5, 0.7), pred("c", 0.3, 0.2, 0.4)]
    assert keep(preds, 1, limit=1) == ["a"] and keep(preds, 2) == ["a", "b"] and keep([], 2) == []
    for bad in (lambda: keep(preds, 0), lambda: keep(preds, 2, limit=1), lambda: keep([*preds, preds[0]], 1)):
        with pytest.raises(UserError):
            bad()


def test_trend_is_the_last_slope_in_ln_f_carried_to_the_budget():
    obs = [Observation(s, f, r) for s, pts in (("0", ((0.0, 0.1), (1e18, 0.2), (2e18, 0.3))),
                                              ("1", ((0.0, 0.1), (1e18, 0.3), (2e18, 0.3))))
           for f, r in pts]
    t = trend(obs, 16e18)  # slopes 0.1 / ln 2 and 0 per ln F, 3 doublings ahead
    assert t is not None and t.observed == pytest.approx(0.3)
    assert t.reach == pytest.approx(0.3 + 0.05 / math.log(2) * 3 * math.log(2))
    single = trend([Observation("0", 0.0, 0.1), Observation("0", 1e18, 0.4)], 1e20)
    assert single == Trend(0.4, 0.4)  # one evaluation: slope 0
    assert trend([Observation("0", 0.0, 0.1)], 1e20) is None
    assert trend(obs, 1e18).reach == pytest.approx(0.3)  # a budget below the pilots: nothing ahead


def test_arms_the_pilots_cannot_tell_apart_to_the_fits_residue_take_the_room():
    """Four arms that scored 0 on every prompt: the fits read them at 8.4e-11 and 7.7e-11, which is no evidence
    either way; the room the design paid for keeps them all, not the first two by name."""
    preds = [pred(a, r, r, r, p_best=pb) for a, r, pb in
             (("beta0.0.t0.7", 8.43e-11, 0.5), ("beta0.0.t1.0", 8.43e-11, 0.5), ("beta0.04.t0.7", 7.74e-11, 0.0),
              ("beta0.04.t1.0", 7.74e-11, 0.0))]
    trends = {p.arm: Trend(0.0, 0.0) for p in preds}
    assert sorted(keep(preds, 2, trends, limit=4)) == sorted(p.arm for p in preds)
    apart = [pred("a", 0.5, 0.45, 0.55, p_best=1.0), pred("b", 0.3, 0.25, 0.45 - 2e-9, p_best=0.0)]
    assert keep(apart, 1, {"a": Trend(0.5, 0.5), "b": Trend(0.3, 0.3)}, limit=2) == ["a"]  # beyond it: ruled out


def test_an_arm_whose_pilots_never_rose_goes_on_on_its_upper_bound_alone_after_the_arms_the_evidence_keeps():
    """An arm at 0 since step 0 (checks.unmoved): interval to 1, not comparable (P(best) 0), slope 0. Neither
    condition beyond the halving's count can speak for it, and the upper bound says the evidence cannot rule it
    out: it takes the room after the arms the P(best) or their slope keep (it was dropped whenever the leader's lower
    bound was above its reach: the true best in 65 % of benchmarks/shapes_round39.py's repetitions)."""
    from flopplan.race.checks import FELL, UNMOVED

    floored = ArmPrediction(arm="floored", ledger_flops=1e20, reward=0.0, lo=0.0, hi=1.0, gain=-0.01, gain_lo=-0.01,
                            gain_hi=0.99, p_best=0.0, extrapolation=2.0, usable=False, comparable=False, note=UNMOVED,
                            observed=None)
    preds = [pred("a", 0.70, 0.65, 0.75, p_best=0.6), pred("b", 0.66, 0.60, 0.72, p_best=0.3), floored,
             pred("wide", 0.50, 0.30, 0.68, p_best=0.1), pred("bloomer", 0.45, 0.25, 0.68, p_best=0.0)]
    trends = {"a": Trend(0.5, 0.7), "b": Trend(0.6, 0.6), "floored": Trend(0.0, 0.0), "wide": Trend(0.2, 0.3),
              "bloomer": Trend(0.2, 0.66)}
    assert keep(preds, 2, trends) == ["b", "a", "wide", "bloomer", "floored"]
    assert keep(preds, 2, trends, limit=4) == ["b", "a", "wide", "bloomer"]
    # a non-comparable arm that did move (say non-monotone) is not kept on its upper bound alone
    odd = replace(floored, arm="odd", note="non-monotone (fails the envelope check)")
    assert keep([*preds[:2], odd], 2, {**trends, "odd": Trend(0.0, 0.0)}) == ["b", "a"]
    assert keep([*preds[:2], floored], 2, trends) == ["b", "a", "floored"]
    fallen = replace(floored, arm="fallen", note=FELL)  # its pilots fell below half their start: as unbounded
    assert keep([*preds[:2], fallen], 2, {**trends, "fallen": Trend(0.0, 0.0)}) == ["b", "a", "fallen"]


def test_arms_whose_pilots_never_rose_take_short_room_by_their_last_slope_not_by_name():
    """Three arms whose pilots never rose, room for two: they go in rule 2's order (reach, then observed), where
    they went by name (in the demo's race, the arm second best at F was set aside by its name). Exact ties still go
    by name."""
    from flopplan.race.checks import UNMOVED

    def flat(arm: str) -> ArmPrediction:
        return ArmPrediction(arm=arm, ledger_flops=1e20, reward=0.0, lo=0.0, hi=1.0, gain=0.0, gain_lo=0.0,
                             gain_hi=1.0, p_best=0.0, extrapolation=50.0, usable=False, comparable=False, note=UNMOVED,
                             observed=None)

    preds = [pred("a", 0.70, 0.65, 0.75, p_best=0.7), pred("b", 0.66, 0.60, 0.72, p_best=0.3),
             flat("aa.flat"), flat("ab.flat"), flat("zz.flat")]
    trends = {"a": Trend(0.5, 0.7), "b": Trend(0.6, 0.6), "aa.flat": Trend(0.0, 0.0), "ab.flat": Trend(0.01, 0.01),
              "zz.flat": Trend(0.0, 0.03)}
    assert keep(preds, 2, trends, limit=4) == ["b", "a", "zz.flat", "ab.flat"]
    level = {**trends, "zz.flat": Trend(0.01, 0.01)}  # zz ties ab on reach; its observed is the same: the name
    assert keep(preds, 2, level, limit=4) == ["b", "a", "ab.flat", "zz.flat"]
    seen = {**trends, "zz.flat": Trend(0.02, 0.01)}  # the same reach, more observed
    assert keep(preds, 2, seen, limit=4) == ["b", "a", "zz.flat", "ab.flat"]
