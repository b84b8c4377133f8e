"""The naive pick beside RACE's (the arm seen best at the largest pilot, DataDecide's single-scale ranking: the
baseline RACE must beat): whether the curves overturn it (:func:`naive_stands`), what race.json says of it beside
RACE's pick and why RACE differs when it does (:func:`naive_fields`), and what it says of a pick the halving had
eliminated (:func:`eliminated_pick`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopplan.race.results import ArmPrediction, BudgetResult, Recommendation
from flopplan.units import eng


def naive_fields(arm: str | None, at_f: BudgetResult, naive: tuple[str, float] | None) -> dict[str, Any]:
    """The naive pick beside RACE's, and why RACE differs from it when it does."""
    if naive is None:
        return {"naive_arm": None, "naive_reward": None, "naive_note": "no survivor was observed at the top rung"}
    name, seen = naive
    out: dict[str, Any] = {"naive_arm": name, "naive_reward": seen, "naive_note": ""}
    if arm is None or arm == name:
        return out
    preds = {p.arm: p for p in at_f.predictions}
    mine, theirs = preds.get(arm), preds.get(name)
    if mine is None or theirs is None:
        out["naive_note"] = f"{name} has no prediction at {eng(at_f.flops)}: RACE picks among the fitted arms"
        return out
    if not theirs.comparable:  # the naive pick fell back in its pilots (:func:`naive_stands`)
        out["naive_note"] = (f"the naive pick {name} shows the best reward at the largest pilot ({seen:.3f}) but fell "
                             f"back below its running best there ({theirs.note}), and {arm}'s lower bound at "
                             f"{eng(at_f.flops)}, {mine.lo:.3f} (predicted {mine.reward:.3f}), is above that reward")
        return out
    out["naive_note"] = (f"the naive pick {name} shows the best reward at the largest pilot ({seen:.3f}), but "
                         f"{arm} is predicted {mine.reward:.3f} [{mine.lo:.3f}, {mine.hi:.3f}] at {eng(at_f.flops)} "
                         f"against {theirs.reward:.3f} [{theirs.lo:.3f}, {theirs.hi:.3f}]: their curves cross "
                         "before the budget, and the intervals do not overlap")
    return out


def naive_stands(at_f: BudgetResult, pred: ArmPrediction, naive: tuple[str, float] | None, level: float,
                  tied: bool) -> str | None:
    """Why the naive pick stays the recommendation although the curves put ``pred`` first (None: the evidence
    overturns it, or there is no other naive pick). With no prediction at the budget (its curve was not fitted: flat,
    or at a pass rate of 1 from step 0) it stays unless ``pred``'s lower bound there is above the reward it shows at
    the largest pilot: what is not fitted is not ruled out. When the curves cannot tell the top arms apart
    (``tied``) it always stays. Otherwise the curves overturn the arm seen best at the largest pilot only when
    ``pred``'s lower bound at the budget is above the naive pick's upper bound there (their intervals do not
    overlap), or, when the naive pick fails the envelope check (its curve is not trusted), above the reward it shows
    at the largest pilot."""
    if naive is None or naive[0] == pred.arm:
        return None
    theirs = next((p for p in at_f.predictions if p.arm == naive[0]), None)
    name, seen = naive
    if theirs is None:
        if pred.lo > seen:
            return None
        return (f"{name}, the best observed at the largest pilot ({seen:.3f}), has no prediction at "
                f"{eng(at_f.flops)} (its curve was not fitted), and {pred.arm}, the best usable arm, has "
                f"{pred.lo:.3f} as the lower bound of its interval there, which does not reach that reward: the arm "
                "seen best is recommended on what it shows")
    if tied:  # the curves cannot separate them: the arm seen best at the largest pilot is the lower-variance call
        return (f"{name}, the best observed at the largest pilot, is recommended: the predictions at "
                f"{eng(at_f.flops)} do not overturn it")
    if not theirs.comparable:
        if pred.lo > seen:
            return None
        return (f"{name}, the best observed at the largest pilot ({seen:.3f}), is recommended although it fell back "
                f"below its running best (fails the envelope check): {pred.arm}, the best comparable arm, has "
                f"{pred.lo:.3f} as the lower bound of its interval at {eng(at_f.flops)}, which does not reach that "
                "reward")
    if pred.lo > theirs.hi:
        return None
    return (f"{name}, the best observed at the largest pilot ({seen:.3f}), is recommended: {pred.arm} is predicted "
            f"higher at {eng(at_f.flops)}, {pred.reward:.3f} [{pred.lo:.3f}, {pred.hi:.3f}], but its {level:.0%} "
            f"interval overlaps {name}'s [{theirs.lo:.3f}, {theirs.hi:.3f}]; the curves overturn the arm seen best "
            "only when the intervals at the budget do not overlap")


def eliminated_pick(rec: Recommendation, at_f: BudgetResult, rung: int, rungs: int, largest: float, *,
                    running: bool = False) -> Recommendation:
    """A recommendation of an arm that did not reach the highest rung any arm reached: the halving eliminated it
    after rung ``rung`` (0-based, of ``rungs``), or (``running``, midway through a race) it was promoted and its
    pilots of the next rung are still running; its pilots so far stopped at ``largest`` ledger FLOPs. Said in its
    reasons, and the naive pick's note says what RACE read (its own curve from its own pilots), not that the curves
    cross, which no pilot showed (it never ran beside the naive pick at the highest rung). An eliminated arm can
    lead at F: the halving keeps arms by their bounds at F after each rung, and the analysis reads every arm again
    on all its pilots."""
    arm = str(rec.arm)
    pred = next((p for p in at_f.predictions if p.arm == arm), None)
    ahead = f"{pred.extrapolation:.1f}x before" if pred is not None else "before"
    how = (f"{arm} was promoted past rung {rung + 1} of {rungs} and its pilots there are still running" if running
           else f"{arm} was eliminated by the halving after rung {rung + 1} of {rungs}")
    why = (f"{how}: it is read on its pilots so far, which stopped at {eng(largest)}, {ahead} {eng(at_f.flops)}; no "
           "arm that ran the highest rung was seen beside it there")
    fields: dict[str, Any] = {"reasons": (*rec.reasons, why)}
    if rec.naive_arm is not None and rec.naive_arm != arm and pred is not None:
        fields["naive_note"] = (f"the naive pick {rec.naive_arm} shows the best reward at the largest pilot "
                                f"({rec.naive_reward:.3f}), where {arm} did not run ("
                                + ("still running" if running else f"eliminated after rung {rung + 1}")
                                + f"); its own pilots' curve predicts it {pred.reward:.3f} [{pred.lo:.3f}, "
                                  f"{pred.hi:.3f}] at {eng(at_f.flops)}")
    return replace(rec, **fields)
