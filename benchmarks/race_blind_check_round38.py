"""Round 38's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog (nor the bodies of rounds 30-37's
families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds,
200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round
37's script is imported first (and with it rounds 31-36), so every key stays unique and these five come after (their
keys and random streams follow round 37's); every flag of race_blind_check works here (without --families, these
five). x below is FLOPs in units of F_P. An optimizer step of arm G samples G rollouts for each of the same number of
prompts, so it costs FLOPs in proportion to G: tau = 4 x / G is the arm's step clock in units of g4's steps per F_P
(replay and toolrl change the cost of a step, and say how). A step's quality grows with the group (a better advantage
estimate): q_G = (G / 4)^gamma. Phi is the normal CDF; every curve is analytic in x > 0, and theta0 (the starting
logit) is solved so that the reward at 0 FLOPs is r0.

klanneal: an adaptive KL controller (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences": beta
    is multiplied by 1 + K_beta e_t per step, e_t the KL's relative error to its target, clipped to +-0.2; the same
    controller is verl's algorithm.kl_ctrl.type=adaptive). Early in a run the KL is far below its target, e_t sits at
    the clip, and beta decays geometrically in optimizer steps: beta(tau) = beta0 exp(-tau / T). The reward signal
    pulls the logit towards theta* at lambda_G = k q_G per step and the KL penalty pulls it back to the start at
    beta(tau): du/dtau = lambda D - (lambda + beta(tau)) u, u = theta - theta0, D = theta* - theta0, so u(tau) = lambda
    D int_0^tau exp(-lambda (tau - s) - b (e^(-s/T) - e^(-tau/T))) ds, b = beta0 T in (1.5, 12), T in (0.1, 1). (The
    series got by expanding exp(-b e^(-s/T)) alternates and loses about 1e-7 to rounding at b = 11, so the truth is
    the ODE by DOP853 at rtol 1e-13, dense output, checked against adaptive quadrature of that integral.) theta* rises
    with the group, D_G = D (G / 4)^zeta, D in (1.5, 3.5), zeta in (0.05, 0.3). While beta >>
    lambda the policy sits at u ~ lambda D / beta(tau), which grows like e^(tau / T) (a rise that speeds up in ln F);
    the schedule counts steps, so g4 is released 8 times sooner per FLOP than g32, whose better steps hold a higher
    quasi-equilibrium while beta is still large. Deterministic.

hackdet: reward hacking through a format exploit, and a detector switched on at a fixed step (Baker et al. 2025,
    "Monitoring Reasoning Models for Misbehavior and the Risks of Promoting Obfuscation": a monitor added to the
    training reward; Skalse et al. 2022, "Defining and Characterizing Reward Hacking"). A lenient training checker
    accepts a malformed answer (say, several boxed candidates) that the strict evaluation scores 0. The share of
    answers using the exploit is h = h_max expit(l) (h_max in (0.4, 0.8): the prompts where the checker can be
    fooled). Any rollout that uses it is rewarded, so it spreads at a per step whatever the group, until the
    detector, whose switch in steps is s(tau) = Phi((tau - T_d) / w), w = T_d / 4, T_d log-uniform in (0.15, 1.2)
    g4-step units, penalises it at c per step: dl/dtau = a - (a + c) s, so l = l_s + a tau - (a + c) w (Psi((tau -
    T_d) / w) - Psi(-T_d / w)), Psi(z) = z Phi(z) + phi(z). A seed finds the exploit at its own time: l_s = l0 +
    sigma Z, l0 in (-7, -4), sigma in (0.4, 1.2); a = -l0 / (rho T_d), rho in (0.6, 2) (g4's exploit would pass 1/2
    at rho T_d without the detector), c = a (0.5, 1.5). The skill learns on its own: theta = theta0 + A_G (1 -
    exp(-k q_G tau)), A_G = A (G / 4)^zeta, A in (1, 2.5), zeta in (0, 0.3). Evaluation reward r_top (1 - h)
    Phi(theta). Every arm goes through the same exploit and detection in steps, so in FLOPs g32's dip comes 8 times
    later than g4's (the detector reaches g32 at 8 T_d F_P, often between F_P and F or past it), while its skill
    climbs towards a higher ceiling. The truth is the expectation over Z of r_top (1 - h) Phi(theta), 96-node
    Gauss-Hermite (checked against adaptive quadrature over Z, and l against DOP853 of its ODE). (A first draft let
    the exploit spread at a q_G: the drop after the detector was then so steep in ln x, hundreds of logits per
    e-fold, that the harness's 30-node average over a seed's timing shift was off by 0.002; now about 1e-11.)

clipcap: the PPO/GRPO ratio clip caps the rise of a rare correct strategy (Schulman et al. 2017, PPO; Yu et al. 2025,
    "DAPO", whose clip-higher answers exactly this: with eps = 0.2 a token at probability 0.01 can rise only to 0.012
    per update, so low-probability exploration is throttled). Hard prompts are solved (share p_max of them) only by a
    strategy of probability p = expit(l), p0 in (0.01, 0.08). Unclipped, a step moves l by v = k_h q_G (1 - (1 -
    p)^G) (1 - p) (a group holds a success with probability 1 - (1 - p)^G); the clip bounds the step's change of ln p,
    so of l, by m = c / (1 - p); the step takes the smooth minimum v m / (v^4 + m^4)^(1/4). Per FLOP, below the cap
    large groups escape the plateau first (4 k_h q_G p, rising with G), at the cap small groups climb faster (c 4 / G):
    the arms cross. Easy prompts (share w_e in (0.2, 0.5)) follow theta_e = theta_e0 + A_e (1 - exp(-k_e q_G tau)); the
    ordinary strategy solves s_h = Phi(theta_e0 - Delta) of the hard ones and does not improve there. Reward r_top
    (w_e Phi(theta_e) + (1 - w_e) (s_h + (p_max - s_h) p)). Deterministic; l(tau) by DOP853 at rtol 1e-12 (dense
    output), checked against the quadrature tau(l) = int dl / rate(l).

toolrl: tool-integrated RL (Li et al. 2025, "ToRL: Scaling Tool-Integrated RL"; Feng et al. 2025, "ReTool"): the
    policy learns to call a code interpreter, which makes answers more accurate (B logits at full use) and longer
    (the tool's output enters the context: a step costs G (1 + c u), c in (0.5, 1.5)). Tool use u spreads as groups
    that hold a tool-using success reinforce it, about G u of them per prompt: u = expit(l_s + alpha_G tau), alpha_G =
    a (G / 4) q_G, so per FLOP large groups adopt the tool first. A seed's first tool call comes at its own time: l_s =
    lu0 + sigma Z, lu0 in (-6, -3.5), sigma in (0.3, 0.9). The FLOP clock is x(tau) = (G / 4) (tau + c (softplus(l_s +
    alpha tau) - softplus(l_s)) / alpha), convex in tau, inverted by Newton from above (monotone, to machine precision;
    checked against brentq and x(tau) against the quadrature of the cost). theta = theta0 + A (1 - exp(-k q_G tau)) +
    B u: small groups learn the plain skill faster per FLOP, large ones adopt the tool first and then pay more per
    step. The truth is the expectation over Z, 96-node Gauss-Hermite (checked against adaptive quadrature over Z).

replay: experience replay of the policy's own verified successes (Zhang et al. 2025, "RLEP: Reinforcement Learning
    with Experience rePlay for LLM Reasoning"; Zhan et al. 2025, "ExGRPO: Learning to Reason from Experience"). A hard
    prompt (pass rate rho in (0.01, 0.06) per rollout) gives signal only when its group holds a success, c_G = 1 - (1
    - rho)^G, until a success is stored; from then on a replayed success joins each of its groups (worth w_r in (0.3,
    0.8) of an on-policy one: importance weighting) and saves one rollout's generation. The buffer's coverage of hard
    prompts is b(tau) = 1 - exp(-v c_G tau). Hard progress H = k_h q_G ((c_G + w_r (1 - c_G)) tau - w_r (1 - c_G) (1 -
    e^(-v c_G tau)) / (v c_G)), theta_h = theta_e0 - Delta + A_h (1 - e^(-H)); easy prompts theta_e = theta_e0 + A_e
    (1 - e^(-k_e q_G tau)); reward r_top (w_e Phi(theta_e) + (1 - w_e) Phi(theta_h)). A step costs G - phi b(tau)
    rollouts (phi = the hard share times generation's share of a rollout's FLOPs), so x(tau) = (G tau - phi (tau - (1 -
    e^(-v c_G tau)) / (v c_G))) / 4, concave, inverted by Newton from below (checked against brentq, and x and H
    against quadrature). Before the buffer fills large groups learn hard prompts faster per FLOP (4 q_G rho), after it
    small ones do (4 q_G w_r / G): the arms cross. Deterministic.

Every family draws its parameters per repetition; --leader-share says how often the arm best at F_P is not the best
at F (seed 3838: klanneal 0.23, hackdet 0.38, clipcap 0.48, toolrl 0.69, replay 0.15). The truth at F is exact to
about 1e-11 or better: closed forms (hackdet; Newton inversions of closed-form FLOP clocks for toolrl and replay),
ODEs solved by DOP853 at rtol 1e-13 and 1e-12 (klanneal, clipcap) and Gauss-Hermite expectations over a seed's Z
(hackdet, toolrl), every curve smooth enough in ln x that the harness's 30-node average over a seed's timing shift is
converged (to 1e-9 or better against a fine trapezoid; clipcap 1.5e-6);
--truth-check checks each by Monte Carlo of seeds (round 32's check) and by an independent quadrature or solver
(_exactness).

    python benchmarks/race_blind_check_round38.py --families klanneal hackdet clipcap toolrl replay \
        --reps 100 --replicates 100 --seed 3838 --out race-blind-check     # round 38
    python benchmarks/race_blind_check_round38.py --leader-share --reps 100 --seed 3838   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round38.py --truth-check --seed 3838   # Monte Carlo of the stated truths
    python benchmarks/race_blind_check_round38.py --table --explain --out race-blind-check   # the table of the rows
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 37's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32
import race_blind_check_round34 as r34
import race_blind_check_round36 as r36
import race_blind_check_round37 as r37  # registers rounds 31-37's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.special import expit, exprel, ndtr, ndtri

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r37.GROUPS  # the arms g4, g8, g16, g32
X_MAX = 20.0  # clipcap's ODE is solved up to this many F_P (truth_at's widest node reaches about 6 F_P)

_x, _logu = r34._x, r34._logu  # FLOPs in units of F_P; a log-uniform draw

_ZX, _ZW = r37._ZX, r37._ZW  # 96-node Gauss-Hermite over a seed's Z ~ N(0, 1), normalised
_q, _softplus = r36._quality, r36._softplus  # (G / 4)^gamma: a step's quality; log(1 + e^z)
_npdf, _psi = r37._npdf, r37._psi  # the normal density; z Phi(z) + phi(z)


class _PerSeed:
    """A seed of an arm whose seeds differ by Z: its curve f -> reward."""

    def __init__(self, parent, z):
        self.p, self.z = parent, z

    def __call__(self, f):
        return self.p.seed_reward(f, self.z)


class _SeedsDiffer:
    """An arm whose seeds differ by their own Z ~ N(0, 1) (seed_reward(f, z)); called, it is the expectation over Z
    (96-node Gauss-Hermite), checked against adaptive quadrature (expect_quad)."""

    def seed_reward(self, f, z):
        raise NotImplementedError

    def __call__(self, f):
        f = np.asarray(f, dtype=float)
        return (self.seed_reward(f[..., None], _ZX) * _ZW).sum(axis=-1)

    def draw_seeds(self, rng, n):
        return [_PerSeed(self, z) for z in rng.standard_normal(n)]

    def expect_quad(self, f):
        fn = lambda z: float(self.seed_reward(np.float64(f), z)) * _npdf(z)  # noqa: E731
        return quad(fn, -12, 12, epsabs=1e-13, epsrel=1e-12, limit=400)[0]


# ---- klanneal --------------------------------------------------------------------------------------------------------
class KLAnneal:
    def __init__(self, g, r0, r_top, lam, D, b, T):
        self.g, self.r_top, self.lam, self.D, self.b, self.T = g, r_top, lam, D, b, T
        self.th0 = float(ndtri(r0 / r_top))
        self.tau_max = 4 * X_MAX / g
        self.sol = self.solve(None)

    def u(self, tau):
        tau = np.asarray(tau, dtype=float)
        return self.sol.sol(tau.ravel())[0].reshape(tau.shape)

    def beta(self, tau):
        return self.b / self.T * np.exp(-tau / self.T)

    def __call__(self, f):
        tau = 4 * _x(f) / self.g
        return self.r_top * ndtr(self.th0 + self.u(tau))

    def solve(self, taus, method="DOP853"):
        """The ODE from 0: dense to tau_max (taus None, DOP853, the truth), else at taus (the check: Radau)."""
        rhs = lambda t, y: [self.lam * self.D - (self.lam + self.beta(t)) * y[0]]  # noqa: E731
        end = self.tau_max if taus is None else float(max(taus))
        return solve_ivp(rhs, (0, end), [0.0], method=method, t_eval=taus, dense_output=taus is None, rtol=1e-13,
                         atol=1e-15)

    def u_quad(self, tau):
        fn = lambda s: math.exp(-self.lam * (tau - s) - self.b * (math.exp(-s / self.T)  # noqa: E731
                                                                 - math.exp(-tau / self.T)))
        return self.lam * self.D * quad(fn, 0, tau, epsabs=1e-14, epsrel=1e-13, limit=400)[0]


def fam_klanneal(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    k = _logu(rng, 0.5, 4.0)
    D = rng.uniform(1.5, 3.5)
    b = rng.uniform(1.5, 12.0)
    T = _logu(rng, 0.1, 1.0)
    zeta = rng.uniform(0.05, 0.3)
    r_top = rng.uniform(0.85, 0.97)
    return [KLAnneal(g, r0, r_top, k * _q(g, gamma), D * (g / 4) ** zeta, b, T) for g in GROUPS]


# ---- hackdet ---------------------------------------------------------------------------------------------------------
class HackDet(_SeedsDiffer):
    def __init__(self, g, r0, r_top, q, k, A, l0, sigma, a, c, T_d, h_max):
        self.g, self.r_top, self.q, self.k, self.A, self.h_max = g, r_top, q, k, A, h_max
        self.l0, self.sigma, self.a, self.c, self.T_d, self.w = l0, sigma, a, c, T_d, T_d / 4
        h0 = h_max * float((expit(l0 + sigma * _ZX) * _ZW).sum())
        self.th0 = float(ndtri(r0 / (r_top * (1 - h0))))

    def drift(self, tau):  # l - l_s
        tau = np.asarray(tau, dtype=float)
        w, T = self.w, self.T_d
        return self.a * tau - (self.a + self.c) * w * (_psi((tau - T) / w) - _psi(-T / w))

    def theta(self, tau):
        return self.th0 + self.A * -np.expm1(-self.k * self.q * tau)

    def seed_reward(self, f, z):
        tau = 4 * _x(f) / self.g
        h = self.h_max * expit(self.l0 + self.sigma * z + self.drift(tau))
        return self.r_top * (1 - h) * ndtr(self.theta(tau))

    def solve(self, taus):
        rhs = lambda t, y: [self.a - (self.a + self.c) * ndtr((t - self.T_d) / self.w)]  # noqa: E731
        return solve_ivp(rhs, (0, float(max(taus))), [0.0], method="DOP853", t_eval=taus, rtol=1e-13, atol=1e-14)


def fam_hackdet(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    k = _logu(rng, 0.3, 3.0)
    A = rng.uniform(1.0, 2.5)
    zeta = rng.uniform(0.0, 0.3)
    l0 = rng.uniform(-7.0, -4.0)
    sigma = rng.uniform(0.4, 1.2)
    T_d = _logu(rng, 0.15, 1.2)
    a = -l0 / (rng.uniform(0.6, 2.0) * T_d)  # g4's exploit would pass 1/2 at (0.6, 2) T_d without the detector
    c = a * rng.uniform(0.5, 1.5)
    h_max = rng.uniform(0.4, 0.8)  # the share of prompts where the lenient checker can be fooled
    r_top = rng.uniform(0.85, 0.97)
    return [HackDet(g, r0, r_top, _q(g, gamma), k, A * (g / 4) ** zeta, l0, sigma, a, c, T_d, h_max) for g in GROUPS]


# ---- clipcap ---------------------------------------------------------------------------------------------------------
class ClipCap:
    def __init__(self, g, r0, r_top, q, k_h, c, l0, p_max, w_e, A_e, k_e, delta):
        self.g, self.r_top, self.q, self.k_h, self.c, self.l0 = g, r_top, q, k_h, c, l0
        self.p_max, self.w_e, self.A_e, self.k_e, self.delta = p_max, w_e, A_e, k_e, delta
        self.th0 = brentq(lambda t: self.reward(t, l0, ndtr(t - delta)) - r0, -30, 30, xtol=1e-14, rtol=1e-15)
        self.s_h = float(ndtr(self.th0 - delta))  # hard prompts the ordinary strategy solves (it does not improve)
        self.tau_max = 4 * X_MAX / g
        self.sol = solve_ivp(lambda t, y: [self.rate(y[0])], (0, self.tau_max), [l0], method="DOP853",
                             dense_output=True, rtol=1e-12, atol=1e-13)

    def rate(self, l):
        pm = expit(-l)  # 1 - p
        v = self.k_h * self.q * -np.expm1(self.g * np.log(pm)) * pm
        m = self.c / pm
        return v * m / (v**4 + m**4) ** 0.25

    def logit(self, tau):
        tau = np.asarray(tau, dtype=float)
        return self.sol.sol(tau.ravel())[0].reshape(tau.shape)

    def reward(self, th_e, l, s_h):
        return self.r_top * (self.w_e * ndtr(th_e) + (1 - self.w_e) * (s_h + (self.p_max - s_h) * expit(l)))

    def __call__(self, f):
        tau = 4 * _x(f) / self.g
        th_e = self.th0 + self.A_e * -np.expm1(-self.k_e * self.q * tau)
        return self.reward(th_e, self.logit(tau), self.s_h)


def fam_clipcap(rng, r0):
    gamma = rng.uniform(0.2, 0.6)
    l0 = rng.uniform(-4.5, -2.5)
    p0 = float(expit(l0))
    k_h = 1.0 / (4 * p0 * _logu(rng, 1.0, 8.0))  # g4 leaves the plateau after about 1 / (4 k_h p0) steps
    c = _logu(rng, 1.0, 8.0)  # the clip's bound on ln p per g4-step unit
    p_max = rng.uniform(0.6, 0.95)
    w_e = rng.uniform(0.2, 0.5)
    A_e = rng.uniform(0.5, 1.5)
    k_e = _logu(rng, 1.0, 6.0)
    delta = rng.uniform(1.0, 2.5)
    r_top = rng.uniform(0.85, 0.97)
    return [ClipCap(g, r0, r_top, _q(g, gamma), k_h, c, l0, p_max, w_e, A_e, k_e, delta) for g in GROUPS]


# ---- toolrl ----------------------------------------------------------------------------------------------------------
class ToolRL(_SeedsDiffer):
    def __init__(self, g, r0, r_top, q, k, A, B, lu0, sigma, alpha, c):
        self.g, self.r_top, self.q, self.k, self.A, self.B = g, r_top, q, k, A, B
        self.lu0, self.sigma, self.alpha, self.c = lu0, sigma, alpha, c
        start = lambda t: float((ndtr(t + B * expit(lu0 + sigma * _ZX)) * _ZW).sum()) * r_top - r0  # noqa: E731
        self.th0 = brentq(start, -30, 30, xtol=1e-14, rtol=1e-15)

    def x_of(self, tau, ls):
        return self.g / 4 * (tau + self.c * (_softplus(ls + self.alpha * tau) - _softplus(ls)) / self.alpha)

    def steps(self, x, ls):
        """tau with x_of(tau) = x: Newton from tau = 4 x / G (above the root; x_of is convex and increasing)."""
        if np.ndim(x) == 0 and np.ndim(ls) == 0:  # one seed at one FLOP count (Monte Carlo): plain floats
            x, ls, t = float(x), float(ls), 4 * float(x) / self.g
            sp0 = math.log1p(math.exp(ls)) if ls < 30 else ls
            for _ in range(100):
                z = ls + self.alpha * t
                sp = (math.log1p(math.exp(z)) if z < 30 else z + math.log1p(math.exp(-z)))
                err = self.g / 4 * (t + self.c * (sp - sp0) / self.alpha) - x
                step = err / (self.g / 4 * (1 + self.c / (1 + math.exp(-z))))
                t -= step
                if abs(step) <= 1e-13 * max(t, 1e-300):
                    break
            return t
        x, ls = np.broadcast_arrays(np.asarray(x, float), np.asarray(ls, float))
        t = 4 * x / self.g
        for _ in range(100):
            err = self.x_of(t, ls) - x
            step = err / (self.g / 4 * (1 + self.c * expit(ls + self.alpha * t)))
            t = t - step
            if np.all(np.abs(step) <= 1e-13 * np.maximum(t, 1e-300)):
                break
        return t

    def seed_reward(self, f, z):
        ls = self.lu0 + self.sigma * z
        tau = self.steps(_x(f), ls)
        th = self.th0 + self.A * -np.expm1(-self.k * self.q * tau) + self.B * expit(ls + self.alpha * tau)
        return self.r_top * ndtr(th)


def fam_toolrl(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    k = _logu(rng, 0.3, 3.0)
    A = rng.uniform(0.8, 2.0)
    B = rng.uniform(0.5, 1.5)
    lu0 = rng.uniform(-6.0, -3.5)
    sigma = rng.uniform(0.3, 0.9)
    a = -lu0 / _logu(rng, 0.5, 4.0)  # g4's tool use reaches 1/2 at tau in (0.5, 4) (before the cost)
    c = rng.uniform(0.5, 1.5)
    r_top = rng.uniform(0.85, 0.97)
    return [ToolRL(g, r0, r_top, _q(g, gamma), k, A, B, lu0, sigma, a * (g / 4) * _q(g, gamma), c) for g in GROUPS]


# ---- replay ----------------------------------------------------------------------------------------------------------
class Replay:
    def __init__(self, g, r0, r_top, q, rho, v, w_r, k_h, k_e, A_e, A_h, delta, w_e, phi):
        self.g, self.r_top, self.q, self.v, self.w_r, self.k_h, self.k_e = g, r_top, q, v, w_r, k_h, k_e
        self.A_e, self.A_h, self.delta, self.w_e, self.phi = A_e, A_h, delta, w_e, phi
        self.cg = float(-np.expm1(g * np.log1p(-rho)))
        self.fill = v * self.cg  # the buffer's rate per step
        start = lambda t: r_top * (w_e * ndtr(t) + (1 - w_e) * ndtr(t - delta)) - r0  # noqa: E731
        self.th0 = brentq(start, -30, 30, xtol=1e-14, rtol=1e-15)

    def _lag(self, tau):  # int_0^tau b = tau - (1 - e^(-fill tau)) / fill
        return tau - tau * exprel(-self.fill * tau)

    def x_of(self, tau):
        return (self.g * tau - self.phi * self._lag(tau)) / 4

    def steps(self, x):
        """tau with x_of(tau) = x: Newton from tau = 4 x / G (below the root; x_of is concave and increasing)."""
        x = np.asarray(x, dtype=float)
        t = 4 * x / self.g
        for _ in range(100):
            step = (self.x_of(t) - x) / ((self.g - self.phi * -np.expm1(-self.fill * t)) / 4)
            t = t - step
            if np.all(np.abs(step) <= 1e-13 * np.maximum(t, 1e-300)):
                break
        return t

    def hard(self, tau):
        return self.k_h * self.q * (self.cg * tau + self.w_r * (1 - self.cg) * self._lag(tau))

    def __call__(self, f):
        tau = self.steps(_x(f))
        th_e = self.th0 + self.A_e * -np.expm1(-self.k_e * self.q * tau)
        th_h = self.th0 - self.delta + self.A_h * -np.expm1(-self.hard(tau))
        return self.r_top * (self.w_e * ndtr(th_e) + (1 - self.w_e) * ndtr(th_h))


def fam_replay(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    rho = rng.uniform(0.01, 0.06)
    v = 1.0 / (4 * rho * _logu(rng, 1.0, 6.0))  # the buffer fills at about x in (1, 6) for every arm
    w_r = rng.uniform(0.3, 0.8)
    k_h = 1.0 / (w_r * _logu(rng, 0.5, 4.0))  # with a full buffer, g4 learns hard prompts over x in (0.5, 4)
    k_e = _logu(rng, 1.0, 6.0)
    A_e, A_h, delta = rng.uniform(1.0, 2.5), rng.uniform(1.5, 3.0), rng.uniform(1.5, 3.0)
    w_e = rng.uniform(0.2, 0.45)
    phi = (1 - w_e) * rng.uniform(0.4, 0.75)
    r_top = rng.uniform(0.85, 0.97)
    return [Replay(g, r0, r_top, _q(g, gamma), rho, v, w_r, k_h, k_e, A_e, A_h, delta, w_e, phi) for g in GROUPS]


MINE = {"klanneal": fam_klanneal, "hackdet": fam_hackdet, "clipcap": fam_clipcap, "toolrl": fam_toolrl,
        "replay": fam_replay}
rbc.register(MINE, "round 38")


def _exactness(fam, reps, seed):
    """The families' own exactness checks, independent of the seed Monte Carlo: klanneal's series against DOP853 of
    its ODE (rtol 1e-13) and adaptive quadrature of its integral; hackdet's exploit logit against DOP853 and its
    Gauss-Hermite expectation against adaptive quadrature over Z; clipcap's dense DOP853 solution against the
    quadrature tau(l) = int dl / rate(l); toolrl's Newton inversion against brentq, its clock against the quadrature
    of the cost per step, and its Gauss-Hermite expectation against quadrature over Z; replay's Newton inversion
    against brentq and its clock and hard progress against quadrature; r(0) = r0 for every arm; and the range of the
    curves (200 seeds' for hackdet and toolrl) on the evaluation grid (the harness clips at 0.002 and 0.998)."""
    idx = list(rbc.FAMILIES).index(fam)
    worst, lo, hi = 0.0, 1.0, 0.0
    grid = np.concatenate([rbc.EVALS0, rbc.EVALS1, [F]])[None, :] * np.exp(0.6 * np.linspace(-1, 1, 5))[:, None]
    xs = np.array([0.05, 0.3, 1.0, 2.0, 4.0])
    for rep in range(reps):
        rng = np.random.default_rng([seed, idx, rep])
        r0 = rng.uniform(0.1, 0.3)
        curves = rbc.FAMILIES[fam](rng, r0)
        for c in curves:
            worst = max(worst, abs(float(c(1e-30 * F_P)) - r0))  # the start, r0 (x = 1e-30)
            if isinstance(c, KLAnneal):
                taus = 4 * xs / c.g
                worst = max(worst, max(abs(float(c.u(t)) - c.u_quad(t)) for t in taus))
            elif isinstance(c, HackDet):
                taus = 4 * xs / c.g
                ref = c.solve(taus)
                worst = max(worst, float(np.abs(c.drift(taus) - ref.y[0]).max()))
                for x in xs:
                    worst = max(worst, abs(float(c(x * F_P)) - c.expect_quad(x * F_P)))
            elif isinstance(c, ClipCap):
                for frac in (0.2, 0.5, 0.8, 0.95):
                    l_t = c.l0 + frac * (float(c.logit(c.tau_max / 4)) - c.l0)
                    t_l = quad(lambda l, c=c: 1 / c.rate(l), c.l0, l_t, epsabs=1e-13, epsrel=1e-12, limit=400)[0]
                    worst = max(worst, abs(float(c.logit(t_l)) - l_t))
            elif isinstance(c, ToolRL):
                for z in (-2.0, 0.0, 2.0):
                    ls = c.lu0 + c.sigma * z
                    for x in xs:
                        t = c.steps(np.array(x), np.array(ls))
                        tb = brentq(lambda s, c=c, ls=ls, x=x: c.x_of(s, ls) - x, 0, 4 * x / c.g, xtol=1e-15,
                                    rtol=1e-15)
                        worst = max(worst, abs(float(t) - tb), abs(c.steps(x, ls) - tb))
                        cost = quad(lambda s, c=c, ls=ls: c.g / 4 * (1 + c.c * expit(ls + c.alpha * s)), 0, tb,
                                    epsabs=1e-14, epsrel=1e-13)[0]
                        worst = max(worst, abs(cost - x))
                for x in xs:
                    worst = max(worst, abs(float(c(x * F_P)) - c.expect_quad(x * F_P)))
            elif isinstance(c, Replay):
                for x in xs:
                    t = float(c.steps(x))
                    tb = brentq(lambda s, c=c, x=x: c.x_of(s) - x, 4 * x / c.g, 4 * x / (c.g - c.phi) + 1e-12,
                                xtol=1e-15, rtol=1e-15)
                    worst = max(worst, abs(t - tb))
                    cost = quad(lambda s, c=c: (c.g - c.phi * -math.expm1(-c.fill * s)) / 4, 0, tb, epsabs=1e-14,
                                epsrel=1e-13)[0]
                    sig = quad(lambda s, c=c: c.k_h * c.q * (c.cg + c.w_r * (1 - c.cg) * -math.expm1(-c.fill * s)),
                               0, tb, epsabs=1e-14, epsrel=1e-13)[0]
                    worst = max(worst, abs(cost - x), abs(sig - float(c.hard(tb))))
            vals = r34.grid_values(c, grid, seed, idx, rep)
            lo, hi = min(lo, float(vals.min())), max(hi, float(vals.max()))
    return worst, lo, hi


def truth_check(families, reps, seed, n_mc):
    """Round 32's Monte Carlo of the stated truths at F (seeds drawn as the harness draws them), then each family's
    own exactness check (_exactness)."""
    r32.truth_check(families, reps, seed, n_mc)
    r34.report_exactness(families, MINE, _exactness, reps, seed, "closed form - independent quadrature or solver")


if __name__ == "__main__":
    r32.run_cli(MINE, 3838, r32.leader_share, truth_check)
