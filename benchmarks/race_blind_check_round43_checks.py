"""The checks of round 43's blind families (benchmarks/race_blind_check_round43.py), apart from the run so that each
file stays short: the truths against an independent quadrature and a Monte Carlo of the seeds through the harness's
own simulate, and how often the arm best at F_P is not the best at F (with which arms lead at F_P and at F).

    python benchmarks/race_blind_check_round43_checks.py --truth-check --reps 10 --seed 4343 [--mc 2000]
    python benchmarks/race_blind_check_round43_checks.py --leader-share --reps 100 --seed 4343

The independent quadrature shares no rule with the run's. sigfit: its mean as ScaleRL writes it,
r0 + (A - r0) / (1 + (c / x)^b), and the timing shift by adaptive quadrature (scipy's quad) in z. The three
others are one-state ODEs (flatgroups: the pass rate p; iccrise and broad: w = 1 - y, the share of the gap closed),
so the time to reach a state is the quadrature of 1 / rate from the ODE's own right-hand side (flatgroups' all-equal
share from the Beta moments as rising factorials, not the run's log-gamma; iccrise and broad from the rate, not the
run's closed forms), the mean at x the state whose time is x (a root solve), and the truth the timing shift's
integral rewritten over the state: z(w) = ln(T(w) / x) / s, dz = T'(w) / (s T(w)) dw, by adaptive quadrature
between the states at z = -8.5 and 8.5 (broken where z = -4, -2, 0, 2, 4). Gain and wobble numerically (round 41's
checks: Gauss-Legendre, the wobble on the clip's pieces). The Monte Carlo draws whole seeds with
race_blind_check.simulate as the run has it installed (every evaluation put at F, no jitter) and averages their 0/1
scores: z = (mean - truth) / its standard error.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41_checks import _h, check_truths, leaders
from race_blind_check_round42_checks import _phi
from race_blind_check_round43 import GROUPS, MINE, Broad, Flat, Icc, Sigfit
from scipy.integrate import quad
from scipy.optimize import brentq

_Q = {"limit": 400, "epsabs": 1e-14, "epsrel": 1e-12}


def _moment(a, k, g):
    """E[q^g], q ~ Beta(a, k - a): the rising factorials (a)_g / (k)_g."""
    return float(np.prod([(a + j) / (k + j) for j in range(g)]))


def path(arm):
    """(w0, w_end, rate(w), reward(w)) of a one-state arm, from its ODE's definition (module docstrings)."""
    if isinstance(arm, Flat):
        def rate(p):
            i = 1 - _moment(arm.k * p, arm.k, arm.g) - _moment(arm.k * (1 - p), arm.k, arm.g)
            return arm.a * (arm.A - p) / (1 + arm.beta * (1 + (arm.g - 1) * arm.rho) / i)
        return arm.r0, arm.A, rate, lambda p: p
    reward = lambda w: arm.r0 + (arm.A - arm.r0) * w  # noqa: E731
    if isinstance(arm, Icc):
        def rate(w):
            y = 1 - w
            rho = arm.rho1 - (arm.rho1 - arm.rho0) * y ** arm.m
            return arm.a * y / (1 + arm.beta / y * arm.g * (1 + (arm.g - 1) * rho) / (arm.g - 1))
        return 0.0, 1.0, rate, reward
    if isinstance(arm, Broad):
        d, h = 1 / (1 + (arm.g - 1) * arm.rho), arm.h_raw * 4 / arm.g
        end = 1.0 if d >= h else d / h  # the floor y* = (h - d) / h where the harm wins
        return 0.0, end, lambda w: arm.a * (1 - w) * (d - h * w), reward
    raise TypeError(type(arm).__name__)


def _time(rate, w0, w):
    return quad(lambda v: 1 / rate(v), w0, w, **_Q)[0]


def _state_at(arm, x):
    """The state w whose time is x (and the path), by a root solve on the quadrature of 1 / rate."""
    w0, end, rate, reward = path(arm)
    if x <= 0:
        return w0, (w0, end, rate, reward)
    for k in range(1, 34):  # a bracket: states ever closer to the end (1 / rate diverges there)
        hi = end - (end - w0) * 2.0 ** -k
        if _time(rate, w0, hi) > x:
            return brentq(lambda w: _time(rate, w0, w) - x, w0, hi, xtol=1e-16, rtol=1e-15), (w0, end, rate, reward)
    return hi, (w0, end, rate, reward)  # not reached by x within 2^-33 of the end: there


def mean_of(arm, x):
    """The arm's mean reward at x = f / F_P, from its definition."""
    if isinstance(arm, Sigfit):
        return arm.r0 if x <= 0 else arm.r0 + (arm.a - arm.r0) / (1 + (arm.c / x) ** arm.b)
    w, (_, _, _, reward) = _state_at(arm, x)
    return reward(w)


def _indep(arm, x):
    """The truth at x = f / F_P, independently of the run's rules."""
    s = rbc.SHIFT_SD
    if isinstance(arm, Sigfit):
        f = lambda z: _phi(z) * _h(mean_of(arm, x * np.exp(s * z)), arm.r0)  # noqa: E731
        return quad(f, -8.5, 8.5, points=[np.log(arm.c / x) / s] if abs(np.log(arm.c / x) / s) < 8 else None,
                    **_Q)[0]
    cuts = [_state_at(arm, x * np.exp(s * z))[0] for z in (-8.5, -4, -2, 0, 2, 4, 8.5)]
    w0, _, rate, reward = path(arm)

    def f(w):
        t = _time(rate, w0, w)
        return _phi(np.log(t / x) / s) * _h(reward(w), arm.r0) / (s * t * rate(w))
    total = quad(f, cuts[0], cuts[-1], points=cuts[1:-1], **_Q)[0]
    tail = quad(_phi, np.log(_time(rate, w0, cuts[-1]) / x) / s, np.inf)[0]  # a state never reached: the last
    return total + tail * _h(reward(cuts[-1]), arm.r0)


def truth_check(families, reps, seed, n_mc):
    check_truths(families, reps, seed, n_mc, _indep, 43, mean_of)


def leader_share(families, reps, seed):
    for fam in families:
        moved, best, draws = leaders(fam, reps, seed)
        at_fp = np.bincount([int(np.argmax(fp)) for _, fp, _ in draws], minlength=len(GROUPS))
        gap = [max(f) - f[int(np.argmax(fp))] for _, fp, f in draws]
        print(f"{fam:<10} leader at F_P not best at F: {moved / reps:.3f} of {reps}; best at F_P g4/g8/g16/g32: "
              f"{'/'.join(map(str, at_fp))}, at F: {'/'.join(map(str, best))}; truth at F lost by keeping the F_P "
              f"leader: mean {np.mean(gap):.4f}, max {np.max(gap):.4f}")


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                           "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4343, mc=2000)


if __name__ == "__main__":
    main()
