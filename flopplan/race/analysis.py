"""RACE analysis: from the pilots of a grid of arms to curves, regimes, a recommendation and its checks.

Input (the caller converts run folders into these): :class:`ArmInfo` per arm and a :class:`RaceInput` holding,
per evaluation target, the pilots as :class:`flopplan.race.bootstrap.PilotData` (exact ledger FLOPs and per-prompt
scores, step 0 included). :func:`analyze` returns a :class:`flopplan.race.results.RaceAnalysis`; write it with
:func:`flopplan.race.report.write_outputs`.

Per fitted target (``fitted_targets``; the others are observed only, never fitted for the recommendation):

1. Per arm: the ScaleRL curve R = R0 + (A - R0) / (1 + (F_mid / F)^B) over ledger FLOPs (R0 measured at step 0),
   fitted as :mod:`flopplan.race.curves` describes, with and without the first evaluation point of each seed; the
   power-law and monotone-envelope checks (:mod:`flopplan.race.checks`).
2. One paired bootstrap over seeds and evaluation prompts for all fitted arms (:func:`paired_bootstrap`): at every
   rung budget and the target budget F, each arm's reward and gain R - R0 with intervals; A's interval and the
   identification flag. An arm is read at budget - its upfront FLOPs (a learned reward model's training is
   charged at every budget). Gain replicates: the replicate's reward less its R0*, the replicate curve's limit at
   F -> 0 (read at 1e-300 FLOPs, where expit(B (ln F - ln F_mid)) < 1e-15 for every B on the grid).
3. The regime at each budget and the recommendation at F (:mod:`flopplan.race.regime`, rules stated there and in
   the report); a warning when the best G decreases as the budget grows.
4. The temporal holdout of each surviving arm (reached the top rung): refit on the first half of its FLOPs,
   predict the second half (:func:`temporal_holdout`), error and interval coverage in numbers.

Deterministic for a ``seed``: each target's and each holdout's random stream is derived from the seed and the
target's (and arm's) name, so the order of targets does not change the numbers.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from flopplan import __version__
from flopplan.errors import UserError, check_int, check_number, is_int, is_number
from flopplan.race import checks
from flopplan.race.bootstrap import (
    NOT_SHOWN,
    Arm,
    BootstrapResult,
    PilotData,
    bootstrap_interval,
    paired_bootstrap,
    temporal_holdout,
)
from flopplan.race.curves import CurveFit
from flopplan.race.regime import AXES, Candidate, Decision, decide, g_warnings, recommend, rules
from flopplan.race.results import (
    RACE_VERSION,
    ArmCurve,
    ArmPrediction,
    ArmRecord,
    BudgetResult,
    HoldoutPointRecord,
    HoldoutRecord,
    HoldoutSummary,
    PointFit,
    PowerLawCheck,
    RaceAnalysis,
    TargetResult,
)
from flopplan.units import eng

FloatArray = NDArray[np.float64]
BUCKETS = ("rollout", "learning", "feedback")
BAND_POINTS = 40
R0_FLOPS = 1e-300  # where a replicate's curve is read for its R0* (module docstring, step 2)
STATEMENT = ("RACE is a diagnostic pilot-grid protocol, not a guarantee of held-out improvement: it fits each arm's "
             "cheap pilots, says which allocation they favour at the target budget and how sure the pilots make "
             "it, and checks itself (temporal holdout here; the validating run and the held-out target later). A "
             "recommendation is a hypothesis for the validating run to test.")
COVERED = ("What the intervals cover: the seed-to-seed variation the pilots showed and the sampling of evaluation "
           "prompts (the same prompt draws for every arm), propagated through a ScaleRL refit per replicate; R0 is "
           "resampled with them, so the gain R - R0 has its own interval. Both gain and absolute R are reported, "
           "since policies of different sizes start from different R0; decisions use absolute R.")


@dataclass(frozen=True)
class ArmInfo:
    """One arm of the grid. ``axes``: its value on each design axis (keys among policy, group_size, iterations,
    reward; any subset may vary); ``params``: policy parameters (orders the size axis); ``split``: its FLOP shares
    by bucket {rollout, learning, feedback} (sum 1); ``upfront_flops``: e.g. a learned reward model's training,
    charged to this arm's feedback at every budget."""

    name: str
    axes: dict[str, str | int | float]
    params: int
    split: dict[str, float]
    upfront_flops: int = 0

    def __post_init__(self) -> None:
        where = f"arm {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise UserError("an arm needs a non-empty name")
        if not isinstance(self.axes, dict) or any(k not in AXES for k in self.axes):
            raise UserError(f"{where}: axes must be a dict with keys among {', '.join(AXES)}")
        for key, value in self.axes.items():
            ok = is_number(value) if key in ("group_size", "iterations") else isinstance(value, str) or is_number(
                value)
            if not ok:
                raise UserError(f"{where}: axis {key} must be {'a number' if key != 'policy' else 'a value'}, "
                                f"not {value!r}")
        check_int(f"{where}: params", self.params)
        if not isinstance(self.split, dict) or set(self.split) - set(BUCKETS) or not all(
                is_number(v) and v >= 0 for v in self.split.values()) or abs(sum(self.split.values()) - 1) > 1e-6:
            raise UserError(f"{where}: split must map {', '.join(BUCKETS)} to shares >= 0 that sum to 1")
        check_int(f"{where}: upfront_flops", self.upfront_flops, minimum=0)


@dataclass(frozen=True)
class RaceInput:
    """The pilot grid to analyse: arms, per target the pilots (every arm's name among ``arms``), the targets used
    for decisions, the target budget F, the rung budgets (ascending), the highest rung index each arm ran, the sum
    of all pilots' ledgers and the command that regenerates the analysis."""

    arms: tuple[ArmInfo, ...]
    targets: dict[str, PilotData]
    fitted_targets: tuple[str, ...]
    budget_flops: float
    rung_budgets: tuple[float, ...]
    reached: dict[str, int]
    pilot_flops: int
    command: str

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
        rungs = self.rung_budgets
        if not rungs or not all(is_number(r) and r > 0 for r in rungs) or any(
                b <= a for a, b in itertools.pairwise(rungs)):
            raise UserError("rung_budgets must be FLOPs > 0 in ascending order")
        if set(self.reached) != set(names) or not all(is_int(v) and 0 <= v < len(rungs)
                                                      for v in self.reached.values()):
            raise UserError(f"reached must give every arm a rung index from 0 to {len(rungs) - 1}")
        check_int("pilot_flops", self.pilot_flops, minimum=0)
        if not isinstance(self.command, str):
            raise UserError("command must be a string")


def _stream(seed: int, *names: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *(zlib.crc32(n.encode()) for n in names)]))


def _observed_only(info: ArmInfo, arm: Arm, rungs: tuple[float, ...], reason: str, failed: bool) -> ArmCurve:
    """An arm with observations and no curve: ``failed`` when the fit failed (not for a held-out target)."""
    noise, how = checks.last_noise(arm)
    env = checks.envelope(arm)
    return ArmCurve(info.name, False, reason, len(arm.runs), checks.max_flops(arm), noise, how,
                    checks.observations(arm), tuple(checks.observed_near(arm, r - info.upfront_flops) for r in rungs),
                    None, None, None, None, None, False, "", None, None, "", None, "", env, env.monotone and not failed,
                    (reason,) if failed else (), (), (), (), ())


def _no_data(info: ArmInfo) -> ArmCurve:
    reason = "no pilot data for this target"
    return ArmCurve(info.name, False, reason, 0, 0.0, 0.0, "", (), (), None, None, None, None, None, False, "", None,
                    None, "", None, "", None, False, (reason,), (), (), (), ())


def _holdout(arm: Arm, n_replicates: int, level: float, rng: np.random.Generator) -> HoldoutRecord:
    try:
        ho = temporal_holdout(arm, n_replicates=n_replicates, level=level, rng=rng)
    except UserError as exc:
        return HoldoutRecord(arm.name, False, str(exc), None, None, (), None, None, None)
    pts = tuple(HoldoutPointRecord(p.flops, p.observed, p.predicted, p.error, p.lo, p.hi, p.inside, p.error_lo,
                                   p.error_hi, p.consistent) for p in ho.points)
    return HoldoutRecord(arm.name, True, "", ho.split_flops, ho.arm_fit.identified, pts, ho.mean_abs_error,
                         ho.coverage, ho.consistency)


def _holdout_summary(records: list[HoldoutRecord], n_replicates: int, level: float) -> HoldoutSummary | None:
    ok = [r for r in records if r.ok]
    pts = [p for r in ok for p in r.points]
    if not pts:
        return None
    err = np.abs([p.error for p in pts])
    method = (f"refit on the evaluation positions with FLOPs <= 0.5 x the arm's largest (+2 %), the rest predicted; "
              f"paired bootstrap of {n_replicates} replicates over prompts and seeds; coverage: share of held-out "
              f"observations inside the {level:.0%} percentile interval of the predicted curve (it leaves out the "
              f"point's own noise, so a calibrated fit covers less than {level:.0%}); consistency: share whose "
              f"{level:.0%} interval of observed - predicted contains 0 (calibrated: about {level:.0%})")
    return HoldoutSummary(len(ok), len(pts), float(err.mean()), float(err.max()),
                          float(np.mean([p.inside for p in pts])), float(np.mean([p.consistent for p in pts])), method)


@dataclass
class _ArmState:
    """A fittable arm while its target is analysed."""

    info: ArmInfo
    arm: Arm
    fit: CurveFit
    point: PointFit
    without_first: PointFit | None
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


def _prepare(info: ArmInfo, arm: Arm, at: float) -> _ArmState:
    """The point fits and checks of an arm; UserError when its curve cannot be fitted at all."""
    fit, pf = checks.point_fit(arm, 0, at)
    try:
        without, without_reason = checks.point_fit(arm, 1, at)[1], ""
    except UserError as exc:
        without, without_reason = None, str(exc)
    try:
        law, law_reason = checks.power_law(arm, fit, at), ""
    except UserError as exc:
        law, law_reason = None, str(exc)
    return _ArmState(info, arm, fit, pf, without, without_reason, law, law_reason)


def _curve(st: _ArmState, res: BootstrapResult, band: FloatArray, col: dict[float, int], level: float,
           rungs: tuple[float, ...]) -> ArmCurve:
    """Fills ``st`` from the bootstrap and returns the arm's curve record."""
    af = res.arms[st.k]
    env = checks.envelope(st.arm)
    st.noise, how = checks.last_noise(st.arm)
    st.monotone, st.identified, st.max_flops = env.monotone, af.identified, af.max_flops
    failed = []
    if not env.monotone:
        failed.append(f"non-monotone: drops {env.max_drop:.3f} below its running best (set at {eng(env.peak_flops)}) "
                      f"at {eng(env.flops_at_max_drop)}, more than 3 x {env.noise_sd:.3f}")
    if not af.identified:
        failed.append("A not identified (the fit or its interval reaches the top of the A or F_mid grid, or F_mid "
                      "lies beyond the data): not extrapolated beyond its pilots")
    cols = [col[float(v)] for v in band]
    pts = res.points[st.k, cols]
    iv = bootstrap_interval(res.replicates[st.k, cols], pts, level)
    u = st.info.upfront_flops
    return ArmCurve(st.info.name, True, "", af.n_seeds, af.max_flops, st.noise, how, checks.observations(st.arm),
                    tuple(checks.observed_near(st.arm, r - u) for r in rungs), st.point, af.a_interval[0],
                    af.a_interval[1], af.a_upper_edge_share, af.f_mid_upper_edge_share, af.identified,
                    af.seed_scheme, af.seed_factor, st.without_first, st.without_first_reason, st.power_law,
                    st.power_law_reason, env, env.monotone, tuple(failed), _floats(band), _floats(pts),
                    _floats(iv[:, 0]), _floats(iv[:, 1]))


def _floats(values: FloatArray) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _at_budget(label: str, budget: float, states: list[_ArmState], res: BootstrapResult, col: dict[float, int],
               level: float) -> tuple[BudgetResult, Decision]:
    """Every fitted arm's prediction at one budget and the regime there."""
    r0_col = col[R0_FLOPS]
    rows, cands = [], []
    for st in states:
        info = st.info
        ledger = budget - info.upfront_flops
        c = col[ledger] if ledger > 0 else r0_col
        reps, point = res.replicates[st.k, c], float(res.points[st.k, c])
        r0_reps, r0 = res.replicates[st.k, r0_col], float(res.points[st.k, r0_col])
        lo, hi = bootstrap_interval(reps, point, level)
        g_lo, g_hi = bootstrap_interval(reps - r0_reps, point - r0, level)
        within = ledger <= checks.SUPPORT_TOL * st.max_flops
        beyond = not (st.identified or within)
        set_aside = ledger <= 0 or (beyond and not st.survived)
        note = ("the upfront FLOPs exceed the budget" if ledger <= 0 else
                "non-monotone (fails the envelope check)" if not st.monotone else
                f"eliminated at rung {st.reached} with A unidentified: set aside beyond its pilots"
                if set_aside else "A unidentified and the budget is beyond its pilots" if beyond else "")
        share = (info.split.get("feedback", 0.0) * ledger + info.upfront_flops) / budget if ledger > 0 else 1.0
        comparable = st.monotone and not set_aside
        cands.append(Candidate(info.name, info.axes, info.params, share, point, reps, not note, note, st.noise,
                               comparable, unidentified_beyond=beyond, in_play=not set_aside))
        observed = checks.observed_near(st.arm, ledger) if ledger > 0 else None
        rows.append((info.name, ledger, point, float(lo), float(hi), point - r0, float(g_lo), float(g_hi),
                     ledger / st.max_flops, not note, comparable, note, observed))
    dec = decide(cands, level)
    preds = tuple(ArmPrediction(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], dec.p_best_of[r[0]], r[8], r[9],
                                r[10], r[11], r[12]) for r in rows)
    return BudgetResult(label, budget, preds, dec.regime, dec.rule, dec.best, dec.runner_up, dec.p_best, dec.margin,
                        dec.margin_lo, dec.margin_hi, dec.noise, dec.comparisons), dec


def _fit_warnings(states: list[_ArmState], at_f: BudgetResult) -> list[str]:
    out = []
    for st in states:
        p = next(p for p in at_f.predictions if p.arm == st.info.name)
        wf = st.without_first
        if wf is not None and abs(wf.predicted_at_budget - p.reward) > (p.hi - p.lo) / 2:
            out.append(f"{p.arm}: R at the target budget moves from {p.reward:.3f} to {wf.predicted_at_budget:.3f} "
                       "without the first evaluation points (more than half the interval's width)")
        law = st.power_law
        if law is not None and law.sse < law.scalerl_sse:
            out.append(f"{p.arm}: the power law fits its points better than the ScaleRL curve (SSE {law.sse:.4g} vs "
                       f"{law.scalerl_sse:.4g}): the run may not have bent yet")
    return out


def _fitted_target(inp: RaceInput, name: str, data: PilotData, survived: dict[str, bool], n_replicates: int,
                   level: float, seed: int, holdout: bool) -> TargetResult:
    f_target = inp.budget_flops
    budgets = [*inp.rung_budgets, f_target]
    labels = [*(f"rung {i}" for i in range(len(inp.rung_budgets))), "target"]
    present = {a.name: a for a in data.arms}
    curves: dict[str, ArmCurve] = {}
    states: list[_ArmState] = []
    for info in inp.arms:
        if info.name not in present:
            curves[info.name] = _no_data(info)
            continue
        try:
            states.append(replace(_prepare(info, present[info.name], f_target - info.upfront_flops),
                                  survived=survived[info.name], reached=inp.reached[info.name]))
        except UserError as exc:
            curves[info.name] = _observed_only(info, present[info.name], inp.rung_budgets, f"not fitted: {exc}",
                                               True)
    warnings = [f"{c.arm}: {c.reason}" for c in curves.values()]
    if not states:
        return TargetResult(name, True, data.n_prompts, tuple(curves[a.name] for a in inp.arms), (), None, (), None,
                            tuple(warnings), "no arm could be fitted")
    lo_f = min(p.flops for st in states for r in st.arm.runs for p in r.points if p.flops > 0)
    hi_f = max([f_target - min(st.info.upfront_flops for st in states), *(checks.max_flops(st.arm) for st in states)])
    band = np.geomspace(lo_f, max(hi_f, lo_f * 1.0001), BAND_POINTS)
    needed = {b - st.info.upfront_flops for st in states for b in budgets if b - st.info.upfront_flops > 0}
    grid = np.array(sorted({R0_FLOPS, *needed, *band.tolist()}))
    col = {float(v): j for j, v in enumerate(grid)}
    res = paired_bootstrap(PilotData(tuple(st.arm for st in states)), grid, n_replicates=n_replicates, level=level,
                           rng=_stream(seed, name))
    method = (f"{res.method} (recomputed among the arms comparable at each budget); gain = R - R0 from the same "
              "replicates (R0* = each replicate curve's limit at F -> 0)")
    for k, st in enumerate(states):
        st.k = k
        curves[st.info.name] = _curve(st, res, band, col, level, inp.rung_budgets)
        if not st.monotone:
            warnings.append(f"{st.info.name}: {curves[st.info.name].checks_failed[0]}")
    results = [_at_budget(label, b, states, res, col, level) for label, b in zip(labels, budgets, strict=True)]
    budget_results = [r[0] for r in results]
    g_of = {a.name: (float(a.axes["group_size"]) if "group_size" in a.axes else None) for a in inp.arms}
    warnings += g_warnings(budget_results, g_of)
    at_f, dec_f = results[-1]
    warnings += _fit_warnings(states, at_f)
    observed = None
    if dec_f.best is None or dec_f.top_unidentified:
        survivors = [present[n] for n in present if survived[n]]
        if survivors:
            observed = checks.observed_bootstrap(survivors, n_replicates, level, _stream(seed, name, "observed"))
    recommendation = recommend(name, at_f, dec_f, {a.name: a.upfront_flops for a in inp.arms},
                               float(inp.budget_flops - inp.pilot_flops), method, observed, level)
    holdouts = [_holdout(st.arm, n_replicates, level, _stream(seed, name, st.info.name, "holdout"))
                for st in states if holdout and survived[st.info.name]]
    return TargetResult(name, True, data.n_prompts, tuple(curves[a.name] for a in inp.arms), tuple(budget_results),
                        recommendation, tuple(holdouts), _holdout_summary(holdouts, n_replicates, level),
                        tuple(warnings), method)


def analyze(inp: RaceInput, *, n_replicates: int = 500, level: float = 0.9, seed: int = 0,
            holdout: bool = True) -> RaceAnalysis:
    """The analysis of the module docstring; deterministic for a ``seed``. ``holdout=False`` leaves out step 4 (the
    targets then carry no holdout records and no holdout summary): a simulation that only needs the predictions
    saves the refits."""
    check_int("n_replicates", n_replicates, minimum=10)
    if not is_number(level) or not 0 < level < 1:
        raise UserError(f"level must be a number between 0 and 1, not {level!r}")
    check_int("seed", seed, minimum=0)
    top = max(inp.reached.values())
    survived = {a.name: inp.reached[a.name] == top for a in inp.arms}
    targets = []
    for name, data in inp.targets.items():
        if name in inp.fitted_targets:
            targets.append(_fitted_target(inp, name, data, survived, n_replicates, level, seed, holdout))
            continue
        present = {a.name: a for a in data.arms}
        reason = "held-out target: observed only, never fitted for the recommendation (the validate step uses it)"
        curves = tuple(_observed_only(i, present[i.name], inp.rung_budgets, reason, False) if i.name in present
                       else _no_data(i) for i in inp.arms)
        targets.append(TargetResult(name, False, data.n_prompts, curves, (), None, (), None, (), "not fitted"))
    varying = tuple(k for k in AXES if len({str(a.axes.get(k)) for a in inp.arms}) > 1)
    records = tuple(ArmRecord(a.name, dict(a.axes), a.params, {k: float(v) for k, v in a.split.items()},
                              a.upfront_flops, inp.reached[a.name], survived[a.name]) for a in inp.arms)
    return RaceAnalysis(RACE_VERSION, __version__, inp.command, float(inp.budget_flops),
                        tuple(float(r) for r in inp.rung_budgets), inp.pilot_flops,
                        inp.pilot_flops / float(inp.budget_flops), float(inp.budget_flops - inp.pilot_flops), level,
                        n_replicates, seed, varying, records, tuple(inp.fitted_targets), tuple(targets),
                        rules(level), STATEMENT, f"{COVERED} {NOT_SHOWN}")
