"""Round 37's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog (nor the bodies of rounds 30-36's
families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds,
200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round
36's script is imported first (and with it rounds 31-35), so every key stays unique and these five come after (their
keys and random streams follow round 36's); every flag of race_blind_check works here (without --families, these
five). x below is FLOPs in units of F_P. An optimizer step of arm G samples G rollouts for each of the same number of
prompts, so it costs FLOPs in proportion to G: tau = 4 x / G is the arm's step clock in units of g4's steps per F_P
(g4 takes 8 times the steps of g32 per FLOP). A step's quality grows with the group (a better advantage estimate):
q_G = (G / 4)^gamma, gamma in (0.3, 0.8). Phi is the normal CDF; the reward is r_top Phi(theta) (times a share that
fits the context for ctxext), theta0 solved so that the reward at 0 FLOPs is r0; every curve is analytic in x > 0.

rmgold: reward-model overoptimisation (Gao, Schulman & Hilton 2023, "Scaling Laws for Reward Model
    Overoptimization"): the policy climbs a proxy reward model, and the gold reward, as a function of the distance
    d = sqrt(KL(pi || pi_init)), follows their RL form R(d) = d (alpha - beta ln d), which peaks at d* = exp(alpha /
    beta - 1) and then falls. A step moves the policy a trust-region-limited amount whatever the group (the KL per
    step does not depend on G) and the KL penalty slows the drift: dK/dtau = kappa / (1 + K / K0), so K(tau) = K0
    (sqrt(1 + 2 kappa tau / K0) - 1). A larger group spends less of its KL on the reward model's noise (a better
    advantage estimate), so its peak lies further out: d*_G = (G / 4)^zeta (units of g4's peak), zeta in (0.15,
    0.5), alpha_G = beta (1 + ln d*_G), peak gain beta d*_G, beta in (0.8, 2). theta = theta0 + R_G(sqrt(K)). g4's
    distance at F_P is u1 in (0.6, 1.5) of its peak (K0 log-uniform in (0.3, 3), kappa solved from it). Seeds drift
    at their own speed: kappa_s = kappa exp(sigma Z), sigma in (0.15, 0.4) (which seed exploits the reward model
    first is luck). Small groups reach their (lower) peak early in FLOPs and fall past it by F; large groups are
    still climbing: the arms cross. The truth is the expectation over Z, by 96-node Gauss-Hermite (checked against
    adaptive quadrature over Z, and the seed's K(tau) against DOP853).

dynsamp: dynamic sampling (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale"):
    groups whose rewards are all equal carry no advantage and are filtered out; the sampler draws prompts until the
    batch is full of informative groups, so every step has a full effective batch but the generation it discards
    costs FLOPs. Training prompts are either solved (every rollout right: filtered) or open, with pass rate p_o in
    (0.05, 0.25), whose group of G is informative with probability i_G = 1 - p_o^G - (1 - p_o)^G (small groups draw
    more all-wrong groups). The open share u falls as the policy learns: u = exp(-lambda_G n) after n steps, lambda_G
    = k q_G, k log-uniform in (0.5, 4), and the evaluation logit follows it, theta = theta0 + A (1 - u), A in (1.5,
    3). A step generates G rollouts for each of the 1 / (u i_G) prompts drawn per kept one and trains on the kept G:
    cost G (a + 1 / (u i_G)), a in (2, 5) the FLOPs of training on a kept rollout relative to generating one
    (forward and backward 6N per token, the old-policy and reference forwards 2N each, against 2N to generate), so
    x(n) = (G / 4) h (a n + (e^(lambda n) - 1) / (lambda i_G)), h = 1 / (a + 1 / i_4). Steps get dearer as the pool
    is solved; inverted in closed form by the Lambert W function (Wright omega: with b = 1 / (lambda i_G), y = 4 x /
    (G h): n = (y + b) / a - W0((1 / (a i_G)) exp(lambda (y + b) / a)) / lambda). Early the training term (the same
    per rollout for every arm) favours small groups' many steps; late the discarded generation, 1 / (u i_G) per
    step, weighs on the small groups, so larger groups can overtake near the common ceiling. Deterministic; closed
    form (checked against a root solve of x(n) and DOP853 of dn/dx).

ctxext: a two-stage context-length schedule (Luo et al. 2025, "DeepScaleR: Surpassing O1-Preview with a 1.5B Model
    by Scaling RL": 8K then 16K then 24K tokens, switched at fixed steps). The switch is set in steps, so g4 reaches
    the longer context at 1/8 of g32's FLOPs; its smooth form is s(tau) = Phi((tau - T) / w), T log-uniform in (0.1,
    0.8), w = T / 4. In the short context answers that run past it are cut and scored 0: the share that fits is phi1
    in (0.55, 0.85), in the long one phi2 = phi1 + v (1 - phi1), v in (0.5, 0.9), phi(tau) = phi1 + (phi2 - phi1) s.
    Longer answers make a step dearer by the factor c in (1.5, 2.5): x(tau) = (G / 4) (tau + (c - 1) w (Psi((tau -
    T) / w) - Psi(-T / w))), Psi(z) = z Phi(z) + phi_N(z), inverted by bisection to machine precision. The skill
    relaxes towards a ceiling that the longer context raises: dtheta/dtau = lambda_G (theta0 + A1 + (A2 - A1) s -
    theta), lambda_G = k q_G, A1 in (1, 2.5), A2 = A1 + (0.5, 1.5), so theta = theta0 + A1 (1 - e^(-lambda tau)) + (A2
    - A1) (Phi(z) - e^(-lambda tau) Phi(z0) - e^(lambda (T - tau) + lambda^2 w^2 / 2) (Phi(z - lambda w) - Phi(z0 -
    lambda w))), z = (tau - T) / w, z0 = -T / w (the Gaussian integral of the exponential kernel, in closed form;
    computed through log Phi). Reward r_top phi(tau) Phi(theta). Small groups switch early and pay the dearer steps
    for most of their FLOPs; large ones switch late (g16 and g32 often between F_P and F: a jump no pilot shows).
    The arms keep their order (--leader-share 0). Deterministic; closed form
    (checked against DOP853 of the ODE in (tau, theta) against x).

diffadapt: difficulty-adaptive sampling at the frontier (Shi et al. 2025, "Efficient Reinforcement Finetuning via
    Adaptive Curriculum Learning", AdaRFT; Bae et al. 2025, "Online Difficulty Filtering for Reasoning Oriented
    Reinforcement Learning"): the sampler keeps serving prompts whose estimated pass rate is about 1/2, so the signal
    per step does not fade as the policy improves, until the pool's hardest prompts are reached (headroom H in (1.5,
    3.5) logits). The pass rate of a prompt is estimated from its last group of G, so the prompts served sit at p =
    1/2 +- sqrt(s0^2 + 1 / (4 G)) and their signal 4 p (1 - p) averages e_G = 1 - 4 s0^2 - 1 / G, s0 in (0.05, 0.2).
    Progress S = k e_G q_G tau (g4 reaches the headroom at x_H in (0.3, 2.5)); theta = theta0 + H sat(S / H),
    sat(z) = z / (1 + z^n)^(1 / n), n in (2, 6): linear, then flat at the pool's end (sat solves dsat/dz = (1 -
    sat^n)^(1 + 1 / n)). Every arm has the same ceiling; small groups get there first, larger ones close the gap.
    Deterministic; closed form (checked against DOP853 of that ODE).

majvote: rewards from the group's own majority vote (Zuo et al. 2025, "TTRL: Test-Time Reinforcement Learning"):
    without a verifier, each rollout is rewarded for agreeing with the group's majority answer. The pseudo-label is
    right more often than not only above a break-even competence theta_b, and a group of G votes more reliably, so
    its break-even lies lower: the net signal is proportional to (theta - theta_b,G) (theta* - theta), dtheta/dtau =
    lambda_G (theta - theta_b,G) (theta* - theta) / (theta* - theta_b,G), a logistic in y = (theta - theta_b,G) /
    (theta* - theta_b,G): y = expit(l_G + lambda_G tau), l_G = l_4 + nu ln(G / 4), l_4 in (-5, -2.5), nu in (0.5,
    1.2), theta* = theta0 + (1.5, 3.5), theta_b,G from y(0) (theta0 is where every arm starts). lambda_G = k q_G, g4
    taking off (y = 1/2) at x in (0.4, 3). Seeds take off at their own pace: lambda_s = lambda_G exp(sigma Z), sigma
    in (0.1, 0.35). Large groups start further from break-even and rise first; small groups sit longer near it, then
    climb faster per FLOP (8 times the steps): g4 overtakes g32 at about x = nu ln 8 x_mid / (-l_4 (1 - 8^(gamma -
    1))), mostly before F_P (--leader-share, seed 3737: 0.11). The truth is the expectation over Z, by 96-node
    Gauss-Hermite (checked against adaptive quadrature over Z, and the seed's logistic against DOP853).

Every family draws its parameters per repetition; --leader-share says how often the arm best at F_P is not the best
at F. The truth at F is exact: closed forms (a Lambert W for dynsamp, a bisection of a closed-form cost for ctxext,
Gauss-Hermite expectations for rmgold and majvote) that --truth-check checks by Monte Carlo of seeds (round 32's
check) and by an independent quadrature or solver (_exactness).

    python benchmarks/race_blind_check_round37.py --families rmgold dynsamp ctxext diffadapt majvote \
        --reps 100 --replicates 100 --seed 3737 --out race-blind-check     # round 37
    python benchmarks/race_blind_check_round37.py --leader-share --reps 100 --seed 3737   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round37.py --truth-check --seed 3737   # Monte Carlo of the stated truths
    python benchmarks/race_blind_check_round37.py --table --explain --out race-blind-check   # the table of the rows
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 36's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32
import race_blind_check_round34 as r34
import race_blind_check_round36 as r36  # registers rounds 31-36's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.special import expit, log_ndtr, ndtr, ndtri, wrightomega

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r36.GROUPS  # the arms g4, g8, g16, g32

_x, _logu = r34._x, r34._logu  # FLOPs in units of F_P; a log-uniform draw
_quality = r36._quality

_ZX, _ZW = np.polynomial.hermite_e.hermegauss(96)  # expectation over a seed's Z ~ N(0, 1)
_ZW = _ZW / _ZW.sum()


def _npdf(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)


def _log_ndtr_diff(a, b):
    """log(Phi(a) - Phi(b)) for a > b, without cancellation on either tail."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    upper = a > 0  # both in the upper tail: Phi(a) - Phi(b) = Phi(-b) - Phi(-a)
    hi = np.where(upper, log_ndtr(-b), log_ndtr(a))
    lo = np.where(upper, log_ndtr(-a), log_ndtr(b))
    with np.errstate(divide="ignore"):  # a = b (tau = 0): -inf, masked by the caller
        return hi + np.log1p(-np.exp(lo - hi))


# ---- arms whose seeds run at their own pace (rmgold, majvote) --------------------------------------------------------
class _Seed:
    def __init__(self, parent, rate):
        self.p, self.rate = parent, rate

    def __call__(self, f):
        return self.p.reward(4 * _x(f) / self.p.g, self.rate)


class _SeedsAtTheirPace:
    """An arm whose seeds run at ``rate`` exp(sigma Z), Z ~ N(0, 1), with ``reward(tau, rate)`` on its step clock
    tau = 4 x / G: its truth is the expectation over Z (96-node Gauss-Hermite), checked against quadrature."""

    g: float
    rate: float
    sigma: float

    def reward(self, tau, rate):
        raise NotImplementedError

    def __call__(self, f):
        tau = 4 * _x(f) / self.g
        rates = self.rate * np.exp(self.sigma * _ZX)
        return (self.reward(np.asarray(tau)[..., None], rates) * _ZW).sum(axis=-1)

    def draw_seeds(self, rng, n):
        return [_Seed(self, self.rate * np.exp(self.sigma * z)) for z in rng.standard_normal(n)]

    def expect_quad(self, f):
        tau = 4 * _x(f) / self.g
        fn = lambda z: float(self.reward(tau, self.rate * np.exp(self.sigma * z))) * _npdf(z)  # noqa: E731
        return quad(fn, -12, 12, epsabs=1e-13, epsrel=1e-12, limit=400)[0]


# ---- rmgold ----------------------------------------------------------------------------------------------------------
class RMGold(_SeedsAtTheirPace):
    def __init__(self, g, beta, d_star, k0, kappa, sigma, th0, r_top):
        self.g, self.beta, self.d_star, self.k0, self.kappa, self.sigma = g, beta, d_star, k0, kappa, sigma
        self.th0, self.r_top, self.rate = th0, r_top, kappa  # (a seed's drift speed)

    def kl(self, tau, kappa):
        return self.k0 * (np.sqrt(1 + 2 * kappa * tau / self.k0) - 1)

    def theta(self, tau, kappa):
        d = np.sqrt(np.maximum(self.kl(tau, kappa), 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            gold = np.where(d > 0, self.beta * d * (1 + np.log(self.d_star) - np.log(np.where(d > 0, d, 1.0))), 0.0)
        return self.th0 + gold

    def reward(self, tau, kappa):
        return self.r_top * ndtr(self.theta(tau, kappa))

    def solve(self, kappa, taus):
        rhs = lambda t, k: [kappa / (1 + k[0] / self.k0)]  # noqa: E731
        return solve_ivp(rhs, (0, taus[-1]), [0.0], method="DOP853", t_eval=taus, rtol=1e-13, atol=1e-15)


def fam_rmgold(rng, r0):
    zeta = rng.uniform(0.15, 0.5)
    beta = rng.uniform(0.8, 2.0)
    u1 = rng.uniform(0.6, 1.5)  # g4's distance at F_P, in units of its peak
    k0 = _logu(rng, 0.3, 3.0)
    kappa = k0 * ((1 + u1 * u1 / k0) ** 2 - 1) / 2  # K(tau = 1) = u1^2
    sigma = rng.uniform(0.15, 0.4)
    r_top = rng.uniform(0.65, 0.95)
    th0 = float(ndtri(r0 / r_top))
    return [RMGold(float(g), beta, (g / 4.0) ** zeta, k0, kappa, sigma, th0, r_top) for g in GROUPS]


# ---- dynsamp ---------------------------------------------------------------------------------------------------------
class DynSamp:
    def __init__(self, g, gamma, k, p_o, a, amp, th0, r_top):
        self.g, self.lam, self.a, self.amp, self.th0, self.r_top = g, k * _quality(g, gamma), a, amp, th0, r_top
        self.i_g = 1 - p_o**g - (1 - p_o) ** g
        i4 = 1 - p_o**4 - (1 - p_o) ** 4
        self.h = 1 / (a + 1 / i4)

    def x_of(self, n):  # FLOPs (units of F_P) after n effective steps
        return self.g / 4 * self.h * (self.a * n + np.expm1(self.lam * n) / (self.lam * self.i_g))

    def steps(self, f):
        y = 4 * _x(f) / (self.g * self.h)
        b = 1 / (self.lam * self.i_g)
        z = np.log(1 / (self.a * self.i_g)) + self.lam * (y + b) / self.a
        return (y + b) / self.a - np.real(wrightomega(z)) / self.lam

    def __call__(self, f):
        n = self.steps(f)
        return self.r_top * ndtr(self.th0 + self.amp * -np.expm1(-self.lam * n))

    def solve(self, xs):
        rhs = lambda x, n: [1 / (self.g / 4 * self.h * (self.a + np.exp(self.lam * n[0]) / self.i_g))]  # noqa: E731
        return solve_ivp(rhs, (0, xs[-1]), [0.0], method="DOP853", t_eval=xs, rtol=1e-13, atol=1e-15)


def fam_dynsamp(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    k = _logu(rng, 0.5, 4.0)
    p_o = rng.uniform(0.05, 0.25)
    a = rng.uniform(2.0, 5.0)
    amp = rng.uniform(1.5, 3.0)
    r_top = rng.uniform(0.65, 0.95)
    th0 = float(ndtri(r0 / r_top))
    return [DynSamp(float(g), gamma, k, p_o, a, amp, th0, r_top) for g in GROUPS]


# ---- ctxext ----------------------------------------------------------------------------------------------------------
def _psi(z):
    return z * ndtr(z) + _npdf(z)


class CtxExt:
    def __init__(self, g, gamma, k, t_sw, c, phi1, phi2, a1, a2, r_top, r0):
        self.g, self.lam, self.t, self.w, self.c = g, k * _quality(g, gamma), t_sw, t_sw / 4, c
        self.phi1, self.phi2, self.a1, self.a2, self.r_top = phi1, phi2, a1, a2, r_top
        self.z0 = -self.t / self.w
        self.th0 = float(ndtri(r0 / (r_top * self.fit(0.0))))

    def switch(self, tau):
        return ndtr((np.asarray(tau, float) - self.t) / self.w)

    def fit(self, tau):
        return self.phi1 + (self.phi2 - self.phi1) * self.switch(tau)

    def x_of(self, tau):
        tau = np.asarray(tau, float)
        return self.g / 4 * (tau + (self.c - 1) * self.w * (_psi((tau - self.t) / self.w) - _psi(self.z0)))

    def steps(self, f):
        x = np.asarray(_x(f), float)
        lo, hi = 4 * x / (self.c * self.g), 4 * x / self.g  # the cost per step lies in [G/4, c G/4]
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            below = self.x_of(mid) < x
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
            if np.all(hi - lo <= 4e-16 * np.maximum(hi, 1e-300)):
                break
        return 0.5 * (lo + hi)

    def theta(self, tau):
        tau = np.asarray(tau, float)
        lam, w = self.lam, self.w
        z = (tau - self.t) / w
        tail = np.exp(lam * (self.t - tau) + 0.5 * (lam * w) ** 2 + _log_ndtr_diff(z - lam * w, self.z0 - lam * w))
        tail = np.where(tau > 0, tail, 0.0)
        smooth = ndtr(z) - np.exp(-lam * tau) * ndtr(self.z0) - tail  # lambda int_0^tau e^(lambda (t - tau)) s(t) dt
        return self.th0 + self.a1 * -np.expm1(-lam * tau) + (self.a2 - self.a1) * smooth

    def reward_tau(self, tau):
        return self.r_top * self.fit(tau) * ndtr(self.theta(tau))

    def __call__(self, f):
        return self.reward_tau(self.steps(f))

    def solve(self, xs):
        def rhs(x, y):
            tau, th = y
            s = float(ndtr((tau - self.t) / self.w))
            dtau = 4 / (self.g * (1 + (self.c - 1) * s))
            return [dtau, dtau * self.lam * (self.th0 + self.a1 + (self.a2 - self.a1) * s - th)]
        return solve_ivp(rhs, (0, xs[-1]), [0.0, self.th0], method="DOP853", t_eval=xs, rtol=1e-13, atol=1e-14)


def fam_ctxext(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    k = _logu(rng, 0.5, 3.0)
    t_sw = _logu(rng, 0.1, 0.8)
    c = rng.uniform(1.5, 2.5)
    phi1 = rng.uniform(0.55, 0.85)
    phi2 = phi1 + rng.uniform(0.5, 0.9) * (1 - phi1)
    a1 = rng.uniform(1.0, 2.5)
    a2 = a1 + rng.uniform(0.5, 1.5)
    r_top = rng.uniform(0.7, 0.95)
    return [CtxExt(float(g), gamma, k, t_sw, c, phi1, phi2, a1, a2, r_top, r0) for g in GROUPS]


# ---- diffadapt -------------------------------------------------------------------------------------------------------
class DiffAdapt:
    def __init__(self, g, gamma, k, s0, head, n, th0, r_top):
        self.g, self.head, self.n, self.th0, self.r_top = g, head, n, th0, r_top
        self.e_g = 1 - 4 * s0 * s0 - 1 / g
        self.rate = k * self.e_g * _quality(g, gamma)  # frontier progress per step (logits)

    def sat(self, z):
        z = np.asarray(z, float)
        return z / (1 + z**self.n) ** (1 / self.n)

    def theta(self, tau):
        return self.th0 + self.head * self.sat(self.rate * np.asarray(tau, float) / self.head)

    def __call__(self, f):
        return self.r_top * ndtr(self.theta(4 * _x(f) / self.g))

    def solve(self, zs):
        rhs = lambda z, y: [(1 - y[0] ** self.n) ** (1 + 1 / self.n)]  # noqa: E731
        return solve_ivp(rhs, (0, zs[-1]), [0.0], method="DOP853", t_eval=zs, rtol=1e-13, atol=1e-15)


def fam_diffadapt(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    s0 = rng.uniform(0.05, 0.2)
    head = rng.uniform(1.5, 3.5)
    n = rng.uniform(2.0, 6.0)
    x_h = _logu(rng, 0.3, 2.5)  # g4 reaches the headroom at x_h
    e4 = 1 - 4 * s0 * s0 - 1 / 4
    k = head / (e4 * x_h)  # g4's clock: tau = x
    r_top = rng.uniform(0.65, 0.95)
    th0 = float(ndtri(r0 / r_top))
    return [DiffAdapt(float(g), gamma, k, s0, head, n, th0, r_top) for g in GROUPS]


# ---- majvote ---------------------------------------------------------------------------------------------------------
class MajVote(_SeedsAtTheirPace):
    def __init__(self, g, gamma, k, l0, sigma, th0, th_star, r_top):
        self.g, self.lam, self.l0, self.sigma = g, k * _quality(g, gamma), l0, sigma
        self.th0, self.th_star, self.r_top, self.rate = th0, th_star, r_top, self.lam  # (a seed's take-off speed)
        y0 = expit(l0)
        self.th_b = (th0 - th_star * y0) / (1 - y0)  # the break-even logit of a group of g

    def theta(self, tau, lam):
        return self.th_b + (self.th_star - self.th_b) * expit(self.l0 + lam * tau)

    def reward(self, tau, lam):
        return self.r_top * ndtr(self.theta(tau, lam))

    def solve(self, lam, taus):
        span = self.th_star - self.th_b
        rhs = lambda t, th: [lam * (th[0] - self.th_b) * (self.th_star - th[0]) / span]  # noqa: E731
        return solve_ivp(rhs, (0, taus[-1]), [self.th0], method="DOP853", t_eval=taus, rtol=1e-13, atol=1e-14)


def fam_majvote(rng, r0):
    gamma = rng.uniform(0.3, 0.8)
    l4 = rng.uniform(-5.0, -2.5)
    nu = rng.uniform(0.5, 1.2)
    x_mid = _logu(rng, 0.4, 3.0)  # g4 takes off (y = 1/2) here
    k = -l4 / x_mid  # g4's clock: tau = x
    sigma = rng.uniform(0.1, 0.35)
    r_top = rng.uniform(0.65, 0.95)
    th0 = float(ndtri(r0 / r_top))
    th_star = th0 + rng.uniform(1.5, 3.5)
    return [MajVote(float(g), gamma, k, l4 + nu * np.log(g / 4.0), sigma, th0, th_star, r_top) for g in GROUPS]


MINE = {"rmgold": fam_rmgold, "dynsamp": fam_dynsamp, "ctxext": fam_ctxext, "diffadapt": fam_diffadapt,
        "majvote": fam_majvote}
rbc.register(MINE, "round 37")


def _exactness(fam, reps, seed):
    """The families' own exactness checks, independent of the seed Monte Carlo: rmgold's K(tau) and majvote's
    logistic (at the seeds' kappa or lambda and +-2 sigma) against DOP853 (rtol 1e-13), and their Gauss-Hermite
    expectations against adaptive quadrature over Z; dynsamp's Wright omega against a root solve of the closed-form
    cost and against DOP853 of dn/dx; ctxext's bisection and closed-form theta against DOP853 of (tau, theta) in x;
    diffadapt's sat against DOP853 of its ODE; r(0) = r0 for every arm; and the range of the curves (200 seeds' for
    rmgold and majvote) on the evaluation grid (the harness clips at 0.002 and 0.998)."""
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
            if isinstance(c, RMGold):
                taus = 4 * xs / c.g
                for kap in (c.kappa, c.kappa * np.exp(2 * c.sigma), c.kappa * np.exp(-2 * c.sigma)):
                    ref = c.solve(kap, taus)
                    worst = max(worst, float(np.abs(c.kl(taus, kap) - ref.y[0]).max()))
                for x in xs:
                    worst = max(worst, abs(float(c(x * F_P)) - c.expect_quad(x * F_P)))
            elif isinstance(c, DynSamp):
                n = c.steps(xs * F_P)
                for x, nn in zip(xs, n, strict=True):
                    nq = brentq(lambda t, c=c, x=x: c.x_of(t) - x, 0, 4 * x / c.g / c.h / c.a + 1,
                                xtol=1e-14, rtol=1e-14)
                    worst = max(worst, abs(float(nn) - nq))
                ref = c.solve(xs)
                worst = max(worst, float(np.abs(n - ref.y[0]).max()))
            elif isinstance(c, CtxExt):
                ref = c.solve(xs)
                tau = c.steps(xs * F_P)
                worst = max(worst, float(np.abs(tau - ref.y[0]).max()), float(np.abs(c.theta(tau) - ref.y[1]).max()))
            elif isinstance(c, DiffAdapt):
                zs = c.rate * 4 * xs / c.g / c.head
                ref = c.solve(zs)
                worst = max(worst, float(np.abs(c.sat(zs) - ref.y[0]).max()))
            elif isinstance(c, MajVote):
                taus = 4 * xs / c.g
                for lam in (c.lam, c.lam * np.exp(2 * c.sigma), c.lam * np.exp(-2 * c.sigma)):
                    ref = c.solve(lam, taus)
                    worst = max(worst, float(np.abs(c.theta(taus, lam) - ref.y[0]).max()))
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
    r32.run_cli(MINE, 3737, r32.leader_share, truth_check)
