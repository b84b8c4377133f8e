"""The checks of round 40's blind families (benchmarks/race_blind_check_round40.py), apart from the run so that each
file stays short: the truths against an independent computation and a Monte Carlo of the seeds, the share of
repetitions with an arm whose pilots scored exactly 0, and how often the arm best at F_P is not the best at F.

    python benchmarks/race_blind_check_round40_checks.py --truth-check --reps 10 --seed 4040 [--mc 4000]
    python benchmarks/race_blind_check_round40_checks.py --zero-share --reps 100 --seed 4040
    python benchmarks/race_blind_check_round40_checks.py --leader-share --reps 100 --seed 4040

``--families NAME ...`` limits each to some of the five.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools

import numpy as np
import race_blind_check as rbc
from race_blind_check_round40 import MINE, Discover, FmtBreak, FmtFind, LenBlow, Sharpen, _npdf, _sw
from scipy.integrate import quad
from scipy.special import expit, ndtr


def _reps(fam, reps, seed):
    """The rep's generator as repetition() runs it, up to the simulations: (r0, curves, truth, sims)."""
    for rep in range(reps):
        rng = np.random.default_rng([seed, list(rbc.FAMILIES).index(fam), rep])
        r0 = rng.uniform(0.1, 0.3)
        curves = rbc.FAMILIES[fam](rng, r0)
        names = [f"g{2 ** (i + 2)}" for i in range(rbc.N_ARMS)]
        truth = {n: rbc.truth_at(c, rbc.F) for n, c in zip(names, curves, strict=True)}
        d = rbc.DIFF_SD * rng.standard_normal(rbc.N_PROMPTS)
        sims = {n: rbc.simulate(rng, n, c, d, r0) for n, c in zip(names, curves, strict=True)}
        yield r0, curves, truth, sims


def zero_share(families, reps, seed):
    n0 = 1 + rbc.EVALS0.size
    for fam in families:
        any0 = any_all = any_eval = 0
        arms0 = []
        for _, _, _, sims in _reps(fam, reps, seed):
            z0 = [n for n, (_, sc) in sims.items() if sc[:, 1:n0].sum() == 0]
            za = [n for n, (_, sc) in sims.items() if sc[:, 1:].sum() == 0]
            any0 += bool(z0)
            any_all += bool(za)
            any_eval += any(bool((sc[:, 1:].sum(axis=2) == 0).any()) for _, sc in sims.values())
            arms0.append(len(z0))
        print(f"{fam:<10} reps {reps}: >= 1 arm all-zero after step 0 at rung 0 {any0 / reps:.2f}, "
              f"at all 7 evaluations {any_all / reps:.2f}; mean all-zero arms at rung 0 {np.mean(arms0):.2f}; "
              f">= 1 seed evaluation after step 0 all-zero {any_eval / reps:.2f}", flush=True)


def leader_share(families, reps, seed):
    for fam in families:
        moved = 0
        for _, curves, truth, _ in _reps(fam, reps, seed):
            at_fp = [rbc.truth_at(c, rbc.F_P) for c in curves]
            moved += int(np.argmax(at_fp) != np.argmax(list(truth.values())))
        print(f"{fam:<10} leader at F_P not best at F: {moved / reps:.2f}", flush=True)


def _indep(c, x):
    """An independent computation of the truth curve at x (no shift)."""
    if isinstance(c, (FmtFind, FmtBreak)):
        from scipy.optimize import brentq

        def l_seed(z):  # l by bisection of l - e^(-l) = K (not the Newton of the stated curve)
            kk = c.k0 + c.rate * np.exp(c.sigma * z) * x
            return brentq(lambda l: l - np.exp(-l) - kk, -60, max(60.0, kk + 1), xtol=1e-14)
        kinks = [brentq(lambda z, v=v: l_seed(z) - v, -12, 12, xtol=1e-14)
                 for v in (-c.w, c.w) if l_seed(-12) < v < l_seed(12)]
        pts = [-12] + [z for z in kinks if -12 < z < 12] + [12]
        e = ndtr(-12) + sum(quad(lambda z: _npdf(z) * float(_sw(l_seed(z), c.w)), a, b, epsabs=1e-14,
                                 epsrel=1e-12, limit=400)[0] for a, b in itertools.pairwise(pts))
        th = ndtr(c._theta(x)) * c.r_top
        if isinstance(c, FmtFind):
            return th * e
        so = float(c._old(x))
        return th * (so + (1 - so) * e)
    if isinstance(c, Discover):
        integ = quad(lambda t: c._lam(t) * np.exp(-c._Lam(t) - c.kappa * (x - t)), 0, x, epsabs=1e-14,
                     epsrel=1e-12, limit=400)[0]
        return c.A * (-np.expm1(-c._Lam(x)) - integ)
    if isinstance(c, Sharpen):
        from scipy.optimize import brentq

        def l_at(psi):  # invert psi(l) = int_l0^l dl / rate by bisection on the quadrature
            if psi <= 0:
                return c.l0
            def g(l):
                return quad(lambda s: 1 / c.rate(s), c.l0, l, epsabs=0, epsrel=1e-12, limit=400)[0] - psi

            hi = c.l0 + 1
            while g(hi) < 0:
                hi += 2 * (hi - c.l0)
            return brentq(g, c.l0, hi, xtol=1e-13)
        tau = 4 * x / c.G
        return quad(lambda z: _npdf(z) * c.r_top * expit(l_at(c.k * np.exp(c.sigma * z) * tau)), -8, 8,
                    epsabs=1e-11, epsrel=1e-10, limit=200)[0]
    if isinstance(c, LenBlow):
        return quad(lambda z: _npdf(z) * float(c._seed_val(x, z)), -12, 12, epsabs=1e-13, epsrel=1e-12,
                    limit=400)[0]
    raise TypeError(type(c))


def truth_check(families, reps, seed, n_mc):
    rng_mc = np.random.default_rng([seed, 40])
    for fam in families:
        zs, worst, exact, nodes = [], 0.0, 0.0, 0
        for _, curves, truth, _ in _reps(fam, reps, seed):
            for c, t in zip(curves, truth.values(), strict=True):
                # Monte Carlo of seeds: the harness's shift (gain has mean 1 around start) and this family's draws
                shift = np.exp(rbc.SHIFT_SD * rng_mc.standard_normal(n_mc))
                per, wt = c.draw_seeds_wide(rng_mc, n_mc)
                vals = wt * np.array([float(per[i](rbc.F * shift[i])) for i in range(n_mc)])
                se = vals.std(ddof=1) / np.sqrt(n_mc) + 1e-15
                zs.append((vals.mean() - t) / se)
                worst = max(worst, abs(vals.mean() - t))
                # exactness: the stated curve against the independent computation, at the harness's shift nodes
                for xs in (rbc.F / rbc.F_P) * np.exp(rbc.SHIFT_SD * rbc._HX[::6]):
                    exact = max(exact, abs(float(c(xs * rbc.F_P)) - _indep(c, xs)))
                    nodes += 1
        zs = np.array(zs)
        print(f"{fam:<10} truth check over {reps} draws x 4 arms, {n_mc} MC seeds each (importance-sampled, "
              f"twice as wide): largest |MC - stated| "
              f"{worst:.4f}, largest |z| {np.abs(zs).max():.2f}, mean z {zs.mean():+.2f}, mean z^2 "
              f"{(zs ** 2).mean():.2f}; exactness over {nodes} points: largest |stated - independent| {exact:.2e}",
              flush=True)


def main():
    rbc.checks_main(MINE, {"--truth-check": (truth_check, 10),
                     "--zero-share": (lambda f, r, s, _: zero_share(f, r, s), 100),
                     "--leader-share": (lambda f, r, s, _: leader_share(f, r, s), 100)}, seed=4040, mc=4000)

if __name__ == "__main__":
    main()
