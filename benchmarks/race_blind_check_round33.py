"""Round 33's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog, on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1 prompts,
rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 32's script is imported
(and with it round 31's), so every key stays unique; these five follow them (their keys and random streams come
after round 32's), and every flag of race_blind_check works here (without --families, these five):

  klbind     a KL penalty to the reference policy that binds as the policy drifts: gradient flow on reward minus
             beta KL, so gains slow in proportion to the distance travelled and stop at an arm's own equilibrium
  format     measured reward = format compliance x accuracy of a well-formed answer: a fast multiplicative jump as
             the format is learnt (at a FLOP that differs by seed), then a slow reasoning gain at an arm's own rate
  passk      RL sharpens pass@k into pass@1: pass@1 at f is the base model's pass@m(f) over prompts of Beta
             distributed solve rates, m(f) saturating at a ceiling that is lower for arms that sharpen fast
  hardonset  easy and hard prompt subsets: easy ones learnt at once (fastest per FLOP for small groups), hard ones
             only after a per-seed random onset (earlier per FLOP for large groups), then slowly
  overlong   responses grow longer as training goes on; longer reasoning is more accurate, but answers cut at the
             context limit score 0, so the truncated share caps and can turn the measured reward down

    python benchmarks/race_blind_check_round33.py --families klbind format passk hardonset overlong \
        --reps 100 --replicates 100 --seed 7373 --out race-blind-check     # round 33
    python benchmarks/race_blind_check_round33.py --leader-share --reps 100 --seed 7373   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round33.py --truth-check --seed 7373   # Monte Carlo of the stated truths
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 32's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32  # registers round 31's and round 32's families first (keys and streams)
from scipy.special import expit, gammaln, lambertw, ndtr

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r32.GROUPS  # the arms g4, g8, g16, g32


def _f(f):
    return np.asarray(f, dtype=float)


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _ln(f):
    with np.errstate(divide="ignore"):
        return np.log(_f(f))


# standard-normal quadrature for the seed expectations: a fine trapezoid grid (format: a smooth integrand) and
# Gauss-Legendre on [-9, z*] (hardonset: the integrand has a kink at the onset z*)
_ZG = np.linspace(-9.0, 9.0, 1801)
_ZGW = np.exp(-0.5 * _ZG**2) * (_ZG[1] - _ZG[0]) / np.sqrt(2 * np.pi)
_ZGW[[0, -1]] *= 0.5
_GLX, _GLW = np.polynomial.legendre.leggauss(96)


# ---- 1. KL penalty that binds ----------------------------------------------------------------------------------------
def _kl_table(b):
    """Gradient flow dx/ds = e^-x - b x from x = 0 (s: progress, time constant 1): the equilibrium x* = W(1/b) and
    the table (s, x) of its inverse s(x) = int_0^x dy / (e^-y - b y). With x = x* (1 - e^-z), delta = x* e^-z and
    e^-x* = b x*, the integrand in z is delta / (b (x* expm1(delta) + delta)): finite at x*, no cancellation."""
    xs = float(lambertw(1.0 / b).real)
    z = np.linspace(0.0, 60.0, 30001)
    d = xs * np.exp(-z)
    g = d / (b * (xs * np.expm1(d) + d))
    s = np.concatenate([[0.0], np.cumsum(0.5 * (g[1:] + g[:-1]) * np.diff(z))])
    return xs, s, xs - d


def fam_klbind(rng, r0):
    """GRPO as first published (DeepSeekMath, arXiv 2402.03300) adds beta KL(pi || pi_ref) to the loss (beta 0.04);
    later recipes drop it or reset the reference because it holds the policy back once it has drifted (DAPO,
    arXiv 2503.14476; ProRL, arXiv 2505.24864). In distance from the reference x = d/d0 (d = sqrt KL, as in Gao et
    al., arXiv 2210.10760) the task reward is R = r0 + A (1 - e^-x) and training is gradient flow on R - beta d^2:
    dx/df = k (e^-x - b x), b = 2 beta d0^2 / A. Early on the penalty's gradient is ~0 (x ~ 0) and arms rise at their
    own rate k; as x grows the gains slow in proportion to it and stop at x* = W(1/b) (Lambert W), a level
    A (1 - b x*) that is lower for a stronger penalty. f(x) = s(x)/k, s(x) = int_0^x dy/(e^-y - b y), inverted on a
    table (_kl_table). Read the arms as four KL settings: b log-U [0.04, 1] and 1/k log-U [F_P/40, F_P] per arm
    (steps per FLOP and the penalty differ by arm), A U[0.4, 0.7] shared (+- 0.03 per arm), r0 + A at most 0.95.
    A fast arm with a strong penalty leads at F_P and stalls; a slow one with a weak penalty passes it."""
    a0 = rng.uniform(0.4, 0.7)
    out = []
    for _ in range(N_ARMS):
        b = _logu(rng, 0.04, 1.0)
        k = 1.0 / _logu(rng, F_P / 40, F_P)
        a = float(min(a0 + rng.uniform(-0.03, 0.03), 0.95 - r0))
        xs, s_tab, x_tab = _kl_table(b)

        def curve(f, a=a, k=k, xs=xs, s_tab=s_tab, x_tab=x_tab):
            x = np.interp(k * _f(f), s_tab, x_tab, right=xs)
            return r0 + a * -np.expm1(-x)
        curve.kl = (b, k, xs, a)  # for the check of the mathematics
        out.append(curve)
    return out


# ---- 2. format learning ----------------------------------------------------------------------------------------------
class FormatSeeds:
    """R = phi(f) c(f): the share of answers in the required format, phi = phi0 + (1 - phi0) expit(ln(f/T_s)/w),
    times c(f), the accuracy of a well-formed answer. Each seed learns the format at its own T_s = T exp(sig Z).
    Called directly: the expectation over seeds (a 1801-point grid in Z); draw_seeds: one curve per seed."""

    def __init__(self, phi0, t, sig, w, acc):
        self.phi0, self.lt, self.sig, self.w, self.acc = phi0, float(np.log(t)), sig, w, acc

    def _phi(self, lf, lt):
        return self.phi0 + (1 - self.phi0) * expit((lf - lt) / self.w)

    def __call__(self, f):
        f = _f(f)
        phi = (self._phi(_ln(f)[..., None], self.lt + self.sig * _ZG) * _ZGW).sum(axis=-1)
        return phi * self.acc(f)

    def draw_seeds(self, rng, n):
        lts = self.lt + self.sig * rng.standard_normal(n)
        return [lambda f, lt=lt: self._phi(_ln(f), lt) * self.acc(_f(f)) for lt in lts]


def fam_format(rng, r0):
    """R1-Zero-style runs show a fast early gain while the model learns the answer format or template the verifier
    parses (a format reward in DeepSeek-R1, arXiv 2501.12948; Liu et al., arXiv 2503.20783, on how much of the early
    gain is template/format), then a slower gain in reasoning. Measured reward = format share x accuracy of a
    well-formed answer: phi0 U[0.5, 0.8] of the base model's answers parse (shared), c0 = r0/phi0; the format is
    learnt around T per arm (log-U [F_P/300, 2 F_P]: some arms only between the rungs or later) over w U[0.15, 0.4]
    in ln f, each seed at T exp(sig Z) (sig U[0.2, 0.8]: seeds differ in when they find the format); accuracy
    c(f) = c0 + (C - c0)(1 - (1 + f/fc)^-alpha), C = C0 + U(-0.1, 0.1) (C0 U[0.5, 0.8], in [c0 + 0.1, 0.92]),
    fc log-U [F_P/10, 10 F_P], alpha U[0.3, 0.8] per arm (reasoning gains differ by arm). The jump is multiplicative:
    it is larger where accuracy is already higher. Truth = the expectation over seeds."""
    phi0 = rng.uniform(0.5, 0.8)
    c0 = r0 / phi0
    cc0 = rng.uniform(0.5, 0.8)
    sig, w = rng.uniform(0.2, 0.8), rng.uniform(0.15, 0.4)
    out = []
    for _ in range(N_ARMS):
        t = _logu(rng, F_P / 300, 2 * F_P)
        c = float(np.clip(cc0 + rng.uniform(-0.1, 0.1), c0 + 0.1, 0.92))
        fc, al = _logu(rng, F_P / 10, 10 * F_P), rng.uniform(0.3, 0.8)
        acc = lambda f, c=c, fc=fc, al=al: c - (c - c0) * (1 + _f(f) / fc) ** -al  # noqa: E731
        out.append(FormatSeeds(phi0, t, sig, w, acc))
    return out


# ---- 3. pass@k into pass@1 -------------------------------------------------------------------------------------------
def _pass_at(m, a, b):
    """E[1 - (1 - p)^m] for p ~ Beta(a, b): 1 - B(a, b + m) / B(a, b), m real >= 1."""
    return -np.expm1(gammaln(b + m) + gammaln(a + b) - gammaln(b) - gammaln(a + b + m))


def fam_passk(rng, r0):
    """RL with verifiable rewards mostly sharpens what the base model can already sample: the RL model's pass@1 rises
    towards the base model's pass@k for small k, while its pass@k at large k ends below the base model's (Yue et al.,
    arXiv 2504.13837): diversity is spent. Prompts' base solve rates p ~ Beta(a, b) (a U[0.3, 1.2]: many near 0),
    a share rho U[0.05, 0.35] never solved (p = 0), b so that the mean pass rate is r0; pass@1 at f is the base
    pass@m(f): R = (1 - rho)(1 - B(a, b + m)/B(a, b)), m(f) = 1 + (M - 1)(1 - exp(-(f/tau)^kappa)). Per arm tau
    log-U [F_P/30, 3 F_P], kappa U[0.7, 1.2] and a ceiling M = M0 (tau/F_P)^gamma x log-U [0.6, 1.6] (at least 2),
    M0 log-U [8, 64], gamma U[0.3, 0.9] shared: arms that sharpen fast collapse diversity sooner and distil a
    smaller k; slow ones keep exploring and reach a larger k."""
    a = rng.uniform(0.3, 1.2)
    rho = rng.uniform(0.05, 0.35)
    b = a * ((1 - rho) / r0 - 1)
    m0, gam = _logu(rng, 8, 64), rng.uniform(0.3, 0.9)
    out = []
    for _ in range(N_ARMS):
        tau, kap = _logu(rng, F_P / 30, 3 * F_P), rng.uniform(0.7, 1.2)
        m_cap = max(2.0, m0 * (tau / F_P) ** gam * _logu(rng, 0.6, 1.6))

        def curve(f, tau=tau, kap=kap, m_cap=m_cap):
            m = 1 + (m_cap - 1) * -np.expm1(-((_f(f) / tau) ** kap))
            return (1 - rho) * _pass_at(m, a, b)
        curve.beta = (a, b, rho, m_cap)  # for the check of the mathematics
        out.append(curve)
    return out


# ---- 4. easy and hard prompts, a random onset on the hard ones -------------------------------------------------------
class HardOnset:
    """R = easy(f) + Gh (1 - exp(-(f - T_s)_+ / tau_h)): the hard subset starts to be learnt at each seed's onset
    T_s = T exp(sig Z). Called directly: the expectation over Z, Gauss-Legendre on [-9, z*] (z* the onset at f:
    beyond it the hard term is 0, so the kink is an end point); draw_seeds: one curve per seed."""

    def __init__(self, easy, gh, t, sig, tau_h):
        self.easy, self.gh, self.lt, self.sig, self.tau_h = easy, gh, float(np.log(t)), sig, tau_h

    def _hard(self, f, lt):
        return -np.expm1(-np.maximum(f - np.exp(lt), 0.0) / self.tau_h)

    def __call__(self, f):
        f = _f(f)
        zs = np.clip((_ln(f) - self.lt) / self.sig, -9.0, 9.0)[..., None]
        half = 0.5 * (zs + 9.0)
        z = -9.0 + half * (_GLX + 1)
        wts = half * _GLW * np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
        hard = (self._hard(f[..., None], self.lt + self.sig * z) * wts).sum(axis=-1)
        return self.easy(f) + self.gh * hard

    def draw_seeds(self, rng, n):
        lts = self.lt + self.sig * rng.standard_normal(n)
        return [lambda f, lt=lt: self.easy(_f(f)) + self.gh * self._hard(_f(f), lt) for lt in lts]


def fam_hardonset(rng, r0):
    """Eval sets mix prompts the policy learns at once and hard ones it makes no progress on until it first samples a
    correct long solution (the 'aha' onset of DeepSeek-R1, arXiv 2501.12948; difficulty curricula and filtering of
    unsolved prompts in Kimi k1.5, arXiv 2501.12599, and DAPO, arXiv 2503.14476); when that happens varies from run
    to run. Easy subset: Ge U[0.15, 0.35] learnt as 1 - exp(-f/tau_e), tau_e = tau_e0 (g + c0)/(4 + c0) x log-U
    [0.7, 1.4] (tau_e0 log-U [F_P/100, F_P/10], c0 log-U [1, 16]: per FLOP a small group makes more updates).
    Hard subset: Gh U[0.1, 0.3], learnt as 1 - exp(-(f - T_s)_+/tau_h) after an onset T_s = T exp(sig Z) per seed
    (sig U[0.3, 1]). The onset waits for a first success: among g rollouts of a prompt of solve rate p << 1/g one
    comes after ~1/(g p) steps of (g + c0) rollouts, so T = T0 (g + c0)/(4 + c0) (4/g)^nu x log-U [0.7, 1.4]
    (T0 log-U [F_P/4, 2 F_P], nu U[0.5, 1]; 1 the small-p limit, less where successes cluster). Once started, the
    hard prompts are learnt like the easy ones, per update: tau_h = tau_h0 (g + c0)/(4 + c0) x log-U [0.7, 1.4],
    tau_h0 log-U [F_P/3, 3 F_P]. Small groups lead on the easy prompts and learn hard ones faster once started;
    large groups start the hard ones sooner. Truth = the expectation over seeds."""
    ge, gh = rng.uniform(0.15, 0.35), rng.uniform(0.1, 0.3)
    tau_e0, c0 = _logu(rng, F_P / 100, F_P / 10), _logu(rng, 1, 16)
    tau_h0, t0, nu = _logu(rng, F_P / 3, 3 * F_P), _logu(rng, F_P / 4, 2 * F_P), rng.uniform(0.5, 1.0)
    sig = rng.uniform(0.3, 1.0)
    out = []
    for g in GROUPS:
        cost = (g + c0) / (4 + c0)
        tau_e = tau_e0 * cost * _logu(rng, 0.7, 1.4)
        t = t0 * cost * (4 / g) ** nu * _logu(rng, 0.7, 1.4)  # FLOPs to a first success on the hard prompts
        tau_h = tau_h0 * cost * _logu(rng, 0.7, 1.4)
        easy = lambda f, tau_e=tau_e: r0 + ge * -np.expm1(-_f(f) / tau_e)  # noqa: E731
        out.append(HardOnset(easy, gh, t, sig, tau_h))
    return out


# ---- 5. overlong responses truncated at the context limit ------------------------------------------------------------
def fam_overlong(rng, r0):
    """Responses grow longer during RL (long chain of thought emerges) while the rollout context is fixed; answers
    cut at the limit score 0, and as the truncated share grows the reward stalls or falls (DAPO's overlong filtering
    and soft overlong punishment, arXiv 2503.14476; DeepScaleR raised its context 8k -> 16k -> 24k when truncation
    capped its reward). Length is lognormal (sd sig_L U[0.35, 0.7] in ln) with median L0 e^l(f), l(f) = gamma
    ln(1 + f/fL) (gamma U[0.08, 0.35], fL log-U [F_P/30, F_P/2] per arm); the limit is L0 e^h (h U[1.2, 2.4],
    3.3-11 x the initial median), so the share not truncated is S = Phi((h - l)/sig_L). Accuracy of a complete answer
    c = c0 + (C - c0)(1 - exp(-(l/lam + f/tau_c))) (longer reasoning is more accurate, lam U[0.5, 1.5] shared; plus
    learning not tied to length, tau_c log-U [F_P, 10 F_P] per arm); C = C0 + U(-0.04, 0.04), C0 U[0.55, 0.85];
    c0 = r0 / S(0). R = c S. Arms whose length grows fast gain first and hit the limit first."""
    h, sig_l, lam = rng.uniform(1.2, 2.4), rng.uniform(0.35, 0.7), rng.uniform(0.5, 1.5)
    s0 = float(ndtr(h / sig_l))
    c0 = r0 / s0
    cc0 = rng.uniform(0.55, 0.85)
    out = []
    for _ in range(N_ARMS):
        gam, fl = rng.uniform(0.08, 0.35), _logu(rng, F_P / 30, F_P / 2)
        tau_c = _logu(rng, F_P, 10 * F_P)
        c = cc0 + rng.uniform(-0.04, 0.04)

        def curve(f, gam=gam, fl=fl, tau_c=tau_c, c=c):
            f = _f(f)
            ell = gam * np.log1p(f / fl)
            acc = c - (c - c0) * np.exp(-(ell / lam + f / tau_c))
            return acc * ndtr((h - ell) / sig_l)
        out.append(curve)
    return out


MINE = {"klbind": fam_klbind, "format": fam_format, "passk": fam_passk, "hardonset": fam_hardonset,
        "overlong": fam_overlong}
rbc.register(MINE, "round 33")


def leader_share(families, reps, seed):
    """On the truths only (the same random streams as the main loop): the share of draws where the arm best at F_P
    (by its pilots' expected reward) is not the best at F, the mean regret of that leader at F, the median gap
    between the best and the second at F, and the range of the curves' values (sanity: inside (0, 1))."""
    r32.leader_share(families, reps, seed)


def truth_check(families, reps, seed, n_mc):
    """Monte Carlo of the stated truths at F (round 32's check: the largest |MC - stated|, in standard errors and
    absolute, and the mean squared z)."""
    r32.truth_check(families, reps, seed, n_mc)


if __name__ == "__main__":
    r32.run_cli(MINE, 7373, leader_share, truth_check)
