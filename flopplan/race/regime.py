"""The allocation regime at a budget, the warning on the best group size, and the recommendation.

The rules (:func:`rules` gives them in the words the report prints):

* Predictions are the model average over curve families (:mod:`flopplan.race.ensemble`), whose calibrated
  intervals carry the curve shape's uncertainty. An arm is *comparable* at a budget B when its curve was fitted and
  it passes the monotone-envelope check, and then also *usable* (it may be named best): an arm whose ScaleRL A is
  unidentified, or which the halving eliminated, stays in play with its (wide) interval. Arms are read at
  B - upfront: a learned reward model's training FLOPs are charged at every budget; an arm whose upfront FLOPs
  exceed B is *set aside* there.
* *unstable*: the arm with the highest predicted reward among the fitted arms not set aside is not usable (it would
  win, but its curve cannot be trusted there), or no arm is usable.
* *best*: the usable arm with the highest point prediction. P(best) is recomputed among the comparable arms from
  the same bootstrap replicates. The runner-up is the next comparable arm; the margin the difference of the point
  predictions, with the percentile interval of the paired replicate differences.
* *undecided*: P(best) < 0.8, or a gap within the noise: the margin <= the seed noise (the larger of the two
  arms' seed sd of the reward at their last evaluation: what reseeding one pilot moves), or the interval of the
  margin includes 0 (the paired bootstrap's own measure, extrapolation included); or no comparable arm differs
  from the best on one axis only. Why the interval rule too: for two arms, P(best) >= 0.8 alone would call a
  winner between two identical truths about 40 % of the time; measured with all three rules on 30 same-truth
  pairs of synthetic pilots (3 seeds, 200 prompts, F = 2 x the pilots): 2 named a regime, 21 undecided, 7
  unstable (an unidentified survivor on top).
* Otherwise the regime is named by the design axis whose change costs the best arm the most predicted reward,
  comparing it with its one-axis neighbours (arms equal to it on every other axis), and by the side the best arm
  takes on that axis (:data:`DIRECTION`): size-bound (a larger policy wins at equal FLOPs), search-bound (more
  rollouts per prompt, or fresh rollouts instead of more passes over them), learning-bound (more update passes, or
  more steps: a smaller policy, a smaller G or cheaper feedback turns the same FLOPs into more steps),
  feedback-bound (the arm spending the larger feedback share, a learned reward model, wins despite it).
* A warning when the best arm's G decreases from one budget to the next larger one (undecided budgets included).
* The recommendation at F: the best usable arm, confidence *high* when the regime there is a bound and F - upfront
  is <= 2x (2.1x) its largest pilot FLOPs, *low* otherwise (reasons listed); *cannot tell* when P(best) < 0.8 or
  the margin's interval includes 0: the tied arms (the runner-up and every arm whose upper bound reaches the
  best's lower bound and that is best in at least 5 % of the replicates) are named with the FLOPs one more rung
  for them would cost, and the naive pick (the survivor with the best observed reward at the largest pilot) is
  recommended whenever it has a prediction at F, among the
  tied arms or not (the lower-variance call: single-scale rankings beat extrapolation unless the evidence says
  otherwise, DataDecide; measured on off-family truths, overriding it without that evidence raised the regret
  above the naive pick's after a collapse, docs/results.md); otherwise too the naive pick stays (confidence
  *low*) unless the best usable arm's lower bound at F is above the naive pick's upper bound there, or, when the
  naive pick fails the envelope check, above the reward it shows at the largest pilot (on simulated truths every
  departure that raised RACE's regret above the naive pick's was of this kind: after a collapse, and where an
  arm recovering from a transient dip looked like a late rise, docs/results.md, rounds 5-6); *best observed*
  when no arm is usable: the survivor with the best observed reward at the survivors' largest common FLOPs, with a
  bootstrap of the observed means (:func:`checks.observed_bootstrap`); *best observed* too when the naive pick
  has no prediction at F (its curve was not fitted: a flat arm, or one at a pass rate of 1 from step 0) and the
  best usable arm's lower bound at F does not reach the reward the naive pick shows at the largest pilot (what
  is not fitted is not ruled out). The naive pick is reported beside RACE's,
  with why RACE differs when it does. The P(best) stated for a fitted recommendation, among the finalists, anchors
  each arm at the reward seen at its largest pilot and adds the curves' change from there to F, and under
  *cannot tell* is its mean with the curves' own (:mod:`flopplan.race.persistence`, why); the decision above reads
  the calibrated curves alone. Last, a finalist
  that this anchored forecast makes best in at least :data:`UNDECIDED_P` of the draws, with the curves' change and with
  the calibrated one, when the rules above recommend another arm, is recommended instead, confidence *low*
  (:func:`anchored_pick`, why): the calibrated intervals are each arm's own allowance for its extrapolation and overlap
  where the paired draws agree on the order.

Why these: ScaleRL and IsoCompute compare recipes that differ in one choice at a time, so a one-axis comparison is
what the evidence can attribute; the direction matters because "the smaller policy wins" is a statement about steps,
not about size. P(best) >= 0.8 and a margin above the seed noise are the protocol's thresholds (race.md, step 5).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from flopplan.race.bootstrap import bootstrap_interval, p_best
from flopplan.race.checks import UNBOUNDED, ObservedBest, tie_order
from flopplan.race.design import AXES
from flopplan.race.naive import naive_fields, naive_stands
from flopplan.race.persistence import Challenger
from flopplan.race.promotion import P_OPEN
from flopplan.race.results import ArmPrediction, AxisComparison, BudgetResult, Decision, Recommendation
from flopplan.units import eng

FloatArray = NDArray[np.float64]
BOUNDS = ("size-bound", "search-bound", "learning-bound", "feedback-bound")
REGIMES = (*BOUNDS, "undecided", "unstable")
UNDECIDED_P = 0.8
EXTRAPOLATION_LIMIT = 2.0
EXTRAPOLATION_TOL = 1.05  # pilots stop just short of their rung budget: "2x" allows 2.1x
# axis -> (regime when the best arm has the larger value, regime when it has the smaller)
DIRECTION = {"policy": ("size-bound", "learning-bound"), "group_size": ("search-bound", "learning-bound"),
             "iterations": ("learning-bound", "search-bound"), "reward": ("feedback-bound", "learning-bound")}
ORDERED_BY = {"policy": "parameters", "group_size": "G", "iterations": "mu",
              "reward": "feedback FLOP share (upfront included)"}


def rules(level: float) -> tuple[str, ...]:
    """The regime rules, verbatim as the report and race.json state them."""
    return (
        "each arm is read at B - upfront (a learned reward model's training FLOPs are charged at every budget), "
        "by the model average over curve families with its calibrated interval; set aside at B: an arm whose "
        "upfront FLOPs exceed B; comparable and usable (it may be named best): not set aside, its curve was fitted "
        "(>= 3 positive evaluation FLOPs ~10 % apart) and it passes the monotone-envelope check (no drop below its "
        "running best reward larger than 3 standard errors of the drop); arms eliminated by the halving and arms "
        "whose ScaleRL A is unidentified stay in play with their wide intervals.",
        "unstable: the arm with the highest predicted reward at B among the fitted arms not set aside is not usable "
        "(non-monotone), or no arm is usable.",
        "best: the usable arm with the highest predicted reward at B; P(best): the share of bootstrap replicates "
        "in which it is the highest among the comparable arms; runner-up: the next comparable arm; margin: best - "
        f"runner-up (point predictions), with the {level:.0%} percentile interval of the paired replicate "
        "differences; noise: the larger of the two arms' seed sd (ddof 1) of the mean reward at their last "
        "evaluation (with one seed: the prompt standard error of that evaluation).",
        f"undecided: P(best) < {UNDECIDED_P:g}, or the gap is within the noise (margin <= noise, or the margin's "
        f"{level:.0%} interval includes 0), or no comparable arm differs from the best on one design axis only.",
        "otherwise, for each design axis on which a comparable arm differs from the best on that axis only, cost = "
        "the "
        "best's predicted reward - the best such neighbour's; the axis with the largest cost names the regime by "
        "the side the best arm takes on it: policy (parameters) larger: size-bound, smaller: learning-bound (a "
        "smaller policy takes more steps in the same FLOPs); group_size G larger: search-bound, smaller: "
        "learning-bound (the same rollouts spread over more prompts and updates); iterations mu larger: "
        "learning-bound, smaller: search-bound (fresh rollouts instead of more passes over the same ones); reward "
        "with the larger feedback FLOP share (a learned reward model, upfront included): feedback-bound, smaller "
        "(e.g. the rule): learning-bound (the feedback FLOPs saved buy more steps); any other axis (a recipe field "
        "or a training knob) names the regime after itself, AXIS-bound, without a direction.",
        "warning: the best usable arm's G decreases from one budget to the next larger one (IsoCompute finds the "
        "best G growing with the budget; undecided budgets included, and said).",
        "confidence of the recommendation: high when the regime at the target budget is a bound and the budget "
        f"less upfront is at most {EXTRAPOLATION_LIMIT:g}x the arm's largest pilot FLOPs (up to "
        f"{EXTRAPOLATION_LIMIT * EXTRAPOLATION_TOL:g}x: pilots stop just short of their rung); low otherwise; "
        f"'cannot tell' when P(best) < {UNDECIDED_P:g} or the margin's interval includes 0: the tied arms (the "
        "runner-up and every arm whose upper bound reaches the best's lower bound and that is best in at least "
        f"{P_OPEN:.0%} of the replicates) are named with the FLOPs one more rung for them would cost, and the "
        "naive pick (the survivor with the best observed reward at the top rung) is recommended whenever it has a "
        "prediction there; otherwise the naive pick is also recommended, confidence low, unless the best usable "
        "arm's lower bound at the budget is above the naive pick's upper bound there (or, when the naive pick "
        "fails the envelope check, above the reward it shows at the top rung); 'best observed' when no arm is "
        "usable: the surviving arm with the best observed reward at the survivors' largest common FLOPs (a "
        "prompt-and-seed bootstrap of the observed means), no curve extrapolated; 'best observed' too, for the "
        "naive pick, when it has no prediction at the budget (its curve not fitted) and the best usable arm's lower "
        "bound there does not reach the reward it shows at the top rung. Then a finalist whose P(best) below (the "
        f"anchored forecast's) is at least {UNDECIDED_P:g}, and also with the calibrated change in place of the "
        "model average's, is recommended in place of the arm these rules picked, confidence low, with the reason "
        "stated. The recommendation's P(best), among itself and the finalists (the comparable arms that reached "
        "the top rung; with fewer than two, the decision's): the share of the paired bootstrap draws in which its "
        "arm's reward seen at its largest pilot, plus the model average's change from there to the budget in the "
        "same draw (before the calibration's stretch; when no arm of the pool is still accelerating in ln F, the "
        "arms' changes pooled toward their mean as far as the draws cannot tell them apart, the spread between "
        "arms drawn from its posterior in a hierarchical normal model), is the highest; the eliminated arms' wide "
        "intervals far beyond their pilots count in the decision's P(best) above, not in this one; under 'cannot "
        "tell' the P(best) stated is the mean of that share and the curves' own among the same arms. Against "
        "simulated truths at a budget 2x the largest pilot (benchmarks/race_misspecification.py and three checks "
        "written blind to its shapes, 100-200 repetitions a shape; docs/results.md, round 30) it came within 0.10 of "
        "how often the pick was best on 49 of 58 shapes and geometries; it read up to 0.26 too high where arms "
        "meet at the budget, on over-optimisation whose fall starts after the pilots (0.16 with 6 arms), on "
        "collapses after them and where seeds take off by chance, and up to 0.16 too low where the order seen "
        "holds but the curves cannot show it (the sigmoid rise with 6 arms and 2 seeds, a straight rise in F).",
    )


@dataclass(frozen=True, eq=False)
class Candidate:
    """A fitted arm at one budget: its design values, parameters, feedback share at the budget, point prediction
    and bootstrap replicates of the reward, whether it is usable (``note``: why not) and its noise."""

    name: str
    axes: dict[str, str | int | float]
    params: int
    feedback_share: float
    point: float
    reps: FloatArray
    usable: bool
    note: str
    noise: float
    comparable: bool = True
    unidentified_beyond: bool = False
    in_play: bool = True


def _order_value(axis: str, c: Candidate) -> float:
    if axis == "policy":
        return float(c.params)
    if axis == "reward":
        return c.feedback_share
    return float(c.axes[axis])


def one_axis_neighbours(best: Candidate, others: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """The candidates that differ from ``best`` on exactly one design axis, by axis."""
    out: dict[str, list[Candidate]] = {}
    for c in others:
        keys = set(best.axes) | set(c.axes)
        diff = [k for k in keys if best.axes.get(k) != c.axes.get(k)]
        if len(diff) == 1:
            out.setdefault(diff[0], []).append(c)
    return out


def decide(cands: Sequence[Candidate], level: float) -> Decision:
    """The regime at one budget from the fitted arms there (module docstring)."""
    none: dict[str, float] = {c.name: 0.0 for c in cands}

    def out(regime: str, rule: str, **kw: object) -> Decision:
        base: dict[str, object] = {"best": None, "runner_up": None, "p_best": None, "margin": None,
                                   "margin_lo": None, "margin_hi": None, "noise": None, "comparisons": (),
                                   "p_best_of": none, "top": None, "top_unidentified": False}
        return Decision(regime=regime, rule=rule, **(base | kw))  # type: ignore[arg-type]

    play = [c for c in cands if c.in_play]
    if not play:
        return out("unstable", "no arm could be fitted" if not cands else "every arm is set aside at this budget")
    top = max(play, key=lambda c: c.point)  # max keeps the first of equals: the arms' order breaks ties
    usable = [c for c in cands if c.usable]
    comparable = [c for c in cands if c.comparable or c.usable]
    kw: dict[str, object] = {"top": top.name,
                             "top_unidentified": top.comparable and top.unidentified_beyond and not top.usable}
    if not usable:
        return out("unstable", f"no arm is usable (the highest predicted, {top.name}: {top.note})", **kw)
    best = max(usable, key=lambda c: c.point)
    pb = p_best(np.stack([c.reps for c in comparable]))
    p_of = none | {c.name: float(p) for c, p in zip(comparable, pb, strict=True)}
    p = p_of[best.name]
    rest = [c for c in comparable if c is not best]
    kw |= {"best": best.name, "p_best": p, "p_best_of": p_of}
    if rest:
        runner = max(rest, key=lambda c: c.point)
        margin = best.point - runner.point
        lo, hi = bootstrap_interval(best.reps - runner.reps, margin, level)
        noise = max(best.noise, runner.noise)
        kw |= {"runner_up": runner.name, "margin": margin, "margin_lo": float(lo), "margin_hi": float(hi),
               "noise": noise}
    comparisons = []
    for axis, group in one_axis_neighbours(best, rest).items():
        nb = max(group, key=lambda c: c.point)
        if axis in DIRECTION:
            larger, smaller = DIRECTION[axis]
            b_val, n_val = _order_value(axis, best), _order_value(axis, nb)
            names = larger if b_val > n_val else smaller if b_val < n_val else "undecided"
        else:
            names = f"{axis}-bound"  # an axis beyond the allocation's four names itself
        comparisons.append(AxisComparison(axis=axis, neighbour=nb.name, best_value=str(best.axes.get(axis)),
                                          neighbour_value=str(nb.axes.get(axis)), cost=best.point - nb.point,
                                          names=names))
    comparisons.sort(key=lambda a: (AXES.index(a.axis) if a.axis in AXES else len(AXES), a.axis))
    kw["comparisons"] = tuple(comparisons)
    if not top.usable:
        by = " by its curves, which its pilots do not bound" if top.note in UNBOUNDED else ""  # stated otherwise
        return out("unstable", f"the arm with the highest predicted reward{by}, {top.name} ({top.point:.3f}), is "
                   f"not usable: {top.note}", **kw)
    if p < UNDECIDED_P:
        return out("undecided", f"P(best) of {best.name} is {p:.2f} < {UNDECIDED_P:g}", **kw)
    if rest:
        m, lo_m, hi_m, noise = (float(kw[k]) for k in ("margin", "margin_lo", "margin_hi", "noise"))  # type: ignore[arg-type]
        if m <= noise:
            return out("undecided", f"margin {m:.3f} over {kw['runner_up']} is within the seed noise: <= the seed "
                       f"sd {noise:.3f}", **kw)
        if lo_m <= 0:
            return out("undecided", f"margin {m:.3f} over {kw['runner_up']} is within the noise: its {level:.0%} "
                       f"interval [{lo_m:.3f}, {hi_m:.3f}] includes 0", **kw)
    if not comparisons:
        return out("undecided", f"no comparable arm differs from {best.name} on one design axis only", **kw)
    decisive = max(comparisons, key=lambda a: a.cost)
    if decisive.names == "undecided":
        return out("undecided", f"the decisive axis {decisive.axis} does not order {best.name} and "
                   f"{decisive.neighbour} by {ORDERED_BY[decisive.axis]}", **kw)
    if decisive.axis in DIRECTION:
        side = "larger" if decisive.names == DIRECTION[decisive.axis][0] else "smaller"
        has = f"the {side} {ORDERED_BY[decisive.axis]}"
    else:
        has = f"{decisive.axis} {decisive.best_value}"
    return out(decisive.names, f"{best.name} (P(best) {p:.2f}) loses most by changing {decisive.axis} "
               f"({decisive.best_value} -> {decisive.neighbour_value}, {decisive.neighbour}: -{decisive.cost:.3f}); "
               f"the best arm has {has}", **kw)


def g_warnings(budgets: Sequence[BudgetResult], group_size: dict[str, float | None]) -> list[str]:
    """A warning for each step from a budget to the next larger one where the best arm's G decreases."""
    seq = [(b, b.decision, group_size.get(b.decision.best)) for b in sorted(budgets, key=lambda b: b.flops)
           if b.decision.best is not None]
    seq = [(b, d, g) for b, d, g in seq if g is not None]
    out = []
    for (b1, d1, g1), (b2, d2, g2) in itertools.pairwise(seq):
        if g2 < g1:  # type: ignore[operator]
            out.append(f"the best G decreases as the budget grows: G = {g1:g} ({d1.best}, {b1.label}, "
                       f"{eng(b1.flops)}, {d1.regime}) -> G = {g2:g} ({d2.best}, {b2.label}, {eng(b2.flops)}, "
                       f"{d2.regime})")
    return out


def tied_arms(at_f: BudgetResult, best: str) -> tuple[str, ...]:
    """The comparable arms the evidence cannot separate from ``best`` at the budget, best first: its runner-up and
    every arm whose upper bound reaches its lower bound and that is best in at least ``P_OPEN`` of the replicates
    (:func:`flopplan.race.promotion.keep`'s open arms; an arm at 0 reaches a lower bound of 0, no replicate's best)."""
    preds = [p for p in at_f.predictions if p.comparable or p.arm == best]
    lead = next(p for p in preds if p.arm == best)
    near = [p.arm for p in sorted(preds, key=lambda p: (-p.reward, p.arm))
            if p.arm != best and p.hi >= lead.lo and p.p_best >= P_OPEN]
    runner = at_f.decision.runner_up
    if runner is not None and runner not in near:
        near.insert(0, runner)
    return (best, *near)


def recommend(target: str, at_f: BudgetResult, upfront: dict[str, int], budget_left: float, interval: str,
              observed: ObservedBest | None, level: float, naive: tuple[str, float] | None = None,
              rung_cost: dict[str, float] | None = None) -> Recommendation:
    """The recommendation at the target budget (:func:`rules`, the last one); ``naive``: (arm, observed reward) of
    the naive pick; ``rung_cost``: per arm the FLOPs of one more rung (the price of separating a tie)."""
    f, decision = at_f.flops, at_f.decision
    common: dict[str, Any] = {"target": target, "flops": f, "regime": decision.regime, "budget_left_flops": budget_left}
    if decision.best is None or decision.top_unidentified:
        why = (f"{decision.top}'s A is not identified and {eng(f)} lies beyond its pilots: its curve is not "
               "extrapolated" if decision.top_unidentified else f"no arm is usable at {eng(f)}: {decision.rule}")
        if observed is None or not observed.names:
            return Recommendation(**common, arm=None, mode="none", confidence="best observed",
                                  reasons=(why, "no surviving arm to observe"), at_flops=f, reward=None, lo=None,
                                  hi=None, gain=None, gain_lo=None, gain_hi=None, p_best=None, runner_up=None,
                                  margin=None, margin_lo=None, margin_hi=None, extrapolation=None, upfront_flops=0,
                                  interval=interval)
        rec = _best_observed(common, observed, upfront, why, level)
        return replace(rec, **naive_fields(rec.arm, at_f, naive))
    arm = decision.best
    pred: ArmPrediction = next(p for p in at_f.predictions if p.arm == arm)
    reasons = []
    if not decision.regime.endswith("-bound"):  # BOUNDS, or AXIS-bound
        reasons.append(f"{decision.regime} at the target budget: {decision.rule}")
    far = pred.extrapolation > EXTRAPOLATION_LIMIT * EXTRAPOLATION_TOL  # (the curves' best arm's: the confidence)
    tied: tuple[str, ...] = ()
    separate = None
    p = decision.p_best if decision.p_best is not None else 1.0
    if decision.runner_up is not None and (p < UNDECIDED_P or (decision.margin_lo or 0.0) <= 0):
        tied = tied_arms(at_f, arm)
        separate = float(sum((rung_cost or {}).get(a, 0.0) for a in tied))
        reasons.insert(0, f"cannot tell {', '.join(tied)} apart at {eng(f)}: the curves' P(best) of {arm} {p:.2f}, "
                       f"margin {decision.margin:.3f} [{decision.margin_lo:.3f}, {decision.margin_hi:.3f}] over "
                       f"{decision.runner_up}; one more rung for them costs {eng(separate)} "
                       f"({separate / f:.1%} of the budget)")
    confidence = "cannot tell" if tied else "low" if reasons or far else "high"
    p_arm, runner, margin = decision.p_best, decision.runner_up, decision.margin
    m_lo, m_hi = decision.margin_lo, decision.margin_hi
    stands = naive_stands(at_f, pred, naive, level, bool(tied))
    theirs = next((p for p in at_f.predictions if p.arm == naive[0]), None) if naive is not None else None
    if stands is not None and naive is not None and theirs is None and observed is not None:
        rec = _best_observed(common, observed, upfront, stands, level, arm=naive[0])  # no curve: what it shows
        return replace(rec, **naive_fields(rec.arm, at_f, naive))
    if stands is not None and naive is not None and theirs is not None:
        reasons.insert(1 if tied else 0, stands)  # tied: after the "cannot tell" reason, which names the tie
        confidence = "cannot tell" if tied else "low"
        top, arm, pred = arm, naive[0], theirs
        p_arm, runner, margin, m_lo, m_hi = decision.p_best_of.get(arm, 0.0), top, None, None, None
    if pred.extrapolation > EXTRAPOLATION_LIMIT * EXTRAPOLATION_TOL:  # the recommended arm's own
        reasons.append(f"{pred.extrapolation:.2f}x extrapolation beyond the arm's largest pilot FLOPs (beyond "
                       f"~{EXTRAPOLATION_LIMIT:g}x)")
    return Recommendation(**common, arm=arm, mode="fitted", confidence=confidence,
                          reasons=tuple(reasons), at_flops=pred.ledger_flops, reward=pred.reward, lo=pred.lo,
                          hi=pred.hi, gain=pred.gain, gain_lo=pred.gain_lo, gain_hi=pred.gain_hi,
                          p_best=p_arm, runner_up=runner, margin=margin, margin_lo=m_lo, margin_hi=m_hi,
                          extrapolation=pred.extrapolation, upfront_flops=upfront.get(arm, 0), interval=interval,
                          tied=tied, separate_flops=separate, **naive_fields(arm, at_f, naive))


def separated_the_other_way(at_f: BudgetResult, pick: str | None, arm: str) -> bool:
    """Whether the calibrated intervals at the budget put ``pick`` above ``arm`` (its lower bound above ``arm``'s
    upper bound): then the curves and the anchored forecast disagree, and the rules' pick stands
    (:func:`anchored_pick`)."""
    ours = next((q for q in at_f.predictions if q.arm == pick), None)
    theirs = next(q for q in at_f.predictions if q.arm == arm)
    return ours is not None and ours.lo > theirs.hi


def anchored_pick(rec: Recommendation, at_f: BudgetResult, lead: Challenger, upfront: dict[str, int],
                  naive: tuple[str, float] | None) -> Recommendation:
    """The recommendation moved to ``lead``: a finalist the anchored forecast (:mod:`flopplan.race.persistence`)
    makes best at the budget with a P(best) of at least :data:`UNDECIDED_P`, and as much with the calibrated change
    (:func:`flopplan.race.persistence.holds_calibrated`), although the rules before it picked ``rec``'s arm (the
    naive pick, as a rule), and the calibrated intervals do not separate the two the other way
    (:func:`separated_the_other_way`). The caller checks both conditions.

    Why: the anchored forecast is the one whose P(best) was checked against simulated truths (within 0.10 of the hit
    rate on most shapes at 2x, docs/results.md); with the protocol's own threshold on it, on the same repetitions
    as the rules before it (benchmarks/race_misspecification.py, 200 a shape, 37 cells; docs/results.md, round
    23) the pick moved in at most 6 % of them, RACE's regret came below the naive pick's where sigmoids cross
    (by 0.0032-0.0043 of 0.027-0.029, at three seeds) and on the entropy-ceiling shape (0.0076 to 0.0061), and no
    cell's rose above the naive pick's by more than 0.0002, one paired standard error. An independent check's
    families then found moves that lost by 0.04-0.06 (round 26), and a rerun of the cells found 10 of 48 above the
    naive pick's: the move now also needs the forecast carried by the calibrated change to reach the threshold
    (round 27: 3 cells above, by at most 0.0003, none of the check's; still below where sigmoids cross). The calibrated
    intervals, each arm's own allowance for its extrapolation, overlap where the paired draws agree on the order, so
    they keep arms tied that the draws separate. Confidence: low. ``tied`` and ``separate_flops`` stay the rules' (the
    arms the curves could not tell apart, when they named a tie: evidence about the curves, not about the move)."""
    arm, p, p_calibrated, _ = lead
    pred = next(q for q in at_f.predictions if q.arm == arm)
    old = next((q for q in at_f.predictions if q.arm == rec.arm), None)
    f = at_f.flops
    how = ("although the calibrated intervals at {f} overlap" if old is None or pred.lo <= old.hi
           else "as the calibrated intervals at {f} also say").format(f=eng(f))
    reasons = [f"{arm} is recommended over {rec.arm}: the anchored forecast (each finalist's reward seen at its "
               f"largest pilot plus the curves' change from there to {eng(f)}) gives it P(best) {p:.2f}, and "
               f"{p_calibrated:.2f} with the calibrated change (both at least {UNDECIDED_P:g}), {how}"]
    if not at_f.decision.regime.endswith("-bound"):
        reasons.append(f"{at_f.decision.regime} at the target budget: {at_f.decision.rule}")
    if pred.extrapolation > EXTRAPOLATION_LIMIT * EXTRAPOLATION_TOL:
        reasons.append(f"{pred.extrapolation:.2f}x extrapolation beyond the arm's largest pilot FLOPs (beyond "
                       f"~{EXTRAPOLATION_LIMIT:g}x)")
    fields = naive_fields(arm, at_f, naive)
    if naive is not None and naive[0] != arm:
        fields["naive_note"] = (f"the naive pick {naive[0]} shows the best reward at the largest pilot "
                                f"({naive[1]:.3f}), but the curves' change from there to {eng(f)} carries {arm} past "
                                f"it: the anchored forecast gives {arm} P(best) {p:.2f}")
    return replace(rec, arm=arm, confidence="low", reasons=tuple(reasons), at_flops=pred.ledger_flops,
                   reward=pred.reward, lo=pred.lo, hi=pred.hi, gain=pred.gain, gain_lo=pred.gain_lo,
                   gain_hi=pred.gain_hi, p_best=p, runner_up=rec.arm, margin=None, margin_lo=None, margin_hi=None,
                   extrapolation=pred.extrapolation, upfront_flops=upfront.get(arm, 0), **fields)


def _best_observed(common: dict[str, Any], obs: ObservedBest, upfront: dict[str, int], why: str, level: float,
                   arm: str | None = None) -> Recommendation:
    """The survivor with the best observed reward (``arm``, when given: that survivor, the runner-up the best of
    the others); ``common``: the recommendation's target, flops, regime and budget left."""
    order = np.array(tie_order(list(obs.points)))  # a tie to the first arm, not to a float's last bit
    if arm is not None:
        order = np.array([obs.names.index(arm), *(j for j in order if obs.names[j] != arm)])
    i = int(order[0])
    arm = obs.names[i]
    pb = p_best(obs.replicates)
    runner = margin = lo_m = hi_m = None
    if len(order) > 1:
        j = int(order[1])
        runner, margin = obs.names[j], float(obs.points[i] - obs.points[j])
        lo_m, hi_m = (float(v) for v in bootstrap_interval(obs.replicates[i] - obs.replicates[j], margin, level))
    g_lo, g_hi = obs.gain_intervals[i]
    reasons = (why, f"numbers are observed at {eng(obs.at_flops[i])} (the survivors' largest common FLOPs), not "
               f"predicted at {eng(common['flops'])}")
    ledger = common["flops"] - upfront.get(arm, 0)
    return Recommendation(**common, arm=arm, mode="best observed", confidence="best observed", reasons=reasons,
                          at_flops=float(obs.at_flops[i]), reward=float(obs.points[i]),
                          lo=float(obs.intervals[i, 0]), hi=float(obs.intervals[i, 1]), gain=float(obs.gains[i]),
                          gain_lo=float(g_lo), gain_hi=float(g_hi), p_best=float(pb[i]), runner_up=runner,
                          margin=margin, margin_lo=lo_m, margin_hi=hi_m,
                          extrapolation=float(ledger / obs.at_flops[i]), upfront_flops=upfront.get(arm, 0),
                          interval=obs.method)
