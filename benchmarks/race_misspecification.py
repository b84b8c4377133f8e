"""RACE's decisions when the truth is not ScaleRL's sigmoid: coverage, P(best) calibration, regret, halving losses.

Per family of truths (random parameters, 4 arms whose curves may cross; ``--arms``), per repetition: 3 seeds x 200
shared 0/1 prompts (``--seeds``, ``--prompts``; Gaussian-copula prompt difficulty; ``--samples K``: avg@K), rungs
F_P/4 and F_P; every arm evaluated at step 0 and at F_P/4 x 2^-4..2^0, the halving keeps 2 of 4 (half of
``--arms``) and, with the design's room (``--room``, default 2: up to 4), every other arm the evidence cannot rule
out at F (``--promotion predicted``: flopplan.race.promotion.keep on the analysis of the rung-0 pilots at F;
``current``: the runner's lower bound of the current reward, 2 arms), the survivors go on to F_P/2 and F_P; the
analysis of the grid recommends an arm at F = 2 F_P (``--horizon H``: F = H F_P).

    python benchmarks/race_misspecification.py --reps 60               # every family, 60 repetitions each
    python benchmarks/race_misspecification.py --quick                 # 8 repetitions, 50 bootstrap replicates
    python benchmarks/race_misspecification.py --reps 40 --holdout-families   # and the held-out shapes
    python benchmarks/race_misspecification.py --r0-per-arm                   # arms that start apart
    python benchmarks/race_misspecification.py --arms 6 --seeds 2 --prompts 100   # the demo's grid geometry
    python benchmarks/race_misspecification.py --stall 0.5                    # seeds that take off or stall
    python benchmarks/race_misspecification.py --families --shape my_curves.py:hacked   # a shape of your own only
    python benchmarks/race_misspecification.py --paired                       # compare two versions rep by rep

The shapes are in benchmarks/race_shapes.py. The held-out shapes (``--holdout-families``: a Gompertz rise, a plateau
then a late straight rise, a power law that hits a hard ceiling, a slow decline after a peak) were written before
RACE's rules were tuned on the five families above and are never used to tune them: they are printed in a table of
their own. Five more were written later (an exponential approach in F, a straight rise in F, two sigmoid rises, arms
saturated before the pilots, a transient dip), to look for what the rules miss; the dip changed one rule
(docs/results.md, round 6). A straight rise in F with no ceiling was added in round 8; a sudden take-off and a
wobbling rise in round 13, measured and not tuned to; in round 15 a power law in F, a logistic in F, a staircase, a
ceiling-free straight rise in ln F, a power-law approach to A, and a grid whose arms each follow a shape of their
own.

Printed per family: errors (analysis exceptions), coverage at F of the 90 % intervals of usable predictions, mean
stated P(best) of fitted recommendations vs how often their arm is the best of the arms that P(best) is computed
among (the finalists: the comparable arms the halving kept, and the pick; all comparable arms with fewer than two
finalists): right when the pick's truth at F is at least theirs (a tie, as at a pass rate of 1, counts; a pick
outside the comparable arms, a naive pick whose curve failed the monotone check, is compared with them), mean regret
at F of RACE, the naive pick (best observed at the largest pilot; ties to the first arm, as RACE), the fitted-point
pick (the highest ScaleRL point fit at F among fitted arms) and exhaustive (0), how often the halving drops the true
best (keeps no arm tied with it), the "cannot tell" rate, RACE's regret where it did not say "cannot tell", the mean
number of arms the halving kept (each costs 3/4 of a first rung's four pilots more), and the share of usable
predictions whose arm tested as still accelerating in ln F (its interval's upper end raised,
flopplan.race.acceleration), and, over the same fitted recommendations as the stated P(best), the two readings the
report prints beside it: the calibrated curves' own P(best) at F among the finalists (P(b)c) and how often the arm
is seen best at the largest pilot (P(b)s; persistence), and the anchored forecast's P(best) (P(b)a: what RACE
stated before round 30, where under "cannot tell" it now states the mean of that and P(b)c); and how many picks
RACE moved off the naive pick, and of
those how many had a lower regret at F than the naive pick (won) and a higher one (lost): ``moved w/l``. With
another flopplan on PYTHONPATH (one before the promotion module) it measures that one, with ``--promotion current``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import numpy as np
from race_shapes import (
    EVALS,
    F_P,
    FAMILIES,
    GENERATORS,
    HOLDOUT,
    MORE,
    RUNGS,
    TARGET,
    YOURS,
    Curve,
    add_shape,
)
from scipy.special import ndtr

from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.pilot_data import ArmPilots, PilotData
from flopplan.race.results import ArmCurve, ArmInfo

try:
    from flopplan.race.checks import naive_pick
except ImportError:  # a checkout before round 31 (PYTHONPATH, the "before" runs): its naive pick took the largest float
    def naive_pick(seen):  # type: ignore[no-untyped-def]
        observed = [(n, r) for n, r in seen if r is not None]
        return max(observed, key=lambda x: x[1]) if observed else None

ARM_R0: list[tuple[float, float]] = []
"""Empty: every arm of a repetition starts from one R0, U(0.1, 0.3), as arms that share a base policy.
``--r0-per-arm`` puts (0.05, 0.35) here: each arm draws its own R0 from that range, as arms of different policy sizes
start apart (the generators' ceilings are drawn from 0.45 up, so every arm still has room to rise)."""

STALL: dict[str, object] = {"p": 0.0, "rng": None}
"""``--stall P``: each arm draws a chance q ~ U(0, P) that a seed of it stalls, and a stalled seed keeps only
U(0, 0.3) of the arm's gain over R0 at every rung (the seed that stalled in the first rung's pilots is the one that
continues), as RL runs whose seeds take off or do not (the CPU demo's tiny arms: one seed at 1.00, its twin at 0.13).
The truth at F is then what the arm reaches in expectation over seeds, R0 + (R(F) - R0) (1 - 0.85 q). Its draws come
from a generator of their own, so a run with ``--stall`` draws every other number as the run without it (paired)."""

SEED_SD: dict[str, float] = {}
"""``--seed-sd S``: the relative seed sd the analysis assumes for an arm of one seed (``race design --seed-sd``);
empty: the analysis's default (and code from before the option)."""

GRID = {"arms": 4, "seeds": 3, "prompts": 200, "samples": 1}
"""The pilots' geometry (``--arms``, ``--seeds``, ``--prompts``): the issue's check ran 4 arms x 3 seeds on 200 shared
prompts and halved 4 -> 2; with N arms the halving keeps :func:`halving_keeps` (and the design's room).
``--samples K``: each prompt's score is the mean of K sampled answers (avg@K, as AIME is often scored), not one."""


def halving_keeps(n_arms: int) -> int:
    """The arms the first rung's halving keeps before the design's room: half of them (eta 2), at least one."""
    return max(1, n_arms // 2)

SEED_NOISE = {"gain": 0.05, "shift": 0.1}
"""The seeds' spread (``--gain-sd``, ``--flop-shift-sd``): sd of a seed's relative gain over R0, and of its curve's
shift in ln F. The issue's own check drew seeds with sd 0.02 on ScaleRL's A and no shift: ``--flop-shift-sd 0``
(with the gain's sd at 0.05, about 0.02 on gains of 0.3-0.6)."""


def pilots(rng: np.random.Generator, name: str, curve: Curve, eta: np.ndarray, flops: np.ndarray,
           kept: np.ndarray | None = None) -> ArmPilots:
    """The seeds (:data:`GRID`) at step 0 and ``flops`` (x 1 +- 1 % jitter): seed s's curve R0 + (R - R0)
    (1 + 0.05 N) kept_s at F e^(0.1 N) (the sds: :data:`SEED_NOISE`; ``kept``: the share of the gain each seed keeps,
    1 but for a stalled seed, :data:`STALL`); scores by the Gaussian copula on the shared prompt latents ``eta``
    (rho 0.5). The same random numbers are drawn whatever the sds, so runs with other sds are paired."""
    r0 = float(curve(np.zeros(1))[0])
    k = GRID["seeds"]
    f = np.concatenate([np.zeros((k, 1)), flops * (1 + 0.01 * rng.uniform(-1, 1, (k, flops.size)))], axis=1)
    gain = 1 + SEED_NOISE["gain"] * rng.standard_normal((k, 1))
    shift = np.exp(SEED_NOISE["shift"] * rng.standard_normal((k, 1)))
    if kept is not None:
        gain = gain * kept[:, None]
    p = np.clip(r0 + (curve(f * shift) - r0) * gain, 0, 1)
    p[:, 0] = r0
    z = np.sqrt(0.5) * eta[:, None] + np.sqrt(0.5) * rng.standard_normal((k, f.shape[1], eta.size, GRID["samples"]))
    return ArmPilots.from_arrays(name, f, (ndtr(z) < p[:, :, None, None]).mean(axis=3))  # K = 1: the 0/1 scores


def fingerprint(arms: list[ArmPilots]) -> str:
    """A digest of every evaluation of every arm (FLOPs and scores): equal digests, equal pilots."""
    h = hashlib.sha256()
    for arm in arms:
        for run in arm.runs:
            for p in run.points:
                h.update(np.float64(p.flops).tobytes())
                h.update(np.ascontiguousarray(p.scores, dtype=np.float64).tobytes())
    return h.hexdigest()


def bend(curve: ArmCurve) -> float | None:
    """The arm's last gain over the one before: the seed-mean reward's rise between its last two evaluation
    positions over its rise between the two before them (a straight rise in F doubling F per position reads 2; a
    rise that stopped within its last positions reads less). None with fewer than three positions after step 0."""
    by_seed: dict[str, list[float]] = {}
    for o in sorted(curve.observations, key=lambda o: o.flops):
        if o.flops > 0:
            by_seed.setdefault(o.seed, []).append(o.reward)
    n = min((len(v) for v in by_seed.values()), default=0)
    if n < 3:
        return None
    m = np.mean([v[-3:] for v in by_seed.values()], axis=0)
    return float((m[2] - m[1]) / max(m[1] - m[0], 1e-3))


def info(name: str, g: int) -> ArmInfo:
    return ArmInfo(name, {"group_size": g}, 500_000_000, {"rollout": 0.6, "learning": 0.4, "feedback": 0.0})


def repetition(family: str, rng: np.random.Generator, promotion: str, n_replicates: int, room: float = 2.0,
               target: float = TARGET) -> dict[str, object]:
    r0 = rng.uniform(0.1, 0.3)
    n_arms, n_keep = GRID["arms"], halving_keeps(GRID["arms"])
    curves = [GENERATORS[family](rng, rng.uniform(*ARM_R0[0]) if ARM_R0 else r0) for _ in range(n_arms)]
    names = [f"g{2 ** (i + 2)}" for i in range(n_arms)]
    infos = tuple(info(n, 2 ** (i + 2)) for i, n in enumerate(names))
    truth = {n: float(c(np.array([target]))[0]) for n, c in zip(names, curves, strict=True)}
    kept_gain = dict.fromkeys(names)
    if STALL["p"]:
        stall_rng: np.random.Generator = STALL["rng"]  # type: ignore[assignment]
        for n in names:
            q = stall_rng.uniform(0, STALL["p"])  # type: ignore[arg-type]
            stalled = stall_rng.uniform(size=GRID["seeds"]) < q
            kept_gain[n] = np.where(stalled, stall_rng.uniform(0, 0.3, GRID["seeds"]), 1.0)
            r0_n = float(curves[names.index(n)](np.zeros(1))[0])
            truth[n] = r0_n + (truth[n] - r0_n) * (1 - 0.85 * q)  # E[kept] = (1 - q) + q 0.15
    eta = rng.standard_normal(GRID["prompts"])
    first = {n: pilots(rng, n, c, eta, EVALS, kept_gain[n]) for n, c in zip(names, curves, strict=True)}
    seed = int(rng.integers(2**31))
    if promotion == "predicted":
        from flopplan.race import promotion as halving
        from flopplan.race.design import room_ladder
        inp0 = RaceInput(infos, {"math": PilotData(tuple(first.values()))}, ("math",), target, RUNGS,
                         dict.fromkeys(names, 0), 0, "benchmark", **SEED_SD)
        t0 = analyze(inp0, n_replicates=n_replicates, seed=seed, holdout=False).target("math")
        from flopplan.race import runner
        preds = t0.budgets[-1].predictions if t0.budgets else ()  # none: no arm's pilots could be fitted
        trend = getattr(halving, "trend", None)  # None: a promotion module before the trend rank
        obs = {c.arm: c.observations for c in t0.curves}
        trends = {p.arm: trend(obs[p.arm], p.ledger_flops) for p in preds} if trend else None
        limit = room_ladder((n_arms, n_keep), room)[1]  # the design's room at the second rung
        kept = (halving.keep(list(preds), n_keep, trends, limit=limit) if trend
                else halving.keep(list(preds), n_keep, limit=n_keep))
        with_unfitted = getattr(runner, "with_unfitted", None)  # the runner's rule for arms without a curve
        if with_unfitted is not None and trends is not None:
            unfitted = {c.arm: c.observed_at_rungs[0] for c in t0.curves if c.arm not in {p.arm for p in preds}}
            kept = with_unfitted(kept, trends, unfitted, n_keep)[:limit]
    else:
        from flopplan.race.runner import lower_bound  # type: ignore[attr-defined]  # before the promotion module
        bounds = {}
        for n, arm in first.items():  # the runner's rule: the same draws for every arm (paired)
            last = np.stack([sorted(r.points, key=lambda p: p.flops)[-1].scores for r in arm.runs])
            bounds[n] = lower_bound(last, np.random.default_rng(0))
        kept = sorted(names, key=lambda n: (-bounds[n][1], -bounds[n][0], n))[:n_keep]
    arms = []
    for n, c in zip(names, curves, strict=True):
        if n in kept:  # the survivor continues: its rung-1 evaluations added to the same seeds
            more = pilots(rng, n, c, eta, MORE, kept_gain[n])
            runs = tuple(type(r)(r.seed, (*r.points, *m.points[1:])) for r, m in zip(first[n].runs, more.runs,
                                                                                    strict=True))
            arms.append(ArmPilots(n, runs))
        else:
            arms.append(first[n])
    inp = RaceInput(infos, {"math": PilotData(tuple(arms))}, ("math",), target, RUNGS,
                    {n: int(n in kept) for n in names}, 0, "benchmark", **SEED_SD)
    t = analyze(inp, n_replicates=n_replicates, seed=seed, holdout=False).target("math")
    rec = t.recommendation
    at_f = t.budgets[-1] if t.budgets else None  # None: no arm's pilots could be fitted
    best = max(truth.values())
    observed = {c.arm: c.observed_at_rungs[-1] for c in t.curves if c.arm in kept}
    # the naive pick as RACE breaks its ties (two arms with the same count of solved prompts: the first arm)
    naive = str(naive_pick([(n, observed[n]) for n in names if n in kept])[0])  # type: ignore[index]
    fitted = {c.arm: c.predicted_at_budget for c in t.curves if c.predicted_at_budget is not None}
    point_pick = max(fitted, key=lambda n: fitted[n]) if fitted else naive  # type: ignore[arg-type, return-value]
    usable = [p for p in at_f.predictions if p.usable] if at_f else []
    comparable = [p.arm for p in at_f.predictions if p.comparable] if at_f else []
    fitted_rec = rec is not None and rec.mode == "fitted" and rec.p_best is not None
    finalists = [n for n in comparable if n in kept or (fitted_rec and n == rec.arm)]  # type: ignore[union-attr]
    pool = finalists if len(finalists) > 1 else comparable  # the arms the stated P(best) is computed among
    top_truth = max((truth[n] for n in pool), default=None)  # ties count; a pick outside the pool is compared too
    raised = {c.arm for c in t.curves if c.ensemble is not None and getattr(c.ensemble, "reach_at_budget", None)
              is not None}  # accelerating arms (flopplan.race.acceleration; absent before it)
    return {"inside": [p.lo <= truth[p.arm] <= p.hi for p in usable], "width": [p.hi - p.lo for p in usable],
            "stall_seen": [kept_gain[p.arm] is not None and bool(np.any(kept_gain[p.arm] < 1))  # type: ignore[operator]
                           for p in usable],
            "accelerating": [p.arm in raised for p in usable],
            "stated": rec.p_best if fitted_rec else None,  # type: ignore[union-attr]
            "curves": rec.p_best_curves if fitted_rec else None,  # type: ignore[union-attr]
            "seen": rec.p_best_seen if fitted_rec else None,  # type: ignore[union-attr]
            "anchored": (rec.p_best if getattr(rec, "p_best_anchored", None) is None  # type: ignore[union-attr]
                         else rec.p_best_anchored) if fitted_rec else None,  # type: ignore[union-attr]
            "right": (truth[rec.arm] >= top_truth) if fitted_rec else None,  # type: ignore[union-attr, index, operator]
            "race": best - truth[rec.arm] if rec is not None and rec.arm else np.nan,
            "naive": best - truth[naive], "point": best - truth[point_pick],
            "dropped": max(truth[n] for n in kept) < best,  # no arm the halving kept is (tied) best at F
            "cannot_tell": rec is not None and rec.confidence == "cannot tell", "kept": len(kept),
            "pilots": fingerprint(arms), "arm_pilots": {a.name: fingerprint([a]) for a in arms},
            "pick": rec.arm if fitted_rec else None,  # type: ignore[union-attr]
            "moved": rec is not None and rec.arm is not None and rec.arm != naive,  # RACE's pick is not the naive one
            "pick_bend": bend(next(c for c in t.curves if c.arm == rec.arm)) if fitted_rec else None}  # type: ignore[union-attr]


def summarise(rows: list[dict[str, object]]) -> str:
    ok = [r for r in rows if "error" not in r]
    inside = [x for r in ok for x in r["inside"]]  # type: ignore[attr-defined]
    width = [x for r in ok for x in r["width"]]  # type: ignore[attr-defined]
    stated = [r["stated"] for r in ok if r["stated"] is not None]
    curves = [r["curves"] for r in ok if r["curves"] is not None]  # None with fewer than two finalists
    persistence = [r["seen"] for r in ok if r["seen"] is not None]
    anchored = [r.get("anchored", r["stated"]) for r in ok if r["stated"] is not None]  # rows of the stated P(best)
    right = [r["right"] for r in ok if r["right"] is not None]
    told = [r["race"] for r in ok if not r["cannot_tell"]]
    accel = [x for r in ok for x in r["accelerating"]]  # type: ignore[attr-defined]
    seen = [(i, x) for r in ok for i, x in zip(r["inside"], r["stall_seen"], strict=True)]  # type: ignore[call-overload]
    if any(x for _, x in seen):  # --stall: coverage where a stall shows in the arm's seeds, and where none does
        cover_seen = np.mean([i for i, x in seen if x])
        cover_unseen = np.mean([i for i, x in seen if not x]) if not all(x for _, x in seen) else float("nan")
        stall = f"   stall seen: cover {cover_seen:.3f} ({sum(x for _, x in seen)}); not seen {cover_unseen:.3f}"
    else:
        stall = ""
    moved = [r for r in ok if r.get("moved")]  # the repetitions whose pick RACE moved, and how the move did
    won = sum(r["race"] < r["naive"] for r in moved)  # type: ignore[operator]
    lost = sum(r["race"] > r["naive"] for r in moved)  # type: ignore[operator]
    mean = lambda k: float(np.nanmean([r[k] for r in ok]))  # noqa: E731
    return (f"{len(rows) - len(ok):>3} {np.mean(inside):>6.3f} {np.mean(width):>6.3f} {np.mean(stated):>6.3f} "
            f"{np.mean(right):>6.3f} {mean('race'):>7.4f} {mean('naive'):>7.4f} {mean('point'):>7.4f} "
            f"{0.0:>6.3f} {mean('dropped'):>6.3f} {mean('cannot_tell'):>6.3f} "
            f"{(np.mean(told) if told else float('nan')):>7.4f} {mean('kept'):>5.2f} {np.mean(accel):>5.2f} "
            f"{(np.mean(curves) if curves else float('nan')):>6.3f} "
            f"{(np.mean(persistence) if persistence else float('nan')):>6.3f} {np.mean(anchored):>6.3f} "
            f"{f'{len(moved)}:{won}/{lost}':>9}{stall}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=60, help="repetitions per family (default 60)")
    parser.add_argument("--replicates", type=int, default=100, help="bootstrap replicates per analysis")
    parser.add_argument("--quick", action="store_true", help="8 repetitions, 50 replicates")
    parser.add_argument("--promotion", choices=["predicted", "current"], default="predicted")
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--holdout-families", nargs="*", choices=list(HOLDOUT), default=None,
                        help="also run these held-out shapes (none named: all), reported in a table of their own")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--horizon", type=float, default=TARGET / F_P,
                        help="F over the largest pilot, F_P (default 2: ScaleRL's fit-on-half protocol)")
    parser.add_argument("--room", type=float, default=2.0,
                        help="the design's room: the halving keeps 2 and up to room x 2 of the 4 arms (default 2)")
    parser.add_argument("--gain-sd", type=float, default=SEED_NOISE["gain"],
                        help="sd of a seed's relative gain over R0 (default 0.05)")
    parser.add_argument("--flop-shift-sd", type=float, default=SEED_NOISE["shift"],
                        help="sd of a seed's curve's shift in ln F (default 0.1; the issue's check: 0)")
    parser.add_argument("--arms", type=int, default=GRID["arms"],
                        help="arms per repetition (default 4; the halving keeps half)")
    parser.add_argument("--seeds", type=int, default=GRID["seeds"], help="seeds per arm (default 3)")
    parser.add_argument("--prompts", type=int, default=GRID["prompts"], help="shared 0/1 prompts (default 200)")
    parser.add_argument("--seed-sd", type=float, default=None, metavar="S",
                        help="the seed sd a one-seed arm is assumed to have, relative to its gain (race design "
                             "--seed-sd; default: the analysis's, 0.05)")
    parser.add_argument("--samples", type=int, default=1, metavar="K",
                        help="answers sampled per prompt, its score their mean (avg@K; default 1: a 0/1 score)")
    parser.add_argument("--shape", action="append", default=[], metavar="FILE.py:FUNCTION",
                        help="also run a shape of your own (repeatable): FUNCTION(rng, r0) returns a curve, FLOPs -> "
                             "mean reward; reported with the held-out shapes (add_shape says more)")
    parser.add_argument("--r0-per-arm", action="store_true",
                        help="each arm its own R0, U(0.05, 0.35) (default: one R0 per repetition, U(0.1, 0.3))")
    parser.add_argument("--stall", type=float, default=0.0, metavar="P",
                        help="seeds that stall: each arm's seeds stall with a chance U(0, P) and keep U(0, 0.3) of "
                             "its gain (default 0: none; STALL says more)")
    parser.add_argument("--paired", action="store_true",
                        help="each repetition its own random stream (default: one stream per family), so that two "
                             "versions of the code see the same truths and pilots repetition by repetition")
    args = parser.parse_args()
    if not 0 <= args.stall <= 1:
        parser.error("--stall must be in [0, 1]")
    if min(args.arms, args.prompts) < 2 or min(args.seeds, args.samples) < 1:
        parser.error("--arms and --prompts must be at least 2, --seeds and --samples at least 1")
    GRID.update(arms=args.arms, seeds=args.seeds, prompts=args.prompts, samples=args.samples)
    if args.seed_sd is not None:
        SEED_SD.update(one_seed_sd=args.seed_sd)
    try:
        yours = [add_shape(spec) for spec in args.shape]
    except Exception as exc:  # a user's file: whatever it raises is one line on stderr, exit 2
        print(f"error: {exc}" if str(exc).startswith("--shape ") else f"error: --shape: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        raise SystemExit(2) from None
    if args.r0_per_arm:
        ARM_R0.append((0.05, 0.35))
    if args.gain_sd < 0 or args.flop_shift_sd < 0:
        parser.error("--gain-sd and --flop-shift-sd must be at least 0")
    SEED_NOISE.update(gain=args.gain_sd, shift=args.flop_shift_sd)
    reps, boot = (8, 50) if args.quick else (args.reps, args.replicates)
    room = f"room {args.room:g}" if args.promotion == "predicted" else "no room"
    print(f"# {reps} repetitions per family, {boot} bootstrap replicates, promotion {args.promotion}, rng seed "
          f"{args.seed}; {args.arms} arms, {args.seeds} seeds, {args.prompts} prompts"
          + (f" scored avg@{args.samples}" if args.samples > 1 else "")
          + (f" (one-seed arms assume a seed sd {args.seed_sd:g})" if args.seed_sd is not None else "")
          + ", rungs F_P/4 and F_P "
          f"(halving {args.arms} -> {halving_keeps(args.arms)}, {room}), "
          f"F = {args.horizon:g} F_P; seeds' gain sd {args.gain_sd:g}, ln-F shift sd {args.flop_shift_sd:g}"
          + ("; each arm its own R0, U(0.05, 0.35)" if ARM_R0 else "")
          + (f"; seeds stall with a chance U(0, {args.stall:g}) per arm" if args.stall else "")
          + ("; each repetition its own random stream (--paired)" if args.paired else ""))
    print(f"{'family':<10} {'err':>3} {'cover':>6} {'width':>6} {'P(b)':>6} {'right':>6} {'r_RACE':>7} {'r_naive':>7} "
          f"{'r_fit':>7} {'r_exh':>6} {'drop':>6} {'c.tell':>6} {'r_told':>7} {'kept':>5} {'accel':>5} {'P(b)c':>6} "
          f"{'P(b)s':>6} {'P(b)a':>6} {'moved w/l':>9}")
    held = [] if args.holdout_families is None else args.holdout_families or [h for h in HOLDOUT if h not in YOURS]
    held += [y for y in yours if y not in held]
    for family in [*args.families, *held]:
        if family == (held or [None])[0]:
            print("# held-out families (not used to tune the rules)")
        index = list(GENERATORS).index(family)
        rng = np.random.default_rng([args.seed, index])
        STALL.update(p=args.stall, rng=np.random.default_rng([args.seed, index, 1]))
        rows: list[dict[str, object]] = []
        start = time.perf_counter()
        for rep in range(reps):
            if args.paired:  # a repetition that draws more or fewer numbers (another promotion) moves no other one
                rng = np.random.default_rng([args.seed, index, 2, rep])
                STALL.update(rng=np.random.default_rng([args.seed, index, 3, rep]))
            try:
                rows.append(repetition(family, rng, args.promotion, boot, args.room, args.horizon * F_P))
            except Exception as exc:  # an analysis error is a finding, counted and printed
                rows.append({"error": f"{type(exc).__name__}: {exc}"})
                print(f"  error: {rows[-1]['error']}")
        print(f"{family:<10} {summarise(rows)}   ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
