"""Round 35's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog (nor the bodies of rounds 31-34's
families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds,
200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round
34's script is imported (and with it rounds 31-33), so every key stays unique; these five follow them (their keys and
random streams come after round 34's), and every flag of race_blind_check works here (without --families, these
five). x below is FLOPs in units of F_P; a step of an arm costs FLOPs in proportion to its group size G (the prompts
per step are the same for every arm), so g4 takes 8 times the optimizer steps of g32 per FLOP.

gnoise: the gradient-noise scale grows as training converges (McCandlish et al. 2018, "An Empirical Model of
    Large-Batch Training": B_noise = tr(Sigma) / |g|^2 rises as the gradient shrinks), under the constant learning
    rate and Adam that GRPO recipes use. Adam's update has a fixed size eta whatever the signal, and the part of it that
    points at the optimum is the cosine D / sqrt(D^2 + nu_G^2) between the batch gradient and the true one, D the
    distance to the optimum in logit units and nu_G ~ G^-1/2 the noise of a batch's gradient in the same units; the
    rest of the step is noise that pushes D out (d D^2 = eta^2 zeta sin^2 per step). So dD/ds = -eta D / sqrt(D^2 +
    nu^2) + eta kappa nu^2 / (D (D^2 + nu^2)): far from the optimum every arm moves a fixed distance per step (g4 eight
    times g32's per FLOP: large groups are wasted early), near it small groups stall at a noise floor D_inf ~ G^-1/4
    that large groups get under (large groups become efficient only later). Reward Phi(theta* - D). Deterministic; the
    truth is the ODE solved by DOP853 to rtol 1e-13 (dense output), checked against the quadrature x(D) = int dD /
    rate(D).

stale: asynchronous rollouts (Noukhovitch et al. 2024, "Asynchronous RLHF"; Fu et al. 2025, AReaL). The generator
    runs ahead of the trainer by a buffer of fixed size, so the samples a step learns from are K / G optimizer steps
    old: small groups are the stalest. The importance-ratio clip discards the part of a stale sample's gradient the
    policy has moved past, and the policy moves more per step the sharper it gets, so the loss grows with progress;
    what the clip lets through is biased, so a stale arm settles below the others: du/dx = c_G (u_inf_G - u) / (1 +
    kappa_G u), c_G ~ G^(gamma - 1) (more steps per FLOP for small G, a better step for large G), kappa_G ~ 1 / G,
    1 - u_inf_G ~ 1 / G. Small groups lead early and slow down; larger ones catch up and settle higher. Reward
    r0 + (r_top - r0) u, u in closed form by the Lambert W function (with w = 1 - u / u_inf and k = kappa u_inf,
    w exp(-a w) = exp(-(k + c x) / (1 + k)), a = k / (1 + k)).

prune: pruning "solved" prompts from a finite training pool (Skywork-OR1, He et al. 2025, and DAPO-style filtering,
    Yu et al. 2025, drop a prompt once a group of its rollouts is all correct). With a small group that verdict is
    noisy: a prompt at pass rate 0.6 is all-correct in a group of 4 13 % of the time and in a group of 32 almost never,
    so small groups strip the pool of the middling prompts that carry the learning signal and are left with hard ones.
    The pool is a share z0 of unsolvable prompts (no signal, never pruned) and 24 strata of difficulty d_k (equal
    shares, quantiles of N(0, s^2)); per FLOP the policy's logit moves c_G 4 (the mean over the prompts still in the
    pool of p (1 - p): the expected GRPO gradient of a 0/1 reward, (1 - 1/G) p (1 - p), times a per-step gain
    G^gamma), and a stratum's share S_k falls at the rate it is visited (~ 1 / (G pool): more visits per FLOP for small
    groups and for a smaller pool) times p_k^G. Reward: (1 - z0) times the pass rate over all strata (the evaluation
    prompts are not pruned). The truth is the 25-state ODE solved by DOP853 to rtol 1e-12 (dense output), checked
    against an independent Radau solve.

rmshift: a learned reward model whose agreement with the gold reward decays as the policy leaves the distribution it
    was trained on (Gao, Schulman & Hilton 2023, "Scaling Laws for Reward Model Overoptimization": the proxy-gold gap
    grows with the KL optimised away). Here gold never falls: its gain per unit of proxy gain is (1 + d)^-kappa, d the
    policy's distance from the start, which grows with the signal (alpha per logit gained) and with the noise of the
    updates (a random walk of the policy, beta per FLOP ~ G^-2: per step ~ 1/G, steps ~ 1/G), so small groups spend
    their distance on noise and their gold gain dries up sooner, large groups start slower and go further. Gold logit
    theta(x) = c_G / a_G phi(a_G x), a_G = alpha c_G + beta_G, phi(z) = ((1 + z)^(1 - kappa) - 1) / (1 - kappa) (a
    ceiling for kappa > 1, a slowing power law below); reward r_top Phi(theta0 + theta). Closed form.

interfere: multi-task interference (the measured task A trained in a mixture with another domain B; conflicting
    gradients, Yu et al. 2020, "Gradient Surgery for Multi-Task Learning"; cross-domain RL mixtures, e.g. Cheng et al.
    2025, "Guru"). A's logit relaxes to its target at rate lambda, and while B is taking off (its progress a logistic
    u_B with midpoint T and width w) B's gradient drags A by c u_B'(tau): theta_A = theta* + (theta_A0 - theta*)
    e^(-lambda tau) - c int_0^tau e^(-lambda (tau - s)) u_B'(s) ds, a dip and a recovery, in closed form by the
    incomplete beta function. Time tau is the arm's update clock, x (G/4)^(gamma - 1); B is hard, so its take-off T_G in
    updates falls with G like 1 / (1 - (1 - q)^G) (a group must hold a success). A seed's B takes off at its own
    T_G e^(sigma Z) (which run "clicks" first is luck); the truth is the expectation over Z, a trapezoid over Z in
    [-9, 9] (1601 points), checked against adaptive quadrature.

Every family draws its parameters per repetition; the arms' curves can cross (the arm best at F_P is often not the
best at F: --leader-share). The truth at F is exact: an ODE solved to 1e-12 or better (gnoise, prune), closed forms
(stale, rmshift) and a closed form averaged over the seeds by a converged trapezoid (interfere); --truth-check checks
each by Monte Carlo of seeds (round 32's check) and by an independent quadrature or solver.

    python benchmarks/race_blind_check_round35.py --families gnoise stale prune rmshift interfere \
        --reps 100 --replicates 100 --seed 3535 --out race-blind-check     # round 35
    python benchmarks/race_blind_check_round35.py --leader-share --reps 100 --seed 3535   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round35.py --truth-check --seed 3535   # Monte Carlo of the stated truths
    python benchmarks/race_blind_check_round35.py --table --explain --out race-blind-check   # the table of the rows
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 34's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32
import race_blind_check_round34 as r34  # registers rounds 31, 32, 33 and 34's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.special import beta as beta_fn
from scipy.special import betainc, expit, lambertw, ndtr, ndtri

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r34.GROUPS  # the arms g4, g8, g16, g32
X_MAX = 20.0  # the ODEs are solved up to this many F_P (truth_at's widest node reaches F e^(0.15 * 9.7) = 8.6 F_P)


def _x(f):
    """FLOPs in units of F_P."""
    return np.asarray(f, dtype=float) / F_P


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _dense(sol, f):
    """A dense ODE solution's first component at FLOPs f (any shape), clipped to [0, X_MAX]."""
    x = np.clip(_x(f), 0.0, X_MAX)
    return sol.sol(x.ravel())[0].reshape(x.shape)


# ---- 1. gradient-noise scale: Adam's fixed step, a cosine that falls near the optimum --------------------------------
class GNoise:
    """One arm: distance D to the optimum (logit units) with dD/dx = -v h(D), h(D) = D / sqrt(D^2 + nu^2) - kappa nu^2
    / (D (D^2 + nu^2)) (zero at the floor D_inf); reward Phi(theta* - D)."""

    def __init__(self, top, d0, v, nu, kappa):
        self.top, self.d0, self.v, self.nu, self.kappa = top, d0, v, nu, kappa
        self.floor = self.floor_of(nu, kappa)
        self.sol = solve_ivp(lambda x, y: -v * self.h(y), (0.0, X_MAX), [d0], method="DOP853", rtol=1e-13,
                             atol=1e-14, dense_output=True)

    @staticmethod
    def floor_of(nu, kappa):
        """D_inf: D^2 sqrt(D^2 + nu^2) = kappa nu^2, i.e. y^3 + nu^2 y^2 = kappa^2 nu^4 with y = D^2."""
        y = brentq(lambda y: y**3 + nu**2 * y**2 - kappa**2 * nu**4, 0.0, 10.0 + kappa * nu, xtol=1e-300,
                   rtol=4 * np.finfo(float).eps)
        return float(np.sqrt(y))

    def h(self, d):
        d = np.asarray(d, dtype=float)
        s = d * d + self.nu**2
        return d / np.sqrt(s) - self.kappa * self.nu**2 / (d * s)

    def distance(self, f):
        return _dense(self.sol, f)

    def __call__(self, f):
        return ndtr(self.top - self.distance(f))


def fam_gnoise(rng, r0):
    top = float(ndtri(rng.uniform(0.66, 0.92)))  # the ceiling's logit (probit)
    d0 = top - float(ndtri(r0))
    floor4 = rng.uniform(0.2, 0.75) * min(1.0, 0.8 * d0)  # g4's noise floor
    nu4 = _logu(rng, 0.3, 1.5)  # g4's batch-gradient noise, logit units
    kappa = floor4**2 * np.sqrt(floor4**2 + nu4**2) / nu4**2
    t4 = _logu(rng, 0.08, 1.0)  # g4's time (F_P) to cover d0 - floor4 at full speed
    v4 = (d0 - floor4) / t4
    return [GNoise(top, d0, v4 * 4 / g, nu4 * np.sqrt(4 / g), kappa) for g in GROUPS]


# ---- 2. asynchronous rollouts: staleness K / G steps, a clip loss that grows with progress ---------------------------
class Stale:
    """du/dx = c (u_inf - u) / (1 + kappa u), u(0) = 0; reward r0 + (top - r0) u. With w = 1 - u / u_inf and
    k = kappa u_inf: -(1 + k) ln w - k (1 - w) = c x, i.e. w exp(-a w) = exp(-(k + c x) / (1 + k)), a = k / (1 + k)."""

    def __init__(self, r0, top, c, kappa, u_inf):
        self.r0, self.top, self.c, self.kappa, self.u_inf = r0, top, c, kappa, u_inf

    def progress(self, f):
        x = np.maximum(_x(f), 0.0)
        k = self.kappa * self.u_inf
        a = k / (1 + k)
        e = np.exp(-(k + self.c * x) / (1 + k))
        w = -lambertw(-a * e, 0).real / a  # the principal branch (a w <= a < 1)
        return self.u_inf * (1.0 - w)

    def x_of(self, u):
        """The inverse, by quadrature of dx/du (independent of the closed form)."""
        return quad(lambda s: (1 + self.kappa * s) / (self.c * (self.u_inf - s)), 0.0, u, epsabs=1e-14,
                    epsrel=1e-13)[0]

    def __call__(self, f):
        return self.r0 + (self.top - self.r0) * self.progress(f)


def fam_stale(rng, r0):
    top = rng.uniform(0.6, 0.9)
    kappa4 = _logu(rng, 0.5, 8.0)  # g4's clip loss at full progress (its staleness is 8 times g32's)
    gam = rng.uniform(0.3, 0.85)  # a step's gain in G: G^gamma
    half4 = _logu(rng, 0.15, 1.5)  # g4 is half-way (u = 1/2) at half4 F_P
    bias4 = rng.uniform(0.05, 0.35)  # g4's off-policy bias: its fixed point is u = 1 - bias4 (~ 1/G)
    c4 = ((1 + kappa4) * np.log(2) - kappa4 / 2) / half4  # (g4 at u_inf = 1)
    return [Stale(r0, top, c4 * (g / 4) ** (gam - 1), kappa4 * 4 / g, 1 - bias4 * 4 / g) for g in GROUPS]


# ---- 3. pruning the prompts a group got all right --------------------------------------------------------------------
K_STRATA = 24


class Prune:
    """State (theta, ln S_1..ln S_K): dtheta/dx = c 4 sum S p (1 - p) / sum S, d ln S_k/dx = -e p_k^G / mean S;
    p_k = expit(theta - d_k); reward mean_k expit(theta - d_k) (the evaluation prompts are never pruned)."""

    def __init__(self, d, z0, theta0, g, c, e):
        self.d, self.z0, self.theta0, self.g, self.c, self.e = d, z0, theta0, g, c, e
        self.sol = self.solve("DOP853", 1e-12, 1e-13, dense=True)

    def rhs(self, x, y):
        p = expit(y[0] - self.d)
        s = np.exp(y[1:])
        ms = (1 - self.z0) * s.mean() + self.z0  # the unsolvable share is never pruned
        return np.concatenate([[self.c * 4 * (1 - self.z0) * (s * p * (1 - p)).mean() / ms], -self.e * p**self.g / ms])

    def solve(self, method, rtol, atol, dense=False, t_eval=None):
        y0 = np.concatenate([[self.theta0], np.zeros(self.d.size)])
        return solve_ivp(self.rhs, (0.0, X_MAX), y0, method=method, rtol=rtol, atol=atol, dense_output=dense,
                         t_eval=t_eval)

    def reward_of(self, theta):
        theta = np.asarray(theta, dtype=float)
        return (1 - self.z0) * expit(theta[..., None] - self.d).mean(axis=-1)

    def __call__(self, f):
        return self.reward_of(_dense(self.sol, f))


def _theta_for(d, r):
    return brentq(lambda t: expit(t - d).mean() - r, -40.0, 40.0, xtol=1e-14, rtol=4 * np.finfo(float).eps)


def fam_prune(rng, r0):
    sd = rng.uniform(1.0, 2.5)
    d = sd * ndtri((np.arange(K_STRATA) + 0.5) / K_STRATA)
    z0 = rng.uniform(0.08, 0.3)  # unsolvable prompts (wrong labels, out of reach): no signal, never pruned
    theta0 = _theta_for(d, r0 / (1 - z0))
    gam = rng.uniform(0.4, 0.9)
    c4 = _logu(rng, 2.0, 12.0)  # g4's logit speed at p (1 - p) = 1/4, per F_P
    e4 = _logu(rng, 3.0, 20.0)  # g4's visits per prompt (epochs) per F_P
    return [Prune(d, z0, theta0, g, c4 * (g / 4) ** (gam - 1) * (1 - 1 / g) / 0.75, e4 * 4 / g) for g in GROUPS]


# ---- 4. a learned reward model that agrees less with gold the further the policy goes --------------------------------
class RMShift:
    """Gold logit theta(x) = c / a phi(a x), phi(z) = ((1 + z)^(1 - kappa) - 1) / (1 - kappa); reward
    top Phi(theta0 + theta)."""

    def __init__(self, top, theta0, c, a, kappa):
        self.top, self.theta0, self.c, self.a, self.kappa = top, theta0, c, a, kappa

    def gold(self, f):
        z = self.a * np.maximum(_x(f), 0.0)
        k1 = 1.0 - self.kappa
        return self.c / self.a * np.expm1(k1 * np.log1p(z)) / k1

    def gold_quad(self, x):
        """theta(x) = int_0^x c (1 + a s)^-kappa ds by adaptive quadrature (independent of the closed form)."""
        return quad(lambda s: self.c * (1 + self.a * s) ** -self.kappa, 0.0, x, epsabs=1e-14, epsrel=1e-13)[0]

    def __call__(self, f):
        return self.top * ndtr(self.theta0 + self.gold(f))


def fam_rmshift(rng, r0):
    top = rng.uniform(0.8, 0.95)
    theta0 = float(ndtri(r0 / top))
    gam = rng.uniform(0.2, 0.8)
    c4 = _logu(rng, 1.0, 8.0)  # g4's gold logit per F_P at the start
    alpha = _logu(rng, 0.05, 0.6)  # distance per gold logit of signal
    beta4 = _logu(rng, 1.0, 30.0)  # g4's noise distance per F_P (~ 1/G^2)
    kappa = rng.uniform(0.6, 1.8)
    if abs(kappa - 1) < 1e-6:
        kappa = 1 + 1e-6
    out = []
    for g in GROUPS:
        c = c4 * (g / 4) ** (gam - 1)
        out.append(RMShift(top, theta0, c, alpha * c + beta4 * (4 / g) ** 2, kappa))
    return out


# ---- 5. multi-task interference: the other domain's take-off drags the measured one ----------------------------------
_ZI = np.linspace(-9.0, 9.0, 1601)
_ZIW = np.exp(-0.5 * _ZI**2) * (_ZI[1] - _ZI[0]) / np.sqrt(2 * np.pi)


class Interfere:
    """theta_A(tau; T) = top + (theta0 - top) e^(-lam tau) - c I(tau; T), I = int_0^tau e^(-lam (tau - s)) u_B'(s) ds,
    u_B(s) = expit((s - T) / w), tau = k x; a seed's T = T_G e^(sigma Z); reward Phi(theta_A), its truth E_Z."""

    def __init__(self, top, theta0, lam, c, w, k, t_g, sigma):
        self.top, self.theta0, self.lam, self.c, self.w, self.k = top, theta0, lam, c, w, k
        self.t_g, self.sigma = t_g, sigma
        self.a = lam * w  # in (0, 1): the incomplete beta function's b = 1 - a > 0
        self.b_full = beta_fn(self.a + 1, 1 - self.a)

    def drag(self, tau, t):
        """I(tau; T) in closed form: with v = expit((s - T)/w), e^(lam s) u_B'(s) ds = e^(lam T) v^a (1 - v)^-a dv."""
        tau, t = np.broadcast_arrays(np.asarray(tau, dtype=float), np.asarray(t, dtype=float))
        out = np.zeros(tau.shape)
        live = (t - tau) / self.w < 40.0  # else I < e^-40: B has not started (0 to 4e-18)
        tl, tt = tau[live], t[live]
        v1, v0 = expit((tl - tt) / self.w), expit(-tt / self.w)
        diff = betainc(self.a + 1, 1 - self.a, v1) - betainc(self.a + 1, 1 - self.a, v0)
        out[live] = np.exp(self.lam * (tt - tl)) * self.b_full * diff
        return out

    def drag_quad(self, tau, t):
        """I by adaptive quadrature of its definition (independent of the closed form)."""
        def up(s):
            z = (s - t) / self.w
            return np.exp(-self.lam * (tau - s)) * expit(z) * expit(-z) / self.w
        pts = [t] if 0 < t < tau else None
        return quad(up, 0.0, tau, points=pts, epsabs=1e-14, epsrel=1e-12, limit=200)[0]

    def seed_curve_at(self, f, t):
        tau = self.k * np.maximum(_x(f), 0.0)
        theta = self.top + (self.theta0 - self.top) * np.exp(-self.lam * tau) - self.c * self.drag(tau, t)
        return ndtr(theta)

    def __call__(self, f):
        f = np.asarray(f, dtype=float)
        t = self.t_g * np.exp(self.sigma * _ZI)
        vals = self.seed_curve_at(f[..., None], t)
        return (vals * _ZIW).sum(axis=-1)

    def expect_quad(self, f):
        dens = lambda z: float(self.seed_curve_at(f, self.t_g * np.exp(self.sigma * z))) * np.exp(-z * z / 2)  # noqa: E731
        return quad(dens, -12, 12, epsabs=1e-14, epsrel=1e-12, limit=400)[0] / np.sqrt(2 * np.pi)

    def draw_seeds(self, rng, n):
        ts = self.t_g * np.exp(self.sigma * rng.standard_normal(n))
        return [lambda f, t=t: self.seed_curve_at(f, t) for t in ts]


def fam_interfere(rng, r0):
    top = float(ndtri(rng.uniform(0.66, 0.92)))
    theta0 = float(ndtri(r0))
    gam = rng.uniform(0.3, 0.85)
    lam = _logu(rng, 2.0, 10.0)  # A's relaxation rate per g4-F_P
    w = rng.uniform(0.1, 0.6) / lam  # B's take-off width (lam w < 1)
    t4 = _logu(rng, 0.3, 2.5)  # B's take-off (midpoint) for g4, g4-F_P
    q = _logu(rng, 0.005, 0.08)  # a B rollout's chance of success at the start
    c = rng.uniform(0.5, 1.8)  # the drag, logit units
    sigma = rng.uniform(0.15, 0.45)  # a seed's take-off spread, log scale
    found4 = 1 - (1 - q) ** 4
    return [Interfere(top, theta0, lam, c, w, (g / 4) ** (gam - 1), t4 * found4 / (1 - (1 - q) ** g), sigma)
            for g in GROUPS]


MINE = {"gnoise": fam_gnoise, "stale": fam_stale, "prune": fam_prune, "rmshift": fam_rmshift,
        "interfere": fam_interfere}
rbc.register(MINE, "round 35")


def leader_share(families, reps, seed):
    """On the truths only (the same random streams as the main loop): the share of draws where the arm best at F_P
    is not the best at F, its mean regret at F, the median gap best-second at F, the range of the curves."""
    r32.leader_share(families, reps, seed)


def _exactness(fam, reps, seed):
    """The families' own exactness checks, independent of the seed Monte Carlo: gnoise's ODE against the quadrature
    x(D) = int_D^D0 dD / (v h(D)); prune's DOP853 dense output against a Radau solve; stale's Lambert W against the
    quadrature of dx/du; rmshift's closed form against the quadrature of its rate; interfere's incomplete beta against
    the quadrature of the drag, and its trapezoid over seeds against adaptive quadrature over Z; and the range of
    the curves (200 seeds' for interfere) on the evaluation grid (the harness clips at 0.002 and 0.998)."""
    idx = list(rbc.FAMILIES).index(fam)
    worst, lo, hi = 0.0, 1.0, 0.0
    grid = np.concatenate([rbc.EVALS0, rbc.EVALS1, [F]])[None, :] * np.exp(0.6 * np.linspace(-1, 1, 5))[:, None]
    xs = np.array([0.05, 0.3, 1.0, 2.0, 4.0])
    for rep in range(reps):
        rng = np.random.default_rng([seed, idx, rep])
        r0 = rng.uniform(0.1, 0.3)
        curves = rbc.FAMILIES[fam](rng, r0)
        for c in curves:
            if isinstance(c, GNoise):
                for frac in (0.05, 0.3, 0.7, 0.95):
                    dd = c.floor + frac * (c.d0 - c.floor)
                    xd = quad(lambda u, c=c: 1 / (c.v * c.h(u)), dd, c.d0, epsabs=1e-14, epsrel=1e-12)[0]
                    if xd < X_MAX:
                        worst = max(worst, abs(float(c.distance(xd * F_P)) - dd))
            elif isinstance(c, Prune):
                ref = c.solve("Radau", 1e-12, 1e-14, t_eval=xs)
                worst = max(worst, float(np.abs(c.reward_of(ref.y[0]) - c(xs * F_P)).max()))
            elif isinstance(c, Stale):
                for u in c.u_inf * np.array([0.1, 0.5, 0.9, 0.99]):
                    worst = max(worst, abs(float(c.progress(c.x_of(u) * F_P)) - u))
            elif isinstance(c, RMShift):
                for x in xs:
                    worst = max(worst, abs(float(c.gold(x * F_P)) - c.gold_quad(x)))
            elif isinstance(c, Interfere):
                for x in (0.3, 1.0, 2.0):
                    for t in (0.5 * c.t_g, c.t_g, 2 * c.t_g):
                        worst = max(worst, abs(float(c.drag(c.k * x, t)) - c.drag_quad(c.k * x, t)))
                    worst = max(worst, abs(float(c(x * F_P)) - c.expect_quad(x * F_P)))
            vals = r34.grid_values(c, grid, seed, idx, rep)
            lo, hi = min(lo, float(vals.min())), max(hi, float(vals.max()))
    return worst, lo, hi


def truth_check(families, reps, seed, n_mc):
    """Round 32's Monte Carlo of the stated truths at F (seeds drawn as the harness draws them), then each family's
    own exactness check (_exactness)."""
    r32.truth_check(families, reps, seed, n_mc)
    r34.report_exactness(families, MINE, _exactness, reps, seed,
                         "closed form or ODE - independent quadrature or solver")


if __name__ == "__main__":
    r32.run_cli(MINE, 3535, leader_share, truth_check)
