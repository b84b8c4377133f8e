"""Round 43's independent check of RACE's analysis: truth families on one theme, the best group size moves as training
goes on (the value of a larger or smaller GRPO group changes over the run, so that the order of the arms at F_P is a
poor guide to their order at F), written by a session that had not seen benchmarks/race_misspecification.py's
shapes, the results, the changelog or flopplan/race's code (nor the bodies of rounds 31-41's families), on the
protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1
prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 42's script is
imported first (and with it rounds 31-41), so every key stays unique and these come after (their keys and random
streams follow round 42's); every flag of race_blind_check works here (without --families, these).

Units. x = f / F_P. Unlike round 42, every arm's update costs the same FLOPs: a batch of B rollouts, B / G prompts
times G rollouts each, so every arm makes the same number of updates per FLOP (u = x, in units of the updates one
F_P buys) and G only trades prompts per update against rollouts per prompt. Every curve equals r0 at x = 0 and is
smooth (no kinks: the truth's quadrature in the timing shift stays accurate).

The truth at F is the harness's own: the expected clipped pass rate over the seed draw of race_blind_check.simulate
(timing shift exp(0.15 N), gain 1 + 0.08 N, wobble 0.01 N, clip to [0.002, 0.998]). Gain and wobble in closed form
(round 41's clip_mean), the timing shift by Simpson's rule on 4001 nodes over |z| <= 8 (round 42's). The harness's
truth_at is wrapped so that curves of this round (attribute truth_r43) answer with it; every other curve keeps the
truth it had. The independent quadrature and a Monte Carlo through the harness's simulate:
race_blind_check_round43_checks.py.

sigfit -- the sigmoidal compute-performance curve, fitted per recipe. Source: Khatri et al. (2025), "The art of
scaling reinforcement learning compute for LLMs" (ScaleRL: R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B); design
choices move the asymptote A and the efficiency B, C_mid separately, and a larger batch starts slower but ends
higher). R_G = r0 + (A_G - r0) expit(b_G ln(x / c_G)); A_G = clip(A + t (log2(G/4) - 1.5) / 1.5 + U(-0.02, 0.02),
r0 + 0.1, 0.95), A ~ U[0.45, 0.85], t ~ U[-0.03, 0.2]; c_G = c (G/4)^kappa e^U(-0.1, 0.1), c ~ logU[0.05, 1],
kappa ~ U[0.1, 1.2]; b_G = b e^U(-0.15, 0.15), b ~ U[0.7, 2].

flatgroups -- the share of groups whose rewards are all equal (zero advantage) shrinks the effective batch, more so
for small groups, and it moves with the pass rate. Source: Yu et al. (2025), "DAPO: an open-source LLM reinforcement
learning system at scale" (dynamic sampling: as accuracy rises, more groups are all correct, fewer prompts in the
batch carry a gradient, and its variance grows), with the progress per step of McCandlish et al. (2018), "An
empirical model of large-batch training" (1 / (1 + B_noise / B)). Prompts' pass rates ~ Beta(k p, k (1 - p)), p the
mean (the reward); informative share I_G(p) = 1 - E[p^G] - E[(1 - p)^G] (Beta moments); effective batch
B I_G(p) / (1 + (G - 1) rho) (rollouts of one prompt correlate: a design effect, so more prompts help);
dp/dx = a (A - p) / (1 + beta (1 + (G - 1) rho) / I_G(p)), p(0) = r0 (solved by DOP853). Early (low p, many
all-wrong groups) and late (high p, many all-right) large groups waste less; in between more prompts win.
A ~ U[0.7, 0.97], k ~ logU[5, 30], rho ~ logU[0.008, 0.03], beta ~ logU[1, 10]; a puts g8 half-way at x ~
logU[0.3, 3].

iccrise -- rollouts of one prompt grow alike as the policy sharpens, so a group's samples carry less information.
Source: McCandlish et al. (2018) (the noise scale B_noise = tr(Sigma) / |g|^2 grows as the loss falls; progress per
step 1 / (1 + B_noise / B)), with the leave-one-out baseline's variance factor G / (G - 1) of Kool et al. (2019),
"Buy 4 REINFORCE samples, get a baseline for free!", and the within-prompt correlation rho rising as the policy's
entropy collapses (Cui et al., 2025, "The entropy mechanism of reinforcement learning for reasoning language
models"). Gap y (reward r0 + (A - r0)(1 - y)), B_noise = b / y, B_eff = B (G - 1) / (G (1 + (G - 1) rho(y))),
rho(y) = rho1 - (rho1 - rho0) y^m (m < 1: a late rise): dy/du = -a y / (1 + (beta / y) G (1 + (G - 1) rho(y)) /
(G - 1)), whose time is, with s = 1 / y and K = beta G / (G - 1), a u = ln s + K ((1 + (G - 1) rho1)(s - 1) -
(G - 1)(rho1 - rho0)(s^(1 - m) - 1) / (1 - m)) (inverted by bisection). Large groups lead early (a better
baseline), small ones late. beta ~ logU[1, 10], rho0 ~ logU[1e-4, 1e-3], rho1 ~ logU[0.02, 0.2], m ~ U[0.15, 0.8],
A ~ U[0.5, 0.9]; a puts g8 half-way at x ~ logU[0.2, 2].

broad -- small groups stall at a plateau that more rollouts per prompt break through. Source: Hu et al. (2025),
"BroRL: scaling reinforcement learning via broadened exploration" (the unsampled tokens' share of an update has no
sure sign and shrinks with the rollouts per prompt N; it matters once the policy is sharp, where small-N training
saturates and large N keeps improving). Gap y: dy/du = -a y (d_G - h_G (1 - y)), d_G = 1 / (1 + (G - 1) rho) (more
prompts per update help early), h_G = h 4 / G (the harm, growing as y falls); in closed form 1 / y = e^(a c u) +
a h_G u E(a c u), c = d_G - h_G, E(t) = expm1(t) / t: a floor y* = -c / h_G where c < 0. rho ~ logU[0.005, 0.05],
h ~ U[0.3, 2], A ~ U[0.55, 0.95]; a puts g8's first e-fold of the gap (1 / (a d_8)) at x ~ logU[0.15, 1.5].

    python benchmarks/race_blind_check_round43.py --reps 100 --replicates 100 --seed 4343 --out DIR
    python benchmarks/race_blind_check_round43.py --table --explain --out DIR
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41 import GROUPS, _logu, clip_mean
from race_blind_check_round42 import _Z, _ZW, _ln  # registers rounds 31-42's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.special import expit, gammaln


class _Arm:
    """One arm: ``mean(x)`` the reward at x = f / F_P (called with FLOPs, that mean); ``truth_r43(f)`` the expected
    clipped pass rate over the harness's seed draw."""

    def __init__(self, r0, g):
        self.r0, self.g = float(r0), int(g)

    def __call__(self, f):
        return self.mean(np.asarray(f, dtype=float) / rbc.F_P)

    def truth_r43(self, f):
        return float(clip_mean(self.mean(float(f) / rbc.F_P * np.exp(rbc.SHIFT_SD * _Z)), self.r0) @ _ZW)

    def features(self):
        return []


# ---- sigfit ---------------------------------------------------------------------------------------------------------
class Sigfit(_Arm):
    def __init__(self, r0, g, a, c, b):
        super().__init__(r0, g)
        self.a, self.c, self.b = a, c, b

    def mean(self, x):
        return self.r0 + (self.a - self.r0) * expit(self.b * (_ln(x) - np.log(self.c)))

    def features(self):
        return [self.c]


def fam_sigfit(rng, r0):
    A, t, c, kappa, b = (rng.uniform(0.45, 0.85), rng.uniform(-0.03, 0.2), _logu(rng, 0.05, 1.0),
                         rng.uniform(0.1, 1.2), rng.uniform(0.7, 2.0))
    return [Sigfit(r0, g, float(np.clip(A + t * (np.log2(g / 4) - 1.5) / 1.5 + rng.uniform(-0.02, 0.02), r0 + 0.1,
                                        0.95)),
                   c * (g / 4) ** kappa * np.exp(rng.uniform(-0.1, 0.1)), b * np.exp(rng.uniform(-0.15, 0.15)))
            for g in GROUPS]


# ---- flatgroups -----------------------------------------------------------------------------------------------------
XMAX = 40.0  # the ODE's reach in x (the truth needs up to 2 e^(0.15 * 8) < 7)


def informative(g, p, k):
    """1 - E[q^g] - E[(1 - q)^g], q ~ Beta(k p, k (1 - p)): the share of prompts whose group is not all equal."""
    a, b = k * p, k * (1 - p)
    return (1 - np.exp(gammaln(a + g) - gammaln(a) + gammaln(k) - gammaln(k + g))
            - np.exp(gammaln(b + g) - gammaln(b) + gammaln(k) - gammaln(k + g)))


class Flat(_Arm):
    def __init__(self, r0, g, A, k, rho, beta, a=1.0):
        super().__init__(r0, g)
        self.A, self.k, self.rho, self.beta, self.a = A, k, rho, beta, a
        self._sol = None

    def rate(self, p):
        return self.a * (self.A - p) / (1 + self.beta * (1 + (self.g - 1) * self.rho) / informative(self.g, p, self.k))

    def sol(self):
        if self._sol is None:
            self._sol = solve_ivp(lambda _, p: self.rate(p), (0.0, XMAX), [self.r0], method="DOP853", rtol=1e-13,
                                  atol=1e-15, dense_output=True).sol
        return self._sol

    def mean(self, x):
        x = np.asarray(x, dtype=float)
        return self.sol()(np.minimum(x, XMAX).ravel())[0].reshape(x.shape)

    def time_to(self, p):  # x at which the mean reaches p
        return quad(lambda q: 1 / self.rate(q), self.r0, p, limit=200, epsrel=1e-10)[0]


def fam_flatgroups(rng, r0):
    A, k, rho, beta = rng.uniform(0.7, 0.97), _logu(rng, 5.0, 30.0), _logu(rng, 0.008, 0.03), _logu(rng, 1.0, 10.0)
    a = Flat(r0, 8, A, k, rho, beta).time_to((r0 + A) / 2) / _logu(rng, 0.3, 3.0)
    return [Flat(r0, g, A, k, rho, beta, a) for g in GROUPS]


# ---- iccrise --------------------------------------------------------------------------------------------------------
def solve_increasing(phi, t, hi):
    """s in [1, hi] with phi(s) = t (phi increasing, phi(1) = 0 <= t <= phi(hi)), element-wise by bisection."""
    lo, hi = np.ones_like(t), np.broadcast_to(hi, t.shape).astype(float).copy()
    for _ in range(200):
        mid = (lo + hi) / 2
        up = phi(mid) >= t
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
        if np.all(hi - lo <= 4e-16 * hi):
            break
    return (lo + hi) / 2


class Icc(_Arm):
    def __init__(self, r0, g, A, beta, rho0, rho1, m, a=1.0):
        super().__init__(r0, g)
        self.A, self.beta, self.rho0, self.rho1, self.m, self.a = A, beta, rho0, rho1, m, a
        self.k = beta * g / (g - 1)

    def phi(self, s):  # a u at s = 1 / y (module docstring)
        return np.log(s) + self.k * ((1 + (self.g - 1) * self.rho1) * (s - 1) - (self.g - 1) * (
            self.rho1 - self.rho0) * -np.expm1((1 - self.m) * np.log(s)) / (self.m - 1))

    def mean(self, x):
        t = self.a * np.maximum(np.asarray(x, dtype=float), 0.0)
        # phi(s) >= k (1 + (g - 1) rho0) (s - 1), as (1 - s^(1 - m)) / (m - 1) <= s - 1: so phi(hi) >= t
        s = solve_increasing(self.phi, t, 1 + t / (self.k * (1 + (self.g - 1) * self.rho0)) * (1 + 1e-12))
        return self.r0 + (self.A - self.r0) * (1 - 1 / s)


def fam_iccrise(rng, r0):
    beta, rho0, rho1 = _logu(rng, 1.0, 10.0), _logu(rng, 1e-4, 1e-3), _logu(rng, 0.02, 0.2)
    m, A = rng.uniform(0.15, 0.8), rng.uniform(0.5, 0.9)
    a = float(Icc(r0, 8, A, beta, rho0, rho1, m).phi(2.0)) / _logu(rng, 0.2, 2.0)
    return [Icc(r0, g, A, beta, rho0, rho1, m, a) for g in GROUPS]


# ---- broad ----------------------------------------------------------------------------------------------------------
def _e(t):
    """expm1(t) / t, 1 at t = 0."""
    t = np.asarray(t, dtype=float)
    small = np.abs(t) < 1e-8
    return np.where(small, 1 + t / 2, np.expm1(t) / np.where(small, 1.0, t))


class Broad(_Arm):
    def __init__(self, r0, g, A, rho, h, a=1.0):
        super().__init__(r0, g)
        self.A, self.a, self.rho, self.h_raw = A, a, rho, h
        self.d, self.h = 1 / (1 + (g - 1) * rho), h * 4 / g
        self.cc = self.d - self.h

    def inv_gap(self, x):  # 1 / y
        v = self.a * np.maximum(np.asarray(x, dtype=float), 0.0)
        return np.exp(self.cc * v) + self.h * v * _e(self.cc * v)

    def mean(self, x):
        return self.r0 + (self.A - self.r0) * (1 - 1 / self.inv_gap(x))


def fam_broad(rng, r0):
    rho, h, A = _logu(rng, 0.005, 0.05), rng.uniform(0.3, 2.0), rng.uniform(0.55, 0.95)
    a = (1 + 7 * rho) / _logu(rng, 0.15, 1.5)  # 1 / (d_8 x_e)
    return [Broad(r0, g, A, rho, h, a) for g in GROUPS]


# ---- the truth the harness states for this round's curves ----------------------------------------------------------
rbc.own_truth("truth_r43")  # this round's curves: the expected clipped pass rate over the harness's seed draw

MINE = {"sigfit": fam_sigfit, "flatgroups": fam_flatgroups, "iccrise": fam_iccrise, "broad": fam_broad}
rbc.register(MINE, "round 43")


def main():
    """The run (every flag of race_blind_check; without --families, these). The checks of the truths and the leaders:
    benchmarks/race_blind_check_round43_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
