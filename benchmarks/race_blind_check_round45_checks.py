"""The checks of round 45's blind families (benchmarks/race_blind_check_round45.py), apart from the run so that each
file stays short: the truths against an independent quadrature and a Monte Carlo of the seeds through the harness's
own simulate, and how often the arm best at F_P is not the best at F (with which arms lead at F_P and at F, what
keeping the F_P leader loses, how far the truth at F is from the pilot's last slope in ln F carried on to F, and the
data each family's arms have met at F_P and at F).

    python benchmarks/race_blind_check_round45_checks.py --truth-check --reps 10 --seed 4545 [--mc 2000]
    python benchmarks/race_blind_check_round45_checks.py --leader-share --reps 100 --seed 4545
    cd benchmarks && python -c "import race_blind_check_round45_checks as c; c.recheck('curriculum', 9, 4, 4545, 20000)"

(the last: one arm's Monte Carlo again, with more draws of a stream of its own, for the worst |z| --truth-check names).

The independent quadrature shares no rule with the run's. Each mean is recomputed from its definition by adaptive
quadrature (scipy's quad): curriculum's exposure as the integral over FLOPs of the transfer from the difficulty then
trained (the shuffled replay's rate itself a quad over difficulty, not the run's closed form), its pass rate a quad
over the evaluation's difficulty broken at the curriculum's reach, beta0 by a root solve of a quad; epochs' effective
epochs as the integral of each visit's worth (1 for a first visit, e^(-(eps - 1) / R*) after), not the run's closed
form; allsame's FLOPs to a logit as a quad of 1 / rate with the informative share and m(theta) quads over the
prompts' normal (not Gauss-Hermite), inverted by a root solve; evalshift's training gain and transfer as integrals
of their rates. The truth: the timing shift by adaptive quadrature in z on [-8.5, 8.5] broken at the kinks (not the
run's mapped Gauss-Legendre), gain and wobble numerically (round 41's checks: Gauss-Legendre, the wobble on the
clip's pieces); allsame's logit there from its ODE solved forward (scipy's DOP853, dense output) rather than by the
inverse integral. The Monte Carlo draws whole seeds with race_blind_check.simulate as the run has it installed,
every evaluation put at one f (no jitter), and averages their 0/1 scores: z = (mean - truth) / its standard error,
at F and at F_P.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41_checks import _h, _reps, leaders
from race_blind_check_round44_checks import _mc
from race_blind_check_round45 import GROUPS, MINE, AllSame, Curriculum, Epochs, EvalShift
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq

_Q = {"limit": 400, "epsabs": 1e-13, "epsrel": 1e-11}


def _phi(z):
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _expit(t):
    return 1 / (1 + math.exp(-t)) if t > -700 else 0.0


def _normal(fn):
    """E[fn(Z)], Z ~ N(0, 1), by quad on [-12, 12]."""
    return quad(lambda z: _phi(z) * fn(z), -12, 12, **_Q)[0]


# ---- curriculum -----------------------------------------------------------------------------------------------------
_BETA0: dict = {}


def _beta0(arm):
    key = (arm.kappa, arm.r0)
    if key not in _BETA0:
        _BETA0[key] = brentq(lambda b: quad(lambda q: _expit(b - arm.kappa * q), 0, 1, **_Q)[0] - arm.r0, -60, 60,
                             xtol=1e-14)
    return _BETA0[key]


def _curriculum(arm, x):
    b0, T, ell = _beta0(arm), arm.T, arm.ell

    def help_(q, c):  # training at difficulty c, evaluated at q
        return 1.0 if c >= q else math.exp(-(q - c) / ell)

    def skill(q):
        p0 = _expit(b0 - arm.kappa * q)
        rate = arm.a * (arm.g / 4) ** (arm.omega - 1) * (1 - p0 ** arm.g - (1 - p0) ** arm.g)
        ordered = quad(lambda u: help_(q, u / T), 0, min(x, T), points=[q * T] if 0 < q * T < min(x, T) else None,
                       **_Q)[0] if x > 0 else 0.0
        replay = quad(lambda c: help_(q, c), 0, 1, points=[q] if 0 < q < 1 else None, **_Q)[0] * max(x - T, 0.0)
        return _expit(b0 - arm.kappa * q + arm.d * (1 - math.exp(-rate * (ordered + replay))))

    reach = min(x / T, 1.0)
    return quad(skill, 0, 1, points=[reach] if 0 < reach < 1 else None, **_Q)[0]


# ---- allsame --------------------------------------------------------------------------------------------------------
def _share(arm, theta):
    g = arm.g
    return arm.A * _normal(lambda z: 1 - _expit(theta + arm.sigma * z) ** g - _expit(-theta - arm.sigma * z) ** g)


def _m(arm, theta):
    return _normal(lambda z: _expit(theta + arm.sigma * z))


_THETA0: dict = {}


def _theta0(arm):
    key = (arm.A, arm.sigma, arm.r0)
    if key not in _THETA0:
        _THETA0[key] = brentq(lambda t: arm.A * _m(arm, t) - arm.r0, -40, 40, xtol=1e-14)
    return _THETA0[key]


def _allsame(arm, x):
    t0 = _theta0(arm)
    if x <= 0:
        return arm.A * _m(arm, t0)
    flops = lambda th: quad(lambda t: 1 / (arm.k * _share(arm, t)), t0, th, **_Q)[0] - x  # noqa: E731
    hi = t0 + 1.0
    while flops(hi) < 0:
        hi += 2.0
    return arm.A * _m(arm, brentq(flops, t0, hi, xtol=1e-14, rtol=1e-15))


_ODE: dict = {}


def _allsame_ode(arm):
    """x -> mean, the logit from d theta / dx = k I_G(theta) solved forward to x = 7.5 (DOP853, dense output)."""
    if id(arm) not in _ODE:
        sol = solve_ivp(lambda _, th: [arm.k * _share(arm, th[0])], (0.0, 7.5), [_theta0(arm)], method="DOP853",
                        rtol=1e-13, atol=1e-13, dense_output=True)
        _ODE[id(arm)] = (arm, lambda x: arm.A * _m(arm, float(sol.sol(x)[0])))
    return _ODE[id(arm)][1]


# ---- the means and the truths ---------------------------------------------------------------------------------------
def mean_of(arm, x):
    """The arm's mean pass rate at x = f / F_P, from its definition."""
    x = max(float(x), 0.0)
    if isinstance(arm, Curriculum):
        return _curriculum(arm, x)
    if isinstance(arm, Epochs):
        eps = x / arm.E
        worth = quad(lambda s: 1.0 if s <= 1 else math.exp(-(s - 1) / arm.rstar), 0, eps,
                     points=[1.0] if eps > 1 else None, **_Q)[0] if eps > 0 else 0.0
        progress = arm.E * 4 / arm.g * (arm.g / 4) ** arm.omega * worth
        gain = 1 - (1 + progress / arm.c) ** -arm.alpha
        return arm.r0 + (arm.A - arm.r0) * (gain - arm.lam * (1 - math.exp(-(eps - worth) / arm.m0)))
    if isinstance(arm, AllSame):
        return _allsame(arm, x)
    if isinstance(arm, EvalShift):
        train = quad(lambda u: arm.alpha / arm.c * (1 + u / arm.c) ** (-arm.alpha - 1), 0, x, **_Q)[0]
        transfer = arm.phi0 + quad(lambda u: (arm.phi_inf - arm.phi0) / arm.s * math.exp(-u / arm.s), 0, x, **_Q)[0]
        return arm.r0 + (arm.A - arm.r0) * transfer * train
    raise TypeError(type(arm).__name__)


def _indep(arm, x):
    """The truth at x = f / F_P, independently of the run's rules."""
    s = rbc.SHIFT_SD
    mean = _allsame_ode(arm) if isinstance(arm, AllSame) else lambda v: mean_of(arm, v)
    pts = sorted(z for z in (math.log(k / x) / s for k in arm.kinks() if k > 0) if -8.4 < z < 8.4)
    return quad(lambda z: _phi(z) * _h(mean(x * math.exp(s * z)), arm.r0), -8.5, 8.5, points=pts or None, **_Q)[0]


def truth_check(families, reps, seed, n_mc):
    """Per family: the truths at F and at F_P against the independent quadrature, the means against their
    recomputation, and Monte Carlo z at F and at F_P; then a line for all."""
    rng = np.random.default_rng([seed, 45])
    width = max(len(f) for f in (*families, "all")) + 1
    tot = {"zF": [], "zP": [], "dq": [], "dm": [], "worst": []}
    for fam in families:
        got = {"zF": [], "zP": [], "dq": [], "dm": [], "worst": []}
        for rep, (r0, arms) in enumerate(_reps(fam, reps, seed)):
            for arm in arms:
                t, tp = rbc.truth_at(arm, rbc.F), rbc.truth_at(arm, rbc.F_P)
                got["dq"].append(max(abs(t - _indep(arm, 2.0)), abs(tp - _indep(arm, 1.0))))
                got["dm"].append(max(abs(float(arm.mean(np.array(x))) - mean_of(arm, x)) for x in (0.3, 1.0, 2.0, 4.0)))
                m, se = _mc(arm, r0, n_mc, rng, rbc.F)
                got["zF"].append((m - t) / se)
                m, se = _mc(arm, r0, n_mc, rng, rbc.F_P)
                got["zP"].append((m - tp) / se)
                got["worst"].append((max(abs(got["zF"][-1]), abs(got["zP"][-1])), f"{fam} rep {rep} g{arm.g}"))
        for k in tot:
            tot[k] += got[k]
        _line(fam, width, got, n_mc)
    _line("all", width, tot, n_mc)


def _line(name, width, got, n_mc):
    zf, zp = np.array(got["zF"]), np.array(got["zP"])
    worst = max(got["worst"])
    print(f"{name:<{width}} arms {zf.size:>3}  Monte Carlo ({n_mc} draws of 3 seeds) at F: max|z| "
          f"{np.abs(zf).max():.2f}, mean z^2 {np.mean(zf ** 2):.2f}; at F_P: max|z| {np.abs(zp).max():.2f}, "
          f"mean z^2 {np.mean(zp ** 2):.2f} (worst: {worst[1]}); independent quadrature: max|diff| "
          f"{max(got['dq']):.1e} (means {max(got['dm']):.1e})", flush=True)


def recheck(fam, rep, g, seed, n_mc):
    """One arm's Monte Carlo z at F and at F_P again, with ``n_mc`` draws of its own stream."""
    r0, arms = list(_reps(fam, rep + 1, seed))[rep]
    arm = arms[GROUPS.index(g)]
    rng = np.random.default_rng([seed, 45, rep, g])
    for f in (rbc.F, rbc.F_P):
        m, se = _mc(arm, r0, n_mc, rng, f)
        print(f"{fam} rep {rep} g{g} at {f / rbc.F_P:g} F_P: z {(m - rbc.truth_at(arm, f)) / se:+.2f} ({n_mc} draws)")


def leader_share(families, reps, seed):
    for fam in families:
        moved, best, draws = leaders(fam, reps, seed)
        at_fp = np.bincount([int(np.argmax(fp)) for _, fp, _ in draws], minlength=len(GROUPS))
        gap = [max(f) - f[int(np.argmax(fp))] for _, fp, f in draws]
        arms = [a for _, a in _reps(fam, reps, seed)]
        half = [[rbc.truth_at(a, rbc.F_P / 2) for a in arm] for arm in arms]
        # the pilot's last slope in ln F (F_P / 2 to F_P) carried on to F = 2 F_P, less the truth there
        off = np.array([f[i] - (2 * fp[i] - h[i]) for (_, fp, f), h in zip(draws, half, strict=True)
                        for i in range(len(GROUPS))])
        gain = np.array([f[i] - r0 for r0, _, f in draws for i in range(len(GROUPS))])
        seen = np.array([[[a.seen(x) for x in (1.0, 2.0)] for a in arm] for arm in arms])  # (reps, arms, 2)
        lead = lambda c: "/".join(map(str, c))  # noqa: E731
        print(f"{fam:<10} leader at F_P not best at F: {moved / reps:.3f} of {reps}; best at F_P g4/g8/g16/g32: "
              f"{lead(at_fp)}, at F: {lead(best)}; truth at F lost by keeping the F_P leader: mean {np.mean(gap):.4f}, "
              f"max {np.max(gap):.4f}; truth at F less the pilot's last ln-F slope carried on: mean {off.mean():+.4f},"
              f" range {off.min():+.4f} to {off.max():+.4f}; gain over r0 at F: mean {gain.mean():.3f}; data met "
              f"(per arm, F_P -> F): "
              + ", ".join(f"g{g} {seen[:, i, 0].mean():.2f}->{seen[:, i, 1].mean():.2f}" for i, g in enumerate(GROUPS)),
              flush=True)


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                           "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4545, mc=2000)


if __name__ == "__main__":
    main()
