"""Robustness probe of flopplan.race.analysis.analyze on degenerate pilot data a real race can produce (round 34's
independent check wrote it; its three findings are mended and each is a test in tests/test_race_analysis.py).

    python benchmarks/race_degenerate_probe.py                  # every case (about 1 minute)
    python benchmarks/race_degenerate_probe.py all0 dupflops    # some cases

Pilots are built as tests/race_inputs.py and benchmarks/race_blind_check.py build them: 4 arms g4..g32 (ArmInfo with
group_size), 3 seeds, 200 shared 0/1 prompts, step 0 plus F_P/64..F_P/4 (rung 0) and F_P/2, F_P (rung 1), target
F = 2 F_P. For each case: analyze (with the temporal holdout), to_data -> strict JSON, from_data round trip,
render_markdown, write_outputs (with plots); then the checks: any traceback, any NaN/inf in race.json's dict, P(best)
outside [0, 1], a point outside its interval, an interval outside [0, 1], comparable P(best)s not summing to 1, a
recommended arm that is unknown, not a survivor, or not fitted under mode "fitted" without a warning naming it.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import sys
import tempfile
import traceback
import warnings

import numpy as np
from race_output_checks import fin, nonfinite, nonsense
from scipy.special import ndtr

from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.pilot_data import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.report import render_markdown, write_outputs
from flopplan.race.results import ArmInfo, RaceAnalysis

F_P = 1e20
F = 2 * F_P
RUNGS = (F_P / 4, F_P)
GRID = np.concatenate([[0.0], F_P / 4 * 2.0 ** np.arange(-4, 1), [F_P / 2, F_P]])  # 8 points, step 0 first
NAMES = ["g4", "g8", "g16", "g32"]
REPS = 60


def info(name, g):
    return ArmInfo(name, {"group_size": g}, 500_000_000, {"rollout": 0.6, "learning": 0.4, "feedback": 0.0})


def curve(f, a, fmid, r0=0.2, b=1.2):
    f = np.asarray(f, float)
    with np.errstate(divide="ignore"):
        return r0 + (a - r0) / (1 + np.where(f > 0, fmid / np.where(f > 0, f, 1.0), np.inf) ** b)


def scores_for(rng, p, eta):
    """0/1 scores (T, Q) with pass rate p[t] per point, prompts correlated by difficulty eta (Gaussian copula)."""
    z = np.sqrt(0.5) * eta + np.sqrt(0.5) * rng.standard_normal((len(p), eta.size))
    return (ndtr(z) < np.asarray(p)[:, None]).astype(float)


def arm(name, flops, scores):
    """flops: list per seed of arrays; scores: list per seed of (T, Q) arrays."""
    return ArmPilots(name, tuple(SeedRun(s, tuple(EvalPoint(float(f), sc) for f, sc in zip(fs, ss, strict=True)))
                                 for s, (fs, ss) in enumerate(zip(flops, scores, strict=True))))


def normal_arm(rng, name, a, fmid, eta, n_seeds=3, grid=GRID):
    flops = [grid * np.r_[1, 1 + 0.02 * rng.uniform(-1, 1, grid.size - 1)] for _ in range(n_seeds)]
    scores = [scores_for(rng, curve(f, a + 0.02 * rng.standard_normal(), fmid), eta) for f in flops]
    return arm(name, flops, scores)


def race_input(arms, reached=None, budget=F, rungs=RUNGS, names=None, groups=None):
    names = names or [a.name for a in arms]
    groups = groups or [4 * 2**i for i in range(len(names))]
    infos = tuple(info(n, g) for n, g in zip(names, groups, strict=True))
    reached = reached or dict.fromkeys(names, len(rungs) - 1)
    return RaceInput(infos, {"math": PilotData(tuple(arms))}, ("math",), budget, rungs, reached,
                     int(0.2 * budget), "probe")


def base(rng, q=200):
    eta = rng.standard_normal(q)
    return eta, [normal_arm(rng, n, a, fm, eta) for n, a, fm in
                 zip(NAMES, (0.45, 0.55, 0.6, 0.65), (F_P / 20, F_P / 8, F_P / 4, F_P / 2), strict=True)]


def const_arm(name, value, n_seeds=3, q=200, grid=GRID):
    return arm(name, [grid] * n_seeds, [np.full((grid.size, q), float(value))] * n_seeds)


# ---- the cases: each returns a RaceInput ---------------------------------------------------------------------------
def case_flat_one(rng):  # three normal arms and one that never moves off its step-0 reward
    eta, arms = base(rng)
    sc = scores_for(rng, np.full(1, 0.2), eta)[0]
    arms[1] = arm("g8", [GRID] * 3, [np.tile(sc, (GRID.size, 1))] * 3)
    return race_input(arms)


def case_single_point(rng):  # one arm whose seeds each have step 0 and one evaluation (at F_P)
    eta, arms = base(rng)
    g = np.array([0.0, F_P])
    arms[2] = normal_arm(rng, "g16", 0.6, F_P / 4, eta, grid=g)
    return race_input(arms)


def case_single_point_rung0(rng):  # one arm with one evaluation at F_P/4, only rung 0 reached (dropped)
    eta, arms = base(rng)
    g = np.array([0.0, F_P / 4])
    arms[2] = normal_arm(rng, "g16", 0.6, F_P / 4, eta, grid=g)
    return race_input(arms, reached={"g4": 1, "g8": 1, "g16": 0, "g32": 1})


def case_step0_only(rng):  # one arm whose seeds never evaluated after step 0
    eta, arms = base(rng)
    g = np.array([0.0])
    arms[3] = normal_arm(rng, "g32", 0.6, F_P / 4, eta, grid=g)
    return race_input(arms, reached={"g4": 1, "g8": 1, "g16": 1, "g32": 0})


def case_identical(rng):  # every arm the same data
    _eta, arms = base(rng)
    return race_input([ArmPilots(n, arms[2].runs) for n in NAMES])


def case_identical2(rng):  # two arms with the same data, both the best
    _eta, arms = base(rng)
    arms[2] = ArmPilots("g16", arms[3].runs)
    return race_input(arms)


def case_missing_top(rng):  # one seed of the best arm stopped before F_P/2 (no evaluation at rung 1)
    _eta, arms = base(rng)
    runs = list(arms[3].runs)
    runs[0] = SeedRun(runs[0].seed, runs[0].points[:-2])
    arms[3] = ArmPilots("g32", tuple(runs))
    return race_input(arms)


def case_missing_top_all_but_one(rng):  # two of three seeds of the best arm stopped before rung 1
    _eta, arms = base(rng)
    runs = list(arms[3].runs)
    runs[0] = SeedRun(runs[0].seed, runs[0].points[:-2])
    runs[1] = SeedRun(runs[1].seed, runs[1].points[:-3])
    arms[3] = ArmPilots("g32", tuple(runs))
    return race_input(arms)


def case_decreasing(rng):  # rewards fall monotonically from 0.6 for every arm
    eta = rng.standard_normal(200)
    arms = []
    for i, n in enumerate(NAMES):
        flops = [GRID] * 3
        p = 0.6 - (0.05 + 0.03 * i) * np.r_[0, np.arange(1, GRID.size)]
        arms.append(arm(n, flops, [scores_for(rng, np.clip(p, 0.01, 1), eta) for _ in flops]))
    return race_input(arms)


def case_decreasing_exact(rng):  # exactly monotone, deterministic: fraction of prompts solved steps down
    arms = []
    for i, n in enumerate(NAMES):
        k = np.maximum(120 - (10 + 3 * i) * np.arange(GRID.size), 0)
        sc = np.array([np.r_[np.ones(kk), np.zeros(200 - kk)] for kk in k])
        arms.append(arm(n, [GRID] * 3, [sc] * 3))
    return race_input(arms)


def case_seed_spread(rng):  # huge seed spread: seed 0 all 0 after step 0, seed 1 all 1, seed 2 normal
    _eta, arms = base(rng)
    runs = list(arms[3].runs)
    for s, v in ((0, 0.0), (1, 1.0)):
        pts = runs[s].points
        runs[s] = SeedRun(runs[s].seed, (pts[0], *(EvalPoint(p.flops, np.full(200, v)) for p in pts[1:])))
    arms[3] = ArmPilots("g32", tuple(runs))
    return race_input(arms)


def case_dupflops(rng):  # two evaluations at identical FLOPs (a duplicated log line): each seed's F_P/4 twice
    eta, arms = base(rng)
    runs = []
    for r in arms[1].runs:
        pts = list(r.points)
        pts.insert(5, EvalPoint(pts[5].flops, scores_for(rng, [0.4], eta)[0]))
        runs.append(SeedRun(r.seed, tuple(pts)))
    arms[1] = ArmPilots("g8", tuple(runs))
    return race_input(arms)


def case_allsameflops(rng):  # every evaluation of an arm logged at the same FLOPs (a ledger that did not advance)
    _eta, arms = base(rng)
    runs = []
    for r in arms[1].runs:
        pts = [r.points[0], *(EvalPoint(F_P, p.scores) for p in r.points[1:])]
        runs.append(SeedRun(r.seed, tuple(pts)))
    arms[1] = ArmPilots("g8", tuple(runs))
    return race_input(arms)


def case_zeroflops(rng):  # evaluations after step 0 logged at FLOPs 0 (a ledger that never counted)
    _eta, arms = base(rng)
    runs = []
    for r in arms[1].runs:
        runs.append(SeedRun(r.seed, tuple(EvalPoint(0.0, p.scores) for p in r.points)))
    arms[1] = ArmPilots("g8", tuple(runs))
    return race_input(arms)


def case_few_prompts5(rng):
    return race_input(base(rng, q=5)[1])


def case_few_prompts2(rng):
    return race_input(base(rng, q=2)[1])


def case_seed_counts(rng):  # arms with 1, 2, 3 and 5 seeds
    eta = rng.standard_normal(200)
    arms = [normal_arm(rng, n, a, fm, eta, n_seeds=s) for n, a, fm, s in
            zip(NAMES, (0.45, 0.55, 0.6, 0.65), (F_P / 20, F_P / 8, F_P / 4, F_P / 2), (1, 2, 3, 5), strict=True)]
    return race_input(arms)


def case_one_seed_each(rng):  # every arm one seed
    eta = rng.standard_normal(200)
    arms = [normal_arm(rng, n, a, fm, eta, n_seeds=1) for n, a, fm in
            zip(NAMES, (0.45, 0.55, 0.6, 0.65), (F_P / 20, F_P / 8, F_P / 4, F_P / 2), strict=True)]
    return race_input(arms)


def case_one_arm(rng):
    return race_input(base(rng)[1][3:])


def case_budget_below_pilots(rng):  # target F below the largest pilot (F = F_P/2)
    return race_input(base(rng)[1], budget=F_P / 2, rungs=(F_P / 8, F_P / 4))


def case_budget_equal_pilot(rng):  # F = F_P
    return race_input(base(rng)[1], budget=F_P)


def case_far_extrapolation(rng):  # F = 1000 F_P
    return race_input(base(rng)[1], budget=1000 * F_P)


def case_tiny_flops(rng):  # FLOPs around 1e3 (a ledger in the wrong unit)
    _eta, arms = base(rng)
    scaled = [ArmPilots(a.name, tuple(SeedRun(r.seed, tuple(EvalPoint(p.flops * 1e-17, p.scores) for p in r.points))
                                       for r in a.runs)) for a in arms]
    return race_input(scaled, budget=F * 1e-17, rungs=(RUNGS[0] * 1e-17, RUNGS[1] * 1e-17))


def case_midrace(rng):  # no arm reached the top rung yet (every reached = 0), rung-0 pilots only
    eta = rng.standard_normal(200)
    g = GRID[:6]
    arms = [normal_arm(rng, n, a, fm, eta, grid=g) for n, a, fm in
            zip(NAMES, (0.45, 0.55, 0.6, 0.65), (F_P / 20, F_P / 8, F_P / 4, F_P / 2), strict=True)]
    return race_input(arms, reached=dict.fromkeys(NAMES, 0))


def case_best_dropped(rng):  # the clearly best arm was dropped at rung 0 (halving error) and has only rung-0 data
    eta, arms = base(rng)
    arms[0] = normal_arm(rng, "g4", 0.9, F_P / 20, eta, grid=GRID[:6])
    return race_input(arms, reached={"g4": 0, "g8": 1, "g16": 1, "g32": 1})


def case_jump_to_one(rng):  # an arm that goes from 0.2 to exactly 1.0 at the first evaluation and stays
    eta, arms = base(rng)
    sc0 = scores_for(rng, [0.2], eta)[0]
    arms[3] = arm("g32", [GRID] * 3, [np.vstack([sc0, np.ones((GRID.size - 1, 200))])] * 3)
    return race_input(arms)


def case_r0_differs(rng):  # seeds disagree at step 0 (different step-0 evaluations per seed, e.g. sampling)
    eta, arms = base(rng)
    runs = []
    for s, r in enumerate(arms[2].runs):
        runs.append(SeedRun(r.seed, (EvalPoint(0.0, scores_for(rng, [0.05 + 0.3 * s], eta)[0]), *r.points[1:])))
    arms[2] = ArmPilots("g16", tuple(runs))
    return race_input(arms)


def case_two_step0(rng):  # a seed with two step-0 evaluations (a restart logged twice)
    eta, arms = base(rng)
    r = arms[0].runs[0]
    runs = (SeedRun(r.seed, (r.points[0], EvalPoint(0.0, scores_for(rng, [0.5], eta)[0]), *r.points[1:])),
            *arms[0].runs[1:])
    arms[0] = ArmPilots("g4", runs)
    return race_input(arms)


def case_unsorted(rng):  # evaluation points given in reverse order
    _eta, arms = base(rng)
    arms = [ArmPilots(a.name, tuple(SeedRun(r.seed, tuple(reversed(r.points))) for r in a.runs)) for a in arms]
    return race_input(arms)


def case_string_seeds(rng):  # seed ids as strings, same id across arms
    _eta, arms = base(rng)
    arms = [ArmPilots(a.name, tuple(SeedRun(f"s{i}", r.points) for i, r in enumerate(a.runs))) for a in arms]
    return race_input(arms)


def case_noisy_plateau_at_1(rng):  # the best arm saturates at exactly 1.0 by rung 0, others rise
    eta, arms = base(rng)
    flops = [GRID] * 3
    arms[3] = arm("g32", flops, [scores_for(rng, np.minimum(1.0, curve(GRID, 1.4, F_P / 40)), eta) for _ in flops])
    return race_input(arms)


def case_arm_without_data(rng):  # an arm in the design with no pilots on the target (its runs crashed)
    _eta, arms = base(rng)
    return race_input(arms[:3], names=NAMES)


def case_reached_inconsistent(rng):  # reached says rung 1, but the arm's pilots stop at F_P/4
    eta, arms = base(rng)
    arms[3] = normal_arm(rng, "g32", 0.65, F_P / 2, eta, grid=GRID[:6])
    return race_input(arms)


def case_upfront_over_budget(rng):  # an arm whose upfront FLOPs (a learned reward model) exceed the target budget
    _eta, arms = base(rng)
    inp = race_input(arms)
    infos = list(inp.arms)
    infos[3] = ArmInfo("g32", {"group_size": 32, "reward": "prm"}, 500_000_000,
                       {"rollout": 0.5, "learning": 0.3, "feedback": 0.2}, int(3 * F))
    return RaceInput(tuple(infos), inp.targets, inp.fitted_targets, inp.budget_flops, inp.rung_budgets, inp.reached,
                     inp.pilot_flops, inp.command)


def case_heldout_target_other_arms(rng):  # a held-out target scored on 50 prompts, two arms only
    _eta, arms = base(rng)
    _eta2, arms2 = base(rng, q=50)
    inp = race_input(arms)
    return RaceInput(inp.arms, {"math": inp.targets["math"], "code": PilotData(tuple(arms2[:2]))}, ("math",),
                     inp.budget_flops, inp.rung_budgets, inp.reached, inp.pilot_flops, inp.command)


def case_nan_score(rng):  # a NaN score (a failed verifier call) - expect a one-line refusal
    _eta, arms = base(rng)
    sc = arms[0].runs[0].points[2].scores.copy()
    sc[0] = np.nan
    kept = [np.vstack([p.scores for p in r.points]) for r in arms[0].runs][:2]
    first = arms[0].runs[0].points
    broken = np.vstack([*(p.scores for p in first[:2]), sc, *(p.scores for p in first[3:])])
    return race_input([arm("g4", [GRID] * 3, [*kept, broken]), *arms[1:]])


CASES = {k[5:]: v for k, v in dict(globals()).items() if k.startswith("case_")}
for _name, _value in (("all0", 0.0), ("all1", 1.0), ("allhalf", 0.5)):  # every arm constant (0.5: graded, unlearnt)
    CASES[_name] = lambda rng, v=_value: race_input([const_arm(n, v) for n in NAMES])


def summary(an: RaceAnalysis) -> str:
    t = an.target("math")
    r = t.recommendation
    if r is None:
        return "no recommendation"
    pb = "-" if r.p_best is None else f"{r.p_best:.3f}"
    num = "-" if r.reward is None else f"{r.reward:.3f} [{r.lo:.3f}, {r.hi:.3f}]" if fin(r.lo, r.hi) else f"{r.reward}"
    return f"rec {r.arm} mode={r.mode} conf={r.confidence} P(best)={pb} R={num}; {len(t.warnings)} warnings"


def run_case(name, fn):
    rng = np.random.default_rng(sum(map(ord, name)))
    stage = "build input"
    try:
        inp = fn(rng)
        stage = "analyze"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            an = analyze(inp, n_replicates=REPS, seed=1)
        stage = "to_data"
        data = an.to_data()
        found = nonfinite(data)
        stage = "json.dumps(allow_nan=False)"
        try:
            text = json.dumps(data, allow_nan=False)
        except ValueError as exc:
            found.append(f"json: {exc}")
            text = json.dumps(data)
        stage = "from_data round trip"
        RaceAnalysis.from_data(json.loads(text))
        stage = "render_markdown"
        md = render_markdown(an)
        if any(s in md for s in ("nan", " inf", "NaN")):
            found.append("report.md shows nan/inf: " + next(ln for ln in md.splitlines()
                                                         if any(s in ln for s in ("nan", " inf", "NaN")))[:160])
        stage = "write_outputs (plots)"
        with tempfile.TemporaryDirectory() as tmp:
            write_outputs(an, tmp, plots=True)
        stage = "checks"
        bad = found + nonsense(inp, an)
        rw = [f"{w.category.__name__}: {str(w.message)[:100]}" for w in caught
              if not issubclass(w.category, DeprecationWarning)]
        status = "DEFECT" if [b for b in bad if not b.startswith("(note)")] else "ok"
        print(f"[{status}] {name}: {summary(an)}")
        for b in bad[:8]:
            print(f"      - {b}")
        for w in sorted(set(rw))[:4]:
            print(f"      ~ runtime warning {w}")
        return status
    except Exception as exc:
        from flopplan.errors import UserError
        tb = traceback.format_exc().splitlines()
        if isinstance(exc, UserError) and stage in ("build input", "analyze"):
            print(f"[refused] {name} at {stage}: UserError: {str(exc)[:220]}")
            return "refused"
        print(f"[CRASH] {name} at {stage}: {type(exc).__name__}: {str(exc)[:200]}")
        for line in tb[-9:-1]:
            print(f"      {line}")
        return "crash"


def main():
    which = sys.argv[1:] or list(CASES)
    tally = {}
    for name in which:
        s = run_case(name, CASES[name])
        tally[s] = tally.get(s, 0) + 1
    print("tally:", tally)


if __name__ == "__main__":
    main()
