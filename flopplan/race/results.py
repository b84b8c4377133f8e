"""What :func:`flopplan.race.analysis.analyze` returns: frozen dataclasses, written as race.json (versioned by
``RACE_VERSION``) and read back strictly (:meth:`RaceAnalysis.from_data`, :func:`load_analysis`; version 1 files
are read through :func:`flopplan.race.legacy.upgrade`).

The records hold the compute types themselves (a :class:`flopplan.race.curves.CurveFit`, a
:class:`flopplan.race.bootstrap.ArmFit`, a :class:`Decision`, ...), never a copy of their fields: a fit of another
curve family, or a prediction averaged over families, slots in where those stand.

Units: every ``flops`` is FLOPs as the ledger counts them. A budget is the total an arm may spend, its upfront
FLOPs (a learned reward model's training) included; ``ledger_flops`` = budget - upfront is where the arm's curve,
fitted on its pilots' ledger FLOPs, is read. Rewards are absolute (R, a pass rate) unless named ``gain`` (R - R0).
Intervals are [lo, hi] at ``RaceAnalysis.level``; each target's ``interval_method`` says how they were computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan import serial
from flopplan.errors import UserError, check_int, first_problem, is_int, is_number
from flopplan.fileio import read_json
from flopplan.race import legacy
from flopplan.race.bootstrap import MAX_REPLICATES, ArmFit, HoldoutPoint
from flopplan.race.curves import CurveFit, EnvelopeCheck, PowerLawFit
from flopplan.race.design import AXES, is_ladder
from flopplan.race.ensemble import EnsembleFit

RACE_VERSION = 7
READABLE = (1, 2, 3, 4, 5, 6, RACE_VERSION)  # versions 1-6: upgraded on reading (flopplan.race.legacy)
BUCKETS = ("rollout", "learning", "feedback")


@dataclass(frozen=True)
class ArmInfo:
    """One arm of the grid as the analysis sees it. ``axes``: its value on each design axis (keys among policy,
    group_size, iterations, reward; any subset may vary); ``params``: policy parameters (orders the size axis);
    ``split``: its FLOP shares by bucket {rollout, learning, feedback} (sum 1); ``upfront_flops``: e.g. a learned
    reward model's training, charged to this arm's feedback at every budget."""

    name: str
    axes: dict[str, str | int | float]
    params: int
    split: dict[str, float]
    upfront_flops: int = 0

    def __post_init__(self) -> None:
        where = f"arm {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise UserError("an arm needs a non-empty name")
        if not isinstance(self.axes, dict) or any(not isinstance(k, str) for k in self.axes):
            raise UserError(f"{where}: axes must be a dict of axis names ({', '.join(AXES)}, ...) to values")
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
class ArmRecord:
    """An arm as analysed: what it is (``info``), the highest rung it ran and whether that is the top rung any arm
    reached."""

    info: ArmInfo
    reached: int
    survived: bool


@dataclass(frozen=True)
class Observation:
    """One evaluation of one seed: ledger FLOPs (0 at step 0) and the mean score over the target's prompts."""

    seed: str
    flops: float
    reward: float


@dataclass(frozen=True)
class FitReading:
    """A fitted curve and its R at the target budget less the arm's upfront FLOPs."""

    fit: CurveFit
    predicted_at_budget: float


@dataclass(frozen=True)
class PowerLawCheck:
    """The power law fitted beside the ScaleRL curve (``law``), the ScaleRL fit's SSE on the points the power law
    used, and the power law's R at the target budget less upfront."""

    law: PowerLawFit
    scalerl_sse: float
    predicted_at_budget: float


@dataclass(frozen=True)
class EnvelopeResult:
    """The monotone-envelope check on the seed-mean curve (``curve``: ``per seed`` when the seeds' points do not
    align, then the seed with the most significant drop); ``noise_sd``: the standard error of the drop;
    ``monotone``: drop <= 3 noise_sd."""

    curve: str
    check: EnvelopeCheck
    noise_sd: float
    monotone: bool


@dataclass(frozen=True)
class Band:
    """The model average (the curve the decisions read) and its calibrated interval on a grid of ledger FLOPs, for
    the plots. The budgets' intervals carry two adjustments this band leaves out: an arm whose pilots never rose or
    fell is stated at what its pilots showed, its interval from there (or below) to 1, and a seed's fall lowers
    every arm's lower end beyond its pilots (:mod:`flopplan.race.grid_fall`)."""

    flops: tuple[float, ...]
    point: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]


@dataclass(frozen=True)
class ArmCurve:
    """One arm on one target: its observations, the noise the regime rule uses (``noise``, how: ``noise_method``),
    the observed reward near each rung budget, the envelope check, and, when fitted, the bootstrap's fit of the arm
    (``arm_fit``: the fit, A's interval, identification) with its R at the target budget, the refit without the
    first evaluation point of each seed, the power-law check, the model average over curve families the decisions
use (``ensemble``) and its band. Not fitted: ``arm_fit`` is None and
    ``reason`` says why (:meth:`unfitted`)."""

    arm: str
    reason: str
    n_seeds: int
    max_flops: float
    noise: float
    noise_method: str
    observations: tuple[Observation, ...]
    observed_at_rungs: tuple[float | None, ...]
    envelope: EnvelopeResult | None
    stable: bool
    checks_failed: tuple[str, ...]
    arm_fit: ArmFit | None
    predicted_at_budget: float | None
    without_first: FitReading | None
    without_first_reason: str
    power_law: PowerLawCheck | None
    power_law_reason: str
    band: Band | None
    ensemble: EnsembleFit | None = None

    @property
    def fitted(self) -> bool:
        return self.arm_fit is not None

    @property
    def fit(self) -> CurveFit | None:
        """The fit on the original data (None: not fitted)."""
        return None if self.arm_fit is None else self.arm_fit.fit

    @property
    def identified(self) -> bool:
        """A identified by the fit and its bootstrap (False when not fitted)."""
        return self.arm_fit is not None and self.arm_fit.identified

    @classmethod
    def unfitted(cls, arm: str, reason: str, *, failed: bool, n_seeds: int = 0, max_flops: float = 0.0,
                 noise: float = 0.0, noise_method: str = "", observations: tuple[Observation, ...] = (),
                 observed_at_rungs: tuple[float | None, ...] = (), envelope: EnvelopeResult | None = None
                 ) -> ArmCurve:
        """An arm without a curve: ``failed`` when it should have had one (``reason`` is then a failed check), not
        when none was attempted (a held-out target)."""
        stable = envelope is not None and envelope.monotone and not failed
        return cls(arm=arm, reason=reason, n_seeds=n_seeds, max_flops=max_flops, noise=noise,
                   noise_method=noise_method, observations=observations, observed_at_rungs=observed_at_rungs,
                   envelope=envelope, stable=stable, checks_failed=(reason,) if failed else (), arm_fit=None,
                   predicted_at_budget=None, without_first=None, without_first_reason="", power_law=None,
                   power_law_reason="", band=None)


@dataclass(frozen=True)
class ArmPrediction:
    """One fitted arm at one budget: reward and gain with intervals, P(best) among the comparable arms,
    extrapolation = ledger_flops / the arm's largest pilot FLOPs, whether it is usable (may be named best) and
    comparable (competes in P(best) and the margins; :mod:`flopplan.race.regime`), ``note``: why not usable, and
    the observed seed-mean reward near the budget when the arm ran there."""

    arm: str
    ledger_flops: float
    reward: float
    lo: float
    hi: float
    gain: float
    gain_lo: float
    gain_hi: float
    p_best: float
    extrapolation: float
    usable: bool
    comparable: bool
    note: str
    observed: float | None


@dataclass(frozen=True)
class AxisComparison:
    """The best arm against its best neighbour on one axis (the arms that differ from it on that axis only):
    cost = best's predicted reward - the neighbour's; ``names`` the regime this axis names."""

    axis: str
    neighbour: str
    best_value: str
    neighbour_value: str
    cost: float
    names: str


@dataclass(frozen=True)
class Decision:
    """The regime at one budget (:func:`flopplan.race.regime.decide`), the rule that decided it in words, and the
    numbers: the best usable arm, P(best), runner-up, margin with the interval of the paired difference, the
    noise; ``p_best_of`` every arm's P(best); ``top`` the arm with the highest prediction among those in play, and
    whether it is an unidentified survivor beyond its pilots (``top_unidentified``)."""

    regime: str
    rule: str
    best: str | None
    runner_up: str | None
    p_best: float | None
    margin: float | None
    margin_lo: float | None
    margin_hi: float | None
    noise: float | None
    comparisons: tuple[AxisComparison, ...]
    p_best_of: dict[str, float]
    top: str | None
    top_unidentified: bool


@dataclass(frozen=True)
class BudgetResult:
    """One budget (a rung's or the target's): every fitted arm's prediction there and the decision. ``label``:
    ``rung R`` (R counted from 0, as race.json counts rungs) or ``target``; :meth:`shown` is what a reader sees."""

    label: str
    flops: float
    predictions: tuple[ArmPrediction, ...]
    decision: Decision

    def shown(self, rungs: int) -> str:
        """The label as the reports print it, counted as ``race run`` counts rungs: ``rung R of N`` from 1."""
        index = self.label.removeprefix("rung ")
        return rung_name(int(index), rungs) if index.isdigit() else self.label


def rung_name(index: int, rungs: int) -> str:
    """Rung ``index`` (from 0, as race.json counts) of ``rungs`` as people read it: ``rung 1 of 2`` for index 0."""
    return f"rung {index + 1} of {rungs}"


@dataclass(frozen=True)
class Recommendation:
    """The arm to run at the target budget for one evaluation target. ``mode``: ``fitted`` (curves read at the
    budget), ``best observed`` (the best observed reward at ``at_flops``, the survivors' largest common ledger
    FLOPs: no curve is extrapolated) or ``none``. ``confidence``: ``high``, ``low`` (``reasons``), ``cannot tell``
    (the evidence does not separate the arms in ``tied`` at the budget; ``separate_flops``: what one more rung for
    them would cost; a pick the anchored forecast moved keeps the tie the curves named, at confidence ``low``) or
    ``best observed``. Numbers are at ``at_flops``; ``budget_left_flops``: the target budget
    less the pilots. ``naive_arm``: the naive pick, the survivor with the best observed reward at the largest
    pilot (``naive_reward``), and ``naive_note`` why RACE differs from it when it does. The pilots' cost
    (:mod:`flopplan.race.overhead`; 0 in files written before it was recorded): the ledger of the arm's pilot a
    validating run continues (``continued_flops``), the FLOPs spent on what is not continued (``overhead_flops``,
    and as a share of the target budget) and the target budget over the arm's largest pilot (``horizon``). A fitted
    recommendation's ``p_best`` is the anchored forecast's (``p_best_anchored``, :mod:`flopplan.race.persistence`:
    the reward seen at each finalist's largest pilot plus the curves' change to the budget), and under ``cannot
    tell`` the mean of that and the curves' own (version 7 on; before, the anchored one alone); beside it (None in
    files before version 4) the curves' own P(best) at the budget among the finalists (``p_best_curves``) and the
    share of draws in which the arm is seen best at the largest pilot (``p_best_seen``); ``p_best_anchored`` is None
    in files before version 7, and where ``p_best`` is the decision's (fewer than two finalists) or none."""

    target: str
    arm: str | None
    mode: str
    confidence: str
    reasons: tuple[str, ...]
    flops: float
    at_flops: float
    reward: float | None
    lo: float | None
    hi: float | None
    gain: float | None
    gain_lo: float | None
    gain_hi: float | None
    p_best: float | None
    runner_up: str | None
    margin: float | None
    margin_lo: float | None
    margin_hi: float | None
    extrapolation: float | None
    regime: str
    upfront_flops: int
    budget_left_flops: float
    interval: str
    tied: tuple[str, ...] = ()
    separate_flops: float | None = None
    naive_arm: str | None = None
    naive_reward: float | None = None
    naive_note: str = ""
    continued_flops: int = 0
    overhead_flops: int = 0
    overhead_share: float = 0.0
    horizon: float = 0.0
    p_best_curves: float | None = None
    p_best_seen: float | None = None
    p_best_anchored: float | None = None


@dataclass(frozen=True)
class HoldoutRecord:
    """The temporal holdout of one surviving arm (:func:`flopplan.race.bootstrap.temporal_holdout`): refit on its
    first half of FLOPs, the second half predicted; ``identified``: A on the half; ``ok`` false: ``reason`` says
    why it could not run."""

    arm: str
    ok: bool
    reason: str
    split_flops: float | None
    identified: bool | None
    points: tuple[HoldoutPoint, ...]
    mean_abs_error: float | None
    coverage: float | None
    consistency: float | None


@dataclass(frozen=True)
class HoldoutSummary:
    """Pooled over the held-out points of every surviving arm that could be held out."""

    n_arms: int
    n_points: int
    mean_abs_error: float
    max_abs_error: float
    coverage: float
    consistency: float
    method: str


@dataclass(frozen=True)
class TargetResult:
    """One evaluation target. ``fitted`` false (a held-out target): observations only, no curves, regime or
    recommendation (the validate step uses it)."""

    name: str
    fitted: bool
    n_prompts: int
    curves: tuple[ArmCurve, ...]
    budgets: tuple[BudgetResult, ...]
    recommendation: Recommendation | None
    holdout: tuple[HoldoutRecord, ...]
    holdout_summary: HoldoutSummary | None
    warnings: tuple[str, ...]
    interval_method: str


@dataclass(frozen=True)
class RaceAnalysis:
    """The analysis of a RACE pilot grid (race.json). ``axes``: the design axes that vary; ``rules``: the regime
    rules as the report states them; ``statement``: what RACE is; ``not_covered``: what the intervals leave out."""

    race_version: int
    flopplan_version: str
    command: str
    level: float
    n_replicates: int
    seed: int
    budget_flops: float
    rung_budgets: tuple[float, ...]
    budget_left_flops: float
    pilot_flops: int
    pilot_share: float
    axes: tuple[str, ...]
    arms: tuple[ArmRecord, ...]
    fitted_targets: tuple[str, ...]
    targets: tuple[TargetResult, ...]
    rules: tuple[str, ...]
    statement: str
    not_covered: str

    def target(self, name: str) -> TargetResult:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def recommendations(self) -> tuple[Recommendation, ...]:
        return tuple(t.recommendation for t in self.targets if t.recommendation is not None)

    def to_data(self) -> dict[str, Any]:
        """JSON data, ``race_version`` first; floats finite (absent values are null)."""
        data: dict[str, Any] = serial.to_data(self)
        return data

    @staticmethod
    def from_data(data: Any, where: str = "race.json") -> RaceAnalysis:
        """Strict: the version first, then every field with its type; one-line UserError naming the path."""
        if not isinstance(data, dict) or "race_version" not in data:
            raise UserError(f"{where}: not a RACE analysis (no race_version)")
        version = data["race_version"]
        if not is_int(version) or version not in READABLE:
            raise UserError(f"{where}: race_version must be the integer {' or '.join(map(str, READABLE))} (the "
                            f"layouts this flopplan reads), not {version!r}")
        if version < RACE_VERSION:
            data = legacy.upgrade(data, where)
        out: RaceAnalysis = serial.from_data(RaceAnalysis, data, where)
        problem = out.problem()
        if problem:
            raise UserError(f"{where}: {problem} (no analysis writes this; run `flopplan race analyze` again)")
        return out

    def problem(self) -> str:
        """What the values say that no analysis writes (a hand edit, a damaged copy): '' when nothing. The types
        are checked by the reader; this is what a table or a validating run built on the file would carry."""
        checks = (
            (self.budget_flops > 0, "budget_flops must be > 0"),
            (self.pilot_flops >= 0, "pilot_flops must be >= 0"),
            (is_ladder(self.rung_budgets), "rung_budgets must be positive and ascending"),
            (0 < self.level < 1, "level must be between 0 and 1"),
            (1 <= self.n_replicates <= MAX_REPLICATES, f"n_replicates must be from 1 to {MAX_REPLICATES:,}"),
            (bool(self.arms) and len({a.info.name for a in self.arms}) == len(self.arms),
             "arms must be distinct and not empty"),
            (len({t.name for t in self.targets}) == len(self.targets), "targets must be distinct"),
            # the tables and the validating run start from fitted_targets[0]: each names a fitted target, once
            (bool(self.fitted_targets) and len(set(self.fitted_targets)) == len(self.fitted_targets)
             and set(self.fitted_targets) == {t.name for t in self.targets if t.fitted},
             f"fitted_targets {list(self.fitted_targets)} must name each target fitted (\"fitted\": true) once: "
             f"{[t.name for t in self.targets if t.fitted]}"),
        )
        return first_problem(checks)


def load_analysis(path: str | Path) -> RaceAnalysis:
    """Read race.json; any problem is one line."""
    return RaceAnalysis.from_data(read_json(path, "RACE analysis"), str(path))
