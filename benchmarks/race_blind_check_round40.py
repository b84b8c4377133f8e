"""Round 40's independent check of RACE's analysis: five more truth families on one theme, arms whose reward sits at or
near zero for a while, written by a session that had not seen benchmarks/race_misspecification.py's shapes, the
results, the changelog or flopplan/race's code (nor the bodies of rounds 30-38's families), on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1 prompts,
rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 38's script is imported
first (and with it rounds 31-37), so every key stays unique and these five come after (their keys and random streams
follow round 38's); every flag of race_blind_check works here (without --families, these five). x below is FLOPs in
units of F_P; a step of arm G samples G rollouts for each of the same number of prompts, so it costs FLOPs in
proportion to G: tau = 4 x / G is the arm's step clock in g4-steps per F_P, and q_G = (G / 4)^gamma a step's quality
(a better advantage estimate with a larger group). Phi is the normal CDF, s_w(l) = clip((l + w) / (2 w), 0, 1).

The floor. The harness's simulate clips every seed's pass rate to [0.002, 0.998], so a curve at 0 still scores
about 0.4 prompts of 200 per evaluation there, and it puts step 0 at r0 for every arm. An exact floor cannot be
written in that contract, so this script adds one opt-in to it, as the harness's own draw_seeds is opt-in: a curve
with a ``start`` attribute (its value at 0 FLOPs) is simulated by this module's ``simulate`` (installed as
rbc.simulate; every other curve goes to the harness's own, unchanged), which draws the same random numbers in the
same order and differs in three things only: step 0 is at ``start`` (r0 for fmtbreak and lenblow, which honour it;
0 for fmtfind and discover, and the floor eps for sharpen, which ignore r0: their mechanisms start there); the
seed's gain multiplies the distance from ``start``, not from r0; a seed whose curve is exactly 0 has pass
probability 0 on every prompt (every prompt scores 0), and the checkpoint wobble is WOBBLE_SD min(1, mean / 0.1) (a
wobble of 0.01 would swamp a floor of 0.005). Above 0.1 and away from 0 the noise is the harness's.

Exact floor (pass rate 0, every prompt scores 0):

fmtfind: format discovery under a strict, greedy evaluation (DeepSeek-R1-Zero, Guo et al. 2025, format reward and
    strict answer tags; TinyZero / Pan et al. 2025 and Zeng et al. 2025 "SimpleRL-Zoo": small base models sit near 0
    until the format is found). A prompt scores only if its greedy answer is in the required format and right: the
    format's logit l plus a prompt offset uniform in (-w, w) must be > 0, so the formatted share is s_w(l), exactly
    0 while l < -w. Training samples, so a group holds a formatted rollout with probability ~ G expit(l): per FLOP
    dl/dx = b q_G e^(sigma Z) expit(l) (equal rollouts per FLOP; the step's quality favours large G), solved in
    closed form, l - e^(-l) = K0 + b q_G e^(sigma Z) x (a Lambert W, by Newton from above). The reasoning skill is
    learnt from the training reward's lenient answer check whatever the format: theta = theta0 + D (1 - e^(-k q_G
    tau)) per step (small groups faster per FLOP). Reward r_top s_w(l) Phi(theta); l0 = -w - delta, delta in (2.5,
    5), w in (1, 3); g8's median seed reaches l = -w at x log-uniform in (0.08, 2.5); sigma in (0.2, 0.6) per
    seed. Ignores r0 (starts at 0). Truth: r_top Phi(theta) E_Z[s_w(l)], E_Z by 64-node Gauss-Legendre between the Z
    where l = -w and l = w (where s_w is smooth), plus the normal tail above.

fmtbreak: a format broken by early updates, then a new one found (Liu et al. 2025, "Understanding R1-Zero-Like
    Training": a template the base model does not answer in; a format reward that penalises its own style). The
    base model answers in its own style, which the evaluation accepts (step 0 = r0); the training reward's format
    term penalises it on every sample, so its greedy share falls linearly per step: s_old = s_w(w + delta_o - c
    tau), gone at g4's x in (0.005, 0.08) (g32 eight times later); the required format is found as in fmtfind (g8's
    median seed at x in (0.3, 3)).
    Prompts keep or gain a parseable answer independently: reward r_top Phi(theta) (1 - (1 - s_old)(1 - s_new)),
    exactly 0 between losing the old style and finding the new; theta0 = ndtri(r0 / r_top) (honours r0).

discover: sparse-reward exploration with entropy collapse (Cui et al. 2025, "The Entropy Mechanism of
    Reinforcement Learning for Reasoning Language Models"; sparse-reward exploration). A strategy (a tool call, a
    decomposition) without which every prompt scores 0 is found by a seed as a Poisson event: a group of G tries costs
    G, so the hazard per FLOP is h at the start for every arm, but exploration collapses per optimizer step: lambda(x)
    = h e^(-x / c_G), c_G = T G / 4; a seed finds it with probability 1 - e^(-h c_G) (small groups may never), then
    its reward rises per step: A (1 - e^(-kappa_G (x - x_d))), kappa_G = k q_G 4 / G (small groups faster). h in
    (0.5, 6), T in (0.03, 0.5), 1/k in (0.05, 0.5), A in (0.3, 0.8). Ignores r0 (0 until found). Truth: A ((1 -
    e^(-Lambda(x))) - int_0^x lambda(t) e^(-Lambda(t)) e^(-kappa (x - t)) dt), Lambda(x) = h c (1 - e^(-x/c)),
    the integral by 96-node Gauss-Legendre (checked against adaptive quadrature and Monte Carlo of seeds).

Small floor (0.002-0.02: a prompt now and then scores 1 by sampling):

sharpen: pass@k into pass@1 on a hard set at a sampled evaluation (Yue et al. 2025, "Does Reinforcement Learning
    Really Incentivize Reasoning Capacity in LLMs Beyond the Base Model?"): pass@1 starts at eps in (0.002, 0.02).
    GRPO learns from a prompt only when its group holds a success, probability 1 - (1 - p)^G, and moves the logit
    by (1 - p) then: dl/dpsi = q_G (1 - (1 - p)^G) (1 - p), psi = k e^(sigma Z) tau. Per FLOP, near the floor
    large groups escape first (~ 4 q_G p), near the top small ones climb faster; g8's median seed reaches p = 1/2
    at x log-uniform in (0.4, 4); sigma in (0.15, 0.5). Reward r_top p, r_top in (0.6, 0.95). Ignores r0 (starts
    at eps). Truth: 400-node Gauss-Legendre over Z in (-9, 9) of the DOP853 solution (rtol 1e-12, dense output;
    checked against the quadrature psi(l) = int dl / rate(l), inverted by brentq, and adaptive quadrature over Z;
    a first draft's 48-node Gauss-Hermite was off by up to 5e-4: the escape from the floor is steep in ln psi).

lenblow: responses outgrow the generation limit and are cut (scored 0), then the overlong penalty teaches the policy
    to finish (Yu et al. 2025, "DAPO": overlong reward shaping; length growth in R1-Zero-style runs). The cut share
    rises per step, a(tau) = (expit((tau - T1) / w1) - a_0) / (1 - a_0), w1 = T1 / 8, and is repaired per step,
    expit(-(tau - T2 e^(sigma Z)) / w2), w2 = T2 / 10; d = a expit(...); reward r_top Phi(theta) (1 - d) + eps d,
    eps in (0.002, 0.02) (the few answers short enough). g4's cut at x = T1 in (0.02, 0.25), repair T2 = rho T1,
    rho in (3, 10); sigma in (0.1, 0.35); theta as in fmtfind with a ceiling that rises with the group, D_G = D (G /
    4)^zeta, zeta in (0, 0.4) (a better advantage estimate), theta0 = ndtri(r0 / r_top) (honours r0). Large groups
    reach the cut eight times later in FLOPs (often after the pilots, before F); small ones are in their cut during
    the pilots and repaired by F. Truth: 400-node Gauss-
    Legendre over Z in (-9, 9) (checked against adaptive quadrature).

Every family draws its parameters per repetition (seed 4040, 100 repetitions: the arm best at F is g4/g8/g16/g32 in
42/13/17/28 for fmtfind, 20/17/16/47 fmtbreak, 0/5/18/77 discover, 29/24/30/17 sharpen, 41/24/25/10 lenblow; the arm
best at F_P is not the best at F in 0.30, 0.36, 0.33, 0.66, 0.83; at least one arm's rung-0 pilots all 0 after step 0 in
0.68, 0.39, 0.79, 0, 0). The truth at F is exact to 5e-11 or better against the independent computation at the harness's
shift nodes. The checks (race_blind_check_round40_checks.py): --zero-share prints, from this generator (not RACE), the
share of repetitions with at least one arm whose rung-0 pilots (every seed, every evaluation after step 0) scored
exactly 0 on every prompt, and the same over all seven evaluations (rung 1's as if kept); --leader-share how often the
arm best at F_P is not the best at F; --truth-check checks each truth by Monte Carlo of seeds (the harness's timing
shift and this family's seed draws, the seeds importance-sampled from a distribution twice as wide so that rare slow
seeds are seen: a plain Monte Carlo of 4000 seeds missed seeds of probability ~1e-5 still on the floor and reported z of
hundreds on gaps of 1e-5) and by an independent quadrature at the harness's shift nodes.

    python benchmarks/race_blind_check_round40.py --families fmtfind fmtbreak discover sharpen lenblow \
        --reps 100 --replicates 100 --seed 4040 --out race-blind-check     # round 40
    python benchmarks/race_blind_check_round40_checks.py --truth-check --seed 4040
    python benchmarks/race_blind_check_round40_checks.py --zero-share --reps 100 --seed 4040
    python benchmarks/race_blind_check_round40_checks.py --leader-share --reps 100 --seed 4040
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 38's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round38  # noqa: F401  registers rounds 31-38's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.special import expit, ndtr, ndtri

GROUPS = np.array([4.0, 8.0, 16.0, 32.0])
X_MAX = 20.0
_GLX, _GLW = np.polynomial.legendre.leggauss(64)
_GL96X, _GL96W = np.polynomial.legendre.leggauss(96)
_ZX, _ZW = np.polynomial.legendre.leggauss(400)  # E over Z ~ N(0, 1): 400-node Gauss-Legendre on (-9, 9)
_ZX = 9 * _ZX
_ZW = 9 * _ZW * np.exp(-0.5 * _ZX ** 2) / np.sqrt(2 * np.pi)


def _x(f):
    return np.asarray(f, dtype=float) / rbc.F_P


def _logu(rng, a, b):
    return float(np.exp(rng.uniform(np.log(a), np.log(b))))


def _sw(l, w):
    return np.clip((l + w) / (2 * w), 0.0, 1.0)


def _kfun(l):  # K(l) = l - e^(-l)
    return l - np.exp(-l)


def _l_of_k(k):
    """The l with l - e^(-l) = k: v = -l solves e^v + v = -k; Newton from above (g convex, g(v0) >= 0)."""
    m = -np.asarray(k, dtype=float)
    v = np.where(m > 1, np.log(np.maximum(m, 1.0)), m)
    for _ in range(100):
        ev = np.exp(v)
        step = (ev + v - m) / (ev + 1)
        v = v - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1, np.abs(v))):
            break
    return -v


def _npdf(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)


# ---- the opt-in exact floor (see the docstring) ----------------------------------------------------------------------
_harness_simulate = rbc.simulate


def simulate(rng, name, curve, d, r0):
    start = getattr(curve, "start", None)
    if start is None:
        return _harness_simulate(rng, name, curve, d, r0)
    u = rbc.ARM_PROMPT_SD * rng.standard_normal(rbc.N_PROMPTS)
    grid = np.concatenate([rbc.EVALS0, rbc.EVALS1])
    f = grid[None, :] * (1 + rbc.JITTER * rng.uniform(-1, 1, (rbc.N_SEEDS, grid.size)))
    gain = 1 + rbc.GAIN_SD * rng.standard_normal((rbc.N_SEEDS, 1))
    shift = np.exp(rbc.SHIFT_SD * rng.standard_normal((rbc.N_SEEDS, 1)))
    if hasattr(curve, "draw_seeds"):
        per = curve.draw_seeds(rng, rbc.N_SEEDS)
        mean = np.stack([per[s](f[s] * shift[s]) for s in range(rbc.N_SEEDS)])
    else:
        mean = curve(f * shift)
    wob = rbc.WOBBLE_SD * np.minimum(1.0, np.maximum(mean, 0.0) / 0.1) * rng.standard_normal(f.shape)
    p = start + (mean - start) * gain + wob
    zero = np.concatenate([np.full((rbc.N_SEEDS, 1), start <= 0), mean <= 0], axis=1)
    p = np.concatenate([np.full((rbc.N_SEEDS, 1), start), p], axis=1)
    p = np.clip(p, 0.002, 0.998)
    f = np.concatenate([np.zeros((rbc.N_SEEDS, 1)), f], axis=1)
    q = expit(rbc.theta_of(p)[:, :, None] - d[None, None, :] + u[None, None, :])
    q[zero] = 0.0
    scores = (rng.uniform(size=q.shape) < q).astype(float)
    return f, scores


rbc.simulate = simulate


class _Fam:
    """Base: __call__ is the expectation over seeds (the truth), seed(z_or_draw) one seed's curve."""

    start = 0.0

    def draw_seeds(self, rng, n):
        return [self.seed(rng.standard_normal()) for _ in range(n)]

    def draw_seeds_wide(self, rng, n):
        """For the truth check: seeds drawn twice as wide (Z = 2 N), with their importance weights, so that rare
        seeds (a slow one still on the floor where the others have left it) are seen."""
        z = 2 * rng.standard_normal(n)
        return [self.seed(v) for v in z], 2 * np.exp(-3 * z ** 2 / 8)


# ---- fmtfind / fmtbreak ----------------------------------------------------------------------------------------------
class _Format:
    def _new_share_mean(self, x):
        """E_Z[s_w(l_Z(x))] for an array x (flattened), l_Z: K(l) = K0 + rate e^(sigma Z) x."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        out = np.zeros_like(x)
        w, k0, rate, sg = self.w, self.k0, self.rate, self.sigma
        for i, xi in enumerate(x):
            if xi <= 0:
                continue
            za = np.log((_kfun(-w) - k0) / (rate * xi)) / sg
            zb = np.log((_kfun(w) - k0) / (rate * xi)) / sg
            tail = ndtr(-zb)
            lo, hi = max(za, -12.0), min(zb, 12.0)
            mid = 0.0
            if hi > lo:
                z = 0.5 * (hi - lo) * _GLX + 0.5 * (hi + lo)
                l = _l_of_k(k0 + rate * np.exp(sg * z) * xi)
                mid = 0.5 * (hi - lo) * float((_GLW * _npdf(z) * _sw(l, w)).sum())
            out[i] = tail + mid
        return out

    def _new_share_seed(self, x, z):
        x = np.asarray(x, dtype=float)
        return _sw(_l_of_k(self.k0 + self.rate * np.exp(self.sigma * z) * np.maximum(x, 0)), self.w)

    def _theta(self, x):
        return self.theta0 + self.D * (1 - np.exp(-self.k * self.qg * 4 * np.asarray(x, float) / self.G))


def _format_params(obj, rng, G, gamma, xmid, k, D, r_top, w, delta, sigma):
    obj.G, obj.qg, obj.w, obj.sigma = G, (G / 4) ** gamma, w, sigma
    obj.k0 = _kfun(-w - delta)
    obj.rate = (_kfun(-w) - obj.k0) / ((8 / 4) ** gamma * xmid) * 1.0  # per FLOP, q_G e^(sigma Z) left out
    obj.rate *= obj.qg  # b q_G
    obj.k, obj.D, obj.r_top = k, D, r_top


class FmtFind(_Format, _Fam):
    start = 0.0

    def __call__(self, f):
        x = _x(f)
        shp = np.shape(x)
        e = self._new_share_mean(np.ravel(x)).reshape(shp)
        return self.r_top * ndtr(self._theta(x)) * e

    def seed(self, z):
        return lambda f, z=z: self.r_top * ndtr(self._theta(_x(f))) * self._new_share_seed(_x(f), z)


def fam_fmtfind(rng, r0):
    """Format discovery under a strict greedy evaluation (ignores r0: starts at exactly 0); see the docstring."""
    gamma, xmid = rng.uniform(0.2, 0.7), _logu(rng, 0.08, 2.5)
    w, delta, sigma = rng.uniform(1, 3), rng.uniform(2.5, 5), rng.uniform(0.2, 0.6)
    k, D, r_top = 1 / _logu(rng, 0.05, 1.0), rng.uniform(0.5, 2.0), rng.uniform(0.85, 1.0)
    theta0 = rng.uniform(-1.0, 0.5)
    out = []
    for G in GROUPS:
        c = FmtFind()
        _format_params(c, rng, G, gamma, xmid, k, D, r_top, w, delta, sigma)
        c.theta0 = theta0
        out.append(c)
    return out


class FmtBreak(_Format, _Fam):
    def _old(self, x):
        return _sw(self.w + self.delta_o - self.c * 4 * np.asarray(x, float) / self.G, self.w)

    def __call__(self, f):
        x = _x(f)
        shp = np.shape(x)
        e = self._new_share_mean(np.ravel(x)).reshape(shp)
        so = self._old(x)
        return self.r_top * ndtr(self._theta(x)) * (so + (1 - so) * e)

    def seed(self, z):
        def curve(f, z=z):
            x = _x(f)
            so, sn = self._old(x), self._new_share_seed(x, z)
            return self.r_top * ndtr(self._theta(x)) * (1 - (1 - so) * (1 - sn))
        return curve


def fam_fmtbreak(rng, r0):
    """A format broken by early updates (every prompt 0) and a new one found (honours r0); see the docstring."""
    gamma, xmid = rng.uniform(0.2, 0.7), _logu(rng, 0.3, 3.0)
    w, delta, sigma = rng.uniform(1, 3), rng.uniform(2.5, 5), rng.uniform(0.2, 0.6)
    k, D, r_top = 1 / _logu(rng, 0.05, 1.0), rng.uniform(0.5, 2.0), rng.uniform(0.8, 0.95)
    delta_o, xbreak = rng.uniform(0.0, 1.0), _logu(rng, 0.005, 0.08)
    out = []
    for G in GROUPS:
        c = FmtBreak()
        _format_params(c, rng, G, gamma, xmid, k, D, r_top, w, delta, sigma)
        c.theta0 = float(ndtri(r0 / r_top))
        c.delta_o, c.c = delta_o, (2 * w + delta_o) / xbreak  # g4 (tau = x) loses it at xbreak
        c.start = float(r0)
        out.append(c)
    return out


# ---- discover --------------------------------------------------------------------------------------------------------
class Discover(_Fam):
    start = 0.0

    def _lam(self, x):
        return self.h * np.exp(-x / self.c)

    def _Lam(self, x):
        return self.h * self.c * -np.expm1(-np.asarray(x, float) / self.c)

    def _one(self, x):
        if x <= 0:
            return 0.0
        t = 0.5 * x * (_GL96X + 1)
        integ = 0.5 * x * float((_GL96W * self._lam(t) * np.exp(-self._Lam(t) - self.kappa * (x - t))).sum())
        return self.A * (-np.expm1(-self._Lam(x)) - integ)

    def __call__(self, f):
        x = _x(f)
        return np.vectorize(self._one, otypes=[float])(x)

    def seed(self, e1):
        hc = self.h * self.c
        if e1 >= hc:
            return lambda f: np.zeros(np.shape(f))
        xd = -self.c * np.log1p(-e1 / hc)
        return lambda f, xd=xd: np.where(_x(f) > xd, self.A * -np.expm1(-self.kappa * (_x(f) - xd)), 0.0)

    def draw_seeds(self, rng, n):
        return [self.seed(rng.exponential()) for _ in range(n)]

    def draw_seeds_wide(self, rng, n):
        e = rng.exponential(2.0, n)
        return [self.seed(v) for v in e], 2 * np.exp(-e / 2)


def fam_discover(rng, r0):
    """A strategy found as a Poisson event under collapsing exploration (ignores r0: 0 until found)."""
    h, T, k = _logu(rng, 0.5, 6.0), _logu(rng, 0.03, 0.5), 1 / _logu(rng, 0.05, 0.5)
    A, gamma = rng.uniform(0.3, 0.8), rng.uniform(0.2, 0.7)
    out = []
    for G in GROUPS:
        c = Discover()
        c.G, c.h, c.c, c.A = G, h, T * G / 4, A
        c.kappa = k * (G / 4) ** gamma * 4 / G
        out.append(c)
    return out


# ---- sharpen ---------------------------------------------------------------------------------------------------------
class Sharpen(_Fam):
    def rate(self, l):
        p = expit(l)
        return self.qg * -np.expm1(self.G * np.log1p(-p)) * (1 - p)

    def solve(self):
        psi_max = self.k * np.exp(10 * self.sigma) * 4 * X_MAX / self.G
        self.sol = solve_ivp(lambda t, y: self.rate(y), (0, psi_max), [self.l0], method="DOP853", rtol=1e-12,
                             atol=1e-12, dense_output=True)
        self.psi_max = psi_max

    def _l(self, psi):
        psi = np.clip(np.asarray(psi, float), 0, self.psi_max)
        return self.sol.sol(np.ravel(psi))[0].reshape(np.shape(psi))

    def __call__(self, f):
        tau = 4 * np.maximum(_x(f), 0) / self.G
        psi = self.k * np.exp(self.sigma * _ZX) * tau[..., None]
        return self.r_top * (expit(self._l(psi)) * _ZW).sum(axis=-1)

    def seed(self, z):
        return lambda f, z=z: self.r_top * expit(self._l(self.k * np.exp(self.sigma * z) * 4 *
                                                           np.maximum(_x(f), 0) / self.G))


def fam_sharpen(rng, r0):
    """pass@k into pass@1 from a sampled floor eps in (0.002, 0.02) (ignores r0: starts at eps)."""
    eps, r_top = rng.uniform(0.002, 0.02), rng.uniform(0.6, 0.95)
    gamma, xmid, sigma = rng.uniform(0.2, 0.7), _logu(rng, 0.4, 4.0), rng.uniform(0.15, 0.5)
    l0 = float(np.log(eps / r_top) - np.log1p(-eps / r_top))
    # k so that g8's median seed reaches p = 1/2 at xmid: psi(0) - psi(l0) = k 4 xmid / 8
    ref = Sharpen()
    ref.G, ref.qg = 8.0, 2.0 ** gamma
    psi_half = quad(lambda l: 1 / ref.rate(l), l0, 0.0, epsabs=0, epsrel=1e-12, limit=200)[0]
    k = psi_half * 8 / (4 * xmid)
    out = []
    for G in GROUPS:
        c = Sharpen()
        c.G, c.qg, c.k, c.sigma, c.l0, c.r_top, c.start = G, (G / 4) ** gamma, k, sigma, l0, r_top, float(eps)
        c.solve()
        out.append(c)
    return out


# ---- lenblow ---------------------------------------------------------------------------------------------------------
class LenBlow(_Fam):
    def _parts(self, x):
        tau = 4 * np.asarray(x, float) / self.G
        a0 = expit(-self.T1 / self.w1)
        a = (expit((tau - self.T1) / self.w1) - a0) / (1 - a0)
        theta = self.theta0 + self.D * (1 - np.exp(-self.k * self.qg * tau))
        return tau, a, ndtr(theta)

    def _seed_val(self, x, z):
        tau, a, ph = self._parts(x)
        d = a * expit(-(tau - self.T2 * np.exp(self.sigma * z)) / self.w2)
        return self.r_top * ph * (1 - d) + self.eps * d

    def __call__(self, f):
        x = np.maximum(_x(f), 0)
        return (self._seed_val(x[..., None], _ZX) * _ZW).sum(axis=-1)

    def seed(self, z):
        return lambda f, z=z: self._seed_val(np.maximum(_x(f), 0), z)


def fam_lenblow(rng, r0):
    """Answers cut at the generation limit, then repaired (honours r0); floor eps in (0.002, 0.02)."""
    eps, r_top = rng.uniform(0.002, 0.02), rng.uniform(0.8, 0.95)
    T1 = _logu(rng, 0.02, 0.25)
    T2 = T1 * _logu(rng, 3.0, 10.0)
    sigma, gamma = rng.uniform(0.1, 0.35), rng.uniform(0.2, 0.7)
    k, D, zeta = 1 / _logu(rng, 0.05, 1.0), rng.uniform(0.5, 2.0), rng.uniform(0.0, 0.4)
    out = []
    for G in GROUPS:
        c = LenBlow()
        c.G, c.qg, c.eps, c.r_top, c.T1, c.T2, c.w1, c.w2 = G, (G / 4) ** gamma, eps, r_top, T1, T2, T1 / 8, T2 / 10
        c.sigma, c.k, c.D, c.theta0, c.start = sigma, k, D * (G / 4) ** zeta, float(ndtri(r0 / r_top)), float(r0)
        out.append(c)
    return out


MINE = {"fmtfind": fam_fmtfind, "fmtbreak": fam_fmtbreak, "discover": fam_discover, "sharpen": fam_sharpen,
        "lenblow": fam_lenblow}
rbc.register(MINE, "round 40")


def main():
    """The run (every flag of race_blind_check; without --families, these five). The checks of the truths, the
    all-zero pilots and the leaders: benchmarks/race_blind_check_round40_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
