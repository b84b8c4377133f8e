"""Round 30's independent check of RACE's analysis (docs/results.md): five truth families written by a session that
had not seen benchmarks/race_misspecification.py's shapes, the results or the changelog, on a protocol of its own
that follows round 26's check: 4 arms, 3 seeds, 200 shared 0/1 prompts; rung 0 = F_P/4, rung 1 = F_P = 1e20,
target F = 2 F_P. Every arm is evaluated at step 0 and F_P/4 x 2^-4..2^0; the analysis of those pilots at F
drives flopplan.race.promotion.keep (2 kept, trend rank, up to room_ladder((4, 2), 2)[1] arms, with
runner.with_unfitted); survivors add evaluations at F_P/2 and F_P; the analysis of the whole grid recommends.
Its simulation of pilots (prompt difficulty, seeds, noise) is its own and not benchmarks/race_misspecification.py's
on purpose: a check that shared the benchmark's simulation would share its mistakes. What it calls of flopplan is
what a race runs: the promotion, the room ladder and the analysis.

    python benchmarks/race_blind_check.py --reps 100 --replicates 100 --seed 4242     # round 30 (3.5 min)
    python benchmarks/race_blind_check.py --families creep --reps 10 --out DIR        # a subset, elsewhere
    python benchmarks/race_blind_check.py --table --out DIR                           # the table of DIR's rows
    python benchmarks/race_blind_check.py --table --explain --families creep        # why its intervals missed

Each repetition is one JSON line in OUT/rows_FAMILY.jsonl (OUT: --out, default ./race-blind-check), with the seed
and replicate count it ran with; a run resumes after the rows already there (a line cut by a kill is dropped), and
refuses rows of another seed or replicate count (--fresh starts over). The table reads the first --reps rows.
Columns: repetitions, analysis errors, coverage of the 90 % intervals at F of usable predictions (cov_u, and their
count n_u) and of every prediction (cov_all), the stated P(best) of fitted recommendations (P(b)), how often the
pick was the best finalist (hit), stated less hit (P-hit), how often the pick was best among every arm (hitAll),
how often the halving kept no arm as good as the true best (drop), the mean regret at F of RACE, the naive pick
(best observed at F_P among the survivors) and exhaustive (0), the "cannot tell" and "undecided" shares, malformed
numbers (bad), the picks RACE moved off the naive pick (moved, won, lost at F), and the anchored P(best) (P(b)a:
what RACE stated before round 30, where under "cannot tell" it now states the mean of that and the curves' own).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from scipy.special import expit

from flopplan.race import promotion as halving
from flopplan.race import runner
from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.design import room_ladder
from flopplan.race.pilot_data import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.results import ArmInfo

OUT = Path("race-blind-check")
F_P = 1e20
F = 2 * F_P
RUNGS = (F_P / 4, F_P)
EVALS0 = F_P / 4 * 2.0 ** np.arange(-4, 1)  # rung-0 evaluations
EVALS1 = np.array([F_P / 2, F_P])  # survivors' rung-1 evaluations
N_ARMS, N_KEEP, N_SEEDS, N_PROMPTS = 4, 2, 3, 200
# noise model
DIFF_SD, ARM_PROMPT_SD = 1.2, 0.5  # prompt difficulty (shared) and arm x prompt interaction, logit scale
GAIN_SD, SHIFT_SD, WOBBLE_SD, JITTER = 0.08, 0.15, 0.01, 0.02

# population pass rate as a function of the logit level theta: m(theta) = E[expit(theta - s Z)]
_S = float(np.hypot(DIFF_SD, ARM_PROMPT_SD))
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(60)
_GH_W = _GH_W / _GH_W.sum()
_THETA = np.linspace(-15, 15, 6001)
_M = (expit(_THETA[:, None] - _S * _GH_X[None, :]) * _GH_W).sum(axis=1)


def theta_of(p: np.ndarray) -> np.ndarray:
    return np.interp(np.clip(p, _M[0], _M[-1]), _M, _THETA)


def lx(f):  # log-FLOPs relative to F_P
    f = np.asarray(f, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(f / F_P)


# ---- truth families: each returns a list of N_ARMS curves f -> mean reward (population of prompts) ------------------
# (round 30: five families written blind to the benchmark's shapes)
def _lin(f):  # FLOPs in units of F_P (linear, not log)
    return np.asarray(f, dtype=float) / F_P


def fam_ratecross(rng, r0):
    """Arm-dependent rate: a fast early component plus a late component that approaches its ceiling exponentially in
    *linear* F: R = r0 + e(1 - exp(-f/te)) + (A - r0 - e)(1 - exp(-f/tau)); tau per arm log-uniform in
    [F_P/3, 3 F_P] (mid-rise between the pilots and F), ceiling A = a0 + 0.08 ln(tau/F_P) + U(-0.08, 0.08) clipped to
    [r0 + 0.15, 0.95] (slower arms end higher), a0 in [0.55, 0.75]; e in [0.05, 0.4](A - r0), te in
    [F_P/100, F_P/20]."""
    out = []
    a0 = rng.uniform(0.55, 0.75)
    for _ in range(N_ARMS):
        tau = F_P * np.exp(rng.uniform(np.log(1 / 3), np.log(3)))
        a = float(np.clip(a0 + 0.08 * np.log(tau / F_P) + rng.uniform(-0.08, 0.08), r0 + 0.15, 0.95))
        e = rng.uniform(0.05, 0.4) * (a - r0)
        te = F_P * np.exp(rng.uniform(np.log(1 / 100), np.log(1 / 20)))
        out.append(lambda f, a=a, e=e, te=te, tau=tau: r0 + e * (1 - np.exp(-np.asarray(f, float) / te))
                   + (a - r0 - e) * (1 - np.exp(-np.asarray(f, float) / tau)))
    return out


def fam_creep(rng, r0):
    """Quick early rise to a noisy plateau (a small sinusoid in ln F), then a slow creep *linear* in F:
    R = r0 + g(1 - exp(-f/tau)) + w sin(2 pi ln(f)/P + phi) + b f/F_P; plateau gains g = G +- 0.04 around a shared
    G in [0.2, 0.4], tau in [F_P/300, F_P/40], wobble w in [0.005, 0.02], period P in [1, 2] (ln units), creep
    b in [0, 0.08] per F_P."""
    out = []
    gg = rng.uniform(0.2, 0.4)
    for _ in range(N_ARMS):
        g = gg + rng.uniform(-0.04, 0.04)
        tau = F_P * np.exp(rng.uniform(np.log(1 / 300), np.log(1 / 40)))
        w, per, ph = rng.uniform(0.005, 0.02), rng.uniform(1.0, 2.0), rng.uniform(0, 2 * np.pi)
        b = rng.uniform(0.0, 0.08)
        out.append(lambda f, g=g, tau=tau, w=w, per=per, ph=ph, b=b: np.clip(
            r0 + g * (1 - np.exp(-np.asarray(f, float) / tau))
            + w * np.sin(2 * np.pi * np.log(np.maximum(_lin(f), 1e-12)) / per + ph) * (np.asarray(f, float) > 0)
            + b * _lin(f), 0.0, 1.0))
    return out


def fam_cliff(rng, r0):
    """Reward-hacking cliff: a saturating power-law rise R0 = r0 + (A - r0)(1 - (1 + f/fc)^-alpha), A in
    [0.5, 0.9], fc in [F_P/300, F_P/10], alpha in [0.3, 0.9]; with probability 0.5 the arm then collapses sharply
    (logistic in linear F, width 5 % of the onset): R = R0 - D (R0 - r0/2) expit((f - c)/(0.05 c)), D in [0.4, 0.9],
    onset c log-uniform in [0.5 F_P, 1.9 F_P] (mostly between the largest pilot and F)."""
    out = []
    for _ in range(N_ARMS):
        a = rng.uniform(0.5, 0.9)
        fc = F_P * np.exp(rng.uniform(np.log(1 / 300), np.log(1 / 10)))
        al = rng.uniform(0.3, 0.9)
        cliff = rng.uniform() < 0.5
        dd = rng.uniform(0.4, 0.9) if cliff else 0.0
        c = F_P * np.exp(rng.uniform(np.log(0.5), np.log(1.9)))

        def curve(f, a=a, fc=fc, al=al, dd=dd, c=c):
            f = np.asarray(f, float)
            base = a - (a - r0) * (1 + f / fc) ** -al
            return base - dd * (base - r0 / 2) * expit((f - c) / (0.05 * c))
        out.append(curve)
    return out


class SeedMix:
    """Per-seed truth: each seed independently 'takes off' (probability q) or stays stuck. Called directly it is the
    expectation over seeds (used for the truth at F); simulate asks draw_seeds for one curve per seed."""

    def __init__(self, q, up, stuck):
        self.q, self.up, self.stuck = q, up, stuck

    def __call__(self, f):
        return self.q * self.up(f) + (1 - self.q) * self.stuck(f)

    def draw_seeds(self, rng, n):
        return [self.up if rng.uniform() < self.q else self.stuck for _ in range(n)]


def fam_seedsplit(rng, r0):
    """Seeds disagree: per seed, with arm probability q in [0.15, 0.85], a take-off R = r0 + g expit(k(ln(f/F_P) - m))
    (g in [0.3, 0.6], k in [1.5, 3], m in [-3, -0.5]); otherwise stuck with a small slow gain
    R = r0 + h expit(ln(f/F_P) + 3) (h in [0.02, 0.12]). Truth = q up + (1 - q) stuck."""
    out = []
    for _ in range(N_ARMS):
        q = rng.uniform(0.15, 0.85)
        g, k, m = rng.uniform(0.3, 0.6), rng.uniform(1.5, 3.0), rng.uniform(-3.0, -0.5)
        h = rng.uniform(0.02, 0.12)
        up = lambda f, g=g, k=k, m=m: r0 + g * expit(k * (lx(f) - m))  # noqa: E731
        stuck = lambda f, h=h: r0 + h * expit(lx(f) + 3.0)  # noqa: E731
        out.append(SeedMix(q, up, stuck))
    return out


def fam_ceiling(rng, r0):
    """Power-law rise in F that hits an arm-specific ceiling just after F_P: gain = c * s(x), x = (f/f_sat)^gamma,
    s(x) = x / (1 + x^8)^(1/8) (a smoothed min(x, 1)); ceiling c in [0.3, 0.65], f_sat log-uniform in
    [1.05 F_P, 1.6 F_P], gamma in [0.3, 0.8]. A continued rise extrapolated from the pilots overshoots."""
    out = []
    for _ in range(N_ARMS):
        c = rng.uniform(0.3, 0.65)
        fs = F_P * np.exp(rng.uniform(np.log(1.05), np.log(1.6)))
        gam = rng.uniform(0.3, 0.8)

        def curve(f, c=c, fs=fs, gam=gam):
            x = (np.asarray(f, float) / fs) ** gam
            return r0 + c * x / (1 + x ** 8) ** (1 / 8)
        out.append(curve)
    return out


FAMILIES = {"ratecross": fam_ratecross, "creep": fam_creep, "cliff": fam_cliff, "seedsplit": fam_seedsplit,
            "ceiling": fam_ceiling}

_HX, _HW = np.polynomial.hermite_e.hermegauss(30)
_HW = _HW / _HW.sum()


def register(families, who):
    """Add a later check's ``families`` after those already registered (their keys, and so their random streams, come
    after); a key already taken is refused, naming ``who``."""
    taken = set(families) & set(FAMILIES)
    if taken:
        raise ValueError(f"{who}: family {sorted(taken)[0]!r} is taken")
    FAMILIES.update(families)


def truth_at(curve, f):
    """Expected reward at f over the seed distribution (gain mean 1; timing shift exp(SHIFT_SD N))."""
    return float((curve(f * np.exp(SHIFT_SD * _HX)) * _HW).sum())


def own_truth(attr):
    """A later round's truth: :func:`truth_at` (as earlier rounds left it) wrapped so that a curve with the attribute
    ``attr`` (a function of FLOPs) answers with it, and every other curve as before."""
    prior = truth_at

    def wrapped(curve, f):
        own = getattr(curve, attr, None)
        return float(own(f)) if own is not None else prior(curve, f)

    globals()["truth_at"] = wrapped


def round_main(families):
    """A round's run: :func:`main`, every flag of it, with ``--families`` defaulting to the round's ``families``."""
    if "--families" not in sys.argv[1:]:
        sys.argv[1:1] = ["--families", *families]
    main()


def simulate(rng, name, curve, d, r0):
    """All evaluations of one arm's 3 seeds (step 0, rung 0, rung 1): flops (S, T), scores (S, T, Q),
    and the expected scores over these 200 prompts (S, T) for the fixed-prompt truth."""
    u = ARM_PROMPT_SD * rng.standard_normal(N_PROMPTS)  # arm x prompt interaction, fixed across seeds and time
    grid = np.concatenate([EVALS0, EVALS1])
    f = grid[None, :] * (1 + JITTER * rng.uniform(-1, 1, (N_SEEDS, grid.size)))
    gain = 1 + GAIN_SD * rng.standard_normal((N_SEEDS, 1))
    shift = np.exp(SHIFT_SD * rng.standard_normal((N_SEEDS, 1)))
    if hasattr(curve, "draw_seeds"):  # per-seed truths (seedsplit)
        per = curve.draw_seeds(rng, N_SEEDS)
        mean = np.stack([per[s](f[s] * shift[s]) for s in range(N_SEEDS)])
    else:
        mean = curve(f * shift)
    p = r0 + (mean - r0) * gain + WOBBLE_SD * rng.standard_normal(f.shape)
    p = np.concatenate([np.full((N_SEEDS, 1), r0), np.clip(p, 0.002, 0.998)], axis=1)
    f = np.concatenate([np.zeros((N_SEEDS, 1)), f], axis=1)
    q = expit(theta_of(p)[:, :, None] - d[None, None, :] + u[None, None, :])  # (S, T, Q) per-prompt pass prob
    scores = (rng.uniform(size=q.shape) < q).astype(float)
    return f, scores


def arm_pilots(name, f, scores, upto):
    runs = tuple(SeedRun(s, tuple(EvalPoint(float(f[s, t]), scores[s, t]) for t in range(upto)))
                 for s in range(N_SEEDS))
    return ArmPilots(name, runs)


def info(name, g):
    return ArmInfo(name, {"group_size": g}, 500_000_000, {"rollout": 0.6, "learning": 0.4, "feedback": 0.0})


def sanity(budget, tag):
    """Numbers that look wrong in a BudgetResult."""
    bad = []
    for p in budget.predictions:
        vals = (p.reward, p.lo, p.hi, p.p_best)
        if not all(np.isfinite(v) for v in vals):
            bad.append(f"{tag}:{p.arm} non-finite {vals}")
            continue
        if not p.lo - 1e-9 <= p.reward <= p.hi + 1e-9:
            bad.append(f"{tag}:{p.arm} point {p.reward:.4f} outside [{p.lo:.4f},{p.hi:.4f}]")
        if not -1e-9 <= p.p_best <= 1 + 1e-9:
            bad.append(f"{tag}:{p.arm} p_best {p.p_best}")
        if not (p.lo >= -1e-9 and p.hi <= 1 + 1e-9):
            bad.append(f"{tag}:{p.arm} interval outside [0,1]: [{p.lo:.4f},{p.hi:.4f}]")
        if not p.gain_lo - 1e-9 <= p.gain <= p.gain_hi + 1e-9:
            bad.append(f"{tag}:{p.arm} gain {p.gain:.4f} outside [{p.gain_lo:.4f},{p.gain_hi:.4f}]")
    comp = [p.p_best for p in budget.predictions if p.comparable]
    if len(comp) >= 1 and abs(sum(comp) - 1) > 0.02:
        bad.append(f"{tag}: comparable p_best sum {sum(comp):.3f}")
    return bad


def why(ensemble) -> dict:
    """What set a prediction's interval (for --explain): the acceleration test's share of draws bending up in ln F
    and whether it raised the upper end, the conformal scale per e-fold of F, the families' weights."""
    if ensemble is None:
        return {}
    return {"convex": ensemble.convex_share, "raised": ensemble.reach_at_budget is not None, "scale": ensemble.scale,
            "weights": {f.family: round(f.weight, 3) for f in ensemble.families}}


def explain(families, reps=None) -> str:
    """Per family, the usable predictions whose interval missed the truth at F: how many, by how much, and what
    set those intervals (:func:`why`)."""
    lines = []
    for fam in families:
        rows = [r for r in read_rows(OUT / f"rows_{fam}.jsonl")[:reps] if "error" not in r]
        miss = [(r["truth"][p["arm"]], p) for r in rows for p in r["preds"] if p["usable"] and not p["in"]]
        if not miss or "scale" not in miss[0][1]:
            lines.append(f"{fam}: {len(miss)} misses" + ("" if not miss else " (rows written before --explain)"))
            continue
        usable = sum(p["usable"] for r in rows for p in r["preds"])
        above = [t - p["hi"] for t, p in miss if t > p["hi"]]
        below = [p["lo"] - t for t, p in miss if t < p["lo"]]
        span = lambda xs: f"{min(xs):.4f}-{max(xs):.4f}" if xs else "-"  # noqa: E731
        convex = [p["convex"] for _, p in miss if p["convex"] is not None]
        raised = sum(p["raised"] for _, p in miss)
        lines.append(f"{fam}: {len(miss)} of {usable} usable predictions missed: {len(above)} above (by "
                     f"{span(above)}), {len(below)} below (by {span(below)}); the upper end raised in {raised}; "
                     f"convex share {span(convex)}; conformal scale {span([p['scale'] for _, p in miss])}")
    return "\n".join(lines)


def repetition(family, rng, n_replicates):
    r0 = rng.uniform(0.1, 0.3)
    curves = FAMILIES[family](rng, r0)
    names = [f"g{2 ** (i + 2)}" for i in range(N_ARMS)]
    infos = tuple(info(n, 2 ** (i + 2)) for i, n in enumerate(names))
    truth = {n: truth_at(c, F) for n, c in zip(names, curves, strict=True)}
    d = DIFF_SD * rng.standard_normal(N_PROMPTS)  # shared prompt difficulty
    sims = {n: simulate(rng, n, c, d, r0) for n, c in zip(names, curves, strict=True)}
    n0 = 1 + EVALS0.size
    first = {n: arm_pilots(n, *sims[n], n0) for n in names}
    seed = int(rng.integers(2**31))
    inp0 = RaceInput(infos, {"math": PilotData(tuple(first.values()))}, ("math",), F, RUNGS,
                     dict.fromkeys(names, 0), 0, "heldout-check")
    t0 = analyze(inp0, n_replicates=n_replicates, seed=seed, holdout=False).target("math")
    preds0 = t0.budgets[-1].predictions if t0.budgets else ()
    bad = sanity(t0.budgets[-1], "rung0") if t0.budgets else []
    obs = {c.arm: c.observations for c in t0.curves}
    trends = {p.arm: halving.trend(obs[p.arm], p.ledger_flops) for p in preds0}
    limit = room_ladder((N_ARMS, N_KEEP), 2.0)[1]
    kept = halving.keep(list(preds0), N_KEEP, trends, limit=limit)
    unfitted = {c.arm: c.observed_at_rungs[0] for c in t0.curves if c.arm not in {p.arm for p in preds0}}
    kept = runner.with_unfitted(kept, trends, unfitted, N_KEEP)[:limit]
    arms = [arm_pilots(n, *sims[n], n0 + (EVALS1.size if n in kept else 0)) for n in names]
    inp = RaceInput(infos, {"math": PilotData(tuple(arms))}, ("math",), F, RUNGS,
                    {n: int(n in kept) for n in names}, 0, "heldout-check")
    t = analyze(inp, n_replicates=n_replicates, seed=seed, holdout=False).target("math")
    ensembles = {c.arm: c.ensemble for c in t.curves}
    rec = t.recommendation
    at_f = t.budgets[-1] if t.budgets else None
    if at_f is not None:
        bad += sanity(at_f, "final")
    best = max(truth.values())
    # naive: best seed-mean observed reward at the largest pilot (F_P) among the survivors; ties to the first arm
    obs_fp = {n: float(sims[n][1][:, -1].mean()) for n in kept}
    naive = max(kept, key=lambda n: (obs_fp[n], -names.index(n)))
    preds = at_f.predictions if at_f else ()
    fitted_rec = rec is not None and rec.mode == "fitted" and rec.p_best is not None
    if fitted_rec and rec.p_best is not None and not -1e-9 <= rec.p_best <= 1 + 1e-9:
        bad.append(f"rec p_best {rec.p_best}")
    if rec is not None and fitted_rec and rec.lo is not None and not rec.lo - 1e-9 <= rec.reward <= rec.hi + 1e-9:
        bad.append(f"rec reward {rec.reward} outside [{rec.lo},{rec.hi}]")
    comparable = [p.arm for p in preds if p.comparable]
    finalists = [n for n in comparable if n in kept or (fitted_rec and n == rec.arm)]
    pool = finalists if len(finalists) > 1 else comparable
    hit = None
    if fitted_rec:
        hit = bool(truth[rec.arm] >= max([truth[n] for n in pool] or [truth[rec.arm]]) - 1e-12)
    return {
        "truth": truth, "kept": kept, "rec_arm": rec.arm if rec else None, "mode": rec.mode if rec else None,
        "confidence": rec.confidence if rec else None, "regime": at_f.decision.regime if at_f else None,
        "p_best": rec.p_best if fitted_rec else None, "hit": hit,
        "p_best_curves": rec.p_best_curves if fitted_rec else None,
        "p_best_seen": rec.p_best_seen if fitted_rec else None,
        "p_best_anchored": getattr(rec, "p_best_anchored", None) if fitted_rec else None,
        "tied": list(rec.tied) if rec else [], "pool": pool,
        "hit_all": bool(truth[rec.arm] >= best - 1e-12) if fitted_rec else None,
        "preds": [{"arm": p.arm, "r": p.reward, "lo": p.lo, "hi": p.hi, "usable": p.usable,
                   "comparable": p.comparable, "pb": p.p_best, "x": p.extrapolation,
                   "in": bool(p.lo <= truth[p.arm] <= p.hi), **why(ensembles.get(p.arm))} for p in preds],
        "regret_race": (best - truth[rec.arm]) if rec is not None and rec.arm else None,
        "regret_naive": best - truth[naive], "naive": naive,
        "dropped": bool(max(truth[n] for n in kept) < best - 1e-12) if kept else True,
        "bad": bad, "warnings": list(t.warnings), "pick": rec.arm if rec else None,
        "conf": rec.confidence if rec else None,
        "preds2": {p.arm: [p.reward, p.lo, p.hi, p.p_best, bool(p.comparable)] for p in preds},
    }


def refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def read_rows(path: Path, seed: int | None = None, replicates: int | None = None) -> list[dict]:
    """The rows of ``path`` (none when it is absent), less a last line a kill cut short (the file is rewritten
    without it); one line on stderr and exit 2 when a row ran with another seed or replicate count than given."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise
            path.write_text("".join(x + "\n" for x in lines[:-1]))  # a cut last line: its repetition runs again
    for r in rows:
        other_seed = seed is not None and r.get("seed") != seed
        if other_seed or (replicates is not None and r.get("replicates") != replicates):
            refuse(f"{path} holds rows of seed {r.get('seed')} and {r.get('replicates')} replicates, not {seed} and "
                   f"{replicates}: another --out, or --fresh")
    return rows


def table(families, reps=None):
    hdr = (f"{'family':<10}{'n':>4}{'err':>4}{'cov_u':>7}{'n_u':>5}{'cov_all':>8}{'P(b)':>7}{'hit':>6}{'P-hit':>7}"
           f"{'hitAll':>7}{'drop':>6}{'rRACE':>7}{'rNaive':>7}{'rExh':>5}{'c.tell':>7}{'undec':>6}{'bad':>4}"
           f"{'moved':>6}{'won':>5}{'lost':>5}{'P(b)a':>7}")
    lines = [hdr]
    for fam in families:
        rows = read_rows(OUT / f"rows_{fam}.jsonl")[:reps]
        if not rows:
            continue
        ok = [r for r in rows if "error" not in r]
        if not ok:
            lines.append(f"{fam:<10}{len(rows):>4}{len(rows):>4}")
            continue
        usable = [p["in"] for r in ok for p in r["preds"] if p["usable"]]
        allp = [p["in"] for r in ok for p in r["preds"]]
        pb = [r["p_best"] for r in ok if r["p_best"] is not None]
        # the anchored P(best), what RACE stated before round 30 (rows without it: the stated one)
        anchored = [r["p_best"] if r.get("p_best_anchored") is None else r["p_best_anchored"]
                    for r in ok if r["p_best"] is not None]
        hit = [r["hit"] for r in ok if r["hit"] is not None]
        hit_all = [r["hit_all"] for r in ok if r["hit_all"] is not None]
        rr = [r["regret_race"] for r in ok if r["regret_race"] is not None]
        m = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731

        def mv(r):  # the pick moved off the naive pick: +1 won (better truth at F), -1 lost, 0.5 as good, 0 not moved
            if not r["rec_arm"] or r["rec_arm"] == r["naive"]:
                return 0
            d = r["truth"][r["rec_arm"]] - r["truth"][r["naive"]]
            return 1 if d > 1e-12 else (-1 if d < -1e-12 else 0.5)
        lines.append(
            f"{fam:<10}{len(rows):>4}{len(rows) - len(ok):>4}{m(usable):>7.3f}{len(usable):>5}{m(allp):>8.3f}"
            f"{m(pb):>7.3f}{m(hit):>6.3f}{m(pb) - m(hit):>7.3f}{m(hit_all):>7.3f}{m([r['dropped'] for r in ok]):>6.3f}"
            f"{m(rr):>7.4f}{m([r['regret_naive'] for r in ok]):>7.4f}{0:>5.1f}"
            f"{m([r['confidence'] == 'cannot tell' for r in ok]):>7.3f}"
            f"{m([r['regime'] == 'undecided' for r in ok]):>6.3f}"
            f"{sum(len(r['bad']) for r in ok):>4}"
            f"{sum(mv(r) != 0 for r in ok):>6}{sum(mv(r) > 0 for r in ok):>5}{sum(mv(r) < 0 for r in ok):>5}"
            f"{m(anchored):>7.3f}")
    return "\n".join(lines)


def checks_main(families, commands, seed, mc):
    """The command line of a round's checks script (race_blind_check_round40_checks.py and after): ``--families``
    (default and choices: the round's ``families``), ``--reps``, ``--seed`` (default ``seed``), ``--mc`` (Monte
    Carlo seeds, default ``mc``) and exactly one of ``commands``: flag -> (function of (families, reps, seed, mc),
    its default repetitions)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="*", default=list(families), choices=list(families))
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default: the command's own)")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--mc", type=int, default=mc, help="Monte Carlo seeds per arm (--truth-check)")
    which = ap.add_mutually_exclusive_group(required=True)
    for flag in commands:
        which.add_argument(flag, action="store_true")
    a = ap.parse_args()
    flag = next(f for f in commands if getattr(a, f.lstrip("-").replace("-", "_")))
    run, reps = commands[flag]
    run(a.families, reps if a.reps is None else a.reps, a.seed, a.mc)


def main():
    global OUT  # the folder table() and the runs read and write
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--seed", type=int, default=7071)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--explain", action="store_true", help="with --table: what set the intervals that missed")
    ap.add_argument("--out", default=str(OUT), help="the folder of the rows (default ./race-blind-check)")
    a = ap.parse_args()
    OUT = Path(a.out)
    if a.table:
        if not OUT.is_dir():
            refuse(f"{OUT} holds no rows (--out)")
        print(table(a.families, a.reps))
        if a.explain:
            print(explain(a.families, a.reps))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    for fam in a.families:
        path = OUT / f"rows_{fam}.jsonl"
        if a.fresh and path.exists():
            path.unlink()
        done = len(read_rows(path, a.seed, a.replicates))
        start = time.perf_counter()
        for rep in range(done, a.reps):
            rng = np.random.default_rng([a.seed, list(FAMILIES).index(fam), rep])  # each rep its own stream
            try:
                row = repetition(fam, rng, a.replicates)
            except Exception as exc:
                tb = traceback.format_exc().splitlines()
                row = {"error": f"{type(exc).__name__}: {exc}", "tb": tb[-8:], "rep": rep}
                print(f"  {fam} rep {rep} error: {row['error']}", file=sys.stderr, flush=True)
            row.update(rep=rep, seed=a.seed, replicates=a.replicates)
            with path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
        print(f"# {fam}: {time.perf_counter() - start:.0f} s", flush=True)
    print(table(a.families, a.reps))


if __name__ == "__main__":
    main()
