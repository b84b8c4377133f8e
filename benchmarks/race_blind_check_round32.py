"""Round 32's independent check of RACE's analysis: five more truth families, written by a session that had not seen
benchmarks/race_misspecification.py's shapes, the results or the changelog, on the protocol of
benchmarks/race_blind_check.py (imported, not copied: 4 arms g4, g8, g16, g32, 3 seeds, 200 shared 0/1 prompts,
rungs F_P/4 and F_P, target F = 2 F_P, the runner's own promotion and room ladder). Round 31's families are imported
too, so every key stays unique; these five follow them (their keys and random streams come after round 31's), and
every flag of race_blind_check works here (without --families, these five):

  lengthgrow  response length grows during training, so FLOPs per step rise and reward-vs-FLOPs is time-warped
  horizon     an LR schedule (warmup + cosine) tied to each run's own length: the pilots anneal at F_P, the run
              to F anneals at F, so the truth at F is not the pilots' curve continued
  diverge     per-seed training instability: a seed's run diverges at a random FLOP (Weibull hazard) and stays low;
              the truth is the expectation over seeds
  zeroadv     GRPO zero-advantage groups: prompts all pass or all fail in a group give no signal; per-prompt
              dynamics in which larger groups reach harder prompts but cost more per step
  datarepeat  a finite prompt set trained for several epochs: repeated data is worth less (Muennighoff-style),
              and an epoch costs FLOPs in proportion to the group size

    python benchmarks/race_blind_check_round32.py --families lengthgrow horizon diverge zeroadv datarepeat \
        --reps 100 --replicates 100 --seed 6262 --out race-blind-check     # round 32 (3.7 minutes)
    python benchmarks/race_blind_check_round32.py --leader-share --reps 100 --seed 6262   # truths only: how often
                                             # the arm best at F_P (what its pilots show) is not the best at F
    python benchmarks/race_blind_check_round32.py --truth-check --seed 6262   # Monte Carlo of the stated truths
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # race_blind_check and round 31's script beside it

import numpy as np
import race_blind_check as rbc
import race_blind_check_round31 as r31  # registers round 31's families first (keys and streams); its schedule
from scipy.special import expit

F_P, F, N_ARMS = rbc.F_P, rbc.F, rbc.N_ARMS
GROUPS = np.array([2 ** (i + 2) for i in range(N_ARMS)], dtype=float)  # the arms g4, g8, g16, g32


def _f(f):
    return np.asarray(f, dtype=float)


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


# ---- 1. response-length growth -------------------------------------------------------------------------------------
def fam_lengthgrow(rng, r0):
    """Response length grows during RL training (long chain-of-thought emerges, as in R1-style GRPO runs), so the FLOPs
    of a step rise as training goes on, by a different amount per arm. Let s be training progress measured in the
    FLOPs the run would have spent at its initial length. Length multiplier l(s) = 1 + (M - 1)(1 - exp(-s/(sL (M-1))))
    (doubles near s = sL, capped at M); FLOPs f(s) = int_0^s l = M s - (M-1)^2 sL (1 - exp(-s/(sL (M-1)))), inverted
    numerically. Reward in progress units: R = r0 + A (1 - exp(-(s/s0)^k)) + b ln l(s) (longer reasoning also solves
    more), capped smoothly below 0.97. A = a0 (U[0.3, 0.5], shared) + U(-0.08, 0.08), s0 log-U [F_P/30, F_P],
    k U[0.6, 1.2], M log-U [1.5, 6], sL log-U [F_P/30, F_P], b U[0, 0.06]. Arms whose length grows early and far
    progress fast per step but slow down per FLOP; the warp is not a shift in ln F (it changes with f)."""
    out = []
    a0 = rng.uniform(0.3, 0.5)
    s_grid = np.concatenate([[0.0], F_P * np.logspace(-8, 3, 2001)])
    for _ in range(N_ARMS):
        a = a0 + rng.uniform(-0.08, 0.08)
        s0, k = _logu(rng, F_P / 30, F_P), rng.uniform(0.6, 1.2)
        m, sl = _logu(rng, 1.5, 6.0), _logu(rng, F_P / 30, F_P)
        b = rng.uniform(0.0, 0.06)
        tau = sl * (m - 1)
        f_grid = m * s_grid - (m - 1) ** 2 * sl * -np.expm1(-s_grid / tau)
        f_grid[0] = 0.0

        def curve(f, a=a, s0=s0, k=k, m=m, tau=tau, b=b, f_grid=f_grid):
            f = _f(f)
            s = np.interp(f, f_grid, s_grid)
            ell = 1 + (m - 1) * -np.expm1(-s / tau)
            r = r0 + a * -np.expm1(-(s / s0) ** k) + b * np.log(ell)
            return _softcap(r, 0.97)
        out.append(curve)
    return out


def _softcap(r, cap, w=0.02):
    """A smooth min(r, cap) = -w ln(exp(-r/w) + exp(-cap/w)): r below cap - 0.3 is unchanged to 1e-8."""
    return cap - w * np.logaddexp(0.0, (cap - r) / w)


# ---- 2. LR schedule tied to the run's length ----------------------------------------------------------------------
def _lr_u(f, fw, H, lmin):
    """Round 31's warmup and cosine decay to lmin at H ((lr(f), its integral u(f))), H at least 1.5 fw."""
    return r31._lr_progress(f, fw, max(H, 1.5 * fw), lmin)


class HorizonRun:
    """One arm under a schedule tied to the run's own length. Called directly it is the run planned to F (the truth:
    truth_at averages it over the seeds' timing); draw_seeds gives the pilots' run, planned to F_P (the race's
    pilots are launched for the largest rung and the halving stops the losers early); pilot is that run too."""

    def __init__(self, run, horizon_truth, horizon_pilot):
        self.run, self.ht, self.hp = run, horizon_truth, horizon_pilot

    def __call__(self, f):
        return self.run(f, self.ht)

    def pilot(self, f):
        return self.run(f, self.hp)

    def draw_seeds(self, rng, n):
        return [self.pilot] * n


def fam_horizon(rng, r0):
    """The usual RL post-training recipe: linear warmup (fw log-U [F_P/200, F_P/20] FLOPs), then cosine decay to
    lmin x peak (lmin U[0, 0.1]) at the end of the run, so a run's schedule depends on its planned length: the
    pilots are planned to F_P (they anneal there), the run to F anneals at F. Per arm a peak learning rate eta
    (log-U [1/3, 3], relative): progress u = eta int lr; R = r0 + A (1 - exp(-u/u0)) (1 - n lr(f)) where the last
    factor is the share of what was learned that update noise hides while the LR is high (recovered as it
    anneals), n = min(c eta, 0.3), c U[0.03, 0.12]; higher LRs converge faster to a lower level:
    A = a0 - 0.05 ln eta + U(-0.05, 0.05), a0 U[0.3, 0.5], clipped to [0.1, 0.7 - r0]; u0 log-U [F_P/8, 2 F_P].
    The truth at F is the F-planned run at F, not the pilots' curve continued (which has already annealed and
    flattened at F_P)."""
    out = []
    a0 = rng.uniform(0.3, 0.5)
    fw, lmin = _logu(rng, F_P / 200, F_P / 20), rng.uniform(0.0, 0.1)
    for _ in range(N_ARMS):
        eta = _logu(rng, 1 / 3, 3)
        a = float(np.clip(a0 - 0.05 * np.log(eta) + rng.uniform(-0.05, 0.05), 0.1, 0.7 - r0))
        u0 = _logu(rng, F_P / 8, 2 * F_P)
        noise = min(rng.uniform(0.03, 0.12) * eta, 0.3)

        def run(f, H, eta=eta, a=a, u0=u0, noise=noise):
            lr, u = _lr_u(f, fw, H, lmin)
            return r0 + a * -np.expm1(-eta * u / u0) * (1 - noise * lr)
        out.append(HorizonRun(run, F, F_P))
    return out


# ---- 3. divergence -------------------------------------------------------------------------------------------------
class Diverge:
    """Per seed: the run follows up(f) until its divergence FLOP T ~ Weibull(scale fd, shape beta), then stays at
    rd. Called directly: the exact expectation over T, S(f) up(f) + (1 - S(f)) rd with S = exp(-(f/fd)^beta)."""

    def __init__(self, up, rd, fd, beta):
        self.up, self.rd, self.fd, self.beta = up, rd, fd, beta

    def surv(self, f):
        return np.exp(-(_f(f) / self.fd) ** self.beta)

    def __call__(self, f):
        s = self.surv(f)
        return s * self.up(f) + (1 - s) * self.rd

    def draw_seeds(self, rng, n):
        ts = self.fd * rng.weibull(self.beta, n)
        return [lambda f, t=t: np.where(_f(f) < t, self.up(f), self.rd) for t in ts]


def fam_diverge(rng, r0):
    """Training instability (loss/gradient blow-ups, train-inference mismatch collapse in long GRPO/PPO runs): each
    seed's run may diverge at a random FLOP and never recover (reward falls to rd = r0 U[0.1, 0.8], at least 0.03).
    Before that: up = r0 + (A - r0)(1 - (1 + f/fc)^-alpha), A U[0.45, 0.85], fc log-U [F_P/100, F_P/3],
    alpha U[0.3, 0.9]. The hazard grows with training (Weibull shape beta U[1, 3]); its scale fd is log-U
    [1.5 F_P, 40 F_P] and shorter for aggressive arms (those with a small fc: fd times (fc/(F_P/20))^0.3), so the
    fast climbers are the ones at risk (P(a seed diverged by F): median 0.08, 10th-90th percentiles 0.002-0.59).
    Truth = the expectation over seeds (S up + (1 - S) rd)."""
    out = []
    for _ in range(N_ARMS):
        a = rng.uniform(0.45, 0.85)
        fc = _logu(rng, F_P / 100, F_P / 3)
        al = rng.uniform(0.3, 0.9)
        beta = rng.uniform(1.0, 3.0)
        fd = _logu(rng, 1.5 * F_P, 40 * F_P) * (fc / (F_P / 20)) ** 0.3
        rd = max(0.03, r0 * rng.uniform(0.1, 0.8))
        up = lambda f, a=a, fc=fc, al=al: a - (a - r0) * (1 + _f(f) / fc) ** -al  # noqa: E731
        out.append(Diverge(up, rd, fd, beta))
    return out


# ---- 4. zero-advantage groups ------------------------------------------------------------------------------------
_TH = np.linspace(-25, 25, 10001)
_ZX, _ZW = np.polynomial.hermite_e.hermegauss(48)
_ZW = _ZW / _ZW.sum()


def _phi(g):
    """Phi_g(theta) = int dtheta / v_g(expit theta), v_g(p) = 1 - p^g - (1-p)^g (a group with any signal)."""
    p = expit(_TH)
    v = -np.expm1(g * np.log(p)) - (1 - p) ** g  # 1 - p^g - (1-p)^g, accurate near p = 1
    v = np.maximum(v, 1e-300)
    inv = 1 / v
    return np.concatenate([[0.0], np.cumsum(0.5 * (inv[1:] + inv[:-1]) * np.diff(_TH))])


def _mu_for(r0, s):
    """The mean logit mu with E[expit(mu + s Z)] = r0."""
    mus = np.linspace(-15, 15, 3001)
    m = (expit(mus[:, None] + s * _ZX[None, :]) * _ZW).sum(axis=1)
    return float(np.interp(r0, m, mus))


def fam_zeroadv(rng, r0):
    """GRPO learns a prompt only from groups whose rollouts disagree: a group of g all-pass or all-fail has zero
    advantage. Prompts' initial logits theta ~ mu + s Z (s U[1.5, 3], mu so that the mean pass rate is r0; shared by
    the arms); per prompt d theta / d f = eta q(g) v_g(expit theta), v_g(p) = 1 - p^g - (1-p)^g: hard prompts
    (p << 1/g) and solved ones stall, and larger groups reach harder prompts. Per FLOP, q(g) = g/((g + gs)(g + c0)):
    more rollouts give a cleaner update (saturating at gs log-U [2, 32]) but a step costs g + c0 rollouts' worth
    (c0 log-U [1, 16]: prompt/learner overhead). eta = 3 eta_arm / (f_half q(8)), f_half log-U [F_P/20, 2 F_P] shared,
    eta_arm log-U [0.7, 1.4] per arm. A share rho U[0.1, 0.4] of the prompts (drawn from the same population) cannot
    be learned (wrong labels, beyond the model) and keep their initial pass rate, so R = (1 - rho) m(f) + rho r0.
    Truth = that mean pass rate over the prompt population (48-node quadrature)."""
    s = rng.uniform(1.5, 3.0)
    rho = rng.uniform(0.1, 0.4)
    mu = _mu_for(r0, s)
    th0 = mu + s * _ZX
    gs, c0 = _logu(rng, 2, 32), _logu(rng, 1, 16)
    q = lambda g: g / ((g + gs) * (g + c0))  # noqa: E731
    f_half = _logu(rng, F_P / 20, 2 * F_P)
    out = []
    for g in GROUPS:
        eta = 3 * _logu(rng, 0.7, 1.4) / (f_half * q(8.0))
        phi = _phi(g)
        phi0 = np.interp(th0, _TH, phi)

        def curve(f, rate=eta * q(g), phi=phi, phi0=phi0):
            f = _f(f)
            th = np.interp(phi0 + rate * f[..., None], phi, _TH)
            return (1 - rho) * (expit(th) * _ZW).sum(axis=-1) + rho * r0
        out.append(curve)
    return out


# ---- 5. repeated data -----------------------------------------------------------------------------------------------
def fam_datarepeat(rng, r0):
    """RL post-training sets are small (thousands of prompts) and runs go over them for several epochs; a repeated
    prompt teaches less than a fresh one. Epochs E(f) = f / f_ep(g), an epoch costing f_ep(g) = f_ep4 (g + c0)/(4 + c0)
    (f_ep4 log-U [F_P/30, F_P/2] for g4, c0 log-U [1, 16]); effective epochs D = E for E <= 1, else
    1 + Rs (1 - exp(-(E - 1)/Rs)) (Rs log-U [0.7, 6]: how many repeats are worth having). Per prompt, larger groups
    extract more: e(g) = g/(g + gs), gs log-U [4, 64]. R = r0 + A (1 - exp(-(eta e(g) D / d0)^k)), A U[0.3, 0.6]
    shared, d0 log-U [0.2, 2] epochs, k U[0.7, 1.3], eta log-U [0.7, 1.4] per arm. Small groups climb fast and hit
    the data wall early; large groups climb slowly and later pass them."""
    a = rng.uniform(0.3, 0.6)
    f_ep4, c0 = _logu(rng, F_P / 30, F_P / 2), _logu(rng, 1, 16)
    rs, gs = _logu(rng, 0.7, 6.0), _logu(rng, 4, 64)
    d0, k = _logu(rng, 0.2, 2.0), rng.uniform(0.7, 1.3)
    out = []
    for g in GROUPS:
        eta = _logu(rng, 0.7, 1.4)
        fep = f_ep4 * (g + c0) / (4 + c0)
        eff = g / (g + gs)

        def curve(f, fep=fep, eff=eff, eta=eta):
            e = _f(f) / fep
            d = np.where(e <= 1, e, 1 + rs * -np.expm1(-np.maximum(e - 1, 0) / rs))
            return r0 + a * -np.expm1(-(eta * eff * d / d0) ** k)
        out.append(curve)
    return out


MINE = {"lengthgrow": fam_lengthgrow, "horizon": fam_horizon, "diverge": fam_diverge, "zeroadv": fam_zeroadv,
        "datarepeat": fam_datarepeat}
rbc.register(MINE, "round 32")


def _pilot(c):
    return getattr(c, "pilot", c)


def leader_share(families, reps, seed):
    """On the truths only (the same random streams as the main loop): the share of draws where the arm best at F_P
    (by its pilots' expected reward) is not the best at F, the mean regret of that leader at F, and the range of
    the curves' values (sanity: inside (0, 1))."""
    for fam in families:
        idx = list(rbc.FAMILIES).index(fam)
        miss, lo, hi, gap, spread = 0, 1.0, 0.0, [], []
        for rep in range(reps):
            rng = np.random.default_rng([seed, idx, rep])
            r0 = rng.uniform(0.1, 0.3)
            curves = rbc.FAMILIES[fam](rng, r0)
            tp = np.array([rbc.truth_at(_pilot(c), F_P) for c in curves])
            tf = np.array([rbc.truth_at(c, F) for c in curves])
            grid = np.concatenate([[1.0], rbc.EVALS0, rbc.EVALS1, [F]])
            vals = np.array([np.concatenate([_pilot(c)(grid), c(grid)]) for c in curves])
            lo, hi = min(lo, vals.min()), max(hi, vals.max())
            miss += int(np.argmax(tp) != np.argmax(tf))
            gap.append(tf.max() - tf[np.argmax(tp)])
            spread.append(tf.max() - np.sort(tf)[-2])
        print(f"{fam:<10} leader-not-best {miss / reps:.3f} ({miss}/{reps}); mean regret of F_P leader "
              f"{np.mean(gap):.4f}; median gap best-second at F {np.median(spread):.4f}; "
              f"curve values in [{lo:.3f}, {hi:.3f}]")


def truth_check(families, reps, seed, n_mc):
    """Monte Carlo of the truth at F as the harness's simulate draws it (a seed's timing shift exp(SHIFT_SD N) and gain
    1 + GAIN_SD N, and for per-seed families the curve draw_seeds gives it) against rbc.truth_at: the largest
    |MC - stated| in units of the MC standard error and absolute, and the mean squared z (about 1 when the stated
    truths are the expectation), over `reps` draws of each family and its 4 arms. Round 33's script calls it too."""
    for fam in families:
        idx = list(rbc.FAMILIES).index(fam)
        zs, worst_abs, per_seed = [], 0.0, False
        for rep in range(reps):
            rng = np.random.default_rng([seed, idx, rep])
            r0 = rng.uniform(0.1, 0.3)
            curves = rbc.FAMILIES[fam](rng, r0)
            mc_rng = np.random.default_rng([seed, idx, rep, 99])
            for c in curves:
                shift = np.exp(rbc.SHIFT_SD * mc_rng.standard_normal(n_mc))
                gain = 1 + rbc.GAIN_SD * mc_rng.standard_normal(n_mc)
                if hasattr(c, "draw_seeds") and not isinstance(c, HorizonRun):
                    per_seed = True
                    per = c.draw_seeds(mc_rng, n_mc)
                    mean = np.array([per[i](F * shift[i]) for i in range(n_mc)], dtype=float)
                else:  # for horizon the truth is the F-planned run itself (its seeds differ only by timing)
                    mean = c(F * shift)
                v = r0 + (mean - r0) * gain
                est, se = v.mean(), v.std(ddof=1) / np.sqrt(n_mc)
                stated = rbc.truth_at(c, F)
                zs.append((est - stated) / max(se, 1e-12))
                worst_abs = max(worst_abs, abs(est - stated))
        zs = np.array(zs)
        kind = "per-seed draws" if per_seed else "no per-seed draws: the harness's shift and gain only"
        print(f"{fam:<10} truth check over {reps} draws x {N_ARMS} arms, {n_mc} MC seeds each ({kind}): largest "
              f"|MC - stated| {worst_abs:.4f} ({np.abs(zs).max():.2f} standard errors); mean z {zs.mean():+.2f}, "
              f"mean z^2 {np.mean(zs**2):.2f}")


def run_cli(mine, default_seed, leader_share_of, truth_check_of):
    """The command line of a blind check's script: --leader-share and --truth-check (with their own --families,
    --reps, --seed, --mc), else the harness's flags on ``mine``'s families by default."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--leader-share", action="store_true")
    ap.add_argument("--truth-check", action="store_true")
    flags, rest = ap.parse_known_args()
    if flags.leader_share or flags.truth_check:
        ap2 = argparse.ArgumentParser()
        ap2.add_argument("--families", nargs="*", default=list(mine), choices=list(rbc.FAMILIES))
        ap2.add_argument("--reps", type=int, default=100 if flags.leader_share else 20)
        ap2.add_argument("--seed", type=int, default=default_seed)
        ap2.add_argument("--mc", type=int, default=20000)
        a, _ = ap2.parse_known_args(rest)
        if flags.leader_share:
            leader_share_of(a.families, a.reps, a.seed)
        else:
            truth_check_of(a.families, a.reps, a.seed, a.mc)
    else:
        if "--families" not in rest:
            rest += ["--families", *mine]
        sys.argv = [sys.argv[0], *rest]
        rbc.main()


if __name__ == "__main__":
    run_cli(MINE, 6262, leader_share, truth_check)
