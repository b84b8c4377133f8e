"""Curve families beside ScaleRL's sigmoid, fitted to the same bootstrap draws: the shapes RACE's ensemble averages.

Every family is read in u = ln(F / F_ref), F_ref the arm's largest fitted FLOPs (so the pilots sit at u <= 0 and a
budget twice the pilots at u = ln 2), and is linear in its coefficients once one shape value g is fixed; g runs over
a small grid and, per replicate, the g with the smallest weighted SSE wins (profile least squares, as ScaleRL's fit
profiles A and F_mid). One matrix solve per (replicate, g): every replicate of every arm in a few milliseconds.

* ``power``, a saturating power law (Domhan et al. 2015's pow3): R = A - c (F / F_ref)^-alpha = A - c e^(-alpha u),
  c >= 0, alpha on a log grid in [0.05, 3]: a rise that slows towards A.
* ``log-linear``, a log-linear rise with a cap: R = c0 + c1 min(u, k), c1 >= 0, the cap's knot k at an interior
  evaluation or beyond the data (no cap seen: a straight line in ln F).
* ``two-stage``, two log-linear pieces: R = c0 + c1 u + c2 max(0, u - k), k at an interior evaluation (>= 2
  positions each side): a plateau then a second take-off, or a rise then a fall; extrapolated along the last piece.
* ``turn-down``, a concave quadratic in ln F: R = c0 + c1 u + c2 u^2, c2 <= 0: a rise that bends over and can
  turn down.
* ``steep-fall``, a fall that steepens in ln F: R = c0 + c1 u - c2 e^(g u), c2 >= 0, g on a geometric grid in
  [0.5, 4] (:data:`FALL_RATES`). Fitted only for an arm whose pilots already fall (:mod:`flopplan.race.fall`: the
  test, and why it is gated): the quadratic's slope changes at most linearly in ln F, while a reward model
  over-optimised (Gao, Schulman and Hilton, arXiv 2210.10760: gold reward d (alpha - beta ln d) in the policy's
  distance d) falls ever faster, and the other families extrapolated such a fall too gently.

A family whose sign constraint some replicate breaks at every shape value is not fitted for the arm. Fitting that
replicate on the bound instead (constrained least squares: a rising family on falling points is their mean) makes
the family one-sided over the replicates (a flat arm's rising families rise or stay flat, never fall) and skews the
mixture upward: tried, it left the 90 % intervals of arms saturated before the pilots covering 0.978-0.981 and
those of crossing curves 0.85 (docs/results.md, round 7).

Predictions are clipped to [0, 1] (a pass rate). A family needs more distinct evaluation positions (FLOPs more than
~10 % beyond a position's first: :func:`distinct_positions`) than it has free values (coefficients + the shape
value; :data:`MIN_POSITIONS`); with fewer it is not fitted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from flopplan.errors import UserError

FloatArray = NDArray[np.float64]
FAMILIES = ("power", "log-linear", "two-stage", "turn-down")  # fitted for every arm
FALL_FAMILY = "steep-fall"  # fitted only for an arm whose pilots fall
EVERY_FAMILY = (*FAMILIES, FALL_FAMILY)
MIN_POSITIONS = {"power": 4, "log-linear": 3, "two-stage": 5, "turn-down": 4, FALL_FAMILY: 4}
FALL_RATES = np.geomspace(0.5, 4.0, 10)
ALPHAS = np.geomspace(0.05, 3.0, 24)


@dataclass(frozen=True, eq=False)
class ArmSample:
    """An arm's fitted points: FLOPs (S, P); rewards y and weights w (1 + k, S, P) and R0 (1 + k,), row 0 the
    original data, rows 1.. the bootstrap replicates (weight 0: padding or a seed not drawn)."""

    flops: FloatArray
    y: FloatArray
    w: FloatArray
    r0: FloatArray


Features = Callable[[FloatArray, float], FloatArray]  # (u (m,), g) -> design (m, p)


def _power(u: FloatArray, g: float) -> FloatArray:
    return np.stack([np.ones_like(u), -np.exp(-g * u)], axis=-1)


def _capped(u: FloatArray, g: float) -> FloatArray:
    return np.stack([np.ones_like(u), np.minimum(u, g)], axis=-1)


def _two_stage(u: FloatArray, g: float) -> FloatArray:
    return np.stack([np.ones_like(u), u, np.maximum(u - g, 0.0)], axis=-1)


def _quadratic(u: FloatArray, g: float) -> FloatArray:
    return np.stack([np.ones_like(u), u, u * u], axis=-1)


def _steep_fall(u: FloatArray, g: float) -> FloatArray:
    return np.stack([np.ones_like(u), u, -np.exp(g * u)], axis=-1)


FEATURES: dict[str, Features] = {"power": _power, "log-linear": _capped, "two-stage": _two_stage,
                                 "turn-down": _quadratic, FALL_FAMILY: _steep_fall}
# per family, (index, sign) of a coefficient whose sign is fixed: >= 0 for a rising curve, <= 0 for one that bends
# over (a convex quadratic would extrapolate an early sigmoid's upswing; the two-stage family keeps late take-offs)
SIGNED = {"power": (1, 1.0), "log-linear": (1, 1.0), "turn-down": (2, -1.0), FALL_FAMILY: (2, 1.0)}


def _grid(family: str, positions: FloatArray) -> FloatArray:
    """The shape values g tried for a family, from the distinct evaluation positions u (ascending)."""
    if family == "power":
        return ALPHAS
    if family == FALL_FAMILY:
        return FALL_RATES
    if family == "log-linear":
        return np.append(positions[1:-1], np.inf)
    if family == "two-stage":
        return positions[2:-2] if positions.size >= 5 else positions[:0]
    return np.zeros(1)


CURVE_POSITIONS = 3
"""The fewest distinct positions after step 0 (:func:`distinct_positions`) an arm's curve is fitted from
(:func:`flopplan.race.curves.fit_curve`; the design gives every arm's first rung as many:
:mod:`flopplan.race.eval_points`)."""


def distinct_positions(u: FloatArray) -> FloatArray:
    """The distinct evaluation positions among u values (ln FLOPs): sorted, a new position wherever a value lies more
    than 0.1 beyond the first of the current one (seeds evaluate at FLOPs within a few % of each other); each
    position's mean u. Anchored at each position's first value, not chained from neighbour to neighbour: points each
    within 10 % of the next (an evaluation every step) are many positions, not one (a review: 45 points over 50x
    had read as a single position)."""
    s = np.sort(u)
    if s.size == 0:
        return s
    starts = [0]
    for i in range(1, s.size):
        if s[i] - s[starts[-1]] > 0.1:
            starts.append(i)
    return np.array([g.mean() for g in np.split(s, starts[1:])])


@dataclass(frozen=True, eq=False)
class FamilyFit:
    """k fits of one family: the shape value g and coefficients (k, p) per fit, in u = ln(F / f_ref); ``sse``."""

    family: str
    f_ref: float
    g: FloatArray
    coef: FloatArray
    sse: FloatArray

    def predict(self, flops: FloatArray) -> FloatArray:
        """R of every fit at ``flops`` (m,) > 0: (k, m), clipped to [0, 1]."""
        u = np.log(np.asarray(flops, dtype=float)) - np.log(self.f_ref)  # not ln(F / f_ref): 1e-300 / 1e24 is 0
        feats = FEATURES[self.family]
        values = np.unique(self.g)
        out = np.empty((self.g.size, u.size))
        for v in values:
            rows = self.g == v
            out[rows] = self.coef[rows] @ feats(u, float(v)).T
        return np.clip(out, 0.0, 1.0)


def weighted_lstsq(design: FloatArray, y: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted least squares by the normal equations for designs (G, n, p) and rows ``y``, ``w`` (k, n), a ridge of
    1e-10 of the Gram matrix's trace (+ 1e-12) keeping a rank-deficient design solvable: the coefficients
    (k, G, p) and X'Wy (k, G, p), from which the SSE is sum w y^2 - coef . X'Wy."""
    p = design.shape[-1]
    gram = np.einsum("gni,kn,gnj->kgij", design, w, design)
    rhs = np.einsum("gni,kn->kgi", design, w * y)
    gram += (1e-10 * np.trace(gram, axis1=2, axis2=3) + 1e-12)[..., None, None] * np.eye(p)
    return np.asarray(np.linalg.solve(gram, rhs[..., None])[..., 0], dtype=float), rhs


def fit_family(family: str, flops: FloatArray, y: FloatArray, w: FloatArray, f_ref: float) -> FamilyFit | None:
    """Fit ``family`` to k rows of points: ``flops`` (n,) > 0, ``y`` and ``w`` (k, n). None when the points hold
    too few distinct positions or no shape value gives a solvable, admissible fit."""
    if family not in FEATURES:
        raise UserError(f"unknown curve family {family!r}; choose from {', '.join(FEATURES)}")
    x = np.asarray(flops, dtype=float)
    yy, ww = np.atleast_2d(y), np.atleast_2d(w)
    u = np.log(x) - np.log(f_ref)
    positions = distinct_positions(u[ww.max(axis=0) > 0])
    if positions.size < MIN_POSITIONS[family]:
        return None
    grid = _grid(family, positions)
    if grid.size == 0:
        return None
    design = np.stack([FEATURES[family](u, float(g)) for g in grid])  # (G, n, p)
    coef, rhs = weighted_lstsq(design, yy, ww)  # (k, G, p)
    sse = (ww * yy * yy).sum(axis=1)[:, None] - np.einsum("kgi,kgi->kg", coef, rhs)
    bad = ~np.isfinite(sse)
    if family in SIGNED:
        index, sign = SIGNED[family]
        bad |= sign * coef[..., index] < 0
    sse = np.where(bad, np.inf, sse)
    best = sse.argmin(axis=1)
    rows = np.arange(yy.shape[0])
    if not np.isfinite(sse[rows, best]).all():
        return None
    return FamilyFit(family, float(f_ref), grid[best], coef[rows, best], np.maximum(sse[rows, best], 0.0))


def fit_families(sample: ArmSample, keep: NDArray[np.bool_] | None = None, falling: bool = False
                 ) -> dict[str, FamilyFit | None]:
    """Every family of :data:`FAMILIES`, and :data:`FALL_FAMILY` when the arm is ``falling``, fitted to every row of
    ``sample`` on the positions ``keep`` (P,) (default all), F_ref the largest kept FLOPs of the original data; a
    family not fitted (or not tried) maps to None."""
    sel = np.ones(sample.flops.shape[1], dtype=bool) if keep is None else keep
    f = sample.flops[:, sel]
    k = sample.y.shape[0]
    y, w = sample.y[:, :, sel].reshape(k, -1), sample.w[:, :, sel].reshape(k, -1)
    valid = sample.w[0][:, sel] > 0
    if not valid.any():
        return dict.fromkeys(EVERY_FAMILY)
    f_ref = float(f[valid].max())
    return {name: fit_family(name, f.ravel(), y, w, f_ref) if name in FAMILIES or falling else None
            for name in EVERY_FAMILY}
