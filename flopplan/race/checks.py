"""Per-arm facts and checks that need no curve bootstrap: observations, the noise the regime rule uses, the
monotone-envelope check with its noise, observed rewards near a budget, the naive pick, the point fits (with and
without the first evaluation point of each seed), the power-law check, and the bootstrap of observed means ("best
observed").

An arm's seed runs are read as sorted evaluation points; step-0 evaluations (FLOPs = 0) of a seed are averaged
into one. A point's reward is the mean of its scores over the target's prompts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Any

import numpy as np
from numpy.typing import NDArray

from flopplan.errors import UserError
from flopplan.race.bootstrap import bootstrap_interval
from flopplan.race.curves import A_MAX, CurveFit, PowerLawFit, fit_curve, fit_power_law, monotone_envelope
from flopplan.race.design_notes import HOLDOUT_POSITIONS
from flopplan.race.pilot_data import ArmPilots, EvalPoint, SeedRun
from flopplan.race.results import ArmCurve, EnvelopeResult, Observation, PowerLawCheck

FloatArray = NDArray[np.float64]
DROP_Z = 3.0  # a drop below the running best larger than DROP_Z standard errors fails the envelope check
NEAR = (0.8, 1.05)  # "observed at budget B": the last evaluation with FLOPs in [0.8 B, 1.05 B]
SUPPORT_TOL = 1.05  # a budget is "within the pilots" up to 5 % beyond the largest pilot FLOPs


def seed_points(arm: ArmPilots) -> list[list[EvalPoint]]:
    """Per seed: one step-0 point (the mean of the seed's step-0 evaluations), then its positive points by FLOPs."""
    out = []
    for run in arm.runs:
        zero = np.mean([p.scores for p in run.points if p.flops == 0], axis=0)
        out.append([EvalPoint(0.0, zero), *sorted((p for p in run.points if p.flops > 0), key=lambda p: p.flops)])
    return out


def observations(arm: ArmPilots) -> tuple[Observation, ...]:
    return tuple(Observation(str(run.seed), float(p.flops), float(p.scores.mean()))
                 for run, pts in zip(arm.runs, seed_points(arm), strict=True) for p in pts)


def max_flops(arm: ArmPilots) -> float:
    return max((p.flops for run in arm.runs for p in run.points), default=0.0)


def last_flops(arm: ArmPilots) -> float:
    """Mean over the seeds with a positive evaluation of each one's largest evaluation FLOPs: where the seed-mean
    reward at the seeds' last evaluations (:func:`flopplan.race.persistence.last_observed`) was seen."""
    last = [f for f in (max(p.flops for p in run.points) for run in arm.runs) if f > 0]
    return float(np.mean(last)) if last else 0.0


def last_noise(arm: ArmPilots) -> tuple[float, str]:
    """The noise of a gap between arms: the sd over seeds (ddof 1) of the mean reward at each seed's last
    evaluation; with one seed, the prompt standard error sd_q(score) / sqrt(Q) of that evaluation."""
    last = [pts[-1].scores for pts in seed_points(arm)]
    if len(last) >= 2:
        return float(np.std([s.mean() for s in last], ddof=1)), f"seed sd of the last evaluation ({len(last)} seeds)"
    q = last[0].size
    sd = float(np.std(last[0], ddof=1) / np.sqrt(q)) if q > 1 else 0.0
    return sd, "prompt standard error of the last evaluation (1 seed)"


def _drop_sd(diff: FloatArray) -> float:
    """Standard error of the mean of per-(seed, prompt) differences (S, Q), seeds independent: the larger of the
    seed-to-seed variance of the seed means and the prompt-level variance / Q, over S."""
    n_s, q = diff.shape
    d = diff.mean(axis=1)
    var_seed = float(np.var(d, ddof=1)) if n_s >= 2 else 0.0
    var_eval = float(np.mean(np.var(diff, axis=1, ddof=1)) / q) if q >= 2 else 0.0
    return float(np.sqrt(max(var_seed, var_eval) / n_s))


def envelope(arm: ArmPilots) -> EnvelopeResult:
    """The monotone-envelope check with a noise yardstick. Seeds with the same number of points: on the
    seed-mean curve (positions aligned); the drop's standard error from the paired per-seed, per-prompt
    differences between the peak and the dropped point (:func:`_drop_sd`). Otherwise per seed (evaluation noise
    only), the seed with the most significant drop reported. Monotone: drop <= DROP_Z x its standard error."""
    runs = seed_points(arm)
    if len({len(r) for r in runs}) == 1:
        scores = np.stack([[p.scores for p in r] for r in runs])  # (S, T, Q)
        flops = np.mean([[p.flops for p in r] for r in runs], axis=0)
        groups, curve = [(flops, scores)], "seed mean"
    else:
        groups = [(np.array([p.flops for p in r]), np.stack([p.scores for p in r])[None]) for r in runs]
        curve = "per seed"
    results = []
    for f, sc in groups:
        check = monotone_envelope(f, sc.mean(axis=(0, 2)))
        i = int(np.flatnonzero(f == check.flops_at_max_drop)[0])
        j = int(np.flatnonzero(f == check.peak_flops)[0])
        sd = _drop_sd(sc[:, j] - sc[:, i])
        z = check.max_drop / sd if sd > 0 else (np.inf if check.max_drop > 1e-12 else 0.0)
        results.append((z, check, sd))
    z, check, sd = max(results, key=lambda r: r[0])
    return EnvelopeResult(curve=curve, check=check, noise_sd=sd, monotone=bool(z <= DROP_Z))


def observed_near(arm: ArmPilots, budget: float) -> float | None:
    """Mean over seeds of each seed's last evaluation with FLOPs in [0.8, 1.05] x ``budget`` (None: no seed)."""
    vals = []
    for pts in seed_points(arm):
        near = [p for p in pts if NEAR[0] * budget <= p.flops <= NEAR[1] * budget]
        if near:
            vals.append(float(near[-1].scores.mean()))
    return float(np.mean(vals)) if vals else None


def observed_at_rung(curve: ArmCurve, rung: int, rung_flops: float) -> float | None:
    """The reward an arm that ran ``rung`` (of ``rung_flops`` training FLOPs) showed there: observed near the rung's
    budget (``observed_at_rungs``: at equal FLOPs, a learned reward model's training included, so None for an arm
    whose upfront FLOPs put it beyond the rung), or, where its pilots stopped below 0.8 of the rung's training FLOPs
    (evaluations that cost more than the design priced, as a TRL script's own evaluation loop can), the mean over
    seeds of each seed's last evaluation: what the rung's FLOPs bought it. Read as 0 before, such an arm lost the
    promotion to any arm that had shown a reward. Only for an arm known to have run the rung (the promotion's arms,
    the top rung's survivors): an arm set aside earlier has no evaluation near a later rung either."""
    seen = curve.observed_at_rungs[rung] if -len(curve.observed_at_rungs) <= rung < len(curve.observed_at_rungs) \
        else None
    if seen is not None or not stopped_short(curve.max_flops, rung_flops):  # a full rung is read at equal FLOPs
        return seen
    last: dict[str, Observation] = {}
    for o in curve.observations:
        if o.flops > 0 and (o.seed not in last or o.flops >= last[o.seed].flops):
            last[o.seed] = o
    return float(np.mean([o.reward for o in last.values()])) if last else None


def stopped_short(largest: float, rung_flops: float) -> bool:
    """Whether pilots whose last evaluation was at ``largest`` training FLOPs stopped below 0.8 of their rung's
    ``rung_flops`` (the lower end of :data:`NEAR`), having evaluated beyond step 0."""
    return 0 < largest < NEAR[0] * rung_flops


def short_pilots(arms: Sequence[ArmPilots], rung_flops: float) -> list[str]:
    """A warning per arm of ``arms`` (those that ran the top rung, of ``rung_flops`` training FLOPs) whose pilots
    stopped below 0.8 of it: its reward is read at its last evaluation (:func:`observed_at_rung`)."""
    return [f"{arm.name}: its pilots stopped at {max_flops(arm) / rung_flops:.0%} of the top rung's training FLOPs "
            "(the budget guard stops a pilot before a round whose worst case, its evaluations included, no longer "
            "fits; a TRL script's evaluations can cost more than designed): its observed reward is read at its last "
            "evaluation"
            for arm in arms if stopped_short(max_flops(arm), rung_flops)]


TIE = 1e-12
"""Observed rewards closer than this are a tie: two means of equal 0/1 sums, taken over seeds in another order,
differ in the last bit, and a tie is broken by a rule (the first arm, or by name), not by that bit. Rounding to a
number of decimals would not do: equal means on either side of a rounding midpoint (at 40,960 prompts, say) round
apart. Distinct rewards of 0/1 scores differ by at least 1 / (seeds^2 x prompts), far above it."""


def above(a: float, b: float) -> bool:
    """Whether observed reward ``a`` is higher than ``b`` beyond a tie (:data:`TIE`)."""
    return a > b + TIE


def tie_order(rewards: Sequence[float]) -> list[int]:
    """The indices of ``rewards``, highest first; tied rewards (:data:`TIE`) keep their given order."""
    def compare(i: int, j: int) -> int:
        return int(above(rewards[j], rewards[i])) - int(above(rewards[i], rewards[j]))

    return sorted(range(len(rewards)), key=cmp_to_key(compare))  # a stable sort: ties keep their order


def by_reward(rewards: Mapping[str, float]) -> list[str]:
    """The names of ``rewards``, highest first, a tie (:data:`TIE`) by name."""
    names = sorted(rewards)
    return [names[i] for i in tie_order([rewards[n] for n in names])]


UNMOVED = ("its pilots never rose above their start (no prompt scored above its step-0 score at any evaluation of "
           "any seed): nothing bounds its reward at the budget, and a take-off after the pilots is not ruled out; its "
           "interval there runs to 1, and the P(best) leaves it out")


def unmoved(arm: ArmPilots) -> bool:
    """Whether ``arm``'s pilots never rose above their start: no evaluation of any seed scored any prompt above the
    highest score that prompt got at step 0 (0 FLOPs) over the seeds; without a step-0 evaluation, whether every
    score of every evaluation is one value.

    Such pilots carry no sign of learning, so nothing bounds what the arm reaches later: the curve families read
    them as flat to the budget (or falling) and the bootstrap has little or nothing to resample, so their interval
    would be [x, x + ~0.01] however far the budget lies (:data:`UNMOVED` says what the analysis does instead). The
    CPU demo's tiny-l + rule arm is the case: 0.01 on one seed at step 0, 0 at every evaluation after, and 0.93-1.00
    at F in the exhaustive sweep (docs/results.md). An arm with one prompt above its start at one evaluation moved."""
    points = [p for run in arm.runs for p in run.points]
    if not points:
        return False
    start = [p.scores for p in points if p.flops == 0]
    if not start:
        return all(np.all(p.scores == points[0].scores[0]) for p in points)
    top = np.max(np.stack(start), axis=0)
    return all(bool(np.all(p.scores <= top)) for p in points)


FELL = ("its pilots fell: every seed ended below half its step-0 reward, and the curves cannot tell a lasting fall "
        "from a dip the policy recovers from after the pilots (answers cut at the length limit, a format broken by "
        "early updates): nothing bounds its reward at the budget; its interval there runs to 1, and the P(best) "
        "leaves it out")
FELL_SHARE = 0.5
"""A seed has fallen when its last evaluation's reward is below this share of its step-0 reward."""
FELL_START = 0.05
"""...and its step-0 reward is at least this: below it, a fall is a prompt or two (:func:`unmoved` reads those)."""


def seed_fall(run: SeedRun) -> float | None:
    """Where a seed of pilots that fell ended: its last evaluation's reward, when it evaluated at step 0 (the mean of
    its step-0 evaluations, as :func:`seed_points` reads them) at a reward of at least :data:`FELL_START` and after
    it, and its last evaluation is below :data:`FELL_SHARE` of that; None otherwise."""
    start = [float(p.scores.mean()) for p in run.points if p.flops == 0]
    later = [p for p in run.points if p.flops > 0]
    if not start or not later:
        return None
    s0, last = float(np.mean(start)), float(sorted(later, key=lambda p: p.flops)[-1].scores.mean())  # ties: later
    return last if s0 >= FELL_START and last < FELL_SHARE * s0 else None


def fell(arm: ArmPilots) -> bool:
    """Whether every seed of ``arm``'s pilots fell (:func:`seed_fall`). Round 40's blind `lenblow` (answers cut at
    the generation limit, then repaired after the pilots) is the case: its curves read the fall and bounded the arm
    low, and the halving dropped the best arm in 70-74 % of repetitions (docs/results.md)."""
    return bool(arm.runs) and all(seed_fall(run) is not None for run in arm.runs)


def shown_at(arm: ArmPilots, ledger: float) -> float:
    """What ``arm``'s pilots showed at ledger FLOPs ``ledger``: the mean over its seeds of each seed's last
    evaluation at or below the top of :data:`NEAR` x ``ledger`` (its step-0 mean for a seed with none; of two at the
    same FLOPs, the later, as :func:`observed_near` and :func:`seed_fall` read them). Beyond the pilots, where they
    ended (:func:`ended`). An arm its pilots do not bound (:func:`unbounded`) is stated there, its interval from there
    (or below) to 1: its curves' point is no reading of such pilots (ScaleRL's sigmoid reads a fall as flat at R0: a
    fallen arm seen at 0.010 at its rung was stated 0.237 [0.202, 1] there)."""
    return float(np.mean([[p for p in pts if p.flops <= NEAR[1] * ledger][-1].scores.mean()
                          for pts in seed_points(arm)]))


def ended(arm: ArmPilots) -> float:
    """Where ``arm``'s pilots ended: the mean over its seeds of each seed's last evaluation (:func:`shown_at` beyond
    them). An arm its pilots do not bound has its lower end no higher than this at every budget: a lasting fall
    stays where it ended."""
    return shown_at(arm, math.inf)


UNBOUNDED = (UNMOVED, FELL)
"""The notes of arms whose pilots bound nothing beyond them (:func:`unbounded`)."""


def unbounded(arm: ArmPilots) -> str:
    """Why nothing bounds ``arm``'s reward beyond its pilots: :data:`UNMOVED` (:func:`unmoved`) or :data:`FELL`
    (:func:`fell`); "" when its curves do."""
    return UNMOVED if unmoved(arm) else FELL if fell(arm) else ""


def fit_warnings(arms: Sequence[tuple[ArmPilots, str, Any, PowerLawCheck | None, Any]], at_f: Any) -> list[str]:
    """What the fits of each arm (its pilots, why nothing bounds it beyond them (:func:`unbounded`, "" when they
    do), its fit without the first evaluation points, its power-law check and its model average's record,
    :class:`flopplan.race.results.EnsembleFit`) say its prediction at F (``at_f``, a :class:`flopplan.race.results.
    BudgetResult`) does not show."""
    out = []
    for arm, still, without_first, check, ensemble in arms:
        p = next(p for p in at_f.predictions if p.arm == arm.name)
        if without_first is not None and not still \
                and abs(without_first.predicted_at_budget - p.reward) > (p.hi - p.lo) / 2:  # curves not read
            out.append(f"{p.arm}: R at the target budget moves from {p.reward:.3f} to "
                       f"{without_first.predicted_at_budget:.3f} without the first evaluation points (more than half "
                       "the interval's width)")
        if still:
            out.append(f"{p.arm}: {still}")
        elif check is not None and check.law.sse < check.scalerl_sse:
            out.append(f"{p.arm}: the power law fits its points better than the ScaleRL curve (SSE "
                       f"{check.law.sse:.4g} vs {check.scalerl_sse:.4g}): the run may not have bent yet")
        if not ensemble.held_out and not still:
            positions = max(sum(1 for q in r.points if q.flops > 0) for r in arm.runs)
            out.append(f"{p.arm}: its pilots evaluated at {positions} positions after step 0, too few to hold one out "
                       f"({HOLDOUT_POSITIONS} needed: race design --evals): its curve families are weighted equally "
                       "and its interval is not calibrated on its pilots' own held-out points")
    return out


def naive_pick(seen: Sequence[tuple[str, float | None]]) -> tuple[str, float] | None:
    """The naive pick: of the arms' observed seed-mean rewards at the top rung (in arm order; None: not observed
    there), the best, a tie (:data:`TIE`) going to the first arm (round 31's check found two arms at 232 of 600
    whose last bit had decided it)."""
    observed = [(n, float(r)) for n, r in seen if r is not None]
    return observed[tie_order([r for _, r in observed])[0]] if observed else None


def pooled(arm: ArmPilots) -> tuple[FloatArray, FloatArray, NDArray[np.object_]]:
    """Every evaluation of every seed: FLOPs, reward, seed label (the input of the point fits)."""
    f, y, runs = [], [], []
    for run, pts in zip(arm.runs, seed_points(arm), strict=True):
        for p in pts:
            f.append(p.flops)
            y.append(float(p.scores.mean()))
            runs.append(str(run.seed))
    return np.asarray(f), np.asarray(y), np.asarray(runs, dtype=object)


def point_fit(arm: ArmPilots, drop_first: int) -> CurveFit:
    """The ScaleRL fit on the pooled points, the ``drop_first`` first positive points of each seed left out.
    UserError when it cannot be fitted."""
    f, y, runs = pooled(arm)
    return fit_curve(f, y, runs=runs, drop_first=drop_first)


def read_at(fit: CurveFit | PowerLawFit, at: float) -> float:
    """The fitted R at ledger FLOPs ``at``; R0 where ``at`` <= 0 (the upfront FLOPs use up the budget)."""
    return float(fit.predict(at)) if at > 0 else fit.r0


def power_law(arm: ArmPilots, fit: CurveFit, at: float) -> PowerLawCheck:
    """The power-law check beside the ScaleRL fit, both scored on the points the power law uses, read at ledger
    FLOPs ``at``."""
    f, y, _ = pooled(arm)
    law = fit_power_law(f, y, r0=fit.r0, a_max=A_MAX)
    use = (f > 0) & (y > fit.r0)
    scalerl_sse = float(np.sum((y[use] - fit.predict(f[use])) ** 2))
    with np.errstate(over="ignore"):
        reading = read_at(law, at)
    if not np.isfinite(reading):  # no file can hold it, and no pass rate is near it: the check is not made
        raise UserError(f"the power law (alpha {law.alpha:.3g}) runs beyond float range at the target budget")
    return PowerLawCheck(law=law, scalerl_sse=scalerl_sse, predicted_at_budget=reading)


@dataclass(frozen=True, eq=False)
class ObservedBest:
    """Observed seed-mean rewards of some arms at a common FLOPs cap: points (n_arms,), replicates (n_arms, k),
    intervals (n_arms, 2), the gains over each arm's step-0 reward with their intervals, the FLOPs each arm's
    values are at (seed mean), the method."""

    names: tuple[str, ...]
    cap: float
    points: FloatArray
    replicates: FloatArray
    intervals: FloatArray
    gains: FloatArray
    gain_intervals: FloatArray
    at_flops: FloatArray
    method: str


def observed_bootstrap(arms: list[ArmPilots], n_replicates: int, level: float, rng: np.random.Generator
                       ) -> ObservedBest:
    """The reward each arm reached at the arms' largest common FLOPs (cap = the smallest of their largest pilot
    FLOPs): per seed its last evaluation with FLOPs <= 1.05 x cap, averaged over seeds. Replicates: prompts
    resampled with replacement (the same indices for every arm), seeds resampled with replacement per arm;
    percentile interval at ``level``."""
    cap = min(max_flops(a) for a in arms)
    q = arms[0].runs[0].points[0].scores.size
    cq = rng.multinomial(q, np.full(q, 1.0 / q), size=n_replicates) / q
    points, reps, gains, gain_reps, at = [], [], [], [], []
    cols = np.arange(n_replicates)[:, None]
    for arm in arms:
        runs = seed_points(arm)
        last = []
        for pts in runs:
            within = [p for p in pts if 0 < p.flops <= SUPPORT_TOL * cap]
            last.append(within[-1] if within else pts[-1])
        sc = np.stack([p.scores for p in last])  # (S, Q)
        sc0 = np.stack([pts[0].scores for pts in runs])
        idx = rng.integers(0, len(last), size=(n_replicates, len(last)))
        rep, rep0 = (sc @ cq.T)[idx, cols].mean(axis=1), (sc0 @ cq.T)[idx, cols].mean(axis=1)
        reps.append(rep)
        gain_reps.append(rep - rep0)
        points.append(float(sc.mean()))
        gains.append(float(sc.mean() - sc0.mean()))
        at.append(float(np.mean([p.flops for p in last])))
    rep_a, pt_a, g_rep, g_pts = np.asarray(reps), np.asarray(points), np.asarray(gain_reps), np.asarray(gains)
    method = (f"observed seed-mean reward at <= 1.05 x the survivors' largest common FLOPs; {n_replicates} "
              f"replicates: prompts resampled (same indices for every arm), seeds resampled per arm; {level:.0%} "
              "percentile interval")
    return ObservedBest(tuple(a.name for a in arms), cap, pt_a, rep_a, bootstrap_interval(rep_a, pt_a, level), g_pts,
                        bootstrap_interval(g_rep, g_pts, level), np.asarray(at), method)
