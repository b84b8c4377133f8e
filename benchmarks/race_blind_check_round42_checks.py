"""The checks of round 42's blind families (benchmarks/race_blind_check_round42.py), apart from the run so that each
file stays short: the truths against an independent quadrature and a Monte Carlo of the seeds through the harness's
own simulate, and how often the arm best at F_P is not the best at F (with the share of each arm's gain by F that
comes after F_P).

    python benchmarks/race_blind_check_round42_checks.py --truth-check --reps 10 --seed 4242 [--mc 2000]
    python benchmarks/race_blind_check_round42_checks.py --leader-share --reps 100 --seed 4242

The independent quadrature shares no rule with the run's: each curve's mean is recomputed from its definition rather
than its closed form (aha: the updates by a root solve of the FLOP count; unlock: the hard prompts' expectation by
adaptive quadrature over their logit, the unlock hazard by a hypergeometric series, the two waits by the
textbook hypoexponential (or their convolution where the hazards nearly agree); warmup: the progress by quadrature
of the learning rate; resets: each stage's climb by quadrature of the gamma(3) density; entkeep: the discoveries by
quadrature of the entropy), the timing shift by adaptive quadrature (scipy's quad, broken at the curve's own turning
points), gain and wobble numerically (round 41's checks: Gauss-Legendre, the wobble on the clip's pieces). The Monte
Carlo draws whole seeds with race_blind_check.simulate as the run has it installed (every evaluation put at F, no
jitter) and averages their 0/1 scores: z = (mean - truth) / its standard error.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41_checks import _h, _zpoints, check_truths, leaders
from race_blind_check_round42 import MINE, Aha, Entropy, Resets, Unlock, Warmup
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import betaln, expit, hyp2f1
from scipy.stats import binom

_Q = {"limit": 400, "epsabs": 1e-13, "epsrel": 1e-11}


def _phi(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)


def _tail(g, m, p):
    """P(Bin(g, p) >= m): a binomial tail for whole m, else the incomplete beta I_p(m, g - m + 1) by its
    hypergeometric series (on the side of the mean where it converges fast)."""
    a, b = m, g - m + 1
    if float(m).is_integer():
        return float(binom.sf(int(m) - 1, g, p))
    if p > a / (a + b):
        return 1 - _ibeta_series(b, a, 1 - p)
    return _ibeta_series(a, b, p)


def _ibeta_series(a, b, p):
    return float(np.exp(a * np.log(p) + b * np.log1p(-p) - betaln(a, b)) / a * hyp2f1(a + b, 1.0, a + 1.0, p))


def mean_of(arm, x):
    """The arm's mean reward at x = f / F_P, from its definition (module docstring)."""
    r0, u = arm.r0, 4 * x / arm.g
    if isinstance(arm, Aha):
        n = 0.0 if x <= 0 else brentq(lambda v: arm.g / 4 * (v + arm.c * v * v / 2) - x, 0.0, 4 * x / arm.g + 1e-300,
                                      xtol=1e-300, rtol=1e-15)
        s = arm.q * n
        aha = 0.0 if s <= 0 else arm.e2 / (1 + (arm.sa / s) ** (1 / arm.w))
        return r0 + arm.e1 * (1 - np.exp(-s / arm.s1)) + aha
    if isinstance(arm, Unlock):
        def hard(z):
            p = float(expit(arm.mu + arm.sig * z))
            l1, l2 = arm.kap * 4 / arm.g * _tail(arm.g, arm.m, p), arm.lc
            if abs(l2 - l1) > 1e-4 * l2:  # the hypoexponential survival, as its textbook writes it
                both = 1 - (l2 * np.exp(-l1 * x) - l1 * np.exp(-l2 * x)) / (l2 - l1)
            else:  # the convolution of the two waits
                both = quad(lambda t: l1 * np.exp(-l1 * t) * -np.expm1(-l2 * (x - t)), 0.0, x, **_Q)[0]
            return _phi(z) * (1 - p) * both
        h = quad(hard, -8.0, 8.0, points=np.linspace(-6.0, 6.0, 13), **_Q)[0] / quad(_phi, -8.0, 8.0, **_Q)[0]
        return r0 + (1 - arm.h) * arm.ee * (1 - np.exp(-arm.ke * arm.q * u)) + arm.h * arm.ah * h
    if isinstance(arm, Warmup):
        prog = arm.k * quad(lambda s: 1 - np.exp(-s / arm.W), 0.0, u, **_Q)[0]
        return r0 + (arm.a - r0) * (1 - (1 + prog / arm.p0) ** -arm.alpha)
    if isinstance(arm, Resets):
        total, j = 0.0, 0
        while j * arm.K < u:  # the stages begun by u; each climb the integral of the gamma(3) density
            v = (u - j * arm.K) / arm.tau
            total += arm.d * arm.rho ** j * quad(lambda t: t * t * np.exp(-t) / 2, 0.0, v, **_Q)[0]
            j += 1
        return r0 + total
    if isinstance(arm, Entropy):
        ent = lambda y: arm.hg + (1 - arm.hg) * np.exp(-arm.c * 4 * y / arm.g)  # noqa: E731
        d = arm.kap * quad(ent, 0.0, x, **_Q)[0]
        exploit = arm.e1 * (np.e - np.exp(ent(x))) / (np.e - 1)
        return r0 + exploit + arm.e2 * (1 - (1 + d) * np.exp(-d))
    raise TypeError(type(arm).__name__)


def _indep(arm, x, own=False):
    """The truth at x = f / F_P, independently of the run's rules (own: the curve's own mean in the quadrature)."""
    s = rbc.SHIFT_SD
    m = (lambda y: float(arm.mean(np.array(y)))) if own else (lambda y: mean_of(arm, y))
    f = lambda z: _phi(z) * _h(m(x * np.exp(s * z)), arm.r0)  # noqa: E731
    return quad(f, -8.5, 8.5, points=_zpoints(x, arm.features()) or None, limit=400, epsabs=1e-12,
                epsrel=1e-10)[0]


def truth_check(families, reps, seed, n_mc):
    check_truths(families, reps, seed, n_mc, _indep, 42, mean_of)


def leader_share(families, reps, seed):
    for fam in families:
        moved, best, draws = leaders(fam, reps, seed)
        late = [(b - a) / (b - r0) for r0, at_fp, at_f in draws for a, b in zip(at_fp, at_f, strict=True)
                if b - r0 > 0.01]
        print(f"{fam:<8} leader at F_P not best at F: {moved / reps:.3f} of {reps}; best at F g4/g8/g16/g32: "
              f"{'/'.join(map(str, best))}; share of the gain by F after F_P: median {np.median(late):.2f}, "
              f"above 0.3 in {np.mean(np.array(late) > 0.3):.2f} of arms")


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                           "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4242, mc=2000)


if __name__ == "__main__":
    main()
