"""Round 41's independent check of RACE's analysis: five more truth families on one theme, rewards that fall during RL
post-training, deeply (well below the starting reward) for a while or for good, written by a session that had not
seen benchmarks/race_misspecification.py's shapes, the results, the changelog or flopplan/race's code (nor the bodies
of rounds 30-40's families), on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8,
g16, g32, 3 seeds, 200 shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room
ladder). Round 40's script is imported first (and with it rounds 31-38), so every key stays unique and these five come
after (their keys and random streams follow round 40's); every flag of race_blind_check works here (without
--families, these five).

Units. x = f / F_P. A step of arm G samples G rollouts for each of the same number of prompts, so its FLOPs grow in
proportion to G: u = 4 x / G counts an arm's updates (in g4-updates per F_P), while x itself counts samples, the same
for every arm. Three families use a common rise (the reward of an arm that does not fall):

    base_G(x) = r0 + (A_G - r0) (1 - (1 + p / p0)^-alpha),   p = s_G x (4 / G)^(1 - gamma)

(u updates each worth q_G = (G/4)^gamma: a larger group estimates the advantage better), gamma ~ U[0.3, 1],
p0 ~ logU[0.005, 0.15], alpha ~ U[0.5, 1.2], A_G = min(0.95, A + t log2(G/4)/3 + U(-0.03, 0.03)) with A ~ U[0.45, 0.8],
t ~ U[-0.04, 0.08]; s_G = 1 unless a family says otherwise. Every curve equals r0 at x = 0, so a fall is a fall
from the harness's own start. The fallen level ("floor") fl is drawn per family, below the start.

The truth at F. The harness's simulate gives seed s at FLOPs f the pass rate clip(r0 + (m(f e_s) - r0) g_s + w, 0.002,
0.998), e_s = exp(0.15 N), g_s = 1 + 0.08 N, w = 0.01 N (race_blind_check.simulate), and a seed's 200 prompts score
that rate in expectation (its theta_of is the inverse of the population pass rate). A deep fall reaches the clip,
so the truth here is that expectation with the clip: gain and wobble in closed form (r0 + (m - r0) g + w is normal:
a clipped normal's mean), the timing shift by Simpson's rule on 1601 nodes over |z| <= 8 (and, for tiblowup, the
seed's own collapse time by Gauss-Legendre). race_blind_check.truth_at is wrapped so that curves of this round
(attribute truth_r41) answer with it; every other round's curves keep the harness's own. The independent quadrature
and a Monte Carlo of the seeds through the harness's own simulate: benchmarks/race_blind_check_round41_checks.py.

truncdip -- answers outgrow the generation limit and are truncated (scored 0), then the policy learns to be shorter.
Source: DAPO (Yu et al., 2025, "DAPO: an open-source LLM reinforcement learning system at scale": truncated overlong
samples, overlong filtering and reward shaping) and the length growth of DeepSeek-R1 (DeepSeek-AI, 2025). A shared
set-up (the length limit) that each arm meets after its own number of updates (g4 first, g32 at 8 times the FLOPs);
a deep dip, then recovery. With v = u / u_h, the median log length over the limit is
lambda(v) = kappa (v - 1) - (kappa + kappa') w softplus((v - 1 - Delta) / w), lengths log-normal with sd sigma_l, so
the truncated share is T(v) = Phi(lambda(v) / sigma_l) and R = base_G(x) (1 - T(v)) / (1 - T(0)). u_h ~ logU[0.03,
1.2] (half the answers truncated, in g4-updates per F_P), kappa ~ U[1.5, 4], kappa' = rho kappa with rho ~ U[0.5,
1.5], Delta ~ U[0.3, 1.5] (the delay before the zero reward shortens answers), sigma_l ~ U[0.25, 0.6], w = 0.15.

goldhump -- a learned reward model over-optimised: the gold reward rises, then falls below its start as the policy
moves away from its reference. Source: Gao, Schulman & Hilton (2023), "Scaling laws for reward model
overoptimization": gold R(d) = d (alpha - beta ln d), d = sqrt(KL(pi || pi_0)). Shared mechanism, the KL clock:
KL grows with updates, each of squared size q_G^2, so KL ~ x (G/4)^eps, eps = 2 gamma_k - 1, gamma_k ~ U[0.2, 0.9]
(eps < 0: small groups meet the fall first in FLOPs; eps > 0: large ones). d~ = (x (G/4)^eps / x*_G)^eta,
R = soft_floor(r0 + P_G d~ (1 - ln d~)) (the same curve, its peak P_G at d~ = 1 and back at r0 at d~ = e), with
soft_floor(v) = v for v >= r0 and fl + (r0 - fl) exp((v - r0) / (r0 - fl)) below (continuous with its slope);
x* ~ logU[0.05, 2], x*_G = x* exp(U(-0.15, 0.15)), eta ~ U[0.4, 0.8], P ~ U[0.2, 0.45], P_G = P (1 + U(-0.2, 0.2))
capped at 0.95 - r0, fl ~ U[0.01, 0.05]. Falls for good.

tiblowup -- the training-inference mismatch blows a run up. Source: Yao et al. (2025), "Your efficient RL framework
secretly brings you off-policy RL training" (truncated importance sampling), and Liu et al. (2025), "When speed kills
stability: demystifying RL collapse from the training-inference mismatch". The sampler's and the trainer's token
probabilities differ; a sample with a large mismatch ratio can blow the update up, and the mismatch grows as the
policy sharpens: a hazard per sample, so every arm meets it at its own random number of samples (x, not updates;
each SEED collapses at its own time). Seed's collapse time T ~ Weibull(k, lambda_G) in x, k ~ U[1.5, 4],
lambda ~ logU[0.8, 8], lambda_G = lambda exp(U(-0.3, 0.3)); after T the seed decays to the floor exponentially
in x: m_T(x) = fl + (base_G(x) - fl) exp(-(x - T)_+ / delta_G), delta_G = eps lambda_G, eps ~ U[0.01, 0.05],
fl ~ U[0, 0.03] (the output is gibberish). For good. Truth = E over T (and the seed draw) of the clipped rate.

bigstep -- only arms whose own step is too large diverge. Source: with GRPO's normalisation by the group's standard
deviation a lone success among G samples carries advantage sqrt(G - 1) (Liu et al., 2025, "Understanding R1-Zero-like
training: a critical perspective", Dr. GRPO), so at one learning rate the largest update grows with G; past a
stability limit training diverges as at a too-high learning rate (Wortsman et al., 2023, "Small-scale proxies for
large-scale Transformer training instabilities"). Arms with sqrt(G - 1) > L fall, L ~ logU[2, 7] (none in about a
sixth of the draws); the bolder arms also learn faster before: s_G = (sqrt(G - 1) / sqrt 3)^b, b ~ U[0, 0.6].
Excess e_G = sqrt(G - 1) / L - 1; onset x_c = x0 (G / 4) / e_G (in updates: sooner the larger the excess),
x0 ~ logU[0.01, 0.25]; R = fl + (base_G - fl)(1 - expit(ln(x / x_c) / w)), w ~ U[0.05, 0.3], fl ~ U[0, 0.05]. The
other arms never fall. For good.

klrescue -- only small-group arms blow up (their gradient noise is too large), and an adaptive KL controller pulls
them back. Source: the noise temperature of SGD grows as the learning rate over the batch (McCandlish et al., 2018,
"An empirical model of large-batch training"), the batch here being G times the prompts; the adaptive KL
coefficient of Ziegler et al. (2019), "Fine-tuning language models from human preferences", raises beta while the
policy strays and so brings it back. Arms with 4/G > tau_c fall, tau_c ~ logU[0.15, 1.6] (none in about a fifth of
the draws). rho_G = 4 / (G tau_c); onset in updates u_on = u0 / sqrt(rho_G - 1), u0 ~ logU[0.02, 1.5], at
x_on = u_on G / 4; recovery at x_rec = x_on e^Delta, Delta ~ U[0.5, 2]; with s_a = expit(ln(x / x_a) / w),
R = base_G (1 - c s_rec) - D (base_G - fl) s_on (1 - s_rec), D ~ U[0.75, 1], w ~ U[0.08, 0.25], c ~ U[0, 0.15]
(what the rescue costs for good), fl ~ U[0, 0.05]. A deep dip, then recovery, in the arms that fall.

    python benchmarks/race_blind_check_round41.py --reps 100 --replicates 100 --seed 4141 --out DIR
    python benchmarks/race_blind_check_round41.py --table --explain --out DIR
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import race_blind_check as rbc
import race_blind_check_round40  # noqa: F401  registers rounds 31-40's families first (keys and streams)
from scipy.special import expit, ndtr

GROUPS = (4, 8, 16, 32)
LO, HI = 0.002, 0.998  # race_blind_check.simulate's clip of a seed's pass rate


def _logu(rng, a, b):
    return float(np.exp(rng.uniform(np.log(a), np.log(b))))


def _npdf(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)


# ---- the seed draw's expectation ---------------------------------------------------------------------------------
_Z = np.linspace(-8.0, 8.0, 1601)
_ZW = np.ones_like(_Z)
_ZW[1:-1:2], _ZW[2:-1:2] = 4.0, 2.0  # Simpson's rule
_ZW = _ZW * _npdf(_Z)
_ZW = _ZW / _ZW.sum()
_TX, _TW = np.polynomial.legendre.leggauss(120)


def clip_mean(m, r0):
    """E over a seed's gain and wobble of its clipped pass rate, given the curve's value ``m`` at its shifted FLOPs:
    r0 + (m - r0) g + w is normal, mean m and sd sqrt(((m - r0) GAIN_SD)^2 + WOBBLE_SD^2), so a clipped normal's
    mean, in closed form."""
    m = np.asarray(m, dtype=float)
    s = np.hypot((m - r0) * rbc.GAIN_SD, rbc.WOBBLE_SD)
    lo, hi = (LO - m) / s, (HI - m) / s
    return LO * ndtr(lo) + HI * ndtr(-hi) + m * (ndtr(hi) - ndtr(lo)) + s * (_npdf(lo) - _npdf(hi))


class _Arm:
    """One arm's curve: ``mean(x)`` the reward at x = f / F_P; called with FLOPs it is that mean (what the harness's
    simulate evaluates at each seed's shifted FLOPs); ``truth_r41(f)`` the expected clipped pass rate over seeds."""

    def __init__(self, r0, g):
        self.r0, self.g = float(r0), int(g)

    def __call__(self, f):
        return self.mean(np.asarray(f, dtype=float) / rbc.F_P)

    def seed_means(self, x):  # the expected rate at the shifted x (no randomness beyond the shift)
        return clip_mean(self.mean(x), self.r0)

    def truth_r41(self, f):
        x = float(f) / rbc.F_P * np.exp(rbc.SHIFT_SD * _Z)
        return float(self.seed_means(x) @ _ZW)


class _Base(_Arm):
    def __init__(self, r0, g, c, s=1.0):
        super().__init__(r0, g)
        self.a = min(0.95, c["A"] + c["t"] * np.log2(g / 4) / 3 + c["rng"].uniform(-0.03, 0.03))
        self.k = s * (4 / g) ** (1 - c["gamma"]) / c["p0"]
        self.alpha = c["alpha"]

    def base(self, x):
        return self.r0 + (self.a - self.r0) * (1 - (1 + self.k * np.asarray(x, dtype=float)) ** -self.alpha)


def _common(rng):
    return {"gamma": rng.uniform(0.3, 1.0), "p0": _logu(rng, 0.005, 0.15), "alpha": rng.uniform(0.5, 1.2),
            "A": rng.uniform(0.45, 0.8), "t": rng.uniform(-0.04, 0.08), "rng": rng}


def _lnx(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=float))


def _softplus(z):
    return np.logaddexp(0.0, z)


# ---- truncdip -----------------------------------------------------------------------------------------------------
class Overlong(_Base):
    W = 0.15

    def __init__(self, r0, g, c, uh, kap, kap2, delta, sig):
        super().__init__(r0, g, c)
        self.uh, self.kap, self.kap2, self.delta, self.sig = uh, kap, kap2, delta, sig
        self.t0 = self.trunc(np.array(0.0))

    def lam(self, v):
        return self.kap * (v - 1) - (self.kap + self.kap2) * self.W * _softplus((v - 1 - self.delta) / self.W)

    def trunc(self, v):
        return ndtr(self.lam(v) / self.sig)

    def mean(self, x):
        v = 4 * np.asarray(x, dtype=float) / self.g / self.uh
        return self.base(x) * (1 - self.trunc(v)) / (1 - self.t0)

    def features(self):
        return [self.uh * self.g / 4 * v for v in (1.0, 1 + self.delta)]


def fam_truncdip(rng, r0):
    c = _common(rng)
    uh, kap, sig = _logu(rng, 0.03, 1.2), rng.uniform(1.5, 4.0), rng.uniform(0.25, 0.6)
    kap2, delta = rng.uniform(0.5, 1.5) * kap, rng.uniform(0.3, 1.5)
    return [Overlong(r0, g, c, uh, kap, kap2, delta, sig) for g in GROUPS]


# ---- goldhump -----------------------------------------------------------------------------------------------------
def soft_floor(v, r0, fl):
    v = np.asarray(v, dtype=float)
    with np.errstate(over="ignore"):
        return np.where(v >= r0, v, fl + (r0 - fl) * np.exp(np.minimum(v - r0, 0.0) / (r0 - fl)))


class RmGold(_Arm):
    def __init__(self, r0, g, eps, xs, eta, peak, fl):
        super().__init__(r0, g)
        self.eps, self.xs, self.eta, self.peak, self.fl = eps, xs, eta, peak, fl

    def dtilde(self, x):
        return (np.asarray(x, dtype=float) * (self.g / 4) ** self.eps / self.xs) ** self.eta

    def mean(self, x):
        d = self.dtilde(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(d > 0, self.peak * d * (1 - np.log(np.where(d > 0, d, 1.0))), 0.0)
        return soft_floor(self.r0 + gain, self.r0, self.fl)

    def features(self):
        return [self.xs * (self.g / 4) ** -self.eps * np.exp(k / self.eta) for k in (0.0, 1.0)]


def fam_goldhump(rng, r0):
    eps = 2 * rng.uniform(0.2, 0.9) - 1
    xs, eta, peak, fl = _logu(rng, 0.05, 2.0), rng.uniform(0.4, 0.8), rng.uniform(0.2, 0.45), rng.uniform(0.01, 0.05)
    return [RmGold(r0, g, eps, xs * np.exp(rng.uniform(-0.15, 0.15)), eta,
                   min(peak * (1 + rng.uniform(-0.2, 0.2)), 0.95 - r0), fl) for g in GROUPS]


# ---- tiblowup -----------------------------------------------------------------------------------------------------
class Mismatch(_Base):
    """Each seed collapses at its own Weibull time T (in x); called directly, the mean over T (no clip)."""

    def __init__(self, r0, g, c, k, lam, eps, fl):
        super().__init__(r0, g, c)
        self.kw, self.lam, self.delta, self.fl = k, lam, eps * lam, fl

    def seed_mean(self, x, t):
        x = np.asarray(x, dtype=float)
        return self.fl + (self.base(x) - self.fl) * np.exp(-np.maximum(x - t, 0.0) / self.delta)

    def draw_seeds(self, rng, n):
        ts = self.lam * (-np.log(rng.uniform(size=n))) ** (1 / self.kw)
        return [lambda f, t=t: self.seed_mean(np.asarray(f, dtype=float) / rbc.F_P, t) for t in ts]

    def cdf(self, t):
        return -np.expm1(-(np.maximum(t, 0.0) / self.lam) ** self.kw)

    def pdf(self, t):
        t = np.maximum(t, 0.0)
        return self.kw / self.lam * (t / self.lam) ** (self.kw - 1) * np.exp(-(t / self.lam) ** self.kw)

    def _over_t(self, x, h):
        """E over the collapse time T of h(m_T(x)), for each x: T > x leaves the base; T within 40 delta of x by
        Gauss-Legendre; earlier T has decayed to the floor (e^-40)."""
        x = np.asarray(x, dtype=float)
        b = self.base(x)
        a = np.maximum(x - 40 * self.delta, 0.0)
        t = a[..., None] + (x - a)[..., None] * (_TX + 1) / 2
        m = self.fl + (b - self.fl)[..., None] * np.exp(-(x[..., None] - t) / self.delta)
        mid = (h(m) * self.pdf(t)) @ _TW * (x - a) / 2
        return (1 - self.cdf(x)) * h(b) + mid + self.cdf(a) * h(np.full_like(x, self.fl))

    def mean(self, x):
        return self._over_t(x, lambda m: m)

    def seed_means(self, x):
        return self._over_t(x, lambda m: clip_mean(m, self.r0))

    def features(self):
        return [self.lam]


def fam_tiblowup(rng, r0):
    c = _common(rng)
    k, lam, eps, fl = rng.uniform(1.5, 4.0), _logu(rng, 0.8, 8.0), rng.uniform(0.01, 0.05), rng.uniform(0.0, 0.03)
    return [Mismatch(r0, g, c, k, lam * np.exp(rng.uniform(-0.3, 0.3)), eps, fl) for g in GROUPS]


# ---- bigstep ------------------------------------------------------------------------------------------------------
class BigStep(_Base):
    def __init__(self, r0, g, c, lim, b, x0, w, fl):
        super().__init__(r0, g, c, s=(np.sqrt(g - 1) / np.sqrt(3)) ** b)
        excess = np.sqrt(g - 1) / lim - 1
        self.xc = x0 * (g / 4) / excess if excess > 0 else np.inf
        self.w, self.fl = w, fl

    def mean(self, x):
        b = self.base(x)
        if not np.isfinite(self.xc):
            return b
        return self.fl + (b - self.fl) * (1 - expit((_lnx(x) - np.log(self.xc)) / self.w))

    def features(self):
        return [self.xc] if np.isfinite(self.xc) else []


def fam_bigstep(rng, r0):
    c = _common(rng)
    lim, b, x0 = _logu(rng, 2.0, 7.0), rng.uniform(0.0, 0.6), _logu(rng, 0.01, 0.25)
    w, fl = rng.uniform(0.05, 0.3), rng.uniform(0.0, 0.05)
    return [BigStep(r0, g, c, lim, b, x0, w, fl) for g in GROUPS]


# ---- klrescue -----------------------------------------------------------------------------------------------------
class KlRescue(_Base):
    def __init__(self, r0, g, c, tau, u0, delta, depth, w, cost, fl):
        super().__init__(r0, g, c)
        rho = 4 / (g * tau)
        self.xon = u0 / np.sqrt(rho - 1) * g / 4 if rho > 1 else np.inf
        self.xrec = self.xon * np.exp(delta)
        self.depth, self.w, self.cost, self.fl = depth, w, cost, fl

    def mean(self, x):
        b = self.base(x)
        if not np.isfinite(self.xon):
            return b
        lx = _lnx(x)
        s_on, s_rec = expit((lx - np.log(self.xon)) / self.w), expit((lx - np.log(self.xrec)) / self.w)
        return b * (1 - self.cost * s_rec) - self.depth * (b - self.fl) * s_on * (1 - s_rec)

    def features(self):
        return [self.xon, self.xrec] if np.isfinite(self.xon) else []


def fam_klrescue(rng, r0):
    c = _common(rng)
    tau, u0, delta = _logu(rng, 0.15, 1.6), _logu(rng, 0.02, 1.5), rng.uniform(0.5, 2.0)
    depth, w, cost, fl = rng.uniform(0.75, 1.0), rng.uniform(0.08, 0.25), rng.uniform(0.0, 0.15), rng.uniform(0, 0.05)
    return [KlRescue(r0, g, c, tau, u0, delta, depth, w, cost, fl) for g in GROUPS]


# ---- the truth the harness states for this round's curves --------------------------------------------------------
rbc.own_truth("truth_r41")  # this round's curves: the expected clipped pass rate over the harness's seed draw

MINE = {"truncdip": fam_truncdip, "goldhump": fam_goldhump, "tiblowup": fam_tiblowup, "bigstep": fam_bigstep,
        "klrescue": fam_klrescue}
rbc.register(MINE, "round 41")


def main():
    """The run (every flag of race_blind_check; without --families, these five). The checks of the truths and the
    leaders: benchmarks/race_blind_check_round41_checks.py."""
    rbc.round_main(MINE)


if __name__ == "__main__":
    main()
