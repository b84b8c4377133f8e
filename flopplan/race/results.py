"""What :func:`flopplan.race.analysis.analyze` returns: frozen dataclasses, written as race.json (versioned by
``RACE_VERSION``) and read back strictly (:meth:`RaceAnalysis.from_data`, :func:`load_analysis`).

Units: every ``flops`` is FLOPs as the ledger counts them. A budget is the total an arm may spend, its upfront
FLOPs (a learned reward model's training) included; ``ledger_flops`` = budget - upfront is where the arm's curve,
fitted on its pilots' ledger FLOPs, is read. Rewards are absolute (R, a pass rate) unless named ``gain`` (R - R0).
Intervals are [lo, hi] at ``RaceAnalysis.level``; each target's ``interval_method`` says how they were computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan import serial as schema
from flopplan.errors import UserError, is_int
from flopplan.fileio import read_json

RACE_VERSION = 1


@dataclass(frozen=True)
class ArmRecord:
    """An arm as analysed: its design values, policy parameters, FLOP shares by bucket {rollout, learning,
    feedback}, upfront FLOPs, the highest rung it ran and whether that is the top rung any arm reached."""

    name: str
    axes: dict[str, str | int | float]
    params: int
    split: dict[str, float]
    upfront_flops: int
    reached: int
    survived: bool


@dataclass(frozen=True)
class Observation:
    """One evaluation of one seed: ledger FLOPs (0 at step 0) and the mean score over the target's prompts."""

    seed: str
    flops: float
    reward: float


@dataclass(frozen=True)
class PointFit:
    """A ScaleRL fit on the original data (no bootstrap): R = R0 + (A - R0) / (1 + (F_mid / F)^B);
    ``identified`` is the point fit's own flag (A, F_mid off the top of their grids, F_mid within the data);
    ``predicted_at_budget``: R at the target budget less the arm's upfront FLOPs."""

    a: float
    b: float
    f_mid: float
    r0: float
    sse: float
    n_points: float
    identified: bool
    dropped_first: int
    predicted_at_budget: float


@dataclass(frozen=True)
class PowerLawCheck:
    """R = R0 + c F^alpha on the points above R0 (``n_used``; ``n_excluded`` at or below R0); ``sse`` there, and
    ``scalerl_sse`` of the ScaleRL fit on the same points; ``f_at_ceiling``: where the power law reaches R = 1
    (null: never)."""

    c: float
    alpha: float
    sse: float
    scalerl_sse: float
    n_used: int
    n_excluded: int
    f_at_ceiling: float | None
    predicted_at_budget: float


@dataclass(frozen=True)
class EnvelopeResult:
    """The monotone-envelope check on the seed-mean curve (``per seed`` when the seeds' points do not align):
    the largest drop below the running best, where it happened and where the best was set; ``noise_sd`` the
    standard error of that drop; ``monotone``: drop <= 3 noise_sd."""

    curve: str
    max_drop: float
    flops_at_max_drop: float
    peak_flops: float
    noise_sd: float
    monotone: bool


@dataclass(frozen=True)
class ArmCurve:
    """One arm on one target: its observations, the fit (with and without the first evaluation point of each
    seed), the bootstrap interval of A and the identification flag, the power-law and envelope checks, the noise
    the regime rule uses (``noise``, how: ``noise_method``), the observed reward near each rung budget, and a band
    of the fitted curve (``band_*``, ledger FLOPs) for plots. ``fitted`` false: ``reason`` says why."""

    arm: str
    fitted: bool
    reason: str
    n_seeds: int
    max_flops: float
    noise: float
    noise_method: str
    observations: tuple[Observation, ...]
    observed_at_rungs: tuple[float | None, ...]
    fit: PointFit | None
    a_lo: float | None
    a_hi: float | None
    a_upper_edge_share: float | None
    f_mid_upper_edge_share: float | None
    identified: bool
    seed_scheme: str
    seed_factor: float | None
    without_first: PointFit | None
    without_first_reason: str
    power_law: PowerLawCheck | None
    power_law_reason: str
    envelope: EnvelopeResult | None
    stable: bool
    checks_failed: tuple[str, ...]
    band_flops: tuple[float, ...]
    band_point: tuple[float, ...]
    band_lo: tuple[float, ...]
    band_hi: tuple[float, ...]


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
class BudgetResult:
    """The regime at one budget (a rung's or the target's), the rule that decided it in words, and the numbers:
    the best usable arm, P(best), runner-up, margin with the interval of the paired difference, the noise."""

    label: str
    flops: float
    predictions: tuple[ArmPrediction, ...]
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


@dataclass(frozen=True)
class Recommendation:
    """The arm to run at the target budget for one evaluation target. ``mode``: ``fitted`` (curves read at the
    budget), ``best observed`` (the best observed reward at ``at_flops``, the survivors' largest common ledger
    FLOPs: no curve is extrapolated) or ``none``. ``confidence``: ``high``, ``low`` (``reasons``) or
    ``best observed``. Numbers are at ``at_flops``; ``budget_left_flops``: the target budget less the pilots."""

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


@dataclass(frozen=True)
class HoldoutPointRecord:
    """A held-out evaluation position: observed and predicted seed means, error = observed - predicted, the
    interval of the predicted curve (``inside``) and of the error (``consistent``: it contains 0)."""

    flops: float
    observed: float
    predicted: float
    error: float
    lo: float
    hi: float
    inside: bool
    error_lo: float
    error_hi: float
    consistent: bool


@dataclass(frozen=True)
class HoldoutRecord:
    """The temporal holdout of one surviving arm: refit on its first half of FLOPs, the second half predicted;
    ``ok`` false: ``reason`` says why it could not run."""

    arm: str
    ok: bool
    reason: str
    split_flops: float | None
    identified: bool | None
    points: tuple[HoldoutPointRecord, ...]
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
    budget_flops: float
    rung_budgets: tuple[float, ...]
    pilot_flops: int
    pilot_share: float
    budget_left_flops: float
    level: float
    n_replicates: int
    seed: int
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
        data: dict[str, Any] = schema.to_data(self)
        return data

    @staticmethod
    def from_data(data: Any, where: str = "race.json") -> RaceAnalysis:
        """Strict: the version first, then every field with its type; one-line UserError naming the path."""
        if not isinstance(data, dict) or "race_version" not in data:
            raise UserError(f"{where}: not a RACE analysis (no race_version)")
        version = data["race_version"]
        if not is_int(version) or version != RACE_VERSION:
            raise UserError(f"{where}: race_version must be the integer {RACE_VERSION} (the layout this flopplan "
                            f"reads), not {version!r}")
        out: RaceAnalysis = schema.from_data(RaceAnalysis, data, where)
        return out


def load_analysis(path: str | Path) -> RaceAnalysis:
    """Read race.json; any problem is one line."""
    return RaceAnalysis.from_data(read_json(path, "RACE analysis"), str(path))
