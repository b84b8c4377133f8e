"""The upper side of an arm's interval when its pilots are still accelerating in ln F.

Every curve the model average mixes (:mod:`flopplan.race.ensemble`) bends down or runs straight in ln F beyond the
pilots, except ScaleRL's sigmoid read before its midpoint; a reward that still gains more with every doubling of F
(convex in ln F: a rise in a straight line in F itself, or the early part of a slow sigmoid) was extrapolated too
low. On a straight rise in F the 90 % intervals covered the truth at F 0.65-0.70 of the time, every miss below the
truth (benchmarks/race_misspecification.py, "linear-F"; docs/results.md, rounds 7-8). A curve family that keeps
accelerating, mixed in with the others, fixed that coverage but moved the points and P(best) of sigmoid arms read
before their midpoint (the control's stated P(best) fell 0.11 below how often it was right: round 7). Here the
accelerating curve moves no point and no mixture: it only raises the interval's upper end, and only for an arm
whose pilots show the acceleration.

Per arm (:func:`assess`), on its bootstrap draws (:class:`flopplan.race.families.ArmSample`; row 0 the data):

1. The test: a quadratic in u = ln F, c0 + c1 u + c2 u^2, fitted by weighted least squares to the points at the
   arm's last :data:`LAST_POSITIONS` distinct evaluation positions (fewer than :data:`MIN_POSITIONS`: no test), in
   every bootstrap draw. The arm is *accelerating* when c2 > 0 in at least ``level`` of the draws (0.9 for 90 %
   intervals: the curvature is positive at that one-sided confidence, the draws resampling seeds and prompts).
   Why the last four: a sigmoid whose midpoint lies just before the largest pilot is convex over the last five
   positions but bends within the last four; over five, the sigmoid control's intervals covered 0.976 at one seed
   of the benchmark, above the 0.97 bar. Why not a temporal holdout instead (the rise refitted without the last
   positions must predict them as well as the model average): the early points of a rise in F sit within the
   noise of R0, the refitted exponent is noise, and the holdout turned away about half of such arms (docs/results.md,
   round 8).
2. The reach: the rise R = R0 + c1 (F / F_ref)^g from the arm's measured step-0 reward R0, c1 >= 0 (g = 1: a
   straight line in F; convex in ln F for every g > 0; anchored at R0 as ScaleRL's curve is, so that a few early
   points barely above R0 still pin g), fitted to every draw on all the arm's points by profile least squares
   over g on a log grid in [1/8, 2] (:data:`RISE_EXPONENTS`, the way :mod:`flopplan.race.families` fits its
   shapes); at FLOPs B beyond the pilots, the reach is the upper percentile (1 - (1 - level) / 2) of its draws'
   predictions (clipped to [0, 1]).
3. The stretch (:func:`raise_upper`): where an accelerating arm's reach is above the upper end of its calibrated
   interval, its replicates above the point are stretched away from the point until that upper end is the reach;
   the point, the replicates below it, their order and the mixture (which the stated P(best) reads,
   :mod:`flopplan.race.persistence`) are unchanged. The decision reads the stretched replicates: an overlap with
   the reach makes a tie, and an accelerating naive pick is overturned only by a lower bound above its reach.

Measured on the benchmark's 14 simulated shapes (docs/results.md, round 8): how often the test fires per shape,
and the coverage, P(best) and regret with the raised upper end.

What it does not see: where an accelerating curve stops. A rise in F that hits a ceiling between the largest pilot
and F (a saturation no pilot reached) is inside the raised interval but the arms' order at F is not; how often
that makes the stated P(best) too high is measured in docs/results.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from flopplan.race.families import ArmSample, distinct_positions, weighted_lstsq

FloatArray = NDArray[np.float64]
LAST_POSITIONS = 4
MIN_POSITIONS = 4
RISE_EXPONENTS = 2.0 ** np.arange(-3.0, 1.01, 0.25)  # 1/8 to 2 in quarter octaves, 1 among them


@dataclass(frozen=True, eq=False)
class RiseFit:
    """k fits of the rise R = R0 + c1 (F / f_ref)^g: the exponent g (k,) and coefficients (R0, c1) (k, 2)."""

    f_ref: float
    g: FloatArray
    coef: FloatArray

    def predict(self, flops: FloatArray) -> FloatArray:
        """R of every fit at ``flops`` (m,) >= 0: (k, m), clipped to [0, 1]."""
        ratio = np.asarray(flops, dtype=float) / self.f_ref
        with np.errstate(over="ignore", invalid="ignore"):
            out = self.coef[:, :1] + self.coef[:, 1:] * ratio[None] ** self.g[:, None]
        return np.clip(np.nan_to_num(out, nan=1.0, posinf=1.0, neginf=0.0), 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class Acceleration:
    """An arm's test and reach: ``convex_share`` the share of bootstrap draws whose quadratic in ln F over the
    last positions bends up (None: too few positions to test), ``rise`` the accelerating curve's fits (None: the
    share is below the level, or there is no share), and ``quadratic`` that quadratic's coefficients per draw
    (:func:`last_quadratic`; None: no test), which the fall test (:mod:`flopplan.race.fall`) reads too."""

    convex_share: float | None
    rise: RiseFit | None
    quadratic: FloatArray | None = None

    @property
    def accelerating(self) -> bool:
        return self.rise is not None


def last_quadratic(sample: ArmSample) -> FloatArray | None:
    """Per bootstrap draw (rows 1..), the coefficients (c0, c1, c2) (k, 3) of the quadratic in u = ln(F / F_ref)
    (F_ref the largest FLOPs) fitted by weighted least squares to the points at the last :data:`LAST_POSITIONS`
    distinct positions; None with fewer than :data:`MIN_POSITIONS`. c1 is the slope at the largest pilot (u = 0)."""
    valid = sample.w[0] > 0
    if not valid.any() or sample.y.shape[0] < 2:
        return None
    f_ref = float(sample.flops[valid].max())
    u = np.log(sample.flops) - np.log(f_ref)
    positions = distinct_positions(u[valid])
    if positions.size < MIN_POSITIONS:
        return None
    first = positions[-min(LAST_POSITIONS, positions.size)]
    keep = (u >= first - 0.05).ravel()
    uu = u.ravel()[keep]
    design = np.stack([np.ones_like(uu), uu, uu * uu], axis=-1)[None]
    k = sample.y.shape[0]
    coef, _ = weighted_lstsq(design, sample.y.reshape(k, -1)[1:, keep], sample.w.reshape(k, -1)[1:, keep])
    return np.asarray(coef[:, 0], dtype=float)


def convex_share(sample: ArmSample) -> float | None:
    """Step 1 of the module docstring: the share of the bootstrap draws (rows 1..) whose quadratic in ln F over
    the last :data:`LAST_POSITIONS` distinct positions has c2 > 0; None with fewer than :data:`MIN_POSITIONS`."""
    return _convex(last_quadratic(sample))


def _convex(quadratic: FloatArray | None) -> float | None:
    return None if quadratic is None else float(np.mean(quadratic[:, 2] > 0))


def fit_rise(sample: ArmSample) -> RiseFit | None:
    """Step 2: R = R0 + c1 (F / F_ref)^g, c1 >= 0, R0 each row's measured reward at step 0, fitted to every row of
    ``sample`` (F_ref its largest FLOPs), the g of least weighted SSE per row (c1 by one-coefficient least squares,
    clipped at 0); None without a valid point."""
    flops = sample.flops
    valid = sample.w[0] > 0
    if not valid.any():
        return None
    f_ref = float(flops[valid].max())
    k = sample.y.shape[0]
    x = (flops / f_ref).ravel()[None, :] ** RISE_EXPONENTS[:, None]  # (G, n)
    y = sample.y.reshape(k, -1) - sample.r0[:, None]  # the gain over R0
    w = sample.w.reshape(k, -1)
    c1 = np.maximum(np.einsum("gn,kn,kn->kg", x, w, y) / np.maximum(np.einsum("gn,kn->kg", x * x, w), 1e-300), 0.0)
    resid = y[:, None, :] - c1[..., None] * x[None]
    sse = (w[:, None, :] * resid * resid).sum(axis=-1)
    best = sse.argmin(axis=1)
    rows = np.arange(k)
    return RiseFit(f_ref, RISE_EXPONENTS[best], np.stack([sample.r0, c1[rows, best]], axis=-1))


def assess(sample: ArmSample, level: float) -> Acceleration:
    """The module's test and, for an accelerating arm, its rise fitted to every draw."""
    quadratic = last_quadratic(sample)
    share = _convex(quadratic)
    return Acceleration(share, fit_rise(sample) if share is not None and share >= level else None, quadratic)


def reach(acc: Acceleration, flops: FloatArray, level: float) -> FloatArray | None:
    """Step 2's reach at ``flops`` (m,) > 0: the upper percentile of the rise's bootstrap draws; None when the arm
    is not accelerating."""
    if acc.rise is None:
        return None
    draws = acc.rise.predict(flops)[1:]
    return np.asarray(np.quantile(draws, 1 - (1 - level) / 2, axis=0), dtype=float)


def raise_upper(replicates: FloatArray, point: FloatArray, target: FloatArray, beyond: NDArray[np.bool_],
                level: float) -> FloatArray:
    """Step 3: ``replicates`` (k, m) about ``point`` (m,) with the replicates above the point stretched, at the
    columns ``beyond`` where ``target`` (m,) exceeds their upper percentile, so that the percentile becomes the
    target (to numpy's interpolation); other columns as they were. Values stay in [0, 1]. Where the target is a
    pass rate of 1, the replicates stretched past it are clipped back to 1 and the percentile, interpolated between
    a replicate below 1 and one at 1, would stay below the target: there the stretch brings the percentile's lower
    neighbour (an order statistic) to 1, so that the upper end is 1."""
    q = 1 - (1 - level) / 2
    hi = np.quantile(replicates, q, axis=0)
    lift = beyond & (target > hi)
    if not lift.any():
        return replicates
    anchor = hi.copy()
    ceiling = lift & (target >= 1.0)
    if ceiling.any():
        anchor[ceiling] = np.sort(replicates[:, ceiling], axis=0)[int(np.floor(q * (replicates.shape[0] - 1)))]
    out = replicates.copy()
    above = out[:, lift] > point[lift]
    span = np.maximum(anchor[lift] - point[lift], 1e-9)
    ratio = (target[lift] - point[lift]) / span
    cols = out[:, lift]
    out[:, lift] = np.where(above, point[lift] + (cols - point[lift]) * ratio, cols)
    return np.clip(out, 0.0, 1.0)
