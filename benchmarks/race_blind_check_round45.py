"""Round 45's independent check of RACE's analysis: truth families on one theme, the data the pilot trains on is not
the data the run to F trains on (the pilot stops in an early part of the run's data: the easy end of a curriculum,
the first epochs of a finite prompt set, a batch still full of informative groups, a transfer to the evaluation not
yet built), written by a session that had not seen benchmarks/race_misspecification.py's shapes, the results, the
changelog or flopplan/race's code (nor the bodies of rounds 31-43's families), on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1 prompts, rungs
F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 44's script is imported first
(and with it rounds 31-43), so every key stays unique and these come after (their keys and random streams follow
round 44's); every flag of race_blind_check works here (without --families, these).

Units. x = f / F_P. A rollout costs the same FLOPs in every arm, so a prompt (G rollouts) costs G / 4 times what it
costs g4: an arm of group size G visits 4 / G times as many prompts per FLOP as g4. The pilot is a prefix of the run to
F (the same data stream, stopped at F_P): what differs is the data the run meets after F_P. The pilots are scored on
the race's evaluation set, and so is the truth: mean(x) is the expected pass rate on that set. Every curve equals
r0 at x = 0.

The truth at F (race_blind_check.truth_at, wrapped so that curves of this round, attribute truth_r45, answer with it;
every other curve keeps the truth it had) is the harness's own definition: the expected clipped pass rate over the
seed draw of race_blind_check.simulate (timing shift exp(0.15 N), gain 1 + 0.08 N, wobble 0.01 N, clip to
[0.002, 0.998]) of mean at f. Gain and wobble in closed form (round 41's clip_mean), the timing shift by round 44's
znodes (Gauss-Legendre on the pieces between the curve's kinks, each mapped by a cosine). No simulation enters the
truth. The independent quadrature and a Monte Carlo through the harness's simulate:
race_blind_check_round45_checks.py.

curriculum -- prompts ordered easy to hard, one ordered pass, then the whole set shuffled. Sources: Kimi Team (2025),
"Kimi k1.5: scaling reinforcement learning with LLMs" (curriculum sampling, easy to hard), and Chen et al. (2025),
"Self-evolving curriculum for LLM reasoning" (the order of difficulties a run trains on moves what it learns).
Difficulty quantile q in [0, 1] (the evaluation covers it uniformly); the base pass logit beta0 - kappa q, beta0 such
that the set's mean pass rate is r0; training at difficulty c helps evaluation difficulty q by k(q, c) = 1 for c >= q
and e^(-(q - c) / l) below (easier prompts transfer up a little). The ordered pass reaches c(u) = u / T_G at FLOPs u,
T_G = T G / 4 (a larger group pays more per prompt, so it reaches the hard end later); after it (u > T_G) the set is
replayed shuffled, exposure rate rho(q) = l (1 - e^(-q / l)) + 1 - q. Exposure E(q, x) = int_0^x k(q, c(u)) du (in
closed form, three pieces). Skill at q: logit beta0 - kappa q + d (1 - e^(-a_G(q) E(q, x))), the learning rate a_G(q) =
a (G/4)^(omega - 1) (1 - p0^G - (1 - p0)^G) with p0 = expit(beta0 - kappa q) (a group learns only if its rollouts
disagree: a hard prompt needs many rollouts to be solved once). R = int_0^1 expit(skill) dq (Gauss-Legendre, broken at q
= x / T_G). kappa ~ U[3, 7], d ~ U[1.5, 4], l ~ logU[0.05, 0.5], T ~ logU[0.1, 1.5], a ~ logU[1, 20], omega ~ U[0.3,
0.9].

epochs -- a finite prompt set, repeated; a repeat is worth less than a new prompt and what a policy memorises of its
training prompts does not carry to the evaluation. Source: Muennighoff et al. (2023), "Scaling data-constrained language
models" (effective data D' = U + U R* (1 - e^(-R / R*)) for U unique items repeated R more times), read here for the
passes an RL run makes over a fixed prompt set. An epoch costs E_G = e G / 4 (in F_P); epochs done eps = x / E_G;
effective epochs D = min(eps, 1) + R*_G (1 - e^(-max(eps - 1, 0) / R*_G)), R*_G = R* (4 / G)^psi (a larger group draws
more from one visit, so its repeats decay sooner). Progress P = e (G/4)^omega D (per FLOP (G/4)^(omega - 1) while the
data is new); memorised visits M = eps - D. R = r0 + (A_G - r0) (1 - (1 + P / c)^-alpha - lam (1 - e^(-M / M0))). e ~
logU[0.1, 1], R* ~ logU[0.5, 4], psi ~ U[0, 0.6], omega ~ U[0.3, 0.9], c ~ logU[0.03, 0.5], alpha ~ U[0.5, 1.5], lam ~
U[0, 0.2], M0 ~ logU[1, 6]; A_G as round 44's (_grade, A ~ U[0.5, 0.9], trend t ~ U[-0.1, 0.15] in log2 G).

allsame -- the effective batch shrinks as the policy improves: a group whose G rollouts all pass (or all fail) has
zero advantage and no gradient. Sources: Shao et al. (2024), "DeepSeekMath" (GRPO's group-normalised advantage), and
Yu et al. (2025), "DAPO: an open-source LLM reinforcement learning system at scale" (dynamic sampling drops such
groups because they shrink the batch). A share 1 - A_G of prompts is never solved (never informative); on the rest a
prompt's pass rate is expit(theta + sigma Z), Z ~ N(0, 1) across prompts; informative share
I_G(theta) = A_G E[1 - p^G - (1 - p)^G]; d theta / dx = k_G I_G(theta), k_G = k (G/4)^(omega - 1) e^U(-0.1, 0.1)
(a prompt costs G rollouts; its signal grows as G^omega). Solved as x(theta) = int_theta0^theta dt / (k_G I_G(t))
(12-node Gauss-Legendre per cell of 0.25 in theta, I_G by 160-node Gauss-Hermite), inverted by Newton within its
cell from the cubic through its ends. R = A_G m(theta), m(theta) = E[expit(theta + sigma Z)], A_G m(theta0) = r0.
Small groups go dead first as pass rates rise (1 - p^G ~ G (1 - p)), large groups keep learning. sigma ~ U[0.8, 2],
k ~ logU[1, 15], omega ~ U[0.2, 0.9]; A_G as epochs' with A ~ U[0.55, 0.95].

evalshift -- the training prompts are not the evaluation's: the training reward rises fast, the evaluation gains a
share phi of it, and phi moves with training (up where the skill generalises, down where training specialises to its
own prompts). Sources: Chu et al. (2025), "SFT memorizes, RL generalizes: a comparative study of foundation model
post-training" (out-of-distribution gains grow with RL compute), and Kirk et al. (2024), "Understanding the effects
of RLHF on LLM generalisation and diversity". Training gain s_G(x) = 1 - (1 + x / c_G)^-alpha, c_G = c (G/4)^mu;
transfer phi_G(x) = phi_inf,G - (phi_inf,G - phi0) e^(-x / s_G), s_G = s (G/4)^nu; R = r0 + (A - r0) phi_G s_G.
phi_inf,G = clip(phi_inf + t (log2(G/4) - 1.5) / 1.5 + U(-0.03, 0.03), 0.05, 1) (more rollouts per prompt: a more
varied training signal where t > 0). c ~ logU[0.01, 0.2], mu ~ U[0, 1], alpha ~ U[0.5, 1.5], phi0 ~ U[0.1, 0.5],
phi_inf ~ U[0.2, 1], t ~ U[-0.15, 0.25], s ~ logU[0.3, 3], nu ~ U[-0.5, 0.5], A ~ U[0.6, 0.95].

Every arm also states seen(x), the family's measure of the data met by x (curriculum: the difficulty reached;
epochs: epochs done; allsame: the informative share of the batch; evalshift: the transfer phi), which the checks
print at F_P and at F.

    python benchmarks/race_blind_check_round45.py --reps 100 --replicates 100 --seed 4545 --out DIR
    python benchmarks/race_blind_check_round45.py --table --explain --out DIR
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41 import GROUPS, _logu, clip_mean
from race_blind_check_round44 import _HW, _HX, _grade, m_sigma, znodes  # registers rounds 31-44's families first
from race_blind_check_round44 import _TW as _QW  # 64-node Gauss-Legendre on [0, 1]
from race_blind_check_round44 import _TX as _QX
from scipy.optimize import brentq
from scipy.special import expit

_CX, _CW = np.polynomial.legendre.leggauss(12)
_CX, _CW = (_CX + 1) / 2, _CW / 2


def informative(g, p):
    """1 - p^g - (1 - p)^g: the chance that a group of g rollouts at pass rate p does not all agree."""
    p = np.asarray(p, dtype=float)
    return 1.0 - p ** g - (1.0 - p) ** g


class _Arm:
    """One arm: ``mean(x)`` the expected pass rate on the evaluation set at x = f / F_P; called with FLOPs (as the
    harness's simulate calls it) the same; ``truth_r45(f)`` the expected clipped pass rate at f over the seed draw."""

    def __init__(self, r0, g):
        self.r0, self.g = float(r0), int(g)

    def __call__(self, f):
        return self.mean(np.asarray(f, dtype=float) / rbc.F_P)

    def kinks(self):
        return []

    def truth_r45(self, f):
        x = float(f) / rbc.F_P
        z, w = znodes(x, self.kinks())
        return float(clip_mean(self.mean(x * np.exp(rbc.SHIFT_SD * z)), self.r0) @ w)


# ---- curriculum -----------------------------------------------------------------------------------------------------
def _sp(t):
    return np.logaddexp(0.0, t)


class Curriculum(_Arm):
    def __init__(self, r0, g, kappa, d, ell, T, a, omega):
        super().__init__(r0, g)
        self.kappa, self.d, self.ell, self.T, self.a, self.omega = kappa, d, ell, T * g / 4, a, omega
        # int_0^1 expit(beta - kappa q) dq = (softplus(beta) - softplus(beta - kappa)) / kappa
        self.beta0 = brentq(lambda b: (_sp(b) - _sp(b - kappa)) / kappa - r0, -60.0, 60.0, xtol=1e-14, rtol=1e-15)

    def rate(self, q):
        return self.a * (self.g / 4) ** (self.omega - 1) * informative(self.g, expit(self.beta0 - self.kappa * q))

    def exposure(self, q, x):
        T, ell = self.T, self.ell
        u1 = np.minimum(x, q * T)
        ordered = ell * T * (np.exp(-(q - u1 / T) / ell) - np.exp(-q / ell))
        caught = np.maximum(np.minimum(x, T) - q * T, 0.0)
        rho = ell * -np.expm1(-q / ell) + 1 - q
        return ordered + caught + rho * np.maximum(x - T, 0.0)

    def mean(self, x):
        x = np.maximum(np.asarray(x, dtype=float), 0.0)[..., None]
        cut = np.minimum(x / self.T, 1.0)
        q = np.concatenate([cut * _QX, cut + (1 - cut) * _QX], axis=-1)
        w = np.concatenate([cut * _QW, (1 - cut) * _QW], axis=-1)
        skill = self.beta0 - self.kappa * q - self.d * np.expm1(-self.rate(q) * self.exposure(q, x))
        return (expit(skill) * w).sum(axis=-1)

    def kinks(self):
        return [self.T]

    def seen(self, x):
        return min(x / self.T, 1.0)


def fam_curriculum(rng, r0):
    kappa, d, ell = rng.uniform(3.0, 7.0), rng.uniform(1.5, 4.0), _logu(rng, 0.05, 0.5)
    T, a, omega = _logu(rng, 0.1, 1.5), _logu(rng, 1.0, 20.0), rng.uniform(0.3, 0.9)
    return [Curriculum(r0, g, kappa, d, ell, T, a, omega) for g in GROUPS]


# ---- epochs ---------------------------------------------------------------------------------------------------------
class Epochs(_Arm):
    def __init__(self, r0, g, A, e, rstar, omega, c, alpha, lam, m0):
        super().__init__(r0, g)
        self.A, self.E, self.rstar, self.omega = A, e * g / 4, rstar, omega
        self.c, self.alpha, self.lam, self.m0 = c, alpha, lam, m0

    def effective(self, eps):
        return np.minimum(eps, 1.0) - self.rstar * np.expm1(-np.maximum(eps - 1.0, 0.0) / self.rstar)

    def mean(self, x):
        eps = np.maximum(np.asarray(x, dtype=float), 0.0) / self.E
        dd = self.effective(eps)
        progress = self.E * 4 / self.g * (self.g / 4) ** self.omega * dd
        gain = -np.expm1(-self.alpha * np.log1p(progress / self.c))
        return self.r0 + (self.A - self.r0) * (gain + self.lam * np.expm1(-(eps - dd) / self.m0))

    def kinks(self):
        return [self.E]

    def seen(self, x):
        return x / self.E


def fam_epochs(rng, r0):
    A = _grade(rng, r0, 0.5, 0.9)
    e, rstar, psi, omega = _logu(rng, 0.1, 1.0), _logu(rng, 0.5, 4.0), rng.uniform(0.0, 0.6), rng.uniform(0.3, 0.9)
    c, alpha, lam, m0 = _logu(rng, 0.03, 0.5), rng.uniform(0.5, 1.5), rng.uniform(0.0, 0.2), _logu(rng, 1.0, 6.0)
    return [Epochs(r0, g, A[i], e, rstar * (4 / g) ** psi, omega, c, alpha, lam, m0) for i, g in enumerate(GROUPS)]


# ---- allsame --------------------------------------------------------------------------------------------------------
class AllSame(_Arm):
    CELL = 0.25

    def __init__(self, r0, g, A, sigma, k):
        super().__init__(r0, g)
        self.A, self.sigma, self.k = A, sigma, k
        self.theta0 = brentq(lambda t: A * float(m_sigma(t, sigma)) - r0, -40.0, 40.0, xtol=1e-14, rtol=1e-15)
        self.grid, self.xs = np.array([self.theta0]), np.array([0.0])
        self._extend(8.0)

    def share(self, theta):
        """I_G(theta): the informative share of a batch (Gauss-Hermite over the prompts)."""
        t = np.asarray(theta, dtype=float)[..., None] + self.sigma * _HX
        return self.A * (informative(self.g, expit(t)) @ _HW)

    def _x_between(self, a, b):
        """FLOPs (in F_P) from theta a to theta b (arrays), Gauss-Legendre."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        t = a[..., None] + (b - a)[..., None] * _CX
        return (b - a) * ((1.0 / (self.k * self.share(t))) @ _CW)

    def _extend(self, x_max):
        if self.xs[-1] >= x_max:
            return
        while self.xs[-1] < x_max:
            lo = self.grid[-1] + self.CELL * np.arange(16)
            dx = self._x_between(lo, lo + self.CELL)
            self.grid = np.concatenate([self.grid, lo + self.CELL])
            self.xs = np.concatenate([self.xs, self.xs[-1] + np.cumsum(dx)])
        self.slopes = self.k * self.share(self.grid)

    def theta(self, x):
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        self._extend(float(np.max(x, initial=0.0)) * 1.01)
        j = np.clip(np.searchsorted(self.xs, x, side="right") - 1, 0, self.xs.size - 2)
        lo, hi = self.grid[j], self.grid[j + 1]
        # start: the cubic through the cell's ends with their slopes d theta / dx = k I_G, then Newton
        h, u = self.xs[j + 1] - self.xs[j], (x - self.xs[j]) / (self.xs[j + 1] - self.xs[j])
        s0, s1 = self.slopes[j] * h, self.slopes[j + 1] * h
        th = (lo * (1 + 2 * u) * (1 - u) ** 2 + s0 * u * (1 - u) ** 2 + hi * u * u * (3 - 2 * u)
              - s1 * u * u * (1 - u))
        th = np.clip(th, lo, hi)
        for _ in range(30):
            step = (self.xs[j] + self._x_between(lo, th) - x) * self.k * self.share(th)
            th = np.clip(th - step, lo, hi)
            if np.all(np.abs(step) < 1e-13):
                break
        return th

    def mean(self, x):
        return self.A * m_sigma(self.theta(x), self.sigma)

    def seen(self, x):
        return float(self.share(self.theta(x))) / self.A


def fam_allsame(rng, r0):
    A = _grade(rng, r0, 0.55, 0.95)
    sigma, k, omega = rng.uniform(0.8, 2.0), _logu(rng, 1.0, 15.0), rng.uniform(0.2, 0.9)
    return [AllSame(r0, g, A[i], sigma, k * (g / 4) ** (omega - 1) * np.exp(rng.uniform(-0.1, 0.1)))
            for i, g in enumerate(GROUPS)]


# ---- evalshift ------------------------------------------------------------------------------------------------------
class EvalShift(_Arm):
    def __init__(self, r0, g, A, c, alpha, phi0, phi_inf, s):
        super().__init__(r0, g)
        self.A, self.c, self.alpha, self.phi0, self.phi_inf, self.s = A, c, alpha, phi0, phi_inf, s

    def transfer(self, x):
        return self.phi_inf - (self.phi_inf - self.phi0) * np.exp(-x / self.s)

    def mean(self, x):
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        train = -np.expm1(-self.alpha * np.log1p(x / self.c))
        return self.r0 + (self.A - self.r0) * self.transfer(x) * train

    def seen(self, x):
        return float(self.transfer(x))


def fam_evalshift(rng, r0):
    A, c, mu, alpha = rng.uniform(0.6, 0.95), _logu(rng, 0.01, 0.2), rng.uniform(0.0, 1.0), rng.uniform(0.5, 1.5)
    phi0, phi_inf, t = rng.uniform(0.1, 0.5), rng.uniform(0.2, 1.0), rng.uniform(-0.15, 0.25)
    s, nu = _logu(rng, 0.3, 3.0), rng.uniform(-0.5, 0.5)
    return [EvalShift(r0, g, A, c * (g / 4) ** mu, alpha, phi0,
                      float(np.clip(phi_inf + t * (np.log2(g / 4) - 1.5) / 1.5 + rng.uniform(-0.03, 0.03), 0.05, 1.0)),
                      s * (g / 4) ** nu) for g in GROUPS]


# ---- the truth the harness states for this round's curves ----------------------------------------------------------
rbc.own_truth("truth_r45")  # this round's curves: the expected clipped pass rate over the harness's seed draw

MINE = {"curriculum": fam_curriculum, "epochs": fam_epochs, "allsame": fam_allsame, "evalshift": fam_evalshift}
rbc.register(MINE, "round 45")


def main():
    """The run (every flag of race_blind_check; without --families, these). The checks of the truths and the leaders:
    benchmarks/race_blind_check_round45_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
