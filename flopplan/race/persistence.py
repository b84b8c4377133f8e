"""The stated P(best) of a recommendation: the reward seen at the largest pilot, carried to the budget by the
curves' change (the anchored forecast).

Per arm of the pool (the finalists, the comparable arms that reached the top rung, and the pick) and per paired
bootstrap draw j (the same prompts and seeds for every arm):

    anchored_j = seen_j + (mixture_j(F) - mixture_j(F_last))

where seen_j is the arm's seed-mean reward at each seed's last evaluation in draw j (:func:`last_observed`),
mixture_j the model average's replicate j before the calibration's stretch (:mod:`flopplan.race.ensemble`: each
family fitted to draw j, mixed by out-of-sample weights) and F_last where the arm's seeds were last evaluated
(their mean, :func:`flopplan.race.checks.last_flops`). When no arm of the pool is still accelerating in ln F, the
changes are pooled toward their mean first (:func:`pooled_change`: what the draws cannot tell apart between the arms'
changes is the extrapolation's noise). The stated P(best) is the share of draws in which the arm's anchored value
is the highest (:func:`stated_p_best`).

Why anchored, and why unstretched. The curves' P(best) at F reads each arm's level from its fit; the fit's error
at the pilots, and the calibrated stretch that widens every replicate beyond them, spread the arms' levels at F
more widely than their truths differ, so on simulated pilots whose truths are not the fitted curves
(benchmarks/race_misspecification.py, 200 repetitions per family; docs/results.md) the curves alone stated
0.11-0.14 less than how often the pick was right where curves saturate. The level seen at the largest pilot is
measured, not fitted, with only the sampling noise the draws resample; what the curves add is the change still to
come, whose spread is the families' disagreement and the draws' noise. The calibration's stretch is the
interval's allowance for one arm's extrapolation error; it multiplies every draw's deviation from the arm's point,
so it would spread the arms' differences as widely as their levels (kept in, the anchored P(best) still stated up
to 0.12 too little on the sigmoid control in the same simulations). Persistence alone (the order seen at the
largest pilot, the no-change forecast; the "single-scale ranking" DataDecide, arXiv 2504.11393, found right about
80 % of the time) stated up to 0.17 too much where curves cross after the pilots; the anchored forecast keeps the
curves' crossing. It has no tuned weight; the pooling's weights are estimated from each pool's own draws.

The decision (which arm, and "cannot tell") reads the calibrated curves (:mod:`flopplan.race.regime`), with one
exception: a finalist this anchored forecast makes best in at least 0.8 of the draws, and also when carried by the
calibrated change (:func:`challenger`, :func:`holds_calibrated`), becomes the pick, confidence low
(:func:`flopplan.race.regime.anchored_pick`). The probability stated for the recommended arm is anchored, and under
"cannot tell" the mean of the anchored and the curves' own (:func:`stated_for`, round 30). Persistence's own share
(``p_best_seen``), the curves' (``p_best_curves``) and the anchored one (``p_best_anchored``) are reported beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from flopplan.errors import UserError
from flopplan.race.bootstrap import p_best
from flopplan.race.design_notes import HORIZON_SLACK, MEASURED_HORIZON
from flopplan.race.ensemble import seed_mean
from flopplan.race.families import ArmSample
from flopplan.race.results import ArmCurve, ArmInfo, BudgetResult, Recommendation
from flopplan.recipe import RewardSystem
from flopplan.units import eng

FloatArray = NDArray[np.float64]


def last_observed(sample: ArmSample) -> FloatArray:
    """Per row of ``sample`` (the original data, then each draw): the seed-mean reward at each seed slot's last
    evaluation (1 + k,); a slot with no evaluation in a row does not count."""
    valid = sample.w > 0
    last = (valid.shape[-1] - 1 - np.argmax(valid[..., ::-1], axis=-1))[..., None]  # (1 + k, S, 1)
    y = np.take_along_axis(sample.y, last, axis=-1)
    w = np.take_along_axis(sample.w, last, axis=-1) * valid.any(axis=-1, keepdims=True)
    return seed_mean(y, w)[..., 0]


def stated_p_best(curves: FloatArray, seen: FloatArray, change: FloatArray, finalist: NDArray[np.bool_],
                  accelerating: NDArray[np.bool_]) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per arm of a pool: (stated P(best): the anchored forecast's, persistence's P(best), the curves' P(best))
    from the calibrated replicates at the budget ``curves`` (n, k), the draws' last observed means ``seen`` (n, k),
    the unstretched mixture's change from each arm's largest pilot to the budget ``change`` (n, k), which arms
    are finalists (n,) and which arms' pilots still accelerate in ln F (n,: :mod:`flopplan.race.acceleration`).
    Persistence counts the finalists only (an arm the halving eliminated was not seen at the largest pilot: 0).

    When no arm of the pool accelerates, the anchored forecast carries the arms by their pooled change
    (:func:`pooled_change`); otherwise by each arm's own. Why pooled: a change the draws cannot tell from another
    arm's is the extrapolation's noise, and carried raw it spreads the arms' forecasts as though their futures
    differed; where every arm saturates (the sigmoid control, a decline after a peak) the unpooled forecast stated
    0.10-0.12 less than how often the pick was right (benchmarks/race_misspecification.py; docs/results.md, round
    20). Why not with an accelerating arm: such an arm follows another law than the saturating ones, and the test
    that finds it is one-sided at 90 % on four positions, so a pool where it fires is one where other arms may be
    turning up unseen. Pooled all the same, the crossing sigmoids stated 0.16 more than their hit rate; pooling
    only the arms that do not accelerate, 0.10 more (round 20)."""
    persist = np.zeros(len(finalist))
    if finalist.any():
        persist[finalist] = p_best(seen[finalist])
    carried = change if accelerating.any() else pooled_change(change)
    return p_best(seen + carried), persist, p_best(curves)


def stated_for(confidence: str, anchored: float, by_curves: float) -> float:
    """The P(best) a fitted recommendation states: the anchored forecast's, and under "cannot tell" the mean of that
    and the curves' own (an equal-weight linear opinion pool of the two forecasts: Stone, Ann. Math. Stat. 32:1339,
    1961; Genest and Zidek, Stat. Sci. 1:114, 1986).

    Why under "cannot tell". There the calibrated curves did not separate the pick from the arms named beside it,
    and the anchored forecast reads their order at the largest pilot, carried by the curves' change: where that
    order changes after the pilots, it states too much. In the three independent checks written blind to the
    benchmark's shapes (docs/results.md, rounds 26, 28 and 30), every family outside the 0.10 bar was too high
    with the anchored P(best) alone, by up to 0.33, with "cannot tell" said in 81-98 % of their repetitions; the
    curves' own P(best) errs the other way where curves saturate (the module's docstring). The equal weight is not
    fitted, but the rule was chosen among six variants on the benchmark's 42 cells and round 26's six (in sample:
    7 outside to 5, three of those too low); on round 30's check, drawn after, it took the families outside the
    bar from 4 of 5 to 2 (docs/results.md, round 30). Round 13 took the mean in every case, not only under
    "cannot tell", and the control read 0.14 too low with one R0 for every arm."""
    return (anchored + by_curves) / 2 if confidence == "cannot tell" else anchored


class Challenger(NamedTuple):
    """A finalist the anchored forecast makes best at the budget with a P(best) of at least the threshold, though
    the rules picked another arm: its name, that P(best) (:func:`stated_p_best`), its P(best) in the same forecast
    carried by the calibrated change (the calibrated replicates' change from each arm's largest pilot to the
    budget), and the pool of arms both were computed among."""

    arm: str
    p_best: float
    p_best_calibrated: float
    pool: frozenset[str]


def challenger(stated: FloatArray, pick: int, threshold: float) -> int | None:
    """The pool arm the anchored forecast (``stated``, :func:`stated_p_best`) makes best with a P(best) of at least
    ``threshold`` when it is not ``pick`` (None: none). It takes the pick's place
    (:func:`flopplan.race.regime.anchored_pick`) only when :func:`holds_calibrated` too."""
    top = int(np.argmax(stated))
    return top if top != pick and stated[top] >= threshold else None


def holds_calibrated(p_calibrated: float, threshold: float) -> bool:
    """Whether a challenger's P(best) in the anchored forecast carried by the calibrated change also reaches
    ``threshold``, as the move needs. The calibrated replicates are those the intervals at F are read from: the
    model average stretched by the conformal allowance the pilots' own temporal holdout measured, and, for an arm
    still accelerating in ln F, its upper end raised as its rise forecasts (:mod:`flopplan.race.acceleration`).

    Why. The anchored forecast's change is the unstretched mixture's: its spread is the draws' noise and the
    families' disagreement, not the extrapolation error the holdout measured, so a challenger whose lead rests on a
    climb the pilots only begin to show can reach 0.8 there and not once that error is allowed for. With the
    anchored forecast alone, on 48 cells of simulated pilots (benchmarks/race_misspecification.py, 200 repetitions
    a cell, and an independent check's six families, 100 each; docs/results.md, round 27) the pick moved in 73
    repetitions, 53 won and 20 lost, and RACE's regret came above the naive pick's in 10 cells; with both, 27 moves,
    23 won and 4 lost, 3 cells above (by at most 0.0003), and still below it where sigmoids cross at three seeds.
    The threshold is the protocol's own (no new constant)."""
    return p_calibrated >= threshold


def held_back_caveat(rec: Recommendation, lead: Challenger, threshold: float) -> list[str]:
    """Why the rules' pick ``rec`` stays when the anchored forecast makes ``lead`` best, the calibrated intervals do
    not separate the two the other way, and only the calibrated change keeps ``lead`` below ``threshold``."""
    if holds_calibrated(lead.p_best_calibrated, threshold):
        return []
    return [f"{lead.arm}: the anchored forecast makes it best at {eng(rec.flops)} (P(best) {lead.p_best:.2f}), but "
            f"carried by the calibrated change, which allows for the extrapolation error the pilots' own holdout "
            f"measured, only {lead.p_best_calibrated:.2f} (< {threshold:g}): {rec.arm} stays the recommendation"]


TAU_GRID = 2001
"""Points of the grid on which :func:`pooled_change` integrates the between-arm spread tau."""
TAU_CAP = 50.0
"""The grid's top, in units of the arms' mean noise sqrt(mean v_i), or five times the range of the arms' mean
changes where that is more (means that far apart are barely pooled whatever tau is); the half-Cauchy prior's tail
beyond 50 noise sds holds about 1 % of the prior, and a top of 200 gave the same figures on every simulated cell
(docs/results.md, round 28)."""


def _tau_draws(m: FloatArray, v: FloatArray, n: int) -> FloatArray:
    """n draws of the between-arm sd tau from its posterior given the arms' mean changes ``m`` and noises ``v``: the
    hierarchical normal model m_i ~ N(mu, v_i + tau^2) with mu integrated out (Gelman et al., Bayesian Data
    Analysis, 3rd ed., section 5.4), under a half-Cauchy prior on tau whose scale is the arms' noise sqrt(mean v_i)
    (Gelman, Bayesian Analysis 1:515, 2006: proper with two groups, where a flat prior is not, and weakly
    informative at the scale of the noise). On a grid from 0 to :data:`TAU_CAP`'s top, drawn at the quantiles
    (j + 1/2) / n, so that the same inputs give the same draws."""
    scale = float(np.sqrt(v.mean()))
    if not scale > 1e-12:  # no noise (or only rounding's): the spread of the means themselves sets the scale
        scale = float(m.std())
    if scale == 0.0:
        return np.zeros(n)
    tau = np.linspace(0.0, max(TAU_CAP * scale, 5 * float(np.ptp(m))), TAU_GRID)
    w = 1.0 / np.maximum(v[None, :] + tau[:, None] ** 2, 1e-300)  # (grid, k)
    mu = (w * m).sum(axis=1) / w.sum(axis=1)
    log_post = (0.5 * (np.log(w).sum(axis=1) - np.log(w.sum(axis=1)) - (w * (m - mu[:, None]) ** 2).sum(axis=1))
                - np.log1p((tau / scale) ** 2))
    post = np.exp(log_post - log_post.max())
    cdf = np.cumsum(post) / post.sum()
    return tau[np.minimum(np.searchsorted(cdf, (np.arange(n) + 0.5) / n), TAU_GRID - 1)]


def own_noise(change: FloatArray) -> FloatArray:
    """Each arm's own noise in ``change`` (n >= 2 arms, per draw): n / (n - 1) times the variance over the draws of
    its change less the n arms' mean change in the same draw (:func:`pooled_change` says why)."""
    n = len(change)
    return np.asarray((change - change.mean(axis=0)).var(axis=1, ddof=1) * n / (n - 1), dtype=float)


def pooled_change(change: FloatArray) -> FloatArray:
    """The changes to the budget ``change`` (n, k: per pool arm, per draw) pooled toward the arms' mean change, with
    the uncertainty of how far to pool.

    Arm i has a mean change m_i over the draws and a noise v_i: n / (n - 1) times the variance over the draws of
    its change less the n arms' mean change in the same draw. Noise every arm shares (the same prompts in every
    draw) moves no arm ahead of another and drops out of that difference; of an arm's own noise u, the difference
    keeps (n - 1) / n (exact when the arms' own noises are equal), hence the factor. How much the arms' true changes
    differ, tau, is drawn from its posterior (:func:`_tau_draws`), one value per draw, and in that draw arm i's change
    shrinks toward the arms' mean mu (weighted by 1 / (v_i + tau^2), the model's estimate given tau) by
    B_i = v_i / (v_i + tau^2): it becomes mu + (1 - B_i) (m_i - mu) + sqrt(1 - B_i) (c_ij - m_i), the normal
    posterior's mean and spread given tau. Fewer than two arms: nothing to pool.

    Why tau's posterior and not its estimate. Round 20 pooled by the moment estimate tau^2 = max(var_i(m_i) -
    mean_i(v_i), 0) (Efron and Morris, JASA 70:311, 1975): with two to four arms it is 0 in most pools (64-89 % on
    the simulated shapes, round 19), and then every arm changes by m in every draw and the order at the budget is
    the order seen, taken as certain. Where arms that differ at the largest pilot meet by F, that stated up to 0.33
    more than the hit rate (round 26). Drawn from its posterior, tau keeps each arm part of its own change in the
    draws where the data allow a spread, and the draws where they do not pool it as before. On 48 simulated cells
    (docs/results.md, round 28) it lowered the stated P(best) where it was too high (cells outside the 0.10 bar 9
    to 7, none added). It moves a few picks too: one move that lost is no longer made, and on other samples moves
    that won (round 28 lists them)."""
    out = np.array(change, dtype=float, copy=True)
    if len(out) < 2:
        return out
    v = own_noise(out)
    m = out.mean(axis=1)
    total = v[:, None] + _tau_draws(m, v, out.shape[1])[None, :] ** 2  # (arms, draws)
    shrink = np.divide(v[:, None], total, out=np.ones_like(total), where=total > 0)
    weight = 1.0 / np.maximum(total, 1e-300)
    centre = (weight * m[:, None]).sum(axis=0) / weight.sum(axis=0)  # mu given each draw's tau
    return centre + (1 - shrink) * (m[:, None] - centre) + np.sqrt(1 - shrink) * (out - m[:, None])


def p_best_if_stopped(seen: FloatArray, change: FloatArray, i: int) -> float:
    """Arm ``i``'s anchored P(best) were it to stop at its largest pilot (its change to the budget set to 0) while
    every other arm of the pool changes as forecast: what the stated P(best) would be if the arm's climb ended where
    its pilots did (``seen`` and ``change`` as in :func:`stated_p_best`)."""
    frozen = np.array(change, dtype=float, copy=True)
    frozen[i] = 0.0
    return float(p_best(seen + frozen)[i])


def pool(rec: Recommendation, at_f: BudgetResult, survived: dict[str, bool]) -> set[str]:
    """The arms a fitted recommendation's stated P(best) is computed among: the pick and the finalists (the
    comparable arms that reached the top rung)."""
    comparable = {p.arm for p in at_f.predictions if p.comparable}
    return {n for n in comparable if survived.get(n, False)} | {str(rec.arm)}


def climb_caveat(rec: Recommendation | None, at_f: BudgetResult, curves: dict[str, ArmCurve],
                 survived: dict[str, bool], if_stopped: float | None) -> list[str]:
    """What a fitted recommendation's P(best) takes for granted: the arms it is computed among (the pick and the
    comparable finalists) that were still accelerating in ln F at their largest pilots (their upper ends raised,
    :mod:`flopplan.race.acceleration`) are assumed to keep climbing to the budget. Where such an arm stops between
    its largest pilot and F, no pilot shows; the stated P(best) does not price it in (docs/results.md, round 9:
    how much of it any rule that reads only the pilots could see). When the pick is one of them, the warning gives
    its anchored P(best) were it to stop at its largest pilot while the others go on (``if_stopped``,
    :func:`flopplan.race.analysis._among_finalists`), beside the anchored P(best) it is a twin of (under "cannot
    tell" the stated one is not that: :func:`stated_for`)."""
    if rec is None or rec.mode != "fitted" or rec.arm is None or rec.p_best is None:
        return []
    among = pool(rec, at_f, survived)
    climbing = [n for n, c in curves.items()
                if n in among and c.ensemble is not None and c.ensemble.reach_at_budget is not None]
    if not climbing:
        return []
    anchored = rec.p_best if rec.p_best_anchored is None else rec.p_best_anchored  # what if_stopped is a twin of
    stop = (f"; were {rec.arm} to stop at its largest pilot while the others go on, that P(best) would be "
            f"{if_stopped:.2f}" if rec.arm in climbing and if_stopped is not None else "")
    which = ("" if anchored == rec.p_best else
             f" (the anchored forecast's; the {rec.p_best:.2f} stated averages it with the curves' own)")
    return [f"{', '.join(climbing)}: still accelerating in ln F at the largest pilot; the P(best) of {anchored:.2f}"
            f"{which} assumes the climb goes on to the target budget. A ceiling reached between the largest pilot and "
            f"the budget is in no pilot, and it can reorder the arms{stop}"]


def horizon_caveat(rec: Recommendation) -> list[str]:
    """What the stated P(best) of a fitted recommendation does not show when F is far beyond the pick's largest pilot,
    read as the analysis extrapolates (its ``extrapolation``: F over the largest training FLOPs it read the arm at,
    as the simulations' F / F_P; race.json's ``horizon`` divides by the pilot's whole ledger, which may also hold
    evaluations and, midway through a race, a rung the analysis does not read yet): the anchored forecast was
    measured against simulated truths of 15 curve shapes (benchmarks/race_misspecification.py, 200 repetitions per
    shape and seed; docs/results.md, round 10) at F = 2x the largest pilot, where it was within 0.10 of how often the
    pick was the best finalist on 12 of them (the stated P(best) since round 30, on 49 of 58 shapes and geometries
    there); at 4x and 8x it was off by up to 0.43 (too high where straight rises in F stop at unseen ceilings, too
    low where sigmoids saturate and where arms tie at a pass rate of 1). Beyond :data:`MEASURED_HORIZON` (with
    :data:`HORIZON_SLACK`) the caveat says so; the number stays, as a reading of how strongly the pilots favour the
    arm, not as a probability.
    """
    far = rec.extrapolation if rec.extrapolation is not None else rec.horizon
    if rec.mode != "fitted" or rec.arm is None or rec.p_best is None or far <= MEASURED_HORIZON * HORIZON_SLACK:
        return []
    return [f"{rec.arm}: F is {far:.1f}x its largest pilot; the P(best) of {rec.p_best:.2f} was checked "
            f"against simulated truths only at {MEASURED_HORIZON:g}x (within 0.10 of how often the pick was right on "
            "most curve shapes there; the anchored forecast was off by up to 0.43 at 4x-8x: docs/results.md). Read it "
            "as how strongly the pilots favour the arm, not as the chance that it is best at F"]


MEASURED_PROMPTS = 100  # the fewest evaluation prompts per target the benchmark checked RACE at (race design's default)


def prompts_caveat(target: str, n_prompts: int) -> list[str]:
    """What a target's intervals and stated P(best) do not show when it has fewer evaluation prompts than they were
    checked with: benchmarks/race_misspecification.py (``--prompts``; docs/results.md, round 14) found them within
    the bars on the shapes it ran at 100 and 200 prompts per target, and at 50 found the 90 % intervals holding the
    truth 75 % of the time on a straight rise in F and the stated P(best) off by up to 0.16 (too high where curves
    cross, too low where they collapse). Below :data:`MEASURED_PROMPTS` the caveat says so."""
    if n_prompts >= MEASURED_PROMPTS:
        return []
    return [f"{target}: {n_prompts} evaluation prompts; the intervals and P(best) were checked against simulated "
            f"truths at {MEASURED_PROMPTS}-200 prompts per target, and at 50 a 90 % interval held the truth 75 % of "
            "the time on one curve shape and the P(best) was off by up to 0.16 (docs/results.md). Evaluate on more "
            "prompts (race design --eval-prompts) to read them as checked"]


MEASURED_ARMS = 6  # the most arms per grid the benchmark measured RACE's bars at (the demo's grid)


def arms_caveat(target: str, n_arms: int) -> list[str]:
    """What a target's stated P(best) and intervals do not show on a grid of more arms than they were checked with:
    benchmarks/race_misspecification.py (``--arms``; docs/results.md, rounds 1-20) measured them on 4 arms, and on
    the demo's 6 arms with 2 seeds (200 repetitions a shape: coverage up to 0.978, the P(best) within 0.08 of the
    hit rate); at 8 arms (60 repetitions a shape) it found the intervals holding the truth 98 % of the time on the
    sigmoid control (round 14), and, with round 20's code, the sigmoid control's stated P(best) 0.12 below how
    often the pick was right (the strongest of seven rivals' forecasts runs high, a winner's curse among them, and
    in 83 % of those pools some arm accelerates, so the changes are not pooled) and the capped straight rise in F's
    0.28 above. Beyond :data:`MEASURED_ARMS` the caveat says so."""
    if n_arms <= MEASURED_ARMS:
        return []
    return [f"{target}: {n_arms} arms; the intervals and P(best) were checked against simulated truths on grids of "
            f"4-{MEASURED_ARMS} arms. At 8 the P(best) was off by up to 0.28 in either direction (0.12 too low on a "
            "sigmoid rise, where the best-looking of many rivals looks better than it is; 0.28 too high on a "
            "straight rise in F that stops at a ceiling) and the 90 % intervals held the truth up to 98 % of the "
            "time (docs/results.md). Read them there as unchecked"]


def names_reward_model(reward: object) -> bool:
    """Whether a reward value (an axis label, a pilot ledger's ``reward``) names a reward model
    (:class:`flopplan.recipe.RewardSystem`: ``orm:`` and ``prm:`` carry one, ``rule`` none); a value it cannot read
    is not one."""
    try:
        return RewardSystem.parse(str(reward)).model is not None
    except UserError:
        return False


def learned_reward_caveat(rec: Recommendation, arms: Sequence[ArmInfo], among: set[str],
                          trained: Mapping[str, str] | None = None) -> list[str]:
    """What a fitted recommendation's P(best) and intervals do not show when arms ``among`` its pool (the pick and
    the finalists: :func:`pool`) are trained on a learned reward model (an ``orm:`` or ``prm:`` value on the reward
    axis; ``trained`` holds the reward an arm's pilots' ledgers recorded where it says otherwise, and wins: a user's
    script that loads a reward model in its ``reward_funcs`` while the design says ``rule``, or the reverse) and may
    over-optimise it: a policy trained against a reward model can see its true reward peak and fall while the
    model's score keeps rising (Gao, Schulman and Hilton, arXiv 2210.10760). A fall the pilots show is carried on
    (the steep-fall family, :mod:`flopplan.race.fall`); one that starts after the largest pilot is in no pilot. On
    simulated over-optimisation (benchmarks/shapes_round20.py's ``overoptimised``, four samples of 200
    repetitions; docs/results.md, round 21) the 90 % intervals held the truth at F 76-82 % of the time, and the
    stated P(best) was 0.12-0.22 above how often the pick was the best finalist; with round 30's mean under "cannot
    tell" (:func:`stated_for`), 0.10 above in the issue's geometry and 0.16 in the demo's (round 30)."""
    trained = trained or {}
    learned = [a.name + (" (by its pilots' ledgers)" if a.name in trained else "") for a in arms
               if a.name in among and names_reward_model(trained.get(a.name, a.axes.get("reward", "rule")))]
    if rec.mode != "fitted" or rec.arm is None or rec.p_best is None or not learned:
        return []
    return [f"{', '.join(learned)}: trained on a learned reward model, which a policy can over-optimise (its true "
            "reward peaks, then falls: Gao et al., arXiv 2210.10760). A fall that starts after the largest pilot is "
            f"in no pilot. On simulated over-optimisation the stated P(best) (here {rec.p_best:.2f}) ran 0.10-0.16 "
            "above how often the pick was best, and 90 % intervals held the truth 76-82 % of the time "
            "(docs/results.md, rounds 21 and 30)"]
