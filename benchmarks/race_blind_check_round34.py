"""Round 34's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog (nor the bodies of rounds 31-33's
families; round 31's 'entropy' is an arm's rise and sag, entstall is about seeds stalling on plateaus of their own),
on the protocol of benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200
shared 0/1 prompts, rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 33's
script is imported (and with it rounds 31 and 32), so every key stays unique; these five follow them (their keys and
random streams come after round 33's), and every flag of race_blind_check works here (without --families, these
five):

  entstall   entropy collapse stalls exploration: learning proceeds in proportion to the policy's remaining entropy,
             which decays as a power of FLOPs on a scale each seed draws (log-normal), so every seed stalls on its
             own plateau; arms that keep their entropy longer start slower and end higher
  noisyver   a noisy verifier (flip rate eps): GRPO's normalised step moves by the signal-to-noise ratio of its
             group advantages, S / sqrt(S^2 + nu^2 / G), S = (1 - 2 eps) x headroom, against a constant pull back
             (entropy bonus / KL); accuracy stops where the noisy signal falls to the pull, a cap that rises with G
             (the headroom left shrinks as 1/sqrt(G)), while the cost per FLOP favours small G early
  sftdip     RL from an SFT checkpoint first loses part of the SFT model's held-out reward (answer style shed,
             the "dip", within the first hundredth of F_P) and repairs it only as RL learning proceeds; slow
             learners stay in the dip through the pilots and recover between F_P and F
  volatile   checkpoint volatility: each seed's evaluations swing around the arm's mean curve with a smooth random
             process in ln F (4 random-phase sinusoids, correlation over about an e-fold), its size growing with the
             learning done and falling as 1/sqrt(G) (noisier updates for small groups); the truth is the mean
  spikes     transient reward collapses (gradient-norm spikes): a Poisson process of spikes per seed whose rate
             rises as F^beta and falls with G; each spike takes a share of the gain learnt so far, which recovers
             exponentially; the truth at F is the expectation over spike histories (Campbell's formula, exact)

Every family draws its parameters per repetition; the arms' curves can cross (the arm best at F_P is often not the
best at F: --leader-share). The truth at F is exact: closed forms (sftdip, volatile), Gauss-Hermite quadrature over
the seed's log-normal scale (entstall), an ODE solved to 1e-10 (noisyver), a confluent hypergeometric closed form
(spikes); --truth-check checks each by Monte Carlo of seeds (round 32's check) and by an independent quadrature.

    python benchmarks/race_blind_check_round34.py --families entstall noisyver sftdip volatile spikes \
        --reps 100 --replicates 100 --seed 3434 --out race-blind-check     # round 34
    python benchmarks/race_blind_check_round34.py --leader-share --reps 100 --seed 3434   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round34.py --truth-check --seed 3434   # Monte Carlo of the stated truths
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 33's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32 as r32
import race_blind_check_round33 as r33  # registers rounds 31, 32 and 33's families first (keys and streams)
from scipy.integrate import quad, solve_ivp
from scipy.special import hyp1f1

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = r33.GROUPS  # the arms g4, g8, g16, g32
X_MAX = 60.0  # noisyver's ODE is solved up to this many F_P (shift exp(0.15 N) never gets near)
X_SPIKES = 10.0  # a seed's spikes are drawn up to this many F_P (pilots and F x shift stay below: 10.7 sd)


def _x(f):
    """FLOPs in units of F_P."""
    return np.asarray(f, dtype=float) / F_P


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _satpow(x, xc, al):
    """Saturating power law in F: 0 at F = 0, -> 1: 1 - (1 + x/xc)^-alpha."""
    return 1.0 - (1.0 + np.asarray(x, float) / xc) ** -al


def _mean_arms(rng, r0, top):
    """Arms' mean curves for sftdip/volatile/spikes: r0 + gain (1 - (1 + x/xc)^-alpha), where slower arms (larger
    xc, log-uniform in [1/30, 3] F_P) reach higher: gain/(top - r0) = 0.55 + 0.1 ln xc + U(-0.1, 0.1), clipped to
    [0.2, 0.95]; alpha in [0.5, 1.2] shared."""
    al = rng.uniform(0.5, 1.2)
    arms = []
    for _ in range(N_ARMS):
        xc = _logu(rng, 1 / 30, 3.0)
        gain = (top - r0) * float(np.clip(0.55 + 0.1 * np.log(xc) + rng.uniform(-0.1, 0.1), 0.2, 0.95))
        arms.append((xc, gain, al))
    return arms


# ---- entstall -------------------------------------------------------------------------------------------------------
_HZ, _HZW = np.polynomial.hermite_e.hermegauss(48)
_HZW = _HZW / _HZW.sum()


class EntropySeeds:
    """Reward of one seed: r0 + A (1 - exp(-E(x)/L)), E(x) = integral of the entropy H(u) = (1 + u/c_s)^-kappa from
    0 to x = c_s/(kappa - 1) (1 - (1 + x/c_s)^(1 - kappa)) (FLOPs in F_P); the seed's collapse scale
    c_s = c exp(sigma Z). Called directly: the expectation over Z (48-point Gauss-Hermite; the integrand is smooth and
    bounded, so exact to ~1e-12); draw_seeds: one curve per seed."""

    def __init__(self, r0, a, c, lscale, kappa, sigma):
        self.r0, self.a, self.c, self.L, self.k, self.s = r0, a, c, lscale, kappa, sigma

    def seed_curve(self, z):
        cs = self.c * np.exp(self.s * z)
        k, L, a, r0 = self.k, self.L, self.a, self.r0

        def curve(f):
            x = _x(f)
            e = cs / (k - 1) * (1 - (1 + x / cs) ** (1 - k))
            return r0 + a * (1 - np.exp(-e / L))
        return curve

    def __call__(self, f):
        x = _x(f)[..., None]
        cs = self.c * np.exp(self.s * _HZ)
        e = cs / (self.k - 1) * (1 - (1 + x / cs) ** (1 - self.k))
        return self.r0 + self.a * ((1 - np.exp(-e / self.L)) * _HZW).sum(axis=-1)

    def draw_seeds(self, rng, n):
        return [self.seed_curve(z) for z in rng.standard_normal(n)]


def fam_entropy(rng, r0):
    """Entropy collapse (EntropySeeds): power kappa in [1.5, 3], seed spread sigma in [0.3, 0.7] (log scale), a shared
    gain ceiling A0 in [0.45, 0.7] (+-0.05 per arm, r0 + A <= 0.95); collapse scale c = c_mid exp(s (j - 1.5) +
    U(-0.4, 0.4)) F_P for arm j = 0..3 (g4..g32; larger groups keep their entropy longer), c_mid in [0.3, 1.5], s in
    [0.2, 0.7]; the exploration capacity D = c/((kappa - 1) L) = D0 c^nu e^U(-0.2,0.2) (D0 in [0.8, 2], nu in
    [0.1, 0.5]) sets the seed-median plateau A (1 - e^-D), so arms that learn fast early (small L) stall lower."""
    kappa, sigma = rng.uniform(1.5, 3.0), rng.uniform(0.3, 0.7)
    a0, c_mid, s = rng.uniform(0.45, 0.7), _logu(rng, 0.3, 1.5), rng.uniform(0.2, 0.7)
    d0, nu = rng.uniform(0.8, 2.0), rng.uniform(0.1, 0.5)
    out = []
    for j in range(N_ARMS):
        c = c_mid * np.exp(s * (j - 1.5) + rng.uniform(-0.4, 0.4))
        d = d0 * c**nu * np.exp(rng.uniform(-0.2, 0.2))
        a = min(a0 + rng.uniform(-0.05, 0.05), 0.95 - r0)
        out.append(EntropySeeds(r0, a, c, c / ((kappa - 1) * d), kappa, sigma))
    return out


# ---- noisyver ------------------------------------------------------------------------------------------------------
class NoisyVerifier:
    """Progress b (0 -> cap) of an arm trained on a verifier that flips rewards with probability eps:
    db/dx = k (psi(b) - rho), psi = S / sqrt(S^2 + nu^2/G), S = (1 - 2 eps)(1 - b), x = FLOPs in F_P; reward
    r0 + (amax - r0) b. Solved once (DOP853, rtol 1e-10, atol 1e-13) on [0, X_MAX]; dense output between."""

    def __init__(self, r0, amax, k, eps, nu2, g, rho):
        self.r0, self.amax = r0, amax
        self.args = (k, eps, nu2, g, rho)
        sol = solve_ivp(lambda x, b: self.rate(b), (0.0, X_MAX), [0.0], method="DOP853", rtol=1e-10, atol=1e-13,
                        dense_output=True)
        self.sol = sol.sol

    def rate(self, b):
        k, eps, nu2, g, rho = self.args
        s = (1 - 2 * eps) * (1 - b)
        return k * (s / np.sqrt(s**2 + nu2 / g) - rho)

    def cap(self):
        _, eps, nu2, g, rho = self.args  # psi = rho: S* = rho nu / sqrt(G (1 - rho^2))
        return 1 - rho * np.sqrt(nu2 / (g * (1 - rho**2))) / (1 - 2 * eps)

    def progress(self, f):
        x = np.clip(_x(f), 0.0, X_MAX)
        return np.asarray(self.sol(x.ravel())[0]).reshape(x.shape)

    def __call__(self, f):
        return self.r0 + (self.amax - self.r0) * self.progress(f)


def fam_noisyver(rng, r0):
    """Noisy verifier (NoisyVerifier): eps in [0.05, 0.3] shared; nu^2 = w eps (1 - eps) + v0, w in [1, 4],
    v0 in [0.01, 0.05]; the pull rho set so that g4 stops at progress b4* in [0.45, 0.75] (larger G stop higher:
    headroom 1 - b* falls as 1/sqrt(G)); amax in [max(0.7, r0 + 0.3), 0.95]; rate per F_P
    k = k0 (4/G)^gamma e^U(-0.3,0.3), k0 log-uniform in [3, 12], gamma in [0.6, 1] (cost per step ~ G^gamma)."""
    eps = rng.uniform(0.05, 0.3)
    nu2 = rng.uniform(1, 4) * eps * (1 - eps) + rng.uniform(0.01, 0.05)
    b4 = rng.uniform(0.45, 0.75)
    s4 = (1 - 2 * eps) * (1 - b4)
    rho = s4 / np.sqrt(s4**2 + nu2 / 4)
    amax = rng.uniform(max(0.7, r0 + 0.3), 0.95)
    k0, gam = _logu(rng, 3.0, 12.0), rng.uniform(0.6, 1.0)
    return [NoisyVerifier(r0, amax, k0 * (4 / g) ** gam * np.exp(rng.uniform(-0.3, 0.3)), eps, nu2, g, rho)
            for g in GROUPS]


# ---- sftdip --------------------------------------------------------------------------------------------------------
def fam_sftdip(rng, r0):
    """SFT dip: R = r0 + gain h(x) - D (1 - exp(-x/td)) (1 - h(x)), h = 1 - (1 + x/xc)^-alpha (arms as _mean_arms
    with top 0.92); dip depth D = U(0.3, 0.8) r0, larger for slower arms (+ 0.1 r0 per e-fold of xc, clipped to
    0.85 r0), onset td log-uniform in [1/800, 1/60] F_P (shared)."""
    td = _logu(rng, 1 / 800, 1 / 60)
    out = []
    for xc, gain, al in _mean_arms(rng, r0, 0.92):
        d = r0 * float(np.clip(rng.uniform(0.3, 0.8) + 0.1 * np.log(xc), 0.1, 0.85))
        out.append(lambda f, xc=xc, gain=gain, al=al, d=d: (
            r0 + gain * _satpow(_x(f), xc, al) - d * (1 - np.exp(-_x(f) / td)) * (1 - _satpow(_x(f), xc, al))))
    return out


# ---- volatile ------------------------------------------------------------------------------------------------------
class Volatile:
    """Mean curve m(x) = r0 + gain h(x); a seed's curve m(x) + sd sqrt(h(x)) sum_i sqrt(2/4) sin(w_i ln x + phi_i)
    with phases uniform per seed (so the swing has mean 0 and sd `sd` x sqrt(h) at every x: the truth is m)."""

    def __init__(self, r0, xc, gain, al, sd, w):
        self.r0, self.xc, self.gain, self.al, self.sd, self.w = r0, xc, gain, al, sd, w

    def __call__(self, f):
        return self.r0 + self.gain * _satpow(_x(f), self.xc, self.al)

    def seed_curve(self, phi):
        def curve(f):
            x = _x(f)
            h = _satpow(x, self.xc, self.al)
            lnx = np.log(np.maximum(x, 1e-12))[..., None]
            swing = (np.sqrt(2 / self.w.size) * np.sin(self.w * lnx + phi)).sum(axis=-1)
            return self.r0 + self.gain * h + self.sd * np.sqrt(h) * swing
        return curve

    def draw_seeds(self, rng, n):
        return [self.seed_curve(rng.uniform(0, 2 * np.pi, self.w.size)) for _ in range(n)]


def fam_volatile(rng, r0):
    """Checkpoint volatility (Volatile): arms as _mean_arms with top 0.82; swing sd = sd0 sqrt(16/G), sd0 in
    [0.008, 0.025] (g4: up to 0.05); 4 angular frequencies per arm log-uniform in [0.8, 4] per e-fold of F (the
    evaluations are 0.69 e-folds apart). Largest swing 2.83 sd sqrt(h) keeps every seed's curve inside (0.01, 0.99)."""
    sd0 = rng.uniform(0.008, 0.025)
    out = []
    for (xc, gain, al), g in zip(_mean_arms(rng, r0, 0.82), GROUPS, strict=True):
        w = np.exp(rng.uniform(np.log(0.8), np.log(4.0), 4))
        out.append(Volatile(r0, xc, gain, al, sd0 * np.sqrt(16 / g), w))
    return out


# ---- spikes --------------------------------------------------------------------------------------------------------
class Spikes:
    """Mean-free curve m(x) = r0 + gain h(x); a seed's spikes arrive as a Poisson process of intensity
    lam beta u^(beta - 1) (u in F_P); a seed's reward is r0 + (m(x) - r0) prod_i (1 - delta exp(-(x - u_i)/tau)) over
    the spikes before x. Expectation (Campbell / the Poisson functional): r0 + (m - r0) exp(-delta I(x)),
    I(x) = lam beta int_0^x u^(beta-1) e^(-(x-u)/tau) du = lam x^beta 1F1(1; beta + 1; -x/tau)."""

    def __init__(self, r0, xc, gain, al, lam, beta, tau, delta):
        self.r0, self.xc, self.gain, self.al = r0, xc, gain, al
        self.lam, self.beta, self.tau, self.delta = lam, beta, tau, delta

    def mean_free(self, x):
        return self.r0 + self.gain * _satpow(x, self.xc, self.al)

    def intensity_integral(self, x):
        x = np.asarray(x, float)
        return self.lam * x**self.beta * hyp1f1(1.0, self.beta + 1.0, -x / self.tau)

    def intensity_integral_quad(self, x):  # independent check of the closed form
        lb = self.lam * self.beta
        return quad(lambda u: lb * u ** (self.beta - 1) * np.exp(-(x - u) / self.tau), 0.0, x, limit=200,
                    epsabs=1e-13, epsrel=1e-11)[0]

    def __call__(self, f):
        x = _x(f)
        return self.r0 + (self.mean_free(x) - self.r0) * np.exp(-self.delta * self.intensity_integral(x))

    def seed_curve(self, u):
        def curve(f):
            x = _x(f)
            lag = x[..., None] - u
            keep = np.where(lag >= 0, 1 - self.delta * np.exp(-np.maximum(lag, 0.0) / self.tau), 1.0).prod(axis=-1)
            return self.r0 + (self.mean_free(x) - self.r0) * keep
        return curve

    def draw_seeds(self, rng, n):
        out = []
        for _ in range(n):
            k = rng.poisson(self.lam * X_SPIKES**self.beta)
            out.append(self.seed_curve(X_SPIKES * rng.uniform(size=k) ** (1 / self.beta)))
        return out


def fam_spikes(rng, r0):
    """Reward spikes (Spikes): arms as _mean_arms with top 0.9; beta in [1, 2.5] shared, expected spikes by F for g4
    n4 in [0.5, 4], falling as (4/G)^0.8 for larger groups; recovery time tau log-uniform in [0.05, 0.5] F_P per arm,
    depth delta in [0.3, 0.8] per arm (share of the gain learnt)."""
    beta, n4 = rng.uniform(1.0, 2.5), rng.uniform(0.5, 4.0)
    out = []
    for (xc, gain, al), g in zip(_mean_arms(rng, r0, 0.9), GROUPS, strict=True):
        lam = n4 * (4 / g) ** 0.8 / 2.0**beta
        out.append(Spikes(r0, xc, gain, al, lam, beta, _logu(rng, 0.05, 0.5), rng.uniform(0.3, 0.8)))
    return out


MINE = {"entstall": fam_entropy, "noisyver": fam_noisyver, "sftdip": fam_sftdip, "volatile": fam_volatile,
        "spikes": fam_spikes}
rbc.register(MINE, "round 34")


def leader_share(families, reps, seed):
    """On the truths only (the same random streams as the main loop): the share of draws where the arm best at F_P
    is not the best at F, its mean regret at F, the median gap best-second at F, the range of the curves."""
    r32.leader_share(families, reps, seed)


def _exactness(fam, reps, seed):
    """The families' own exactness checks, independent of the seed Monte Carlo: noisyver's ODE against the
    quadrature of x(b) = int_0^b db / rate(b) (both ways of the same curve); spikes' closed form against adaptive
    quadrature; entropy's Gauss-Hermite against adaptive quadrature over Z; and, for the per-seed families, the range
    of 200 seeds' curves on the evaluation grid (the harness clips at 0.002 and 0.998: a curve there would bias)."""
    idx = list(rbc.FAMILIES).index(fam)
    worst, lo, hi = None, 1.0, 0.0
    grid = np.concatenate([rbc.EVALS0, rbc.EVALS1, [F]])[None, :] * np.exp(0.6 * np.linspace(-1, 1, 5))[:, None]
    for rep in range(reps):
        rng = np.random.default_rng([seed, idx, rep])
        r0 = rng.uniform(0.1, 0.3)
        curves = rbc.FAMILIES[fam](rng, r0)
        for c in curves:
            if isinstance(c, NoisyVerifier):
                for b in (0.2, 0.5, 0.9):
                    b = b * c.cap()
                    xb = quad(lambda v, c=c: 1 / c.rate(v), 0.0, b, epsabs=1e-13, epsrel=1e-11)[0]
                    if xb < X_MAX:
                        worst = max(worst or 0.0, abs(float(c.progress(xb * F_P)) - b))
            elif isinstance(c, Spikes):
                for x in (0.3, 1.0, 2.0, 5.0):
                    worst = max(worst or 0.0, abs(float(c.intensity_integral(x)) - c.intensity_integral_quad(x)))
            elif isinstance(c, EntropySeeds):
                for x in (0.25, 1.0, 2.0):
                    dens = lambda z, c=c, x=x: (float(c.seed_curve(z)(x * F_P)) * np.exp(-z * z / 2)  # noqa: E731
                                                / np.sqrt(2 * np.pi))
                    ref = quad(dens, -12, 12, epsabs=1e-13, epsrel=1e-11)[0]
                    worst = max(worst or 0.0, abs(float(c(x * F_P)) - ref))
            vals = grid_values(c, grid, seed, idx, rep)
            lo, hi = min(lo, float(vals.min())), max(hi, float(vals.max()))
    return worst, lo, hi


def grid_values(c, grid, seed, idx, rep):
    """A curve's values on an exactness check's grid: 200 of its seeds' curves where its seeds differ
    (``draw_seeds``), else its own (the range the check prints)."""
    if hasattr(c, "draw_seeds"):
        return np.array([s(grid) for s in c.draw_seeds(np.random.default_rng([seed, idx, rep, 7]), 200)])
    return c(grid)


def report_exactness(families, mine, exactness, reps, seed, what, curves="curves"):
    """Print each of ``mine``'s ``families``' exactness check (``exactness(fam, reps, seed)``: the largest
    difference from an independent quadrature or solver, None where none is needed, and the curves' range)."""
    for fam in families:
        if fam not in mine:
            continue
        worst, lo, hi = exactness(fam, reps, seed)
        shown = "none needed (closed form)" if worst is None else f"{worst:.2e}"
        print(f"{fam:<10} exactness: largest |{what}| {shown}; {curves} on the grid (shift up to e^0.6) in "
              f"[{lo:.3f}, {hi:.3f}]")


def truth_check(families, reps, seed, n_mc):
    """Round 32's Monte Carlo of the stated truths at F (seeds drawn as the harness draws them), then each family's
    own exactness check (_exactness)."""
    r32.truth_check(families, reps, seed, n_mc)
    report_exactness(families, MINE, _exactness, reps, seed, "closed form or ODE - independent quadrature",
                     "per-seed curves")


if __name__ == "__main__":
    r32.run_cli(MINE, 3434, leader_share, truth_check)
