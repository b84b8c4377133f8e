"""RACE analysis: from the pilots of a grid of arms to curves, regimes, a recommendation and its checks.

Input (the caller converts run folders into these): :class:`flopplan.race.results.ArmInfo` per arm and a
:class:`RaceInput` holding, per evaluation target, the pilots as :class:`flopplan.race.pilot_data.PilotData` (exact
ledger FLOPs and per-prompt scores, step 0 included). :func:`analyze` returns a
:class:`flopplan.race.results.RaceAnalysis`; write it with :func:`flopplan.race.report.write_outputs`.

Per fitted target (``fitted_targets``; the others are observed only, never fitted for the recommendation):

1. Per arm: the ScaleRL curve R = R0 + (A - R0) / (1 + (F_mid / F)^B) over ledger FLOPs (R0 measured at step 0),
   fitted as :mod:`flopplan.race.curves` describes, with and without the first evaluation point of each seed; the
   power-law and monotone-envelope checks (:mod:`flopplan.race.checks`).
2. One paired bootstrap over seeds and evaluation prompts for all fitted arms (:func:`paired_bootstrap`), A's
   interval and the identification flag; on the same draws the model average over curve families with its
   calibrated width (:mod:`flopplan.race.ensemble`), which gives, at every rung budget and the target budget F,
   each arm's reward and gain R - R0 with intervals and P(best). An arm is read at budget - its upfront FLOPs
   (a learned reward model's training is charged at every budget). Gain replicates: the replicate's reward less
   its R0*, the replicate curve's limit at F -> 0 (read at 1e-300 FLOPs, where expit(B (ln F - ln F_mid)) < 1e-15
   for every B on the grid; the other families read R0 there).
3. The regime at each budget and the recommendation at F (:mod:`flopplan.race.regime`, rules stated there and in
   the report); a warning when the best G decreases as the budget grows. Where some seed's pilots fell, every
   arm's lower end beyond its pilots is lowered first (:mod:`flopplan.race.grid_fall`).
4. The temporal holdout of each surviving arm (reached the top rung): refit on the first half of its FLOPs,
   predict the second half (:mod:`flopplan.race.holdout_records`), error and interval coverage in numbers.

Deterministic for a ``seed``: each target's and each holdout's random stream is derived from the seed and the
target's (and arm's) name, so the order of targets does not change the numbers.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from flopplan import __version__
from flopplan.errors import UserError, check_int, check_number, is_int, is_number
from flopplan.race import bootstrap, checks, ensemble, grid_fall, holdout_records, persistence, regime
from flopplan.race.bootstrap import BootstrapResult, bootstrap_interval, paired_bootstrap
from flopplan.race.curves import CurveFit
from flopplan.race.design import is_ladder
from flopplan.race.families import ArmSample
from flopplan.race.naive import eliminated_pick
from flopplan.race.overhead import budget_left, pilot_cost
from flopplan.race.pilot_data import ArmPilots, PilotData
from flopplan.race.regime import AXES, UNDECIDED_P, Candidate, anchored_pick, decide, g_warnings, recommend, rules
from flopplan.race.results import (
    RACE_VERSION,
    ArmCurve,
    ArmInfo,
    ArmPrediction,
    ArmRecord,
    Band,
    BudgetResult,
    FitReading,
    PowerLawCheck,
    RaceAnalysis,
    Recommendation,
    TargetResult,
)
from flopplan.race.seed_pooling import ONE_SEED_SD, is_seed_sd
from flopplan.units import eng

FloatArray = NDArray[np.float64]
BAND_POINTS = 40
MIN_REPLICATES = 10  # the fewest bootstrap replicates an analysis takes (race analyze --replicates)
NO_DATA = "no pilot data for this target"
R0_FLOPS = 1e-300  # where a replicate's curve is read for its R0* (module docstring, step 2)
STATEMENT = ("RACE is a diagnostic pilot-grid protocol, not a guarantee of held-out improvement: it fits each arm's "
             "cheap pilots, says which allocation they favour at the target budget and how sure the pilots make "
             "it, and checks itself (temporal holdout here; the validating run and the held-out target later). A "
             "recommendation is a hypothesis for the validating run to test.")
COVERED = ("What the intervals cover: the seed-to-seed variation the pilots showed (moderated halfway toward the "
           "other arms': raised where an arm's few seeds agree more than the grid's, lowered where they spread more) "
           "and the sampling of evaluation prompts (the same prompt draws for every arm), propagated through a refit "
           "of every curve family per replicate; the disagreement between the families (ScaleRL's sigmoid, a "
           "saturating power law, a capped log-linear rise, a two-stage rise, a rise that can turn down, and a steep "
           "fall for an arm whose pilots fall), weighted by how well each predicted the pilots' own last points; and "
           "a width no smaller than those held-out errors imply per unit of log-extrapolation (split-conformal). R0 "
           "is resampled with them, so the gain R - R0 has its own interval. Where a seed's pilots fell, the lower "
           "end beyond each arm's pilots runs down to where the fallen seeds ended (a fall of the shared set-up may "
           "come later to the others). Both gain and absolute R are reported, since policies of different sizes start "
           "from different R0; decisions use absolute R.")

NOT_SHOWN = ("Not shown by the interval: a change of shape that none of the families follows and the pilots do not "
             "show yet (a collapse or a second take-off after the largest pilot), another evaluation target or "
             "prompt population, seed variance that neither an arm's few seeds nor the grid's other arms showed (a "
             "rare bad seed: with S seeds an arm whose seeds stall one time in five shows none in (4/5)^S of its "
             "pilots); the calibration rests on the few held-out points of one grid.")


@dataclass(frozen=True)
class RaceInput:
    """The pilot grid to analyse: arms, per target the pilots (every arm's name among ``arms``), the targets used
    for decisions, the target budget F, the rung budgets (ascending), the highest rung index each arm ran, the sum
    of all pilots' ledgers, the command that regenerates the analysis and, optionally, each arm's pilots' ledgers
    in seed order (``pilot_spend``: the recommendation's pilot cost, :mod:`flopplan.race.overhead`), the reward
    system an arm's pilots trained on where its ledgers and its design disagree on whether a reward model is trained
    on (``trained_rewards``), and the relative seed sd assumed for an arm of one seed where no other arm shows one
    (``one_seed_sd``, the design's ``--seed-sd``); ``running``: the arms the promotions sent to a rung they have not
    finished (midway through a race: not eliminated, not yet read there)."""

    arms: tuple[ArmInfo, ...]
    targets: dict[str, PilotData]
    fitted_targets: tuple[str, ...]
    budget_flops: float
    rung_budgets: tuple[float, ...]
    reached: dict[str, int]
    pilot_flops: int
    command: str
    pilot_spend: dict[str, tuple[int, ...]] = field(default_factory=dict)
    trained_rewards: dict[str, str] = field(default_factory=dict)
    one_seed_sd: float = ONE_SEED_SD  # the seed sd assumed for an arm of one seed (flopplan.race.seed_pooling)
    running: frozenset[str] = frozenset()  # arms promoted past the rung they finished, their pilots still running

    def ran_top(self, arm: str) -> bool:
        """The arm's pilots ran the design's top rung (midway through a race, no arm has)."""
        return self.reached.get(arm) == len(self.rung_budgets) - 1

    def __post_init__(self) -> None:
        names = [a.name for a in self.arms]
        if not names or len(set(names)) != len(names):
            raise UserError("RACE input needs at least one arm and unique arm names")
        if not self.targets or not self.fitted_targets or any(t not in self.targets for t in self.fitted_targets):
            raise UserError("fitted_targets must name at least one of the targets")
        if len(set(self.fitted_targets)) != len(self.fitted_targets):
            raise UserError("fitted_targets has a repeated target")
        for target, data in self.targets.items():
            if not isinstance(data, PilotData):
                raise UserError(f"target {target!r}: pilots must be a PilotData")
            unknown = [a.name for a in data.arms if a.name not in names]
            if unknown:
                raise UserError(f"target {target!r}: arm {unknown[0]!r} is not among the arms")
        check_number("budget_flops", self.budget_flops, strict=True)
        if not is_seed_sd(self.one_seed_sd):
            raise UserError(f"one_seed_sd must be a relative sd above 0 and at most 1, not {self.one_seed_sd!r}")
        rungs = self.rung_budgets
        if not is_ladder(rungs):
            raise UserError("rung_budgets must be FLOPs > 0 in ascending order")
        if set(self.reached) != set(names) or not all(is_int(v) and 0 <= v < len(rungs)
                                                      for v in self.reached.values()):
            raise UserError(f"reached must give every arm a rung index from 0 to {len(rungs) - 1}")
        check_int("pilot_flops", self.pilot_flops, minimum=0)
        if not isinstance(self.command, str):
            raise UserError("command must be a string")
        if set(self.pilot_spend) - set(names) or not all(is_int(v) and v >= 0 for s in self.pilot_spend.values()
                                                         for v in s):
            raise UserError("pilot_spend must map arms to their pilots' ledger FLOPs (integers >= 0)")
        if set(self.trained_rewards) - set(names) or not all(isinstance(v, str) for v in self.trained_rewards.values()):
            raise UserError("trained_rewards must map arms to the reward systems their pilots trained on")


def _stream(seed: int, *names: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *(zlib.crc32(n.encode()) for n in names)]))


def _observed_only(info: ArmInfo, arm: ArmPilots, rungs: tuple[float, ...], reason: str, failed: bool) -> ArmCurve:
    """An arm with observations and no curve: ``failed`` when the fit failed (not for a held-out target)."""
    noise, how = checks.last_noise(arm)
    return ArmCurve.unfitted(info.name, reason, failed=failed, n_seeds=len(arm.runs), max_flops=checks.max_flops(arm),
                             noise=noise, noise_method=how, observations=checks.observations(arm),
                             observed_at_rungs=tuple(checks.observed_near(arm, r - info.upfront_flops) for r in rungs),
                             envelope=checks.envelope(arm))


@dataclass
class _ArmState:
    """A fittable arm while its target is analysed."""

    info: ArmInfo
    arm: ArmPilots
    fit: CurveFit
    without_first: FitReading | None
    without_first_reason: str
    power_law: PowerLawCheck | None
    power_law_reason: str
    survived: bool = True
    reached: int = 0
    k: int = 0
    noise: float = 0.0
    monotone: bool = True
    identified: bool = False
    max_flops: float = 0.0
    still: str = ""  # why nothing bounds it beyond its pilots (checks.unbounded: never rose, or fell); "" if they do


NUMERIC = (UserError, ArithmeticError, ValueError, np.linalg.LinAlgError)  # a fit that fails: reported, not raised


def _prepare(info: ArmInfo, arm: ArmPilots, at: float) -> _ArmState:
    """The point fits and checks of an arm, read at ledger FLOPs ``at``; one of ``NUMERIC`` when its curve cannot
    be fitted at all."""
    fit = checks.point_fit(arm, 0)
    try:
        without = checks.point_fit(arm, 1)
        reading, without_reason = FitReading(fit=without, predicted_at_budget=checks.read_at(without, at)), ""
    except NUMERIC as exc:
        reading, without_reason = None, str(exc) or type(exc).__name__
    try:
        law, law_reason = checks.power_law(arm, fit, at), ""
    except NUMERIC as exc:
        law, law_reason = None, str(exc) or type(exc).__name__
    return _ArmState(info, arm, fit, reading, without_reason, law, law_reason, still=checks.unbounded(arm))


def _curve(st: _ArmState, res: BootstrapResult, ens: ensemble.EnsembleResult, band: FloatArray,
           col: dict[float, int], level: float, rungs: tuple[float, ...], at: float) -> ArmCurve:
    """Fills ``st`` from the bootstrap and returns the arm's curve record (read at ledger FLOPs ``at``)."""
    af = res.arms[st.k]
    env = checks.envelope(st.arm)
    st.noise, how = checks.last_noise(st.arm)
    st.monotone, st.identified, st.max_flops = env.monotone, af.identified, af.max_flops
    failed = []
    if not env.monotone:
        drop = env.check
        failed.append(f"non-monotone: drops {drop.max_drop:.3f} below its running best (set at "
                      f"{eng(drop.peak_flops)}) at {eng(drop.flops_at_max_drop)}, more than 3 x {env.noise_sd:.3f}")
    if not af.identified:
        failed.append("A not identified (the fit or its interval reaches the top of the A or F_mid grid, or F_mid "
                      "lies beyond the data): ScaleRL's curve alone does not bound it beyond its pilots")
    cols = [col[float(v)] for v in band]
    pts = ens.points[st.k, cols]
    iv = bootstrap_interval(ens.replicates[st.k, cols], pts, level)
    iv = np.stack([np.minimum(iv[:, 0], pts), np.maximum(iv[:, 1], pts)], axis=1)
    u = st.info.upfront_flops
    return ArmCurve(arm=st.info.name, reason="", n_seeds=af.n_seeds, max_flops=af.max_flops, noise=st.noise,
                    noise_method=how, observations=checks.observations(st.arm),
                    observed_at_rungs=tuple(checks.observed_near(st.arm, r - u) for r in rungs), envelope=env,
                    stable=env.monotone, checks_failed=tuple(failed), arm_fit=af,
                    predicted_at_budget=checks.read_at(af.fit, at), without_first=st.without_first,
                    without_first_reason=st.without_first_reason, power_law=st.power_law,
                    power_law_reason=st.power_law_reason,
                    band=Band(*(tuple(map(float, v)) for v in (band, pts, iv[:, 0], iv[:, 1]))),
                    ensemble=ens.fits[st.k])


def _at_budget(label: str, budget: float, states: list[_ArmState], ens: ensemble.EnsembleResult,
               col: dict[float, int], level: float) -> BudgetResult:
    """Every fitted arm's prediction at one budget (the model average, :mod:`flopplan.race.ensemble`) and the
    regime there."""
    r0_col = col[R0_FLOPS]
    preds, cands = [], []
    for st in states:
        info = st.info
        ledger = budget - info.upfront_flops
        c = col[ledger] if ledger > 0 else r0_col
        reps, point = ens.replicates[st.k, c], float(ens.points[st.k, c])
        r0_reps, r0 = ens.replicates[st.k, r0_col], float(ens.points[st.k, r0_col])
        lo, hi = bootstrap_interval(reps, point, level)
        lo, hi = min(lo, point), max(hi, point)
        g_lo, g_hi = bootstrap_interval(reps - r0_reps, point - r0, level)
        g_lo, g_hi = min(g_lo, point - r0), max(g_hi, point - r0)
        set_aside, still = ledger <= 0, st.still
        note = ("the upfront FLOPs exceed the budget" if ledger <= 0 else still if still else
                "non-monotone (fails the envelope check)" if not st.monotone else "")
        share = (info.split.get("feedback", 0.0) * ledger + info.upfront_flops) / budget if ledger > 0 else 1.0
        comparable = st.monotone and not set_aside and not still
        cands.append(Candidate(info.name, info.axes, info.params, share, point, reps, not note, note, st.noise,
                               comparable, in_play=not set_aside))
        stated = point  # the candidate keeps the curves' reading: an arm fallen from the top still unsettles the regime
        if still and not set_aside:  # stated at what its pilots showed (its curves cannot follow a fall)
            stated, end = checks.shown_at(st.arm, ledger), checks.ended(st.arm)
            lo, g_lo = min(lo, stated, end), min(g_lo, min(stated, end) - r0)
        hi, g_hi = (1.0, 1.0 - r0) if still else (float(hi), float(g_hi))  # unmoved: to a pass rate's most
        # upfront FLOPs that use up the budget: read at the start (ledger 0), never at a negative ledger (-4e20)
        preds.append(ArmPrediction(arm=info.name, ledger_flops=max(ledger, 0.0), reward=stated, lo=float(lo), hi=hi,
                                   gain=stated - r0, gain_lo=float(g_lo), gain_hi=float(g_hi), p_best=0.0,
                                   extrapolation=max(ledger, 0.0) / st.max_flops, usable=not note,
                                   comparable=comparable,
                                   note=note,
                                   observed=checks.observed_near(st.arm, ledger) if ledger > 0 else None))
    dec = decide(cands, level)
    return BudgetResult(label=label, flops=budget, predictions=tuple(replace(p, p_best=dec.p_best_of[p.arm])
                                                                     for p in preds), decision=dec)


def _naive(inp: RaceInput, curves: dict[str, ArmCurve], survived: dict[str, bool]) -> tuple[str, float] | None:
    """The naive pick (:func:`checks.naive_pick`) of the survivors' observed rewards at the top rung (an arm that
    ran it but stopped short read at its last evaluation; midway through a race, no arm has run it)."""
    return checks.naive_pick([(a.name, checks.observed_at_rung(curves[a.name], -1, inp.rung_budgets[-1])
                               if inp.ran_top(a.name)
                               else curves[a.name].observed_at_rungs[-1]) for a in inp.arms
                              if a.name in curves and survived[a.name] and curves[a.name].observed_at_rungs])


def _rung_cost(inp: RaceInput, curves: dict[str, ArmCurve]) -> dict[str, float]:
    """Per arm, the ledger FLOPs its seeds would spend to reach one more rung (the ladder's ratio beyond the top
    rung; x2 with one rung) from where its pilots stopped."""
    r = inp.rung_budgets
    nxt = r[-1] * (r[-1] / r[-2] if len(r) > 1 else 2.0)
    return {a.name: max(1, curves[a.name].n_seeds) * max(0.0, nxt - a.upfront_flops - curves[a.name].max_flops)
            for a in inp.arms if a.name in curves}


def _among_finalists(rec: Recommendation, at_f: BudgetResult, states: list[_ArmState],
                     ens: ensemble.EnsembleResult, at_cols: list[int], last_cols: list[int],
                     samples: tuple[ArmSample, ...], grid: FloatArray, among: frozenset[str] | None = None
                     ) -> tuple[Recommendation, float | None, persistence.Challenger | None]:
    """A fitted recommendation's stated P(best) among the finalists (the comparable arms that reached the top rung)
    and itself (:func:`persistence.stated_for`: the anchored forecast's, ``last_cols`` each arm's largest pilot's
    column; under "cannot tell", its mean with the curves'); the decision's P(best) counts the eliminated arms too.
    With fewer than two finalists it stays the decision's. Beside it, what the stated P(best) would be were the pick
    to stop at its largest pilot while the others go on, those still accelerating as their rise
    (:mod:`flopplan.race.acceleration`) forecasts, the rest as the mixture does (None: not computed); and the
    :class:`persistence.Challenger` (None: none; ``among``: its pool again: a moved pick's numbers, same arms)."""
    if rec.mode != "fitted" or rec.arm is None:
        return rec, None, None
    names = among or persistence.pool(rec, at_f, {st.info.name: st.survived for st in states})
    pool = [st for st in states if st.info.name in names]
    if len(pool) < 2:
        return rec, None, None
    seen = np.stack([persistence.last_observed(samples[st.k])[1:] for st in pool])
    change, calibrated_change = (np.stack([r[st.k, at_cols[st.k]] - r[st.k, last_cols[st.k]] for st in pool])
                                 for r in (ens.mixtures, ens.replicates))  # each arm's change to F, in each draw
    curves = np.stack([ens.replicates[st.k, at_cols[st.k]] for st in pool])
    finalist = np.array([st.survived for st in pool])
    accelerating = np.array([ens.accelerations[st.k].accelerating for st in pool])
    stated, persist, by_curves = persistence.stated_p_best(curves, seen, change, finalist, accelerating)
    i = [st.info.name for st in pool].index(rec.arm)
    going_on = change.copy()
    for j, st in enumerate(pool):
        rise = ens.accelerations[st.k].rise  # an accelerating arm's rise, fitted to every draw by the model average
        if rise is not None:
            at = rise.predict(grid[[at_cols[st.k], last_cols[st.k]]])[1:]  # (k, 2): the draws at F and F_last
            going_on[j] = at[:, 0] - at[:, 1]
    top, lead = persistence.challenger(stated, i, UNDECIDED_P), None
    if top is not None:  # the same forecast carried by the calibrated change, which the move needs too
        stated_calibrated = persistence.stated_p_best(curves, seen, calibrated_change, finalist, accelerating)[0]
        lead = persistence.Challenger(pool[top].info.name, float(stated[top]), float(stated_calibrated[top]),
                                      frozenset(names))
    return (replace(rec, p_best=persistence.stated_for(rec.confidence, float(stated[i]), float(by_curves[i])),
                    p_best_anchored=float(stated[i]), p_best_curves=float(by_curves[i]), p_best_seen=float(persist[i])),
            persistence.p_best_if_stopped(seen, going_on, i), lead)


def _fitted_target(inp: RaceInput, name: str, data: PilotData, stopped: tuple[str, ...], survived: dict[str, bool],
                   n_replicates: int, level: float, seed: int, holdout: bool) -> TargetResult:
    f_target = inp.budget_flops
    budgets = [*inp.rung_budgets, f_target]
    labels = [*(f"rung {i}" for i in range(len(inp.rung_budgets))), "target"]
    present = {a.name: a for a in data.arms}
    curves: dict[str, ArmCurve] = {}
    states: list[_ArmState] = []
    for info in inp.arms:
        if info.name not in present:
            curves[info.name] = ArmCurve.unfitted(info.name, NO_DATA, failed=True)
            continue
        try:
            states.append(replace(_prepare(info, present[info.name], f_target - info.upfront_flops),
                                  survived=survived[info.name], reached=inp.reached[info.name]))
        except NUMERIC as exc:
            curves[info.name] = _observed_only(info, present[info.name], inp.rung_budgets,
                                               f"not fitted: {str(exc) or type(exc).__name__}", True)
    upfront = {a.name: a.upfront_flops for a in inp.arms}
    warnings = [*stopped, *(f"{c.arm}: {c.reason}" for c in curves.values()), *checks.short_pilots(
        [present[n] for n in present if inp.ran_top(n)], budgets[-2])]
    warnings += [f"{a.name}: its upfront FLOPs ({eng(a.upfront_flops)}) use up the target budget ({eng(f_target)}): "
                 "it cannot train at F, and its predictions are read at its start" for a in inp.arms
                 if a.upfront_flops >= f_target]

    def observed_best() -> checks.ObservedBest | None:  # "best observed": the survivors' rewards at their largest pilot
        survivors = [present[n] for n in present if survived[n]]
        return checks.observed_bootstrap(survivors, n_replicates, level, _stream(seed, name, "observed")) \
            if survivors else None

    def costed(rec: Recommendation) -> Recommendation:
        return pilot_cost(rec, budget_flops=f_target, pilot_flops=inp.pilot_flops, spend=inp.pilot_spend,
                          upfront=upfront, largest={a: inp.rung_budgets[r] for a, r in inp.reached.items()})

    if not states:  # no curve to extrapolate: the naive pick, as what it shows
        nothing = BudgetResult(label="target", flops=f_target, predictions=(), decision=decide([], level))
        rec = recommend(name, nothing, upfront, budget_left(inp.budget_flops, inp.pilot_flops, inp.arms),
                        "no arm could be fitted",
                        observed_best(), level, naive=_naive(inp, curves, survived))
        return TargetResult(name=name, fitted=True, n_prompts=data.n_prompts,
                            curves=tuple(curves[a.name] for a in inp.arms), budgets=(), recommendation=costed(rec),
                            holdout=(), holdout_summary=None, warnings=tuple(warnings),
                            interval_method="no arm could be fitted")
    lo_f = min(p.flops for st in states for r in st.arm.runs for p in r.points if p.flops > 0)
    hi_f = max([f_target - min(st.info.upfront_flops for st in states), *(checks.max_flops(st.arm) for st in states)])
    band = np.geomspace(lo_f, max(hi_f, lo_f * 1.0001), BAND_POINTS)
    needed = {b - st.info.upfront_flops for st in states for b in budgets if b - st.info.upfront_flops > 0}
    last = [checks.last_flops(st.arm) for st in states]  # where each arm's pilots stopped (the anchored P(best))
    grid = np.array(sorted({R0_FLOPS, *needed, *last, *band.tolist()}))
    col = {float(v): j for j, v in enumerate(grid)}
    res = paired_bootstrap(PilotData(tuple(st.arm for st in states)), grid, n_replicates=n_replicates, level=level,
                           rng=_stream(seed, name), one_seed_sd=inp.one_seed_sd)
    method = (f"{res.method} (recomputed among the arms comparable at each budget); gain = R - R0 from the same "
              "replicates (R0* = each replicate curve's limit at F -> 0)")
    at_cols = [col[f_target - st.info.upfront_flops] if f_target > st.info.upfront_flops else col[R0_FLOPS]
               for st in states]
    ens = ensemble.model_average(list(res.samples), res.points, res.replicates, grid,
                                 [a.max_flops for a in res.arms], at_cols, level, _stream(seed, name, "ensemble"))
    method = f"{ens.method}; {method}"
    for k, st in enumerate(states):
        st.k = k
        curves[st.info.name] = _curve(st, res, ens, band, col, level, inp.rung_budgets,
                                      f_target - st.info.upfront_flops)
        if not st.monotone:
            warnings.append(f"{st.info.name}: {curves[st.info.name].checks_failed[0]}")
    fall = grid_fall.grid_fall(list(present.values()))
    budget_results = [grid_fall.lowered(_at_budget(label, b, states, ens, col, level), fall)
                      for label, b in zip(labels, budgets, strict=True)]  # a seed's fall: lower ends lowered
    g_of = {a.name: (float(a.axes["group_size"]) if "group_size" in a.axes else None) for a in inp.arms}
    warnings += g_warnings(budget_results, g_of) + grid_fall.warning(fall)
    at_f = budget_results[-1]
    warnings += checks.fit_warnings([(st.arm, st.still, st.without_first, st.power_law, ens.fits[st.k])
                                     for st in states], at_f)
    naive = _naive(inp, curves, survived)
    unpredicted = naive is not None and all(p.arm != naive[0] for p in at_f.predictions)
    observed = observed_best() if at_f.decision.best is None or at_f.decision.top_unidentified or unpredicted else None
    rec = recommend(name, at_f, upfront, budget_left(inp.budget_flops, inp.pilot_flops, inp.arms), method, observed,
                    level, naive=naive, rung_cost=_rung_cost(inp, curves))
    last_cols = [col[f] for f in last]
    among, if_stopped, lead = _among_finalists(rec, at_f, states, ens, at_cols, last_cols, res.samples, grid)
    if lead is not None and not regime.separated_the_other_way(at_f, rec.arm, lead.arm):  # a move, or why not
        if persistence.holds_calibrated(lead.p_best_calibrated, UNDECIDED_P):  # read among the arms it was decided in
            among, if_stopped, _ = _among_finalists(anchored_pick(rec, at_f, lead, upfront, naive), at_f, states,
                                                    ens, at_cols, last_cols, res.samples, grid, lead.pool)
        else:
            warnings += persistence.held_back_caveat(rec, lead, UNDECIDED_P)
    recommendation = costed(among)
    if recommendation.arm is not None and not survived.get(recommendation.arm, True):
        recommendation = eliminated_pick(recommendation, at_f, inp.reached[recommendation.arm], len(inp.rung_budgets),
                                         curves[recommendation.arm].max_flops or budgets[-2],
                                         running=recommendation.arm in inp.running)
    warnings += persistence.climb_caveat(recommendation, at_f, curves, survived, if_stopped)
    warnings += persistence.learned_reward_caveat(recommendation, inp.arms,
                                                  persistence.pool(recommendation, at_f, survived), inp.trained_rewards)
    warnings += persistence.horizon_caveat(recommendation)
    warnings += persistence.prompts_caveat(name, data.n_prompts)
    warnings += persistence.arms_caveat(name, len(inp.arms))
    holdouts = [holdout_records.record(st.arm, n_replicates, level, _stream(seed, name, st.info.name, "holdout"))
                for st in states if holdout and survived[st.info.name]]
    return TargetResult(name=name, fitted=True, n_prompts=data.n_prompts,
                        curves=tuple(curves[a.name] for a in inp.arms), budgets=tuple(budget_results),
                        recommendation=recommendation, holdout=tuple(holdouts),
                        holdout_summary=holdout_records.summary(holdouts, n_replicates, level),
                        warnings=tuple(warnings), interval_method=method)


def analyze(inp: RaceInput, *, n_replicates: int = 500, level: float = 0.9, seed: int = 0,
            holdout: bool = True) -> RaceAnalysis:
    """The analysis of the module docstring; deterministic for a ``seed``. ``holdout=False`` leaves out step 4 (the
    targets then carry no holdout records and no holdout summary): a simulation that only needs the predictions
    saves the refits."""
    check_int("n_replicates", n_replicates, minimum=MIN_REPLICATES, maximum=bootstrap.MAX_REPLICATES)
    if not is_number(level) or not 0 < level < 1:
        raise UserError(f"level must be a number between 0 and 1, not {level!r}")
    check_int("seed", seed, minimum=0)
    top = max(inp.reached.values())
    survived = {a.name: inp.reached[a.name] == top for a in inp.arms}
    targets = []
    for name, given in inp.targets.items():
        data, stopped = given.evaluated()  # seeds that stopped before their first evaluation: left out, said
        if name in inp.fitted_targets:
            targets.append(_fitted_target(inp, name, data, stopped, survived, n_replicates, level, seed, holdout))
            continue
        present = {a.name: a for a in data.arms}
        reason = "held-out target: observed only, never fitted for the recommendation (the validate step uses it)"
        curves = tuple(_observed_only(i, present[i.name], inp.rung_budgets, reason, False) if i.name in present
                       else ArmCurve.unfitted(i.name, NO_DATA, failed=True) for i in inp.arms)
        targets.append(TargetResult(name=name, fitted=False, n_prompts=data.n_prompts, curves=curves, budgets=(),
                                    recommendation=None, holdout=(), holdout_summary=None, warnings=stopped,
                                    interval_method="not fitted"))
    names = [*AXES, *(k for a in inp.arms for k in a.axes if k not in AXES)]  # the classic four, then the others
    varying = tuple(k for k in dict.fromkeys(names) if len({str(a.axes.get(k)) for a in inp.arms}) > 1)
    records = tuple(ArmRecord(info=replace(a, axes=dict(a.axes), split={k: float(v) for k, v in a.split.items()}),
                              reached=inp.reached[a.name], survived=survived[a.name]) for a in inp.arms)
    return RaceAnalysis(race_version=RACE_VERSION, flopplan_version=__version__, command=inp.command,
                        budget_flops=float(inp.budget_flops), rung_budgets=tuple(float(r) for r in inp.rung_budgets),
                        pilot_flops=inp.pilot_flops, pilot_share=inp.pilot_flops / float(inp.budget_flops),
                        budget_left_flops=budget_left(inp.budget_flops, inp.pilot_flops, inp.arms), level=level,
                        n_replicates=n_replicates, seed=seed, axes=varying, arms=records,
                        fitted_targets=tuple(inp.fitted_targets), targets=tuple(targets), rules=rules(level),
                        statement=STATEMENT, not_covered=f"{COVERED} {NOT_SHOWN}")
