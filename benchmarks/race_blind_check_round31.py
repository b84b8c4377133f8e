"""Round 31's independent check of RACE's analysis (docs/results.md): five more truth families, written by a session
that had not seen benchmarks/race_misspecification.py's shapes, the results or the changelog, on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms, 3 seeds, 200 shared 0/1 prompts, rungs F_P/4 and F_P,
target F = 2 F_P, the runner's own promotion and room ladder). The families join that script's five (their keys and
random streams follow them), and every flag of that script works here:

  lrsched  a warmup then a cosine learning-rate decay (a late start, an annealing gain near the schedule's end)
  entropy  entropy collapse: a fast rise to an arm's own plateau, then a slow sag; slower explorers end higher
  hetero   arms of one logistic shape in ln F whose seeds differ by an arm's own noise level (gain and timing)
  loglin   rises linear in ln F with the arms' own slopes, their levels bunched at F_P so that slopes cross near it
  stairs   a slow base and 1-3 steep jumps (grokking-like) at an arm's own FLOPs around F_P

    python benchmarks/race_blind_check_round31.py --families lrsched entropy hetero loglin stairs --reps 100 \
        --replicates 100 --seed 5151 --out race-blind-check                       # round 31 (3.5 minutes)
    python benchmarks/race_blind_check_round31.py --leader-share --reps 100 --seed 5151   # truths only: how often
                                                                 # the arm best at F_P is not the best at F
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check beside it

import numpy as np
import race_blind_check as rbc
from scipy.special import expit

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS


def _f(f):
    return np.asarray(f, dtype=float)


def _lx(f):  # ln(f / F_P), -inf at 0 handled by callers
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(_f(f), 1e-300) / F_P)


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


# ---- 1. learning-rate schedule -------------------------------------------------------------------------------------
def _lr_progress(f, fw, H, lmin):
    """Linear warmup to fw, cosine decay from 1 to lmin over [fw, H], then lmin: (lr(f), u(f) = int_0^f lr)."""
    f = _f(f)
    L = H - fw
    x = np.clip((f - fw) / L, 0.0, 1.0)
    lr = np.where(f < fw, f / fw, np.where(f <= H, lmin + (1 - lmin) * 0.5 * (1 + np.cos(np.pi * x)), lmin))
    fc = np.clip(f, fw, H) - fw
    u_cos = lmin * fc + (1 - lmin) * 0.5 * (fc + L / np.pi * np.sin(np.pi * fc / L))
    u = np.where(f < fw, f * f / (2 * fw), fw / 2 + u_cos + lmin * np.maximum(f - H, 0.0))
    return lr, u


def fam_lrsched(rng, r0):
    """R = r0 + A (1 - exp(-u(f)/u0)) + b (1 - lr(f)) [f > fw]; lr: linear warmup to fw (log-U [F_P/100, F_P/3]),
    cosine decay to lmin (U[0, 0.2]) at horizon H (log-U [F_P, 4 F_P]), then flat; u = integral of lr.
    A = U(0.3, 0.55) (shared) +- 0.08, u0 log-U [F_P/20, F_P] (progress units), anneal bonus b U[0, 0.10].
    Long warmups start late; arms whose horizon is near F get their anneal bonus between F_P and F."""
    out = []
    a0 = rng.uniform(0.3, 0.55)
    for _ in range(N_ARMS):
        fw = _logu(rng, F_P / 100, F_P / 3)
        H = _logu(rng, F_P, 4 * F_P)
        lmin = rng.uniform(0.0, 0.2)
        a = float(np.clip(a0 + rng.uniform(-0.08, 0.08), 0.15, 0.62))
        u0 = _logu(rng, F_P / 20, F_P)
        b = rng.uniform(0.0, 0.10)

        def curve(f, fw=fw, H=H, lmin=lmin, a=a, u0=u0, b=b):
            f = _f(f)
            lr, u = _lr_progress(f, fw, H, lmin)
            return r0 + a * (1 - np.exp(-u / u0)) + b * (1 - lr) * (f > fw)
        out.append(curve)
    return out


# ---- 2. entropy collapse -------------------------------------------------------------------------------------------
def fam_entropy(rng, r0):
    """R = max(r0 + g (1 - exp(-(f/tau)^k)) - s ln(1 + f/fc), 0.01), fc = 3 tau: a fast rise (tau log-U
    [F_P/200, F_P], k U[0.7, 1.5]) to a plateau g that is higher for slower arms (they keep exploring):
    g = clip(g0 + 0.06 ln(tau / (F_P/20)) + U(-0.05, 0.05), 0.08, 0.6), g0 U[0.2, 0.4]; after the collapse a slow
    sag s U[0, 0.025] per e-fold beyond 3 tau (with probability 0.6, else s = 0)."""
    out = []
    g0 = rng.uniform(0.2, 0.4)
    for _ in range(N_ARMS):
        tau = _logu(rng, F_P / 200, F_P)
        k = rng.uniform(0.7, 1.5)
        g = float(np.clip(g0 + 0.06 * np.log(tau / (F_P / 20)) + rng.uniform(-0.05, 0.05), 0.08, 0.6))
        s = rng.uniform(0.0, 0.025) if rng.uniform() < 0.6 else 0.0
        fc = 3 * tau

        def curve(f, tau=tau, k=k, g=g, s=s, fc=fc):
            f = _f(f)
            return np.maximum(r0 + g * (1 - np.exp(-(f / tau) ** k)) - s * np.log1p(f / fc), 0.01)
        out.append(curve)
    return out


# ---- 3. heteroscedastic seeds --------------------------------------------------------------------------------------
class SeedGain:
    """Expected curve = base; each seed's curve is r0 + (base - r0) * (1 + sig * v) with v uniform of mean 0, sd 1
    (so the expectation over seeds is base exactly) plus a per-seed timing shift exp(sig_t z) folded in as the
    *same* multiplicative noise level (sig_t = sig / 2), which the truth integrates over."""

    _HX, _HW = np.polynomial.hermite_e.hermegauss(20)
    _HW = _HW / _HW.sum()

    def __init__(self, base, r0, sig):
        self.base, self.r0, self.sig = base, r0, sig

    def __call__(self, f):
        f = _f(f)
        st = self.sig / 2
        return sum(w * self.base(f * np.exp(st * x)) for x, w in zip(self._HX, self._HW, strict=True))

    def draw_seeds(self, rng, n):
        out = []
        for _ in range(n):
            gain = 1 + self.sig * rng.uniform(-np.sqrt(3), np.sqrt(3))
            sh = np.exp(self.sig / 2 * rng.standard_normal())
            out.append(lambda f, gain=gain, sh=sh: self.r0 + (self.base(_f(f) * sh) - self.r0) * gain)
        return out


def fam_hetero(rng, r0):
    """Base R = r0 + A expit(k (ln(f/F_P) - m)), A U[0.25, 0.4], k U[0.7, 1.6], m U[-2.5, 1.5]; per arm a seed
    noise level sig log-U [0.02, 0.35]: seed gain 1 + sig U(-sqrt3, sqrt3), seed timing exp((sig/2) N)."""
    out = []
    for _ in range(N_ARMS):
        a, k, m = rng.uniform(0.25, 0.4), rng.uniform(0.7, 1.6), rng.uniform(-2.5, 1.5)
        sig = _logu(rng, 0.02, 0.35)
        base = lambda f, a=a, k=k, m=m: r0 + a * expit(k * (_lx(f) - m))  # noqa: E731
        out.append(SeedGain(base, r0, sig))
    return out


# ---- 4. linear in ln F ---------------------------------------------------------------------------------------------
def fam_loglin(rng, r0):
    """R = r0 + b ln(1 + f/f0): linear in ln F once f >> f0. Slope b U[0.02, 0.08] per e-fold; the gain at F_P
    L = L0 + U(-0.035, 0.035), L0 U[0.15, 0.3], sets f0 = F_P / (exp(L/b) - 1), so levels are bunched at F_P and
    steeper arms overtake by F. Capped smoothly below 0.97."""
    out = []
    l0 = rng.uniform(0.15, 0.3)
    for _ in range(N_ARMS):
        b = rng.uniform(0.02, 0.08)
        lev = l0 + rng.uniform(-0.035, 0.035)
        f0 = F_P / np.expm1(min(lev / b, 600.0))
        out.append(lambda f, b=b, f0=f0: np.minimum(r0 + b * np.log1p(_f(f) / f0), 0.97))
    return out


# ---- 5. staircase ----------------------------------------------------------------------------------------------------
def fam_stairs(rng, r0):
    """R = r0 + a (1 - exp(-f/tau)) + sum_j h_j expit((ln(f/F_P) - c_j)/w_j): a slow base (a U[0.05, 0.2], tau
    log-U [F_P/30, 3 F_P]) plus 1-3 jumps, heights h_j U[0.05, 0.15], locations c_j U[-3.5, 1.5] in ln(f/F_P)
    (F_P at 0, F at 0.69), widths w_j U[0.05, 0.2] (ln units; steep)."""
    out = []
    for _ in range(N_ARMS):
        a, tau = rng.uniform(0.05, 0.2), _logu(rng, F_P / 30, 3 * F_P)
        nj = int(rng.integers(1, 4))
        h = rng.uniform(0.05, 0.15, nj)
        c = rng.uniform(-3.5, 1.5, nj)
        w = rng.uniform(0.05, 0.2, nj)

        def curve(f, a=a, tau=tau, h=h, c=c, w=w):
            f = _f(f)
            x = _lx(f)[..., None]
            steps = (h * expit((x - c) / w)).sum(axis=-1) * (f > 0)
            return r0 + a * (1 - np.exp(-f / tau)) + steps
        out.append(curve)
    return out


MINE = {"lrsched": fam_lrsched, "entropy": fam_entropy, "hetero": fam_hetero, "loglin": fam_loglin,
        "stairs": fam_stairs}
rbc.register(MINE, "round 31")


def leader_share(families, reps, seed):
    """On the truths only (the same random streams as the main loop): the share of draws where the arm best at F_P
    is not the best at F, plus the ranges of truth values (sanity: inside (0, 1))."""
    for fam in families:
        idx = list(rbc.FAMILIES).index(fam)
        miss, lo, hi, gap = 0, 1.0, 0.0, []
        for rep in range(reps):
            rng = np.random.default_rng([seed, idx, rep])
            r0 = rng.uniform(0.1, 0.3)
            curves = rbc.FAMILIES[fam](rng, r0)
            tp = np.array([rbc.truth_at(c, F_P) for c in curves])
            tf = np.array([rbc.truth_at(c, F) for c in curves])
            grid = np.concatenate([[1.0], rbc.EVALS0, rbc.EVALS1, [F]])
            vals = np.array([c(grid) for c in curves])
            lo, hi = min(lo, vals.min()), max(hi, vals.max())
            miss += int(np.argmax(tp) != np.argmax(tf))
            gap.append(tf.max() - tf[np.argmax(tp)])
        print(f"{fam:<9} leader-not-best {miss / reps:.3f} ({miss}/{reps}); mean regret of F_P leader "
              f"{np.mean(gap):.4f}; curve values in [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--leader-share", action="store_true")
    mine, rest = ap.parse_known_args()
    if mine.leader_share:
        ap2 = argparse.ArgumentParser()
        ap2.add_argument("--families", nargs="*", default=list(MINE), choices=list(rbc.FAMILIES))
        ap2.add_argument("--reps", type=int, default=100)
        ap2.add_argument("--seed", type=int, default=5151)
        a, _ = ap2.parse_known_args(rest)
        leader_share(a.families, a.reps, a.seed)
    else:
        sys.argv = [sys.argv[0], *rest]
        rbc.main()
