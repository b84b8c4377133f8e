"""Round 36's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog (nor the bodies of rounds 30-35's
families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds,
200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round
35's script is imported first (and with it rounds 31-34), so every key stays unique and these five come after (their
keys and random streams follow round 35's); every flag of race_blind_check works here (without --families, these
five). x below is FLOPs in units of F_P. An optimizer step of arm G samples G rollouts for each of the same number of
prompts, so it costs FLOPs in proportion to G: tau = 4 x / G is the arm's step clock in units of g4's steps per F_P
(g4 takes 8 times the steps of g32 per FLOP). A step's quality grows with the group (a better advantage estimate):
q_G = (G / 4)^gamma, gamma in (0.3, 0.8), so per FLOP the plain signal (4 / G) q_G favours small groups; each family
adds a mechanism that changes that. Phi is the normal CDF; every curve is analytic in x (no kinks), so the harness's
Gauss-Hermite average over a seed's timing shift is converged.

curric: an easy-to-hard curriculum switched at a fixed optimizer step (Parashar et al. 2025, "Curriculum
    Reinforcement Learning from Easy to Hard Tasks Improves LLM Reasoning"; Kimi Team 2025, "Kimi k1.5", curriculum
    sampling). The recipe's schedule is in steps, so g4 reaches the hard data at 1/8 of g32's FLOPs. The share of hard
    prompts is a logistic in steps, h(tau) = expit((tau - T) / w), w = T / 5. A prompt teaches only if its group holds
    a success (a group of all-0 rewards has no GRPO advantage): the chance is c_G = 1 - (1 - rho)^G, rho_e about 0.45
    on easy prompts (all arms learn), rho_h in (0.01, 0.08) on hard ones (small groups mostly draw blanks). Progress
    on each kind: E(tau) = k_e q_G c_G,e int_0^tau (1 - h), H(tau) = k_h q_G c_G,h int_0^tau h, with int_0^tau h =
    w (softplus((tau - T) / w) - softplus(-T / w)) in closed form. Evaluation logits theta_e = theta_e0 + A_e u_E +
    b_he A_h u_H, theta_h = theta_e0 - Delta + b_eh A_e u_E + A_h u_H, u = 1 - exp(-progress); reward w_e expit(theta_e)
    + (1 - w_e) expit(theta_h), theta_e0 solved (brentq) so that the reward at tau = 0 is r0. Small groups switch
    early and saturate the easy skill fast, large groups switch late but learn the hard data faster per FLOP.
    Deterministic; closed form (checked against the quadrature of the schedule).

lenpen: a group-relative length penalty for concise reasoning (Arora & Zanette 2025, "Training Language Models to
    Reason Efficiently"; Kimi Team 2025, the length reward relative to the group's shortest and longest answer). The
    penalty pushes a prompt's response length towards the shortest of its group; with log-normal lengths of spread
    sigma_L the shortest of G answers is exp(-sigma_L e_G) of the mean (e_G the expected maximum of G standard
    normals), so the relative length falls as l(tau) = l_G + (1 - l_G) exp(-q_G tau / tau_L), l_G = exp(-sigma_L e_G):
    large groups end shorter. A step costs G (a + l) (a the prompt and update overhead), so steps get cheaper:
    x(tau) = G / (4 (1 + a)) ((a + l_G) tau + (1 - l_G) tau_LG (1 - exp(-tau / tau_LG))), tau_LG = tau_L / q_G,
    inverted in closed form by the Lambert W function (with m = a + l_G, D = 1 - l_G, y = 4 (1 + a) x / G, s = (y -
    D tau_LG) / m: tau = s + tau_LG W0((D / m) exp(-s / tau_LG))). Shorter chains lose accuracy, and only prompts
    that a group of G can solve at all (a success among G at pass rate rho) carry signal: theta = theta0 + A_G (1 -
    exp(-k q_G tau)) - c (1 - l(tau))^2, A_G = A (1 - (1 - rho)^G), rho in (0.04, 0.3); reward r_top Phi(theta).
    Small groups learn fast towards a lower ceiling and keep longer answers; large groups reach further, pay more for
    their shorter answers and get cheaper steps. Deterministic; closed form (checked against a root solve of the
    quadrature of the cost per step).

refema: a KL penalty to a reference that follows the policy (Gorbatovski et al. 2024, "Learn Your Reference Model
    for Real Good Alignment": the reference soft-updated towards the policy; Liu et al. 2025, "ProRL", GRPO with
    periodic reference resets, of which an exponential moving average is the smooth form). Per step the reward
    signal pulls the policy's logit towards theta* at k q_G, the KL penalty pulls it back to the reference phi at
    beta (the same for every arm: the KL gradient is exact), and the reference moves towards the policy at alpha per
    step: d(theta, phi)/dtau = M (theta - theta*, phi - theta*), M = [[-(k q_G + beta), beta], [alpha, -alpha]]. Under
    a fixed reference a large group's equilibrium k q (theta* - phi) / (k q + beta) is higher; the reference's drift
    is counted in steps, so small groups get away from it sooner per FLOP. Real distinct eigenvalues; closed form by
    the eigendecomposition (checked against the matrix exponential, scipy.linalg.expm, to about 1e-13; a DOP853 solve
    at rtol 1e-13 agrees to about 1e-9, its own error); reward r_top Phi(theta).

offguide: off-policy guidance inside the group (Yan et al. 2025, "Learning to Reason under Off-Policy Guidance",
    LUFFY: one of a group's G rollouts is replaced by an expert's trace). The expert's share of a group is 1 / G, so
    per FLOP a small group imitates (4 / G)^2 times more: dtheta/dx = (4 / G) (a_I (4 / G) (theta_E - theta) + a_R q_G
    (theta* - theta)), theta_E the expert's level (its traces are correct, but a policy imitating them settles at
    theta_E, here between the start and a little above theta*). Linear: theta = theta_eq + (theta0 - theta_eq)
    exp(-lambda_G x), lambda_G = (4 / G) (a_I 4 / G + a_R q_G), theta_eq = (a_I (4 / G) theta_E + a_R q_G theta*) /
    (a_I 4 / G + a_R q_G): small groups move fast towards the expert, large ones slowly towards their own optimum.
    Deterministic; closed form (checked against DOP853); reward r_top Phi(theta).

mismatch: the training-inference mismatch (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You
    Off-Policy RL Training"; Qi et al. 2025, "Defeating the Training-Inference Mismatch via FP16"): rollouts from the
    inference engine and log-probabilities from the trainer differ numerically, the gap grows as training goes on,
    and the policy gradient picks up a bias that eventually collapses a run. Here the gap grows by mu per step and
    biases the logit by b_s mu tau per step, b_s a seed's own coefficient b + b_sd Z (which seed collapses first is
    luck): dtheta/dtau = lambda_G (theta* - theta) - b_s mu tau, lambda_G = k q_G, so theta_s = theta* + (theta0 -
    theta*) exp(-lambda tau) - b_s mu K(tau), K = (lambda tau + expm1(-lambda tau)) / lambda^2. The bias counts steps,
    the signal counts steps times q_G: small groups rise fast and fall first. The seed's reward is r_top Phi(theta_s);
    the truth is its exact expectation over Z, r_top Phi((theta* + (theta0 - theta*) e^(-lambda tau) - b mu K) /
    sqrt(1 + (b_sd mu K)^2)) (checked against the quadrature over Z, and theta_s against DOP853).

Every family draws its parameters per repetition; the arms' curves can cross (the arm best at F_P is often not the
best at F: --leader-share). The truth at F is exact: closed forms (Lambert W for lenpen, an eigendecomposition for
refema, a Gaussian expectation for mismatch) that --truth-check checks by Monte Carlo of seeds (round 32's check) and
by an independent quadrature or solver (_exactness).

    python benchmarks/race_blind_check_round36.py --families curric lenpen refema offguide mismatch \
        --reps 100 --replicates 100 --seed 3636 --out race-blind-check     # round 36
    python benchmarks/race_blind_check_round36.py --leader-share --reps 100 --seed 3636   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round36.py --truth-check --seed 3636   # Monte Carlo of the stated truths
    python benchmarks/race_blind_check_round36.py --table --explain --out race-blind-check   # the table of the rows
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 35's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32
import race_blind_check_round34 as r34
import race_blind_check_round35 as r35  # registers rounds 31-35's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.linalg import expm
from scipy.optimize import brentq
from scipy.special import expit, lambertw, ndtr, ndtri

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r35.GROUPS  # the arms g4, g8, g16, g32


_x, _logu = r34._x, r34._logu  # FLOPs in units of F_P; a log-uniform draw


def _quality(g, gamma):
    return (g / 4.0) ** gamma


def _softplus(z):
    return np.logaddexp(0.0, z)


def _max_normal(g):
    """E[max of g standard normals], by quadrature of z g phi(z) Phi(z)^(g-1)."""
    dens = lambda z: z * g * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi) * ndtr(z) ** (g - 1)  # noqa: E731
    return quad(dens, -12, 12, epsabs=1e-13, epsrel=1e-12, limit=200)[0]


E_MAX = {int(g): _max_normal(int(g)) for g in GROUPS}  # 1.029, 1.424, 1.766, 2.070


# ---- curric ----------------------------------------------------------------------------------------------------------
class Curric:
    def __init__(self, g, gamma, t_sw, k_e, k_h, rho_e, rho_h, a_e, a_h, b_eh, b_he, delta, w_e, r0):
        self.g, self.t_sw, self.w = g, t_sw, t_sw / 5
        q = _quality(g, gamma)
        self.ce = k_e * q * (1 - (1 - rho_e) ** g)
        self.ch = k_h * q * (1 - (1 - rho_h) ** g)
        self.a_e, self.a_h, self.b_eh, self.b_he, self.delta, self.w_e = a_e, a_h, b_eh, b_he, delta, w_e
        self.th0 = brentq(lambda t: self.reward_of(t, 0.0, 0.0) - r0, -20, 20, xtol=1e-14)

    def hard_steps(self, tau):
        """int_0^tau h(s) ds in closed form."""
        w = self.w
        return w * (_softplus((np.asarray(tau, dtype=float) - self.t_sw) / w) - _softplus(-self.t_sw / w))

    def hard_steps_quad(self, tau):
        return quad(lambda s: expit((s - self.t_sw) / self.w), 0, tau, epsabs=1e-14, epsrel=1e-13, limit=200,
                    points=[self.t_sw] if 0 < self.t_sw < tau else None)[0]

    def reward_of(self, th0, e, h):
        ue, uh = -np.expm1(-np.asarray(e)), -np.expm1(-np.asarray(h))
        te = th0 + self.a_e * ue + self.b_he * self.a_h * uh
        th = th0 - self.delta + self.b_eh * self.a_e * ue + self.a_h * uh
        return self.w_e * expit(te) + (1 - self.w_e) * expit(th)

    def progress(self, tau):
        hs = self.hard_steps(tau)
        return self.ce * (tau - hs), self.ch * hs

    def __call__(self, f):
        tau = 4 * _x(f) / self.g
        return self.reward_of(self.th0, *self.progress(tau))


def fam_curric(rng, r0):
    gamma, t_sw = rng.uniform(0.3, 0.8), _logu(rng, 0.04, 0.25)
    k_e, k_h = _logu(rng, 1.0, 5.0) / t_sw, _logu(rng, 0.3, 3.0) / t_sw
    rho_e, rho_h = rng.uniform(0.3, 0.6), _logu(rng, 0.01, 0.08)
    a_e, a_h, b_eh, b_he = rng.uniform(1.0, 2.5), rng.uniform(1.5, 4.0), rng.uniform(0.1, 0.4), rng.uniform(0.2, 0.6)
    delta, w_e = rng.uniform(1.5, 3.5), rng.uniform(0.3, 0.6)
    return [Curric(float(g), gamma, t_sw, k_e, k_h, rho_e, rho_h, a_e, a_h, b_eh, b_he, delta, w_e, r0)
            for g in GROUPS]


# ---- lenpen ----------------------------------------------------------------------------------------------------------
class LenPen:
    def __init__(self, g, gamma, a, sigma_l, tau_l, amp, rho, k, c, th0, r_top):
        self.g, self.a, self.c, self.th0, self.r_top = g, a, c, th0, r_top
        self.amp = amp * (1 - (1 - rho) ** g)  # the prompts a group of G can solve at all
        q = _quality(g, gamma)
        self.l_g = float(np.exp(-sigma_l * E_MAX[int(g)]))
        self.tau_lg = tau_l / q
        self.kq = k * q

    def length(self, tau):
        return self.l_g + (1 - self.l_g) * np.exp(-np.asarray(tau) / self.tau_lg)

    def x_of(self, tau):
        """FLOPs (units of F_P) after tau steps: the integral of the cost per step G (a + l) / (4 (1 + a))."""
        m, d, t = self.a + self.l_g, 1 - self.l_g, self.tau_lg
        return self.g / (4 * (1 + self.a)) * (m * tau - d * t * np.expm1(-np.asarray(tau) / t))

    def x_of_quad(self, tau):
        return quad(lambda s: self.g * (self.a + self.length(s)) / (4 * (1 + self.a)), 0, tau, epsabs=1e-14,
                    epsrel=1e-13, limit=200)[0]

    def steps(self, f):
        """tau(x) by the Lambert W function."""
        m, d, t = self.a + self.l_g, 1 - self.l_g, self.tau_lg
        y = 4 * (1 + self.a) * _x(f) / self.g
        s = (y - d * t) / m
        return s + t * lambertw((d / m) * np.exp(-s / t)).real

    def theta(self, tau):
        return self.th0 + self.amp * -np.expm1(-self.kq * tau) - self.c * (1 - self.length(tau)) ** 2

    def __call__(self, f):
        return self.r_top * ndtr(self.theta(self.steps(f)))


def fam_lenpen(rng, r0):
    gamma, a, sigma_l = rng.uniform(0.3, 0.8), rng.uniform(0.15, 0.5), rng.uniform(0.2, 0.6)
    tau_l, amp, rho = _logu(rng, 0.05, 0.6), rng.uniform(1.5, 4.0), _logu(rng, 0.04, 0.3)
    k, c, r_top = _logu(rng, 1.0, 10.0), rng.uniform(0.3, 2.0), rng.uniform(0.6, 0.95)
    th0 = float(ndtri(r0 / r_top))
    return [LenPen(float(g), gamma, a, sigma_l, tau_l, amp, rho, k, c, th0, r_top) for g in GROUPS]


# ---- refema ----------------------------------------------------------------------------------------------------------
class RefEMA:
    def __init__(self, g, gamma, k, beta, alpha, th0, th_star, r_top):
        self.g, self.th0, self.th_star, self.r_top = g, th0, th_star, r_top
        self.kq, self.beta, self.alpha = k * _quality(g, gamma), beta, alpha
        self.m = np.array([[-(self.kq + beta), beta], [alpha, -alpha]])
        tr, det = -(self.kq + beta + alpha), alpha * self.kq
        disc = np.sqrt((self.kq + beta - alpha) ** 2 + 4 * alpha * beta)  # = sqrt(tr^2 - 4 det) > 0
        self.l1, self.l2 = (tr + disc) / 2, (tr - disc) / 2  # slow, fast (both < 0)
        assert abs(self.l1 * self.l2 - det) < 1e-9 * max(1.0, det)
        # theta - theta* = c1 e^(l1 tau) + c2 e^(l2 tau); eigenvector of l: (beta, l + kq + beta) in (theta, phi)
        # starting at theta = phi = th0: y0 = d (1, 1), d = th0 - th*
        d = th0 - th_star
        v1 = np.array([beta, self.l1 + self.kq + beta])
        v2 = np.array([beta, self.l2 + self.kq + beta])
        c = np.linalg.solve(np.column_stack([v1, v2]), np.array([d, d]))
        self.c1, self.c2 = c[0] * v1, c[1] * v2  # (theta, phi) parts

    def state(self, tau):
        tau = np.asarray(tau, dtype=float)
        e1, e2 = np.exp(self.l1 * tau), np.exp(self.l2 * tau)
        return self.th_star + self.c1[0] * e1 + self.c2[0] * e2, self.th_star + self.c1[1] * e1 + self.c2[1] * e2

    def state_expm(self, tau):
        """(theta, phi) at one tau by the matrix exponential (Pade, scipy.linalg.expm): the independent check."""
        return expm(self.m * float(tau)) @ np.full(2, self.th0 - self.th_star) + self.th_star

    def solve(self, t_eval):
        rhs = lambda t, y: self.m @ (y - self.th_star)  # noqa: E731
        return solve_ivp(rhs, (0, float(t_eval[-1])), [self.th0, self.th0], method="DOP853", rtol=1e-13,
                         atol=1e-14, t_eval=t_eval)

    def __call__(self, f):
        return self.r_top * ndtr(self.state(4 * _x(f) / self.g)[0])


def fam_refema(rng, r0):
    gamma, k = rng.uniform(0.3, 0.8), _logu(rng, 1.0, 10.0)
    beta, alpha = k * _logu(rng, 1.0, 10.0), _logu(rng, 0.2, 4.0)
    r_top = rng.uniform(0.6, 0.95)
    th0 = float(ndtri(r0 / r_top))
    th_star = th0 + rng.uniform(1.5, 4.0)
    return [RefEMA(float(g), gamma, k, beta, alpha, th0, th_star, r_top) for g in GROUPS]


# ---- offguide --------------------------------------------------------------------------------------------------------
class OffGuide:
    def __init__(self, g, gamma, a_i, a_r, th0, th_star, th_e, r_top):
        self.g, self.th0, self.th_star, self.th_e, self.r_top = g, th0, th_star, th_e, r_top
        self.wi, self.wr = a_i * 4 / g, a_r * _quality(g, gamma)
        self.lam = 4 / g * (self.wi + self.wr)
        self.th_eq = (self.wi * th_e + self.wr * th_star) / (self.wi + self.wr)

    def theta(self, x):
        return self.th_eq + (self.th0 - self.th_eq) * np.exp(-self.lam * np.asarray(x, dtype=float))

    def solve(self, t_eval):
        rhs = lambda t, y: 4 / self.g * (self.wi * (self.th_e - y) + self.wr * (self.th_star - y))  # noqa: E731
        return solve_ivp(rhs, (0, float(t_eval[-1])), [self.th0], method="DOP853", rtol=1e-13, atol=1e-14,
                         t_eval=t_eval)

    def __call__(self, f):
        return self.r_top * ndtr(self.theta(_x(f)))


def fam_offguide(rng, r0):
    gamma, a_r = rng.uniform(0.3, 0.8), _logu(rng, 0.5, 5.0)
    a_i = a_r * _logu(rng, 0.5, 5.0)
    r_top = rng.uniform(0.6, 0.95)
    th0 = float(ndtri(r0 / r_top))
    gap = rng.uniform(1.5, 4.0)
    th_star, th_e = th0 + gap, th0 + gap * rng.uniform(0.3, 1.1)
    return [OffGuide(float(g), gamma, a_i, a_r, th0, th_star, th_e, r_top) for g in GROUPS]


# ---- mismatch --------------------------------------------------------------------------------------------------------
class MismatchSeed:
    def __init__(self, arm, b):
        self.arm, self.b = arm, b

    def __call__(self, f):
        return self.arm.r_top * ndtr(self.arm.theta(4 * _x(f) / self.arm.g, self.b))


class Mismatch:
    def __init__(self, g, gamma, k, bmu, bmu_sd, th0, th_star, r_top):
        self.g, self.th0, self.th_star, self.r_top = g, th0, th_star, r_top
        self.lam, self.bmu, self.bmu_sd = k * _quality(g, gamma), bmu, bmu_sd

    def kernel(self, tau):
        """K(tau) = int_0^tau e^(-lambda (tau - s)) s ds."""
        lt = self.lam * np.asarray(tau, dtype=float)
        return (lt + np.expm1(-lt)) / self.lam**2

    def clean(self, tau):
        return self.th_star + (self.th0 - self.th_star) * np.exp(-self.lam * np.asarray(tau, dtype=float))

    def theta(self, tau, b):
        """A seed's logit with bias coefficient b (mu folded in)."""
        return self.clean(tau) - b * self.kernel(tau)

    def draw_seeds(self, rng, n):
        return [MismatchSeed(self, self.bmu + self.bmu_sd * z) for z in rng.standard_normal(n)]

    def __call__(self, f):
        tau = 4 * _x(f) / self.g
        k = self.kernel(tau)
        return self.r_top * ndtr((self.clean(tau) - self.bmu * k) / np.sqrt(1 + (self.bmu_sd * k) ** 2))

    def expect_quad(self, f):
        tau = 4 * float(f) / F_P / self.g
        dens = lambda z: self.r_top * ndtr(self.theta(tau, self.bmu + self.bmu_sd * z)) * np.exp(-z * z / 2)  # noqa: E731
        return quad(dens, -12, 12, epsabs=1e-14, epsrel=1e-12, limit=200)[0] / np.sqrt(2 * np.pi)

    def solve(self, b, t_eval):
        rhs = lambda t, y: self.lam * (self.th_star - y) - b * t  # noqa: E731
        return solve_ivp(rhs, (0, float(t_eval[-1])), [self.th0], method="DOP853", rtol=1e-13, atol=1e-14,
                         t_eval=t_eval)


def fam_mismatch(rng, r0):
    gamma, k = rng.uniform(0.3, 0.8), _logu(rng, 0.5, 5.0)
    bmu = _logu(rng, 0.1, 2.0)
    bmu_sd = bmu * rng.uniform(0.2, 0.6)
    r_top = rng.uniform(0.6, 0.95)
    th0 = float(ndtri(r0 / r_top))
    th_star = th0 + rng.uniform(1.5, 4.0)
    return [Mismatch(float(g), gamma, k, bmu, bmu_sd, th0, th_star, r_top) for g in GROUPS]


MINE = {"curric": fam_curric, "lenpen": fam_lenpen, "refema": fam_refema, "offguide": fam_offguide,
        "mismatch": fam_mismatch}
rbc.register(MINE, "round 36")


def _exactness(fam, reps, seed):
    """The families' own exactness checks, independent of the seed Monte Carlo: curric's softplus against the
    quadrature of the schedule; lenpen's Lambert W against a root solve of the quadrature of the cost per step;
    refema's eigendecomposition against the matrix exponential; offguide's exponential and mismatch's seed logit
    against DOP853 (rtol 1e-13);
    mismatch's Gaussian expectation against the quadrature over Z; and the range of the curves (200 seeds' for
    mismatch) on the evaluation grid (the harness clips at 0.002 and 0.998)."""
    idx = list(rbc.FAMILIES).index(fam)
    worst, lo, hi = 0.0, 1.0, 0.0
    grid = np.concatenate([rbc.EVALS0, rbc.EVALS1, [F]])[None, :] * np.exp(0.6 * np.linspace(-1, 1, 5))[:, None]
    xs = np.array([0.05, 0.3, 1.0, 2.0, 4.0])
    for rep in range(reps):
        rng = np.random.default_rng([seed, idx, rep])
        r0 = rng.uniform(0.1, 0.3)
        curves = rbc.FAMILIES[fam](rng, r0)
        for c in curves:
            if isinstance(c, Curric):
                for x in xs:
                    tau = 4 * x / c.g
                    worst = max(worst, abs(float(c.hard_steps(tau)) - c.hard_steps_quad(tau)))
                worst = max(worst, abs(float(c.reward_of(c.th0, 0.0, 0.0)) - r0))
            elif isinstance(c, LenPen):
                for x in xs:
                    tq = brentq(lambda t, c=c, x=x: c.x_of_quad(t) - x, 0, 4 * x / c.g / c.a * (1 + c.a) + 1,
                                xtol=1e-14, rtol=1e-14)
                    worst = max(worst, abs(float(c.steps(x * F_P)) - tq))
            elif isinstance(c, RefEMA):
                for x in xs:
                    ref = c.state_expm(4 * x / c.g)
                    worst = max(worst, float(np.abs(np.array(c.state(4 * x / c.g)) - ref).max()))
            elif isinstance(c, OffGuide):
                ref = c.solve(xs)
                worst = max(worst, float(np.abs(c.theta(xs) - ref.y[0]).max()))
            elif isinstance(c, Mismatch):
                taus = 4 * xs / c.g
                for b in (c.bmu, c.bmu + 2 * c.bmu_sd, c.bmu - 2 * c.bmu_sd):
                    ref = c.solve(b, taus)
                    worst = max(worst, float(np.abs(c.theta(taus, b) - ref.y[0]).max()))
                for x in xs:
                    worst = max(worst, abs(float(c(x * F_P)) - c.expect_quad(x * F_P)))
            vals = r34.grid_values(c, grid, seed, idx, rep)
            lo, hi = min(lo, float(vals.min())), max(hi, float(vals.max()))
    return worst, lo, hi


def truth_check(families, reps, seed, n_mc):
    """Round 32's Monte Carlo of the stated truths at F (seeds drawn as the harness draws them), then each family's
    own exactness check (_exactness)."""
    r32.truth_check(families, reps, seed, n_mc)
    r34.report_exactness(families, MINE, _exactness, reps, seed, "closed form - independent quadrature or solver")


if __name__ == "__main__":
    r32.run_cli(MINE, 3636, r32.leader_share, truth_check)
