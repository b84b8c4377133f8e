"""The checks of round 41's blind families (benchmarks/race_blind_check_round41.py), apart from the run so that each
file stays short: the truths against an independent quadrature and a Monte Carlo of the seeds through the harness's
own simulate, and how often the arm best at F_P is not the best at F.

    python benchmarks/race_blind_check_round41_checks.py --truth-check --reps 10 --seed 4141 [--mc 2000]
    python benchmarks/race_blind_check_round41_checks.py --leader-share --reps 100 --seed 4141

The independent quadrature shares no rule with the run's: the timing shift by adaptive quadrature (scipy's quad,
broken at the curve's own turning points), the gain by Gauss-Legendre on +-8 sd, the wobble numerically on the
pieces the clip cuts (no closed form), and for tiblowup the seed's collapse time by an outer adaptive quadrature
over its quantile (the gain and wobble there by a cubic spline of the same numerical integral). The Monte Carlo
draws whole seeds with race_blind_check.simulate as the run has it installed (every evaluation put at F, no jitter)
and averages their 0/1 scores: z = (mean - truth) / its standard error.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41 import GROUPS, HI, LO, MINE, Mismatch
from scipy.integrate import quad
from scipy.interpolate import CubicSpline

_LX, _LW = np.polynomial.legendre.leggauss(400)
_WX, _WW = np.polynomial.legendre.leggauss(64)


def _reps(fam, reps, seed):
    """(r0, arms) of each repetition, drawn as race_blind_check.repetition draws them."""
    for rep in range(reps):
        rng = np.random.default_rng([seed, list(rbc.FAMILIES).index(fam), rep])
        r0 = rng.uniform(0.1, 0.3)
        yield r0, rbc.FAMILIES[fam](rng, r0)


def _h(m, r0):
    """E over gain and wobble of clip(r0 + (m - r0) gain + wobble), both numerically (the wobble on the clip's
    pieces)."""
    sg, sw = rbc.GAIN_SD, rbc.WOBBLE_SD
    g = 1 + 8 * sg * _LX
    gw = _LW * 8 * sg * np.exp(-0.5 * ((g - 1) / sg) ** 2) / (sg * np.sqrt(2 * np.pi))
    a = r0 + (m - r0) * g  # (400,)
    edges = np.stack([np.full_like(a, -8 * sw), np.clip(LO - a, -8 * sw, 8 * sw), np.clip(HI - a, -8 * sw, 8 * sw),
                      np.full_like(a, 8 * sw)])
    total = np.zeros_like(a)
    for lo, hi in itertools.pairwise(edges):
        w = (lo + hi)[:, None] / 2 + (hi - lo)[:, None] / 2 * _WX[None, :]
        v = np.clip(a[:, None] + w, LO, HI) * np.exp(-0.5 * (w / sw) ** 2) / (sw * np.sqrt(2 * np.pi))
        total += (v * _WW).sum(axis=1) * (hi - lo) / 2
    return float(total @ gw / gw.sum())


_SPLINES: dict = {}


def _h_spline(r0):
    """_h on 2001 points of [0, 1], a cubic spline (the nested quadrature over the collapse time calls it often)."""
    if r0 not in _SPLINES:
        m = np.linspace(0.0, 1.0, 2001)
        _SPLINES[r0] = CubicSpline(m, [_h(v, r0) for v in m])
    return _SPLINES[r0]


def _zpoints(x, feats):
    s = rbc.SHIFT_SD
    return sorted(z for z in (np.log(f / x) / s for f in feats if np.isfinite(f) and f > 0) if -8.4 < z < 8.4)


def _indep(arm, x):
    """The truth at x = f / F_P, computed independently of the run's rules (module docstring)."""
    s, r0 = rbc.SHIFT_SD, arm.r0
    phi = lambda z: np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)  # noqa: E731
    opts = {"limit": 400, "epsabs": 1e-12, "epsrel": 1e-10}
    if isinstance(arm, Mismatch):
        h = _h_spline(r0)

        def given_t(q):
            t = arm.lam * (-np.log1p(-q)) ** (1 / arm.kw)
            f = lambda z: phi(z) * float(h(arm.seed_mean(x * np.exp(s * z), t)))  # noqa: E731
            pts = _zpoints(x, [t, t + arm.delta, t + 5 * arm.delta])
            return quad(f, -8.5, 8.5, points=pts or None, **opts)[0]
        return quad(given_t, 0.0, 1.0, limit=200, epsabs=1e-10, epsrel=1e-9)[0]
    f = lambda z: phi(z) * _h(float(arm.mean(np.array(x * np.exp(s * z)))), r0)  # noqa: E731
    return quad(f, -8.5, 8.5, points=_zpoints(x, arm.features()) or None, **opts)[0]


def _mc(arm, r0, n, rng):
    """Mean and standard error of the 0/1 scores of n draws of 3 seeds at F through the installed simulate."""
    saved = rbc.EVALS0, rbc.EVALS1, rbc.JITTER
    rbc.EVALS0, rbc.EVALS1, rbc.JITTER = np.full(5, rbc.F), np.full(2, rbc.F), 0.0
    try:
        vals = np.empty(n)
        for i in range(n):
            d = rbc.DIFF_SD * rng.standard_normal(rbc.N_PROMPTS)
            f, scores = rbc.simulate(rng, "arm", arm, d, r0)
            if not np.all(f[:, 1:] == rbc.F):
                raise RuntimeError("the installed simulate did not evaluate at F")
            vals[i] = scores[:, 1:].mean()
    finally:
        rbc.EVALS0, rbc.EVALS1, rbc.JITTER = saved
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n))


def check_truths(families, reps, seed, n_mc, indep, salt, mean_of=None):
    """The truth the harness states at F for every arm of ``families`` against ``indep(arm, F / F_P)`` (a round's
    independent quadrature) and against a Monte Carlo of seeds through the harness's simulate (``n_mc`` draws,
    random stream ``[seed, salt]``); with ``mean_of(arm, x)``, each arm's mean against that recomputation from its
    definition too. A line per family, then one for all (rounds 41-43 each check their families through it)."""
    rng = np.random.default_rng([seed, salt])
    width = max(len(f) for f in (*families, "all")) + 1
    zs_all, dq_all, dm_all = [], [], []
    for fam in families:
        zs, dq, dm = [], [], []
        for r0, arms in _reps(fam, reps, seed):
            for arm in arms:
                t = rbc.truth_at(arm, rbc.F)
                dq.append(abs(t - indep(arm, rbc.F / rbc.F_P)))
                if mean_of is not None:
                    dm.append(max(abs(float(arm.mean(np.array(y))) - mean_of(arm, y)) for y in (0.3, 1.0, 2.0, 4.0)))
                m, se = _mc(arm, r0, n_mc, rng)
                zs.append((m - t) / se)
        zs, dq = np.array(zs), np.array(dq)
        zs_all += list(zs)
        dq_all += list(dq)
        dm_all += dm
        means = f" (means {max(dm):.1e})" if dm else ""
        print(f"{fam:<{width}} arms {zs.size:>3}  Monte Carlo ({n_mc} draws of 3 seeds): max|z| "
              f"{np.abs(zs).max():.2f}, mean z^2 {np.mean(zs ** 2):.2f}; independent quadrature: max|diff| "
              f"{dq.max():.1e}{means}", flush=True)
    zs_all, dq_all = np.array(zs_all), np.array(dq_all)
    means = f" (means {max(dm_all):.1e})" if dm_all else ""
    print(f"{'all':<{width}} arms {zs_all.size:>3}  max|z| {np.abs(zs_all).max():.2f}, mean z^2 "
          f"{np.mean(zs_all ** 2):.2f}, max|diff| {dq_all.max():.1e}{means}")


def truth_check(families, reps, seed, n_mc):
    check_truths(families, reps, seed, n_mc, _indep, 41)


def leaders(fam, reps, seed):
    """Over ``reps`` repetitions of ``fam``: how often the arm best at F_P is not the best at F, how often each arm is
    the best at F, and per repetition (r0, the arms' truths at F_P, at F)."""
    draws = [(r0, [rbc.truth_at(a, rbc.F_P) for a in arms], [rbc.truth_at(a, rbc.F) for a in arms])
             for r0, arms in _reps(fam, reps, seed)]
    moved = sum(int(np.argmax(fp) != np.argmax(f)) for _, fp, f in draws)
    best = np.bincount([int(np.argmax(f)) for _, _, f in draws], minlength=len(GROUPS))
    return moved, best, draws


def leader_share(families, reps, seed):
    for fam in families:
        moved, best, draws = leaders(fam, reps, seed)
        fell = sum(t < r0 - 0.05 for r0, _, at_f in draws for t in at_f)
        print(f"{fam:<9} leader at F_P not best at F: {moved / reps:.3f} of {reps}; best at F g4/g8/g16/g32: "
              f"{'/'.join(map(str, best))}; arms more than 0.05 below r0 at F: {fell / (4 * reps):.3f}")


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                     "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4141, mc=2000)

if __name__ == "__main__":
    main()
