"""Round 44's independent check of RACE's analysis: truth families on one theme, the pilot is not a prefix of the run
at F (a pilot and the full run are set up for their own lengths, so the reward a pilot shows at F_P is not what the
run to F shows at F_P), written by a session that had not seen benchmarks/race_misspecification.py's shapes, the
results, the changelog or flopplan/race's code (nor the bodies of rounds 31-42's families), on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1 prompts, rungs
F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 43's script is imported first
(and with it rounds 31-42), so every key stays unique and these come after (their keys and random streams follow
round 43's); every flag of race_blind_check works here (without --families, these).

Units. x = f / F_P; every arm's curve depends on its run's horizon h (in F_P): mean(x, h). An arm called with FLOPs
(as race_blind_check.simulate calls it) is the pilot, a run planned for F_P (h = 1), evaluated at all of its pilot
points (rung 0 is that run's prefix, rung 1 its continuation: one pilot run per arm and seed). A schedule is a
function of the FLOPs, so the harness's timing shift (the curve at f e^(0.15 N)) moves a seed along its schedule
too; past its horizon a run keeps its schedule's last value. Every curve equals r0 at x = 0.

The truth at f (race_blind_check.truth_at, wrapped so that curves of this round, attribute truth_r44, answer with
it; every other curve keeps the truth it had) is the harness's own definition applied to a run planned for f: the
expected clipped pass rate over the seed draw (timing shift, gain 1 + 0.08 N, wobble 0.01 N, clip [0.002, 0.998]) of
mean(., h = f / F_P) at f. So truth_at(arm, F_P) is the pilot's own and truth_at(arm, F) that of a run planned for
F = 2 F_P (for wsd that run is also the pilot's stable-phase checkpoint continued to F with its own cooldown).
Gain and wobble in closed form (round 41's clip_mean), the timing shift by Gauss-Legendre on the pieces between
the schedule's kinks, each piece mapped by z = a + (b - a)(1 - cos(pi t)) / 2 (a square-root cusp at a cut becomes
smooth). The independent quadrature and a Monte Carlo through the harness's simulate (of a run planned for F):
race_blind_check_round44_checks.py.

anneal -- warmup then decay to a floor over the run's own horizon, the reward read through the learning rate's
noise. Sources: Hoffmann et al. (2022), "Training compute-optimal large language models" (a cosine cycle is set to
the run's length; a cycle longer than the run is worse at every point), Tissue et al. (2024), "Scaling law with
learning rate annealing" (L = L0 + A S1^-alpha - C S2: progress by the forward area S1 = sum of learning rates,
the annealing term S2 taken with their momentum lambda -> 0, i.e. the drop of the rate so far), read as Wen et al.
(2024), "Understanding warmup-stable-decay learning rates: a river valley loss landscape perspective" (a hill held
up by the rate's noise, gone when it anneals). eta(u) rises linearly over a share w of the horizon, then decays to
rho (shape: cosine, or linear as transformers' default lr_scheduler_type); S1 its integral (closed form);
R = r0 + (A_G - r0) (1 - (1 + S1 / c_G)^-alpha_G) (1 - k_G eta). The hill k_G = k (3 / (G - 1))^nu: the rate's
noise is the rate times the gradient's noise, smaller for larger groups (a larger group tolerates a higher rate).
w ~ U[0.01, 0.1], rho ~ U[0, 0.1], cosine or linear with probability 1/2, A ~ U[0.5, 0.9], A_G = clip(A + t
(log2(G/4) - 1.5) / 1.5 + U(-0.02, 0.02), r0 + 0.15, 0.95), t ~ U[-0.05, 0.2], c_G = c (G/4)^mu e^U(-0.1, 0.1),
c ~ logU[0.03, 1], mu ~ U[0, 1.2] (fewer prompts per update: slower), alpha_G = alpha e^U(-0.1, 0.1),
alpha ~ U[0.5, 1.5], k ~ U[0.15, 0.5], nu ~ U[0.3, 1].

wsd -- warmup-stable-decay: a fixed warmup w0, the peak rate held, a cooldown over the last share c of the horizon in
the shape 1 - sqrt to 0. Source: Hägele et al. (2024), "Scaling laws and compute-optimal training beyond fixed
training durations" (the cooldown's sharp drop of the loss, 1 - sqrt the better shape, 10-20 % of the run), after
Hu et al. (2024), "MiniCPM: unveiling the potential of small language models with scalable training strategies".
The pilot shows its cooldown's bump in its last c F_P; the run to F is still at the peak rate there. The truth is a
run planned for F, the same as continuing the pilot's checkpoint from before its cooldown (the stable phase does not
depend on the horizon), as these papers propose. Reward as anneal's (S1 in closed form). w0 ~ logU[0.01, 0.05] F_P,
c ~ U[0.1, 0.3]; the other parameters as anneal's.

klreset -- a KL penalty to a reference policy refreshed K times per run (every h / K). Sources: Korbak, Perez and
Buckley (2022), "RL with KL penalties is better viewed as Bayesian inference" (the KL-regularised optimum is
pi_ref e^(r / beta) / Z: for a 0/1 reward each prompt's pass logit moves by 1 / beta from the reference's), with the
periodic reference updates of Gorbatovski et al. (2024), "Learn your reference model for real good alignment", and
the reference resets of Liu et al. (2025), "ProRL: prolonged reinforcement learning expands reasoning boundaries in
large language models". In period j the logit gap to the period's optimum closes as e^(-(x - j T) / tau_G), T = h / K
(the last period runs on past h): theta = theta_0 + d (j (1 - e^(-T / tau_G)) + 1 - e^(-(x - j T) / tau_G));
R = A_G m(theta), m(theta) = E[expit(theta + sigma Z)] (prompts' logits), A_G m(theta_0) = r0 (the share 1 - A_G
never solved). An arm that reaches each optimum quickly gains little from longer periods: the run to F makes the same
K steps as the pilot. K ~ {2, ..., 6}, d ~ U[0.4, 1.5], sigma ~ U[0.8, 2], tau_G = tau (G/4)^mu e^U(-0.1, 0.1),
tau ~ logU[0.02, 0.4], mu ~ U[-0.6, 0.6]; A_G as anneal's with A ~ U[0.55, 0.95].

explore -- an exploration schedule (sampling temperature or entropy bonus) decayed linearly to its floor over the
run's horizon: exploring widens the prompts the policy can solve at all, exploiting sharpens them. Sources: Cui et
al. (2025), "The entropy mechanism of reinforcement learning for reasoning language models" (reward is bought by
spending entropy, R = -a e^H + b), and Yue et al. (2025), "Does reinforcement learning really incentivize reasoning
capacity in LLMs beyond the base model?" (RL sharpens within the sampled coverage, pass@k). Exploration weight
v(u) = max(1 - u / h, 0); E = int v = min(x, h) - min(x, h)^2 / (2 h), X = x - lam E; R = r0 + (A_G - r0)
(c0 + (1 - c0)(1 - e^(-a_G E)))(1 - e^(-b_G X)). More rollouts per prompt cover more (a_G = a (G/4)^mu_a), more
prompts per update sharpen faster (b_G = b (4/G)^mu_b): the pilot stops exploring at F_P. c0 ~ U[0.3, 0.7],
lam ~ U[0.5, 1], a ~ logU[0.5, 8], mu_a ~ U[0.1, 0.8], b ~ logU[1, 10], mu_b ~ U[0, 0.6]; A_G as klreset's.

    python benchmarks/race_blind_check_round44.py --reps 100 --replicates 100 --seed 4444 --out DIR
    python benchmarks/race_blind_check_round44.py --table --explain --out DIR
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools

import numpy as np
import race_blind_check as rbc
import race_blind_check_round43  # noqa: F401  registers rounds 31-43's families first (keys and streams)
from race_blind_check_round41 import GROUPS, _logu, clip_mean
from scipy.optimize import brentq
from scipy.special import expit

_TX, _TW = np.polynomial.legendre.leggauss(64)
_TX, _TW = (_TX + 1) / 2, _TW / 2  # on [0, 1]
_HX, _HW = np.polynomial.hermite_e.hermegauss(160)
_HW = _HW / _HW.sum()


def znodes(x, kinks):
    """Nodes and weights of E over z ~ N(0, 1), |z| <= 8, for a curve at x e^(SHIFT_SD z) whose kinks are at
    ``kinks`` (in x): Gauss-Legendre on the pieces between them, each mapped by z = a + (b - a)(1 - cos(pi t)) / 2."""
    cuts = sorted({-8.0, 8.0, *(z for z in (np.log(k / x) / rbc.SHIFT_SD for k in kinks if k > 0) if -8 < z < 8)})
    z, w = [], []
    for a, b in itertools.pairwise(cuts):
        z.append(a + (b - a) * (1 - np.cos(np.pi * _TX)) / 2)
        w.append(_TW * (b - a) * np.pi / 2 * np.sin(np.pi * _TX))
    z, w = np.concatenate(z), np.concatenate(w)
    w = w * np.exp(-0.5 * z * z)
    return z, w / w.sum()


def _grade(rng, r0, lo, hi, t_lo=-0.1, t_hi=0.15):
    """A_G per group: a shared level, a trend in log2 G of random sign and size, a little noise."""
    A, t = rng.uniform(lo, hi), rng.uniform(t_lo, t_hi)
    return [float(np.clip(A + t * (np.log2(g / 4) - 1.5) / 1.5 + rng.uniform(-0.02, 0.02), r0 + 0.15, 0.95))
            for g in GROUPS]


class _Arm:
    """One arm: ``mean(x, h)`` the reward at x = f / F_P of a run planned for h F_P; called with FLOPs, the pilot
    (h = 1); ``truth_r44(f)`` the expected clipped pass rate at f of a run planned for f."""

    def __init__(self, r0, g):
        self.r0, self.g = float(r0), int(g)

    def __call__(self, f):
        return self.mean(np.asarray(f, dtype=float) / rbc.F_P, 1.0)

    def planned(self, h):
        """The curve (of FLOPs) of a run planned for h F_P."""
        return lambda f: self.mean(np.asarray(f, dtype=float) / rbc.F_P, h)

    def kinks(self, h):
        return [h]

    def expected(self, x, h):
        """E over the harness's seed draw of the clipped pass rate at x of a run planned for h."""
        z, w = znodes(x, self.kinks(h))
        return float(clip_mean(self.mean(x * np.exp(rbc.SHIFT_SD * z), h), self.r0) @ w)

    def truth_r44(self, f):
        x = float(f) / rbc.F_P
        return self.expected(x, x)


# ---- anneal and wsd: progress by the rate's area, a hill held up by the rate ----------------------------------------
class River(_Arm):
    def __init__(self, r0, g, A, c, alpha, k):
        super().__init__(r0, g)
        self.A, self.c, self.alpha, self.k = A, c, alpha, k

    def mean(self, x, h):
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        gain = -np.expm1(-self.alpha * np.log1p(self.area(x, h) / self.c))
        return self.r0 + (self.A - self.r0) * gain * (1 - self.k * self.eta(x, h))


class Anneal(River):
    def __init__(self, r0, g, A, c, alpha, k, w, rho, cos):
        super().__init__(r0, g, A, c, alpha, k)
        self.w, self.rho, self.cos = w, rho, bool(cos)

    def _phi(self, x, h):
        return np.clip((x / h - self.w) / (1 - self.w), 0.0, 1.0)

    def eta(self, x, h):
        u, p = x / h, self._phi(x, h)
        decay = (1 + np.cos(np.pi * p)) / 2 if self.cos else 1 - p
        return np.where(u < self.w, u / self.w, self.rho + (1 - self.rho) * decay)

    def area(self, x, h):
        u, p = x / h, self._phi(x, h)
        d = p / 2 + np.sin(np.pi * p) / (2 * np.pi) if self.cos else p - p * p / 2
        return h * (np.minimum(u, self.w) ** 2 / (2 * self.w) + (1 - self.w) * (self.rho * p + (1 - self.rho) * d)
                    + self.rho * np.maximum(u - 1, 0.0))

    def kinks(self, h):
        return [self.w * h, h]


class Wsd(River):
    def __init__(self, r0, g, A, c, alpha, k, w0, cool):
        super().__init__(r0, g, A, c, alpha, k)
        self.w0, self.cool = w0, cool

    def _phi(self, x, h):
        return np.clip((x - (1 - self.cool) * h) / (self.cool * h), 0.0, 1.0)

    def eta(self, x, h):
        return np.where(x < self.w0, x / self.w0, 1 - np.sqrt(self._phi(x, h)))

    def area(self, x, h):
        p = self._phi(x, h)
        return (np.minimum(x, self.w0) ** 2 / (2 * self.w0) + np.clip(x, self.w0, (1 - self.cool) * h) - self.w0
                + self.cool * h * (p - 2 / 3 * p ** 1.5))

    def kinks(self, h):
        return [self.w0, (1 - self.cool) * h, h]


def _river(rng, r0):
    """Anneal's and wsd's shared draws: per arm (A_G, c_G, alpha_G, k_G)."""
    A = _grade(rng, r0, 0.5, 0.9, -0.05, 0.2)
    c, mu, alpha, k, nu = (_logu(rng, 0.03, 1.0), rng.uniform(0.0, 1.2), rng.uniform(0.5, 1.5),
                           rng.uniform(0.15, 0.5), rng.uniform(0.3, 1.0))
    return [(A[i], c * (g / 4) ** mu * np.exp(rng.uniform(-0.1, 0.1)), alpha * np.exp(rng.uniform(-0.1, 0.1)),
             k * (3 / (g - 1)) ** nu) for i, g in enumerate(GROUPS)]


def fam_anneal(rng, r0):
    w, rho, cos = rng.uniform(0.01, 0.1), rng.uniform(0.0, 0.1), rng.uniform() < 0.5
    return [Anneal(r0, g, *p, w, rho, cos) for g, p in zip(GROUPS, _river(rng, r0), strict=True)]


def fam_wsd(rng, r0):
    w0, cool = _logu(rng, 0.01, 0.05), rng.uniform(0.1, 0.3)
    return [Wsd(r0, g, *p, w0, cool) for g, p in zip(GROUPS, _river(rng, r0), strict=True)]


# ---- klreset --------------------------------------------------------------------------------------------------------
def m_sigma(theta, sigma):
    """E[expit(theta + sigma Z)], Z ~ N(0, 1) (Gauss-Hermite, 160 nodes)."""
    theta = np.asarray(theta, dtype=float)
    return expit(theta[..., None] + sigma * _HX) @ _HW


class KlReset(_Arm):
    def __init__(self, r0, g, A, K, d, sigma, tau):
        super().__init__(r0, g)
        self.A, self.K, self.d, self.sigma, self.tau = A, int(K), d, sigma, tau
        self.theta0 = brentq(lambda t: A * float(m_sigma(t, sigma)) - r0, -40.0, 40.0, xtol=1e-14, rtol=1e-15)

    def shift(self, x, h):
        x, T = np.maximum(np.asarray(x, dtype=float), 0.0), h / self.K
        j = np.minimum(np.floor(x / T), self.K - 1)
        return self.d * (j * -np.expm1(-T / self.tau) - np.expm1(-(x - j * T) / self.tau))

    def mean(self, x, h):
        return self.A * m_sigma(self.theta0 + self.shift(x, h), self.sigma)

    def kinks(self, h):
        return [h * j / self.K for j in range(1, self.K)]


def fam_klreset(rng, r0):
    A = _grade(rng, r0, 0.55, 0.95)
    K, d, sigma = int(rng.integers(2, 7)), rng.uniform(0.4, 1.5), rng.uniform(0.8, 2.0)
    tau, mu = _logu(rng, 0.02, 0.4), rng.uniform(-0.6, 0.6)
    return [KlReset(r0, g, A[i], K, d, sigma, tau * (g / 4) ** mu * np.exp(rng.uniform(-0.1, 0.1)))
            for i, g in enumerate(GROUPS)]


# ---- explore --------------------------------------------------------------------------------------------------------
class Explore(_Arm):
    def __init__(self, r0, g, A, c0, lam, a, b):
        super().__init__(r0, g)
        self.A, self.c0, self.lam, self.a, self.b = A, c0, lam, a, b

    def mean(self, x, h):
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        xm = np.minimum(x, h)
        e = xm - xm * xm / (2 * h)
        cover = self.c0 - (1 - self.c0) * np.expm1(-self.a * e)
        return self.r0 + (self.A - self.r0) * cover * -np.expm1(-self.b * (x - self.lam * e))


def fam_explore(rng, r0):
    A = _grade(rng, r0, 0.55, 0.95)
    c0, lam, a, mua, b, mub = (rng.uniform(0.3, 0.7), rng.uniform(0.5, 1.0), _logu(rng, 0.5, 8.0),
                               rng.uniform(0.1, 0.8), _logu(rng, 1.0, 10.0), rng.uniform(0.0, 0.6))
    return [Explore(r0, g, A[i], c0, lam, a * (g / 4) ** mua, b * (4 / g) ** mub) for i, g in enumerate(GROUPS)]


# ---- the truth the harness states for this round's curves ----------------------------------------------------------
rbc.own_truth("truth_r44")  # this round's curves: a run planned for f, its expected clipped pass rate at f

MINE = {"anneal": fam_anneal, "wsd": fam_wsd, "klreset": fam_klreset, "explore": fam_explore}
rbc.register(MINE, "round 44")


def main():
    """The run (every flag of race_blind_check; without --families, these). The checks of the truths and the leaders:
    benchmarks/race_blind_check_round44_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
