"""Round 42's independent check of RACE's analysis: five more truth families on one theme, gains that come late (the
reward keeps rising, or rises again, after a slow or flat stretch, so that much of an arm's gain by F comes after its
pilots, and differently for different group sizes), written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results, the changelog or flopplan/race's code (nor the bodies of
rounds 31-40's families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8,
g16, g32, 3 seeds, 200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room
ladder). Round 41's script is imported first (and with it rounds 31-40), so every key stays unique and these five
come after (their keys and random streams follow round 41's); every flag of race_blind_check works here (without
--families, these five).

Units. x = f / F_P. A step of arm G samples G rollouts for each of the same number of prompts, so u = 4 x / G counts
its updates (g4-updates per F_P) while x counts samples; q_G = (G / 4)^gamma is an update's quality (a better
advantage estimate with a larger group). Every curve equals r0 at x = 0 and is smooth (no kinks: the truth's
quadrature in the timing shift stays accurate).

The truth at F is the harness's own: the expected clipped pass rate over the seed draw of race_blind_check.simulate
(timing shift exp(0.15 N), gain 1 + 0.08 N, wobble 0.01 N, clip to [0.002, 0.998]). Gain and wobble in closed form
(round 41's clip_mean), the timing shift by Simpson's rule on 4001 nodes over |z| <= 8. race_blind_check.truth_at is
wrapped so that curves of this round (attribute truth_r42) answer with it; every other curve keeps the truth it had.
The independent quadrature and a Monte Carlo through the harness's simulate: race_blind_check_round42_checks.py.

aha -- response length grows and reflection emerges late. Source: DeepSeek-AI (Guo et al., 2025), "DeepSeek-R1:
incentivizing reasoning capability in LLMs via reinforcement learning" (R1-Zero's response length grows steadily
with steps; the "aha moment" of reflection appears mid-run). Length L = 1 + c u grows linearly with updates, so an
update costs FLOPs in proportion to G L: x = (G/4)(u + c u^2/2). With S = q_G u: R = r0 + e1 (1 - exp(-S/s1)) +
e2_G expit((ln S - ln S_a)/w). c ~ logU[0.3, 3], gamma ~ U[0.3, 1], e1 ~ U[0.05, 0.2], s1 ~ logU[0.01, 0.1],
S_a ~ logU[0.3, 3], w ~ U[0.2, 0.5], e2_G = min(e2 (1 + zeta log2(G/4)/3), 0.95 - r0 - e1), e2 ~ U[0.2, 0.4],
zeta ~ U[-0.2, 0.6] (larger groups reinforce the rare reflective rollout more, or less).

unlock -- hard prompts pay only once a group samples enough successes. Source: Yu et al. (2025), "DAPO: an open-source
LLM reinforcement learning system at scale" (groups whose samples are all wrong carry zero advantage: dynamic
sampling), on GRPO (Shao et al., 2024, "DeepSeekMath"). Easy prompts (share 1 - h) rise per update:
ee (1 - exp(-ke q_G u)). A hard prompt of pass p (logit p ~ N(mu, sig^2)) unlocks at hazard per x
l1 = kap (4/G) P(Bin(G, p) >= m) (a group needs m successes to outweigh the noise; m real, via the incomplete beta),
then consolidates at hazard per update kc q_G (l2 = kc q_G 4/G per x), then passes p + (1 - p) a_h; both by x: the
hypoexponential CDF H(l1, l2, x) (zero slope at 0: a late rise). R = r0 + (1 - h) ee (1 - exp(-ke q_G u)) +
h a_h E_p[(1 - p) H]. Small groups win the easy prompts and consolidate sooner (more updates per FLOP); for m > 1
large groups unlock the hardest sooner per FLOP. h ~ U[0.3, 0.6], ee ~ U[0.1, 0.25], 1/ke ~ logU[0.03, 0.5],
gamma ~ U[0.3, 1], mu ~ U[-7, -3.5], sig ~ U[0.3, 1], m ~ U[1, 2.5], a_h ~ U[0.4, 0.8]; kap puts the median hard
prompt's unlock for g8 at x ~ logU[0.3, 2], kc its consolidation for g8 at x ~ logU[0.3, 1.5].

warmup -- a learning-rate warm-up counted in optimizer steps. Source: Goyal et al. (2017), "Accurate, large minibatch
SGD: training ImageNet in 1 hour" (gradual warm-up; the linear scaling rule). lr(u) = (G/4)^psi (1 - exp(-u/W)), the
progress its integral P = (G/4)^psi (u - W (1 - exp(-u/W))) (slow, quadratic, while u < W; larger groups reach W at
G/4 times the FLOPs); R = r0 + (A_G - r0)(1 - (1 + P/p0)^-alpha). W ~ logU[0.05, 0.6], psi ~ U[0, 1] (0: one lr,
1: the linear scaling rule), p0 ~ logU[0.01, 0.2], alpha ~ U[0.5, 1.2], A_G = min(0.95, A + t log2(G/4)/3 +
U(-0.03, 0.03)), A ~ U[0.45, 0.8], t ~ U[0, 0.12].

resets -- plateaus under a KL leash, each broken by a reset of the reference policy. Source: Liu et al. (2025),
"ProRL: prolonged reinforcement learning expands reasoning boundaries in large language models" (KL control with
periodic hard resets of the reference policy and optimizer; gains continue over long training). A reset every K
updates (at x = j K G / 4: small groups reset more often per FLOP); stage j climbs D_G rho^j with a gamma(3) CDF in
updates (smooth; a fresh optimizer starts slowly): R = r0 + sum_j D_G rho^j G3((u - j K)/tau_G), tau_G = f K / q_G.
K ~ logU[0.08, 0.4], rho ~ U[0.5, 0.85], f ~ U[0.1, 0.3], gamma ~ U[0, 0.8], D_G = min(C (1 - rho)(G/4)^zeta,
(0.95 - r0)(1 - rho)), C ~ U[0.35, 0.65], zeta ~ U[0, 0.5] (a larger group's stage climbs higher).

entkeep -- entropy collapse caps exploitation; what entropy remains keeps discovering. Source: Cui et al. (2025), "The
entropy mechanism of reinforcement learning for reasoning language models" (R = -a exp(H) + b while entropy
collapses), and DAPO's clip-higher (Yu et al., 2025: entropy kept up, gains continue). H(u) = H_G + (1 - H_G)
exp(-c u), H_G = min(0.9, h (G/4)^beta) (a larger group samples more rare successes and keeps more entropy);
exploitation E = e1 (e - exp(H)) / (e - 1); discoveries at rate kap H per x, D = kap integral H dx, each paying after
a find and its reinforcement: R = r0 + E + e2 (1 - (1 + D) exp(-D)). c ~ logU[2, 20], h ~ U[0.02, 0.15],
beta ~ U[0.3, 1], e1 ~ U[0.1, 0.3], e2 ~ U[0.15, 0.35], kap ~ logU[0.3, 3].

    python benchmarks/race_blind_check_round42.py --reps 100 --replicates 100 --seed 4242 --out DIR
    python benchmarks/race_blind_check_round42.py --table --explain --out DIR
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
from race_blind_check_round41 import (  # registers rounds 31-41's families first (keys and streams)
    GROUPS,
    _logu,
    clip_mean,
)
from scipy.special import betainc, expit

# ---- the seed draw's expectation: Simpson's rule in the timing shift's z ------------------------------------------
_Z = np.linspace(-8.0, 8.0, 4001)
_ZW = np.ones_like(_Z)
_ZW[1:-1:2], _ZW[2:-1:2] = 4.0, 2.0
_ZW = _ZW * np.exp(-0.5 * _Z * _Z)
_ZW = _ZW / _ZW.sum()


def _ln(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=float))


class _Arm:
    """One arm: ``mean(x)`` the reward at x = f / F_P (called with FLOPs, that mean: what the harness's simulate
    evaluates at each seed's shifted FLOPs); ``truth_r42(f)`` the expected clipped pass rate over the seed draw."""

    def __init__(self, r0, g, gamma=0.0):
        self.r0, self.g, self.q = float(r0), int(g), (g / 4) ** gamma

    def __call__(self, f):
        return self.mean(np.asarray(f, dtype=float) / rbc.F_P)

    def u(self, x):
        return 4 * np.asarray(x, dtype=float) / self.g

    def truth_r42(self, f):
        return float(clip_mean(self.mean(float(f) / rbc.F_P * np.exp(rbc.SHIFT_SD * _Z)), self.r0) @ _ZW)


# ---- aha ------------------------------------------------------------------------------------------------------------
class Aha(_Arm):
    def __init__(self, r0, g, gamma, c, e1, s1, e2, sa, w):
        super().__init__(r0, g, gamma)
        self.c, self.e1, self.s1, self.e2, self.sa, self.w = c, e1, s1, e2, sa, w

    def steps(self, x):  # updates u solving (G/4)(u + c u^2 / 2) = x, in a form without cancellation
        v = self.u(x)
        return 2 * v / (np.sqrt(1 + 2 * self.c * v) + 1)

    def mean(self, x):
        s = self.q * self.steps(x)
        return (self.r0 - self.e1 * np.expm1(-s / self.s1)
                + self.e2 * expit((_ln(s) - np.log(self.sa)) / self.w))

    def features(self):  # x where S = S_a
        u = self.sa / self.q
        return [self.g / 4 * (u + self.c * u * u / 2)]


def fam_aha(rng, r0):
    gamma, c, e1, s1 = rng.uniform(0.3, 1.0), _logu(rng, 0.3, 3.0), rng.uniform(0.05, 0.2), _logu(rng, 0.01, 0.1)
    e2, zeta, sa, w = rng.uniform(0.2, 0.4), rng.uniform(-0.2, 0.6), _logu(rng, 0.3, 3.0), rng.uniform(0.2, 0.5)
    return [Aha(r0, g, gamma, c, e1, s1, min(e2 * (1 + zeta * np.log2(g / 4) / 3), 0.95 - r0 - e1), sa, w)
            for g in GROUPS]


# ---- unlock ---------------------------------------------------------------------------------------------------------
_PZ = np.linspace(-8.0, 8.0, 801)  # the hard prompts' logit, in sd units (Simpson)
_PW = np.ones_like(_PZ)
_PW[1:-1:2], _PW[2:-1:2] = 4.0, 2.0
_PW = _PW * np.exp(-0.5 * _PZ * _PZ)
_PW = _PW / _PW.sum()


def unlock_hazard(g, m, p):
    """P(a group of g holds at least m successes), p the pass rate; m real (the regularised incomplete beta)."""
    return betainc(m, g - m + 1, p)


def both_by(l1, l2, x):
    """P(an unlock at hazard l1, then a consolidation at hazard l2, both by x): the hypoexponential CDF (symmetric
    in l1, l2), with a = min, b = max: 1 - e^(-a x)(1 + a x phi((b - a) x)), phi(d) = (1 - e^-d) / d, so that
    l1 = l2 costs no precision."""
    a, b = np.minimum(l1, l2), np.maximum(l1, l2)
    d = (b - a) * x
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(d < 1e-8, 1 - d / 2, -np.expm1(-d) / np.where(d == 0, 1.0, d))
    return -np.expm1(-a * x) - a * x * np.exp(-a * x) * phi


class Unlock(_Arm):
    def __init__(self, r0, g, gamma, h, ee, ke, mu, sig, m, kap, kc, ah):
        super().__init__(r0, g, gamma)
        self.h, self.ee, self.ke, self.mu, self.sig, self.m, self.kap, self.ah = h, ee, ke, mu, sig, m, kap, ah
        self.lc = kc * self.q * 4 / g  # consolidation hazard per x (per update: kc q_G)
        p = expit(mu + sig * _PZ)
        self.lam = kap * 4 / g * unlock_hazard(g, m, p)
        self.wt = _PW * (1 - p)

    def hard(self, x):  # E_p[(1 - p) P(unlocked and consolidated by x)]
        x = np.asarray(x, dtype=float)
        return both_by(self.lam, self.lc, x[..., None]) @ self.wt

    def mean(self, x):
        easy = -self.ee * np.expm1(-self.ke * self.q * self.u(x))
        return self.r0 + (1 - self.h) * easy + self.h * self.ah * self.hard(x)

    def features(self):
        return []


def fam_unlock(rng, r0):
    gamma, h, ee, ke = rng.uniform(0.3, 1.0), rng.uniform(0.3, 0.6), rng.uniform(0.1, 0.25), 1 / _logu(rng, 0.03, 0.5)
    mu, sig, m, ah = rng.uniform(-7.0, -3.5), rng.uniform(0.3, 1.0), rng.uniform(1.0, 2.5), rng.uniform(0.4, 0.8)
    kap = 1 / (_logu(rng, 0.3, 2.0) * 4 / 8 * unlock_hazard(8, m, expit(mu)))
    kc = 1 / (_logu(rng, 0.3, 1.5) * 4 / 8 * 2 ** gamma)
    return [Unlock(r0, g, gamma, h, ee, ke, mu, sig, m, kap, kc, ah) for g in GROUPS]


# ---- warmup ---------------------------------------------------------------------------------------------------------
class Warmup(_Arm):
    def __init__(self, r0, g, W, psi, p0, alpha, a):
        super().__init__(r0, g)
        self.W, self.k, self.p0, self.alpha, self.a = W, (g / 4) ** psi, p0, alpha, a

    def progress(self, x):
        v = self.u(x) / self.W
        return self.k * self.W * (v + np.expm1(-v))

    def mean(self, x):
        return self.r0 + (self.a - self.r0) * (1 - (1 + self.progress(x) / self.p0) ** -self.alpha)

    def features(self):  # the warm-up's end
        return [self.W * self.g / 4]


def fam_warmup(rng, r0):
    W, psi, p0, alpha = _logu(rng, 0.1, 1.0), rng.uniform(0.0, 1.0), _logu(rng, 0.03, 0.5), rng.uniform(0.5, 1.2)
    A, t = rng.uniform(0.45, 0.8), rng.uniform(0.0, 0.12)
    return [Warmup(r0, g, W, psi, p0, alpha, min(0.95, A + t * np.log2(g / 4) / 3 + rng.uniform(-0.03, 0.03)))
            for g in GROUPS]


# ---- resets ---------------------------------------------------------------------------------------------------------
def g3(v):
    """The gamma(3) CDF (0 for v <= 0): a climb that starts with zero slope and zero curvature."""
    v = np.maximum(np.asarray(v, dtype=float), 0.0)
    return -np.expm1(-v) - v * np.exp(-v) * (1 + v / 2)


class Resets(_Arm):
    def __init__(self, r0, g, gamma, K, rho, f, d):
        super().__init__(r0, g, gamma)
        self.K, self.rho, self.tau, self.d = K, rho, f * K / self.q, d

    def mean(self, x):
        u = self.u(x)
        j = np.arange(int(np.max(u, initial=0.0) / self.K) + 2)
        steps = self.d * self.rho ** j * g3((u[..., None] - j * self.K) / self.tau)
        return self.r0 + steps.sum(axis=-1)

    def features(self):  # the first resets' x
        return [j * self.K * self.g / 4 for j in range(1, 40)]


def fam_resets(rng, r0):
    K, rho, f, gamma = _logu(rng, 0.08, 0.4), rng.uniform(0.5, 0.85), rng.uniform(0.1, 0.3), rng.uniform(0.0, 0.8)
    C, zeta = rng.uniform(0.35, 0.65), rng.uniform(0.0, 0.5)
    return [Resets(r0, g, gamma, K, rho, f, min(C * (1 - rho) * (g / 4) ** zeta, (0.95 - r0) * (1 - rho)))
            for g in GROUPS]


# ---- entkeep --------------------------------------------------------------------------------------------------------
class Entropy(_Arm):
    def __init__(self, r0, g, c, hg, e1, e2, kap):
        super().__init__(r0, g)
        self.c, self.hg, self.e1, self.e2, self.kap = c, hg, e1, e2, kap

    def entropy(self, x):
        return self.hg + (1 - self.hg) * np.exp(-self.c * self.u(x))

    def found(self, x):  # D = kap * integral_0^x H dx'
        x = np.asarray(x, dtype=float)
        return self.kap * (self.hg * x - (1 - self.hg) * self.g / (4 * self.c) * np.expm1(-self.c * self.u(x)))

    def mean(self, x):
        d = self.found(x)
        exploit = self.e1 * (np.e - np.exp(self.entropy(x))) / (np.e - 1)
        return self.r0 + exploit - self.e2 * (np.expm1(-d) + d * np.exp(-d))

    def features(self):  # one and three e-folds of the entropy's collapse
        return [k * self.g / (4 * self.c) for k in (1.0, 3.0)]


def fam_entkeep(rng, r0):
    c, h, beta = _logu(rng, 2.0, 20.0), rng.uniform(0.02, 0.15), rng.uniform(0.3, 1.0)
    e1, e2, kap = rng.uniform(0.1, 0.25), rng.uniform(0.2, 0.4), _logu(rng, 0.5, 3.0)
    return [Entropy(r0, g, c, min(0.9, h * (g / 4) ** beta), e1, e2, kap) for g in GROUPS]


# ---- the truth the harness states for this round's curves ----------------------------------------------------------
rbc.own_truth("truth_r42")  # this round's curves: the expected clipped pass rate over the harness's seed draw

MINE = {"aha": fam_aha, "unlock": fam_unlock, "warmup": fam_warmup, "resets": fam_resets, "entkeep": fam_entkeep}
rbc.register(MINE, "round 42")


def main():
    """The run (every flag of race_blind_check; without --families, these five). The checks of the truths and the
    leaders: benchmarks/race_blind_check_round42_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
