"""ScaleRL reward-vs-compute curve over FLOPs, fitted the ScaleRL way; power-law and monotone-envelope checks.

Curve (ScaleRL: Khatri et al., "The Art of Scaling Reinforcement Learning Compute for LLMs", arXiv 2510.13786,
eq. 1), with the compute C taken as FLOPs F:

    R(F) = R0 + (A - R0) / (1 + (F_mid / F)^B)  =  R0 + (A - R0) * expit(B * (ln F - ln F_mid))

A is the asymptotic reward, B > 0 the efficiency exponent, F_mid the FLOPs at half the gain, R0 the measured
step-0 reward: not fitted, and R(0) = R0. Internally x = ln F and m = ln F_mid.

The fit (ScaleRL appendix A.5): A on a grid (they use 0.450..0.800, step 0.005), C_mid on a grid (100 values), B by
least squares (scipy ``curve_fit``) for each (A, C_mid) pair; the pair with the smallest sum of squared residuals
(SSE) wins, because the joint three-parameter fit is ill-posed. Here:

* A grid: the multiples of ``a_step`` (0.005) above R0 up to ``a_max`` (1.0): all a pass rate allows; the cost does
  not grow with it (below), and cutting it to "above the largest observation" would, under noise, push A up.
* F_mid grid: 100 values, log-spaced from the smallest positive observed F to 100 x the largest.
* B: minimised for every (A, F_mid) pair at the cost of a matrix product. For fixed (F_mid, B) put
  s_i = expit(B (x_i - m)) and g = A - R0. The model is linear in g, and with weights w_i
      SSE(g) = Syy - 2 g Syz + g^2 Szz,   Syy = sum w (y-R0)^2,  Syz = sum w (y-R0) s,  Szz = sum w s^2,
  a parabola, whose minimum over the A grid is the grid value nearest its vertex g* = Syz / Szz. So (1) s is
  tabulated once on the F_mid grid x a log-spaced B grid (120 values in [0.05, 20], ratio 1.05); (2) Syz and Szz
  for every (F_mid, B) and every bootstrap replicate are one matrix product (replicates only reweight and rescore
  the same points); (3) for every (F_mid, B) the best A on its grid is taken and the smallest SSE wins; (4) B is
  refined continuously by safeguarded Gauss-Newton steps in the original (not log) space with A and F_mid held,
  then A is re-chosen on its grid for the refined B (two rounds; no step raises the SSE).
  With ``refine_f_mid=False`` that is ScaleRL's procedure: A and F_mid on their grids, B continuous, minimum SSE;
  it matches a literal per-pair scipy ``curve_fit`` (tests/test_race_curves.py) except where the SSE in B has a
  basin narrower than the B grid spacing.
* ``refine_f_mid=True`` (the default) departs from ScaleRL in one respect, F_mid continuous: a grid of 100 values
  over 3.5 decades has 8 % steps, which on noise-free curves moved A by up to 0.03 (six A steps) along the
  A-F_mid-B ridge. Steps (4) then also move ln F_mid (within the grid's range), and a second start polishes
  (A, B, F_mid) jointly, puts A back on its grid and repeats (4); the lower SSE of the two starts wins. A stays on
  its grid; the F_mid grid still seeds the search and defines the edge flags (nearest grid value).

Edges: A or F_mid at the upper edge of its grid means the curve has not bent within the data: A is not identified
and the curve must not be extrapolated. :mod:`flopplan.race.bootstrap` extends this to the bootstrap distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtr

from flopplan.errors import UserError
from flopplan.race.families import CURVE_POSITIONS, distinct_positions

FloatArray = NDArray[np.float64]

A_STEP = 0.005
A_MAX = 1.0
N_F_MID = 100
F_MID_SPAN = 100.0
B_RANGE = (0.05, 20.0)
N_B = 120
_BLOCK = 128  # replicates per matrix product (bounds memory at _BLOCK x N_F_MID x N_B doubles)
_CHUNK = 16  # replicates per elementwise pass (temporaries that stay in cache)
_GN_ITERS = 6
_ROUNDS = 2
FIT_METHOD = ("ScaleRL grid fit (arXiv 2510.13786 A.5): A on a 0.005 grid, F_mid grid-seeded then continuous, B least "
              "squares (B grid then Gauss-Newton), minimum SSE; R0 measured at step 0")
FIT_METHOD_GRID = ("ScaleRL grid fit (arXiv 2510.13786 A.5): A and F_mid on grids, B least squares per pair (B grid "
                   "then Gauss-Newton), minimum SSE; R0 measured at step 0")


def _log_flops(flops: ArrayLike) -> FloatArray:
    f = np.asarray(flops, dtype=float)
    if np.any(~np.isfinite(f)) or np.any(f < 0):
        raise UserError("FLOPs must be finite and >= 0")
    with np.errstate(divide="ignore"):
        return np.log(f)


def scalerl_curve(flops: ArrayLike, a: ArrayLike, b: ArrayLike, f_mid: ArrayLike, r0: ArrayLike) -> FloatArray:
    """R(F) = R0 + (A - R0) / (1 + (F_mid / F)^B), computed as R0 + (A - R0) expit(B (ln F - ln F_mid)).

    R(0) = R0. Broadcasts like numpy: parameters of shape (k, 1) against FLOPs of shape (n,) give (k, n).
    """
    x = _log_flops(flops)
    a_, b_, r0_ = (np.asarray(v, dtype=float) for v in (a, b, r0))
    return np.asarray(r0_ + (a_ - r0_) * expit(b_ * (x - np.log(np.asarray(f_mid, dtype=float)))))


@dataclass(frozen=True, eq=False)
class CurveGrids:
    """The fit's grids: A values (evenly spaced), ln F_mid values and the B values of the first pass (each sorted
    ascending)."""

    a: FloatArray
    log_f_mid: FloatArray
    b: FloatArray

    def __post_init__(self) -> None:
        for name in ("a", "log_f_mid", "b"):
            values = np.asarray(getattr(self, name), dtype=float)
            if values.ndim != 1 or values.size == 0 or np.any(np.diff(values) <= 0) or not np.all(np.isfinite(values)):
                raise UserError(f"grid {name!r} must be a non-empty, strictly increasing 1-D array")
            object.__setattr__(self, name, values)
        if self.b[0] <= 0:
            raise UserError("the B grid must be > 0")
        if self.a.size < 2 or not np.allclose(np.diff(self.a), self.a[1] - self.a[0], rtol=1e-9, atol=0):
            raise UserError("the A grid must be evenly spaced, with at least 2 values")


def default_grids(flops: ArrayLike, r0: float, *, a_step: float = A_STEP, a_max: float = A_MAX,
                  n_f_mid: int = N_F_MID, f_mid_span: float = F_MID_SPAN, b_range: tuple[float, float] = B_RANGE,
                  n_b: int = N_B) -> CurveGrids:
    """A: multiples of ``a_step`` in (R0, a_max]; ln F_mid: ``n_f_mid`` values evenly spaced from ln min F to
    ln(``f_mid_span`` x max F) over the positive FLOPs; B: ``n_b`` values log-spaced over ``b_range``."""
    f = np.asarray(flops, dtype=float)
    f = f[f > 0]
    if f.size == 0:
        raise UserError("no evaluation point with FLOPs > 0")
    first, last = int(np.floor(r0 / a_step + 1e-9)) + 1, int(np.floor(a_max / a_step + 1e-9))
    if last <= first:  # a curve needs two values of A above R0 (the grid's step)
        raise UserError(f"R0 = {r0:.4g} leaves fewer than 2 A grid values up to a_max = {a_max}: no room for a gain")
    log_f_mid = np.linspace(np.log(f.min()), np.log(f.max() * f_mid_span), n_f_mid)
    return CurveGrids((np.arange(first, last + 1) * a_step).astype(np.float64), log_f_mid, np.geomspace(*b_range, n_b))


@dataclass(frozen=True)
class CurveFit:
    """One fitted curve R(F) = R0 + (A - R0) / (1 + (F_mid / F)^B) and where its parameters sit on the grids.

    ``n_points``: the sum of the weights of the fitted points (their number when unweighted; step-0 points define
    R0 and are not counted). ``*_at_grid_edge``: at either end of the grid (for A: of the values above R0);
    ``*_at_upper_edge``: at the top end, the signature of a curve that has not bent within the data.
    ``f_mid_grid``: (lowest, highest) F_mid of the grid.
    """

    a: float
    b: float
    f_mid: float
    r0: float
    sse: float
    n_points: float
    a_at_grid_edge: bool
    f_mid_at_grid_edge: bool
    a_at_upper_edge: bool
    f_mid_at_upper_edge: bool
    b_at_grid_edge: bool
    a_step: float
    f_mid_grid: tuple[float, ...]
    f_max: float
    dropped_first: int = 0
    method: str = FIT_METHOD

    @property
    def identified(self) -> bool:
        """False when A or F_mid sits at the top of its grid, or F_mid lies beyond the largest fitted FLOPs
        ``f_max`` (less than half the gain observed; an unbent run fits A - R0 ~ F_mid^B anywhere on that ridge):
        the curve has not bent within the data, do not extrapolate it."""
        return not (self.a_at_upper_edge or self.f_mid_at_upper_edge or self.f_mid > self.f_max)

    @overload
    def predict(self, flops: float) -> float: ...
    @overload
    def predict(self, flops: ArrayLike) -> float | FloatArray: ...
    def predict(self, flops: ArrayLike) -> float | FloatArray:
        """The fitted R at ``flops`` (a float for a scalar, an array for an array); R(0) = R0."""
        out = scalerl_curve(flops, self.a, self.b, self.f_mid, self.r0)
        return float(out) if out.ndim == 0 else out


@dataclass(frozen=True, eq=False)
class CurveFitBatch:
    """k fits sharing grids and FLOPs (bootstrap replicates): arrays of shape (k,)."""

    a: FloatArray
    b: FloatArray
    log_f_mid: FloatArray
    r0: FloatArray
    sse: FloatArray
    n_points: FloatArray
    a_index: NDArray[np.intp]
    a_lowest_valid: NDArray[np.intp]
    f_mid_index: NDArray[np.intp]
    log_f_max: FloatArray
    grids: CurveGrids
    refined_f_mid: bool = True

    @property
    def a_at_upper_edge(self) -> NDArray[np.bool_]:
        return np.asarray(self.a_index == self.grids.a.size - 1)

    @property
    def f_mid_at_upper_edge(self) -> NDArray[np.bool_]:
        return np.asarray(self.f_mid_index == self.grids.log_f_mid.size - 1)

    def predict(self, flops: ArrayLike) -> FloatArray:
        """R of every fit at ``flops`` of shape (n,): shape (k, n)."""
        f = np.atleast_1d(np.asarray(flops, dtype=float))
        return scalerl_curve(f[None, :], self.a[:, None], self.b[:, None], np.exp(self.log_f_mid)[:, None],
                             self.r0[:, None])

    def fit(self, i: int, dropped_first: int = 0) -> CurveFit:
        """Fit ``i`` as a :class:`CurveFit`."""
        g = self.grids
        ai, mi = int(self.a_index[i]), int(self.f_mid_index[i])
        return CurveFit(
            a=float(self.a[i]), b=float(self.b[i]), f_mid=float(np.exp(self.log_f_mid[i])), r0=float(self.r0[i]),
            sse=float(self.sse[i]), n_points=float(self.n_points[i]),
            a_at_grid_edge=ai in (int(self.a_lowest_valid[i]), g.a.size - 1),
            f_mid_at_grid_edge=mi in (0, g.log_f_mid.size - 1), a_at_upper_edge=ai == g.a.size - 1,
            f_mid_at_upper_edge=mi == g.log_f_mid.size - 1,
            b_at_grid_edge=bool(np.isclose(self.b[i], g.b[0]) or np.isclose(self.b[i], g.b[-1])),
            a_step=float(g.a[1] - g.a[0]),
            f_mid_grid=(float(np.exp(g.log_f_mid[0])), float(np.exp(g.log_f_mid[-1]))),
            f_max=float(np.exp(self.log_f_max[i])), dropped_first=dropped_first,
            method=FIT_METHOD if self.refined_f_mid else FIT_METHOD_GRID)


def _nearest_index(grid: FloatArray, target: FloatArray, lowest: NDArray[np.intp]) -> NDArray[np.intp]:
    """Index of the grid value nearest ``target`` among indices >= ``lowest`` (broadcast against ``target``)."""
    spacing = np.diff(grid)
    if spacing.size and np.allclose(spacing, spacing[0], rtol=1e-9, atol=0):  # evenly spaced: arithmetic
        nearest = np.rint((target - grid[0]) / spacing[0])
        return np.clip(nearest, lowest, grid.size - 1).astype(np.intp)
    hi = np.searchsorted(grid, target)
    below = np.clip(hi - 1, lowest, grid.size - 1)
    above = np.clip(hi, lowest, grid.size - 1)
    return np.where(np.abs(grid[above] - target) < np.abs(grid[below] - target), above, below)


def _sse_at(x: FloatArray, y: FloatArray, w: FloatArray, r0: FloatArray, g: FloatArray, m: FloatArray,
            b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    s = expit(b[:, None] * (x[None, :] - m[:, None]))
    r = y - r0[:, None] - g[:, None] * s
    return (w * r * r).sum(axis=1), s, r


_Params = dict[str, FloatArray]


def _gauss_newton(x: FloatArray, y: FloatArray, w: FloatArray, r0: FloatArray, par: _Params, free: tuple[str, ...],
                  lo: _Params, hi: _Params) -> _Params:
    """Minimise the SSE over the ``free`` ones of g = A - R0, b = B, m = ln F_mid, the others held, within bounds.

    Gauss-Newton in the original space with the model's derivatives dR/dg = s, dR/dB = g s (1 - s) (x - m),
    dR/dm = -g s (1 - s) B: the step solves sum w J J^T d = sum w J r (a 1e-10 x trace ridge keeps it solvable);
    of the step x {1, 1/2, 1/4, 1/8} the best is kept, and only if it lowers the SSE: no step raises it.
    """
    par = dict(par)
    cur, s, r = _sse_at(x, y, w, r0, par["g"], par["m"], par["b"])
    rows = np.arange(cur.size)
    for _ in range(_GN_ITERS):
        core = par["g"][:, None] * s * (1 - s)
        jac = {"g": s, "b": core * (x[None, :] - par["m"][:, None]), "m": -core * par["b"][:, None]}
        jj = np.stack([jac[name] for name in free], axis=-1)
        h = np.einsum("kni,knj,kn->kij", jj, jj, w)
        ridge = 1e-10 * np.trace(h, axis1=1, axis2=2) + 1e-300
        h += ridge[:, None, None] * np.eye(len(free))
        step = np.linalg.solve(h, np.einsum("kni,kn->ki", jj, w * r)[..., None])[..., 0]
        cands = []
        for f in (1.0, 0.5, 0.25, 0.125):
            cand = dict(par)
            for i, name in enumerate(free):
                cand[name] = np.clip(par[name] + f * step[:, i], lo[name], hi[name])
            cands.append((cand, _sse_at(x, y, w, r0, cand["g"], cand["m"], cand["b"])[0]))
        vals = np.stack([c[1] for c in cands])
        pick = vals.argmin(axis=0)
        better = vals[pick, rows] < cur * (1 - 1e-12)
        if not better.any():  # converged (or stuck at a bound) everywhere
            break
        for name in free:
            par[name] = np.where(better, np.stack([c[0][name] for c in cands])[pick, rows], par[name])
        cur, s, r = _sse_at(x, y, w, r0, par["g"], par["m"], par["b"])
    return par


def fit_curve_batch(log_f: ArrayLike, y: ArrayLike, w: ArrayLike, r0: ArrayLike, grids: CurveGrids, *,
                    refine_f_mid: bool = True) -> CurveFitBatch:
    """Fit k curves on the same points: ``log_f`` (n,) = ln F (> 0 FLOPs only), ``y`` and ``w`` (k, n) rewards and
    weights (0 drops a point), ``r0`` (k,), by the module's method. ``f_mid_index``: the grid value nearest F_mid."""
    x = np.asarray(log_f, dtype=float)
    yy, ww = np.atleast_2d(np.asarray(y, dtype=float)), np.atleast_2d(np.asarray(w, dtype=float))
    r = np.atleast_1d(np.asarray(r0, dtype=float))
    k, n = yy.shape
    if x.shape != (n,) or ww.shape != (k, n) or r.shape != (k,) or not np.all(np.isfinite(x)):
        raise UserError("fit_curve_batch: shapes must be log_f (n,), y and w (k, n), r0 (k,), log_f finite")
    lowest = np.searchsorted(grids.a, r, side="right")
    if np.all(lowest >= grids.a.size):
        raise UserError("R0 is at or above the top of the A grid: no room for a gain")
    lowest = np.minimum(lowest, grids.a.size - 1)  # a replicate's R0 at the top (refused only for every row): no gain
    nm, nb = grids.log_f_mid.size, grids.b.size
    s = expit(grids.b[None, :, None] * (x[None, None, :] - grids.log_f_mid[:, None, None])).reshape(nm * nb, n).T
    s2 = s * s
    a_idx = np.empty(k, dtype=np.intp)
    m_idx = np.empty(k, dtype=np.intp)
    b = np.empty(k)
    a0, step = float(grids.a[0]), float(grids.a[1] - grids.a[0])
    shared_w = bool(np.all(ww == ww[:1]))  # the same weights in every replicate: Szz is computed once
    szz_shared = np.maximum(ww[:1] @ s2, 1e-300)
    for start in range(0, k, _BLOCK):  # few large matrix products, then the elementwise work in cache-sized chunks
        blk = slice(start, start + _BLOCK)
        syz_blk = (ww[blk] * (yy[blk] - r[blk, None])) @ s
        szz_blk = szz_shared if shared_w else np.maximum(ww[blk] @ s2, 1e-300)
        for sub in range(0, syz_blk.shape[0], _CHUNK):
            sl, loc = slice(start + sub, start + sub + _CHUNK), slice(sub, sub + _CHUNK)
            rc, syz = r[sl, None], syz_blk[loc]
            szz = szz_shared if shared_w else szz_blk[loc]
            t = syz / szz  # the vertex g*; Szz is 0 (floored) only where every s = 0, and then Syz = 0
            t += rc
            t -= a0  # nearest A grid index by arithmetic, in place (this loop is the fit's hot spot)
            t /= step
            np.rint(t, out=t)
            np.clip(t, lowest[sl, None], grids.a.size - 1, out=t)
            g = t * step
            g += a0 - rc
            crit = g * szz
            crit -= syz
            crit -= syz
            crit *= g  # = g^2 Szz - 2 g Syz, the SSE less Syy (a constant per replicate)
            best = crit.argmin(axis=1)
            a_idx[sl] = t[np.arange(best.size), best].astype(np.intp)
            m_idx[sl], b[sl] = best // nb, grids.b[best % nb]
    free = ("b", "m") if refine_f_mid else ("b",)
    a_lo, a_hi = grids.a[lowest] - r, np.full(k, grids.a[-1]) - r
    lo = {"g": a_lo, "b": np.full(k, grids.b[0]), "m": np.full(k, grids.log_f_mid[0])}
    hi = {"g": a_hi, "b": np.full(k, grids.b[-1]), "m": np.full(k, grids.log_f_mid[-1])}

    def held_a(par: _Params, a_idx: NDArray[np.intp]) -> tuple[_Params, NDArray[np.intp], FloatArray]:
        for _ in range(_ROUNDS):
            par = _gauss_newton(x, yy, ww, r, par, free, lo, hi)
            sv = expit(par["b"][:, None] * (x[None, :] - par["m"][:, None]))
            num, den = (ww * (yy - r[:, None]) * sv).sum(axis=1), (ww * sv * sv).sum(axis=1)
            a_idx = _nearest_index(grids.a, np.divide(num, den, out=np.zeros_like(num), where=den > 0) + r, lowest)
            par["g"] = grids.a[a_idx] - r
        par = _gauss_newton(x, yy, ww, r, par, free, lo, hi)
        return par, a_idx, _sse_at(x, yy, ww, r, par["g"], par["m"], par["b"])[0]

    grid_par = {"g": grids.a[a_idx] - r, "b": b, "m": grids.log_f_mid[m_idx]}
    par, a_idx, sse = held_a(grid_par, a_idx)
    if refine_f_mid:  # also polish A continuously along the A-F_mid-B ridge, then put A back on its grid
        free_par = _gauss_newton(x, yy, ww, r, grid_par, ("g", "b", "m"), lo, hi)
        free_par = _gauss_newton(x, yy, ww, r, free_par, ("g", "b", "m"), lo, hi)
        snapped = _nearest_index(grids.a, free_par["g"] + r, lowest)
        free_par["g"] = grids.a[snapped] - r
        par2, a_idx2, sse2 = held_a(free_par, snapped)
        take = sse2 < sse
        par = {name: np.where(take, par2[name], par[name]) for name in par}
        a_idx, sse = np.where(take, a_idx2, a_idx), np.where(take, sse2, sse)
    b, m = par["b"], par["m"]
    m_idx = _nearest_index(grids.log_f_mid, m, np.zeros_like(m_idx))
    return CurveFitBatch(a=grids.a[a_idx], b=b, log_f_mid=m, r0=r, sse=sse, n_points=ww.sum(axis=1), a_index=a_idx,
                         a_lowest_valid=lowest, f_mid_index=m_idx, log_f_max=np.where(ww > 0, x, -np.inf).max(axis=1),
                         grids=grids, refined_f_mid=refine_f_mid)


def _first_k_mask(flops: FloatArray, runs: NDArray[np.object_] | None, k: int) -> NDArray[np.bool_]:
    """True for the k smallest-FLOP positive points of each run (the "first evaluation points")."""
    drop = np.zeros(flops.size, dtype=bool)
    labels = np.zeros(flops.size, dtype=int) if runs is None else runs
    for label in dict.fromkeys(labels.tolist()):
        idx = np.flatnonzero((labels == label) & (flops > 0))
        drop[idx[np.argsort(flops[idx], kind="stable")[:k]]] = True
    return drop


def _prepare(flops: ArrayLike, rewards: ArrayLike, r0: float | None, weights: ArrayLike | None
             ) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    f = np.asarray(flops, dtype=float).ravel()
    y = np.asarray(rewards, dtype=float).ravel()
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float).ravel()
    if not (f.size == y.size == w.size) or np.any(~np.isfinite(y)) or np.any(w < 0):
        raise UserError("flops, rewards and weights must have one finite value per point (weights >= 0)")
    _log_flops(f)
    if r0 is None:
        at0 = (f == 0) & (w > 0)
        if not at0.any():
            raise UserError("no step-0 evaluation (FLOPs = 0): pass r0")
        r0 = float(np.average(y[at0], weights=w[at0]))
    return f, y, w, float(r0)


def fit_curve(flops: ArrayLike, rewards: ArrayLike, *, r0: float | None = None, weights: ArrayLike | None = None,
              runs: ArrayLike | None = None, drop_first: int = 0, grids: CurveGrids | None = None,
              a_step: float = A_STEP, a_max: float = A_MAX, refine_f_mid: bool = True) -> CurveFit:
    """Fit R(F) = R0 + (A - R0) / (1 + (F_mid / F)^B) the ScaleRL way (module docstring).

    ``flops``/``rewards``: one value per evaluation (pooled seeds allowed). Points at F = 0 are the step-0
    evaluations: R0 is their (weighted) mean unless ``r0`` is given; they are not fitted. ``drop_first`` drops the
    first k positive-FLOP points of each run (``runs`` labels the points' runs; default: one run), as ScaleRL drops
    its early near-linear window. ``grids`` default to :func:`default_grids` on the kept points;
    ``refine_f_mid=False`` keeps F_mid on its grid (ScaleRL's procedure exactly).
    """
    f, y, w, r0_ = _prepare(flops, rewards, r0, weights)
    keep = (f > 0) & (w > 0)
    if drop_first:
        keep &= ~_first_k_mask(f, None if runs is None else np.asarray(runs, dtype=object).ravel(), drop_first)
    if distinct_positions(np.log(f[keep])).size < CURVE_POSITIONS:  # as the model average's families count them
        raise UserError(f"the curve needs evaluation points at >= {CURVE_POSITIONS} distinct FLOPs > 0, > 10 % apart")
    g = grids or default_grids(f[keep], r0_, a_step=a_step, a_max=a_max)
    batch = fit_curve_batch(np.log(f[keep]), y[keep][None, :], w[keep][None, :], [r0_], g, refine_f_mid=refine_f_mid)
    return batch.fit(0, dropped_first=drop_first)


def fit_with_and_without_first(flops: ArrayLike, rewards: ArrayLike, k: int = 1, **kwargs: object
                               ) -> tuple[CurveFit, CurveFit]:
    """(fit on all points, fit without the first ``k`` points of each run): RACE reports both."""
    return fit_curve(flops, rewards, **kwargs), fit_curve(flops, rewards, drop_first=k, **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class PowerLawFit:
    """R(F) = R0 + c F^alpha, fitted as ln(R - R0) = ln c + alpha ln F by (weighted) least squares over the points
    with F > 0 and R > R0 (``n_excluded`` others). ``sse``: in the original space over the used points.
    ``f_at_ceiling``: the F where the power law reaches ``a_max`` (None: never); ScaleRL's objection to the power
    law is that, fitted early, it runs to the ceiling where the real run saturates."""

    c: float
    alpha: float
    r0: float
    sse: float
    n_used: int
    n_excluded: int
    f_at_ceiling: float | None

    def predict(self, flops: ArrayLike) -> float | FloatArray:
        out = self.r0 + np.exp(np.log(self.c) + self.alpha * np.log(np.maximum(flops, 1e-300)))  # F^alpha may overflow
        return float(out) if np.ndim(out) == 0 else np.asarray(out)


def fit_power_law(flops: ArrayLike, rewards: ArrayLike, *, r0: float | None = None, weights: ArrayLike | None = None,
                  a_max: float = A_MAX) -> PowerLawFit:
    """The power-law check: ln(R - R0) = ln c + alpha ln F on the points with F > 0 and R - R0 > 0."""
    f, y, w, r0_ = _prepare(flops, rewards, r0, weights)
    pos = (f > 0) & (w > 0)
    use = pos & (y > r0_)
    if np.unique(f[use]).size < 2:
        raise UserError("the power law needs points above R0 at >= 2 distinct FLOPs")
    alpha, ln_c = np.polyfit(np.log(f[use]), np.log(y[use] - r0_), 1, w=np.sqrt(w[use]))
    c = float(np.exp(ln_c)) if ln_c < 709.0 else np.inf  # beyond float range: the degenerate fit refused below
    if not (np.isfinite(alpha) and 0 < c < np.inf):  # e.g. its points above R0 sit at near-identical FLOPs
        raise UserError("the power law's fit is degenerate (its points above R0 lie at near-identical FLOPs)")
    sse = float(np.sum(w[use] * (y[use] - r0_ - np.exp(ln_c + alpha * np.log(f[use]))) ** 2))
    with np.errstate(over="ignore"):  # a tiny alpha puts the ceiling beyond float range: never, said as None
        ceiling = float(np.exp((np.log(a_max - r0_) - ln_c) / alpha)) if alpha > 0 else float("inf")
    return PowerLawFit(c=c, alpha=float(alpha), r0=r0_, sse=sse, n_used=int(use.sum()),
                       n_excluded=int(pos.sum() - use.sum()), f_at_ceiling=ceiling if np.isfinite(ceiling) else None)


@dataclass(frozen=True)
class EnvelopeCheck:
    """Running maximum of the observed R in FLOP order, envelope_i = max_{j <= i} R_j, and the largest drop below
    it, max_i (envelope_i - R_i), with the FLOPs where it happens and where the envelope was set. A large drop is
    a run that fell back (instability): the monotone curve fit then describes a run that did not happen. The
    points are in FLOP order, as tuples (race.json records the check)."""

    flops: tuple[float, ...]
    rewards: tuple[float, ...]
    envelope: tuple[float, ...]
    max_drop: float
    flops_at_max_drop: float
    peak_flops: float


def monotone_envelope(flops: ArrayLike, rewards: ArrayLike) -> EnvelopeCheck:
    """The monotone-envelope check on one run (or on a seed-mean curve); step-0 points included."""
    f = np.asarray(flops, dtype=float).ravel()
    y = np.asarray(rewards, dtype=float).ravel()
    if f.size != y.size or f.size == 0:
        raise UserError("flops and rewards must be non-empty and of equal length")
    order = np.argsort(f, kind="stable")
    f, y = f[order], y[order]
    env = np.maximum.accumulate(y)
    drop = env - y
    i = int(drop.argmax())
    peak = int(np.flatnonzero(y[: i + 1] == env[i])[0])
    return EnvelopeCheck(flops=tuple(map(float, f)), rewards=tuple(map(float, y)), envelope=tuple(map(float, env)),
                         max_drop=float(drop[i]), flops_at_max_drop=float(f[i]), peak_flops=float(f[peak]))


def synthetic_scores(rng: np.random.Generator, *, a: float, b: float, f_mid: float, r0: float, f_pilot: float,
                     n_points: int = 5, n_seeds: int = 3, n_prompts: int = 200, seed_sd: float = 0.02,
                     log_f_mid_sd: float = 0.0, prompt_rho: float = 0.5, prompt_latent: ArrayLike | None = None,
                     flops_jitter: float = 0.01) -> tuple[FloatArray, FloatArray]:
    """Synthetic pilots from a known curve, for coverage checks: flops (S, T) and 0/1 scores (S, T, Q), T = 1 + points.

    Seed s follows R_s(F) = R0 + (A_s - R0) / (1 + (F_mid_s / F)^B), A_s = A + seed_sd N(0, 1) (clipped to
    [R0 + 0.01, 1]), ln F_mid_s = ln F_mid + log_f_mid_sd N(0, 1), evaluated at step 0 and at
    F_pilot 2^-(n_points-1), ..., F_pilot, each x (1 + flops_jitter U(-1, 1)). Prompt q at seed s, point t is solved
    when Phi(sqrt(rho) eta_q + sqrt(1 - rho) eps_stq) < R_s(F_t): eta_q ~ N(0, 1) the prompt's difficulty, shared
    by every seed and point (and by arms given the same ``prompt_latent``), eps independent (a Gaussian copula). So
    each score is Bernoulli(R_s(F_t)), the prompt-population mean is R_s(F_t), and with log_f_mid_sd = 0 (and no
    clip binding) the truth, the mean over seeds and prompts, is R(F) with the given A, B, F_mid, R0.
    """
    eta = rng.standard_normal(n_prompts) if prompt_latent is None else np.asarray(prompt_latent, dtype=float)
    grid = f_pilot * 2.0 ** np.arange(-(n_points - 1), 1)
    a_s = np.clip(a + seed_sd * rng.standard_normal((n_seeds, 1)), r0 + 0.01, 1.0)
    fm_s = f_mid * np.exp(log_f_mid_sd * rng.standard_normal((n_seeds, 1)))
    jitter = 1 + flops_jitter * rng.uniform(-1, 1, (n_seeds, n_points))
    flops = np.concatenate([np.zeros((n_seeds, 1)), grid * jitter], axis=1)
    p = scalerl_curve(flops, a_s, b, fm_s, r0)
    z = np.sqrt(prompt_rho) * eta + np.sqrt(1 - prompt_rho) * rng.standard_normal((n_seeds, n_points + 1, eta.size))
    return flops, (ndtr(z) < p[:, :, None]).astype(float)
