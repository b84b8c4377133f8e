"""The checks of round 44's blind families (benchmarks/race_blind_check_round44.py), apart from the run so that each
file stays short: the truths against an independent quadrature and a Monte Carlo of the seeds through the harness's
own simulate, and how often the arm best at F_P is not the best at F (with which arms lead at F_P and at F, and how
far the truth at F is from the pilot's own curve read on to F, as if the pilot were a prefix).

    python benchmarks/race_blind_check_round44_checks.py --truth-check --reps 10 --seed 4444 [--mc 2000]
    python benchmarks/race_blind_check_round44_checks.py --leader-share --reps 100 --seed 4444

The independent quadrature shares no rule with the run's. Each mean is recomputed from its definition: the
learning rate written again from the schedule and its area S1 by adaptive quadrature (scipy's quad, broken at the
schedule's kinks), not the run's closed forms; klreset's logit shift summed period by period and m(theta) by quad
over the prompts' normal (not Gauss-Hermite), theta_0 by its own root solve; explore's explored area by quad. The
truth: the timing shift by adaptive quadrature in z on [-8.5, 8.5] broken at the kinks (not the run's mapped
Gauss-Legendre), gain and wobble numerically (round 41's checks: Gauss-Legendre, the wobble on the clip's pieces).
The Monte Carlo draws whole seeds with race_blind_check.simulate as the run has it installed, every evaluation put
at one f (no jitter), and averages their 0/1 scores: at F the curve of a run planned for F (arm.planned(2)) against
truth_at(arm, F); at F_P the arm itself (the pilot, as the run simulates it) against truth_at(arm, F_P);
z = (mean - truth) / its standard error.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41_checks import _h, _reps, leaders
from race_blind_check_round44 import GROUPS, MINE, Anneal, Explore, KlReset, Wsd
from scipy.integrate import quad
from scipy.optimize import brentq

_Q = {"limit": 400, "epsabs": 1e-13, "epsrel": 1e-11}


def _phi(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)


def rate(arm, x, h):
    """The learning rate (relative to its peak) at x of a run planned for h, from the schedule's definition."""
    if isinstance(arm, Anneal):
        warm_end = arm.w * h
        if x < warm_end:
            return x / warm_end
        if x >= h:
            return arm.rho
        frac = (x - warm_end) / (h - warm_end)
        shape = 0.5 * (1 + np.cos(np.pi * frac)) if arm.cos else 1 - frac
        return arm.rho + (1 - arm.rho) * shape
    if isinstance(arm, Wsd):
        start = h - arm.cool * h
        if x < arm.w0:
            return x / arm.w0
        return 1.0 if x <= start else max(0.0, 1 - np.sqrt(min(1.0, (x - start) / (arm.cool * h))))
    raise TypeError(type(arm).__name__)


def _m(theta, sigma):
    return quad(lambda z: _phi(z) / (1 + np.exp(-(theta + sigma * z))), -12, 12, **_Q)[0]


_THETA0: dict = {}


def mean_of(arm, x, h):
    """The arm's mean reward at x = f / F_P of a run planned for h F_P, from its definition."""
    x = max(float(x), 0.0)
    if isinstance(arm, Anneal | Wsd):
        pts = [p for p in arm.kinks(h) if 0 < p < x]
        s1 = quad(lambda u: rate(arm, u, h), 0.0, x, points=pts or None, **_Q)[0] if x > 0 else 0.0
        gain = 1 - (1 + s1 / arm.c) ** -arm.alpha
        return arm.r0 + (arm.A - arm.r0) * gain * (1 - arm.k * rate(arm, x, h))
    if isinstance(arm, KlReset):
        key = (arm.A, arm.sigma, arm.r0)
        if key not in _THETA0:
            _THETA0[key] = brentq(lambda t: arm.A * _m(t, arm.sigma) - arm.r0, -30, 30, xtol=1e-13)
        period, theta = h / arm.K, _THETA0[key]
        for j in range(arm.K):  # each period closes e^-(time in it) / tau of its gap; the last runs on
            start = j * period
            if x <= start:
                break
            inside = x - start if j == arm.K - 1 else min(x - start, period)
            theta += arm.d * (1 - np.exp(-inside / arm.tau))
        return arm.A * _m(theta, arm.sigma)
    if isinstance(arm, Explore):
        explored = quad(lambda u: max(1 - u / h, 0.0), 0.0, x, points=[h] if h < x else None, **_Q)[0]
        cover = arm.c0 + (1 - arm.c0) * (1 - np.exp(-arm.a * explored))
        return arm.r0 + (arm.A - arm.r0) * cover * (1 - np.exp(-arm.b * (x - arm.lam * explored)))
    raise TypeError(type(arm).__name__)


def _indep(arm, x, h):
    """The truth at x = f / F_P of a run planned for h, independently of the run's rules."""
    s = rbc.SHIFT_SD
    pts = sorted(z for z in (np.log(k / x) / s for k in arm.kinks(h) if k > 0) if -8.4 < z < 8.4)
    return quad(lambda z: _phi(z) * _h(mean_of(arm, x * np.exp(s * z), h), arm.r0), -8.5, 8.5, points=pts or None,
                **_Q)[0]


def _mc(curve, r0, n, rng, f):
    """Mean and standard error of the 0/1 scores of n draws of 3 seeds at f through the installed simulate."""
    saved = rbc.EVALS0, rbc.EVALS1, rbc.JITTER
    rbc.EVALS0, rbc.EVALS1, rbc.JITTER = np.full(5, f), np.full(2, f), 0.0
    try:
        vals = np.empty(n)
        for i in range(n):
            d = rbc.DIFF_SD * rng.standard_normal(rbc.N_PROMPTS)
            fl, scores = rbc.simulate(rng, "arm", curve, d, r0)
            if not np.all(fl[:, 1:] == f):
                raise RuntimeError("the installed simulate did not evaluate at f")
            vals[i] = scores[:, 1:].mean()
    finally:
        rbc.EVALS0, rbc.EVALS1, rbc.JITTER = saved
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n))


def truth_check(families, reps, seed, n_mc):
    """Per family: the truth at F against the independent quadrature, the means against their recomputation, and
    Monte Carlo z at F (a run planned for F) and at F_P (the pilot); then a line for all."""
    rng = np.random.default_rng([seed, 44])
    width = max(len(f) for f in (*families, "all")) + 1
    tot = {"zF": [], "zP": [], "dq": [], "dm": []}
    for fam in families:
        got = {"zF": [], "zP": [], "dq": [], "dm": []}
        for r0, arms in _reps(fam, reps, seed):
            for arm in arms:
                t, tp = rbc.truth_at(arm, rbc.F), rbc.truth_at(arm, rbc.F_P)
                got["dq"].append(max(abs(t - _indep(arm, 2.0, 2.0)), abs(tp - _indep(arm, 1.0, 1.0))))
                got["dm"].append(max(abs(float(arm.mean(np.array(x), h)) - mean_of(arm, x, h))
                                     for x in (0.3, 1.0, 2.0, 4.0) for h in (1.0, 2.0)))
                m, se = _mc(arm.planned(2.0), r0, n_mc, rng, rbc.F)
                got["zF"].append((m - t) / se)
                m, se = _mc(arm, r0, n_mc, rng, rbc.F_P)
                got["zP"].append((m - tp) / se)
        for k in tot:
            tot[k] += got[k]
        _line(fam, width, got, n_mc)
    _line("all", width, tot, n_mc)


def _line(name, width, got, n_mc):
    zf, zp = np.array(got["zF"]), np.array(got["zP"])
    print(f"{name:<{width}} arms {zf.size:>3}  Monte Carlo ({n_mc} draws of 3 seeds) at F (planned for F): max|z| "
          f"{np.abs(zf).max():.2f}, mean z^2 {np.mean(zf ** 2):.2f}; at F_P (pilot): max|z| {np.abs(zp).max():.2f}, "
          f"mean z^2 {np.mean(zp ** 2):.2f}; independent quadrature: max|diff| {max(got['dq']):.1e} (means "
          f"{max(got['dm']):.1e})", flush=True)


def leader_share(families, reps, seed):
    for fam in families:
        moved, best, draws = leaders(fam, reps, seed)
        at_fp = np.bincount([int(np.argmax(fp)) for _, fp, _ in draws], minlength=len(GROUPS))
        gap = [max(f) - f[int(np.argmax(fp))] for _, fp, f in draws]
        prefix = [[a.expected(2.0, 1.0) for a in arms] for _, arms in _reps(fam, reps, seed)]
        off = np.array([f[i] - p[i] for (_, _, f), p in zip(draws, prefix, strict=True) for i in range(len(GROUPS))])
        swap = sum(int(np.argmax(p) != np.argmax(f)) for (_, _, f), p in zip(draws, prefix, strict=True))
        print(f"{fam:<8} leader at F_P not best at F: {moved / reps:.3f} of {reps}; best at F_P g4/g8/g16/g32: "
              f"{'/'.join(map(str, at_fp))}, at F: {'/'.join(map(str, best))}; truth at F lost by keeping the F_P "
              f"leader: mean {np.mean(gap):.4f}, max {np.max(gap):.4f}; truth at F less the pilot's curve read on to "
              f"F: mean {off.mean():+.4f}, range {off.min():+.4f} to {off.max():+.4f}; best differs: {swap / reps:.3f}")


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                           "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4444, mc=2000)


if __name__ == "__main__":
    main()
