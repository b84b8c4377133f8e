"""RACE against the exhaustive answer: run every arm of a demo grid to the full budget F (what RACE tries not to
pay for), repeat the whole protocol with independent seeds, and report, per evaluation target and repetition, the
rank of RACE's recommended arm in the exhaustive ranking, its regret (the exhaustive best's mean minus the
recommended arm's) beside the seed noise, and the pilots' share of F. The first ``--validate`` repetitions also
run the demo's validating run: the recommended arm's pilot continued to F, and beside the arm's regret the
benchmark reports the run's own: the exhaustive best's mean less what the validating run reached at F.

    python benchmarks/race_regret.py --out race-regret               # tiny-s x G 8, 16 x rule, learned RM at 1.2e12
    python benchmarks/race_regret.py --out race-regret --grid demo   # the demo's grid at 6e12 (110 min here on 2 cores)

Exhaustive runs: each arm at F (less its reward model's upfront training, as the validating run), with
``--exhaustive-seeds`` seeds of their own (1000, 1001, ...), evaluated after their last step on every target;
an arm's value is the mean over those seeds of its final accuracy, and the seed noise printed beside a regret is
its standard error (the two arms' standard errors over their seeds, in quadrature). RACE's repetition r uses
seeds 10 r, 10 r + 1, ...; the held-out target is never fitted: RACE's arm there is the fitted target's
recommendation. Everything resumes: killed and rerun, finished runs are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from flopplan.cli.race import race_base
from flopplan.fileio import atomic_write_json
from flopplan.race.analysis import analyze
from flopplan.race.collect import race_input
from flopplan.race.demo import DEMO, QUICK, REGRET, design, train_reward_model
from flopplan.race.design import RaceDesign
from flopplan.race.report import write_outputs
from flopplan.race.runner import PilotTask, pilot_done, run_pilot, run_race
from flopplan.race.tables import realized_table, regret_table
from flopplan.race.validate import run_validation
from flopplan.report.console import print_tables
from flopplan.runfile import load_evaluations

VALIDATION_FIELDS = ("arm", "continued", "budget_flops", "spent_flops", "within_budget", "overhead_share", "horizon",
                     "checks")
"""What the benchmark keeps of each validating run (validation.json has the rest)."""


def exhaustive(root: Path, race: RaceDesign, seeds: list[int], jobs: int) -> dict[str, dict[str, list[float]]]:
    """Every arm at F, each seed: {target: {arm: [final accuracy per seed]}}."""
    folder = root / "exhaustive"
    tasks = [PilotTask(a.name, s, -1, race.budget_flops - a.upfront_flops, folder / a.name / f"seed{s}")
             for a in race.arms for s in seeds]
    todo = [t for t in tasks if not pilot_done(t.folder, t.budget)]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    print(f"exhaustive: {len(todo)} of {len(tasks)} runs to go, each at {race.budget_flops:.3g} FLOPs", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for done, task in enumerate(pool.map(lambda t: run_pilot(race, folder, t, threads), todo), 1):
            print(f"  {done}/{len(todo)}: {task.arm} seed {task.seed}", flush=True)
    values: dict[str, dict[str, list[float]]] = {t: {} for t in race.targets}
    for task in tasks:
        records = load_evaluations(task.folder)
        for target in race.targets:
            last = [r for r in records if r.target == target][-1]
            values[target].setdefault(task.arm, []).append(last.accuracy)
    return values


def exhaustive_best(by_arm: dict[str, list[float]]) -> tuple[dict[str, float], str]:
    """Each arm's mean final accuracy over its exhaustive seeds, and the best arm (ties: the later name)."""
    means = {a: float(np.mean(v)) for a, v in by_arm.items()}
    return means, max(means, key=lambda a: (means[a], a))


def rows_for(rep: int, analysis, values: dict[str, dict[str, list[float]]]) -> list[dict]:
    fitted = [r for r in analysis.recommendations if r.target in analysis.fitted_targets]
    arm = fitted[0].arm if fitted else None
    out = []
    for target, by_arm in values.items():
        means, best = exhaustive_best(by_arm)
        se = {a: float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0 for a, v in by_arm.items()}
        noise = float(np.hypot(se[best], se[arm])) if arm is not None else se[best]
        rank = None if arm is None else 1 + sum(m > means[arm] for m in means.values())
        out.append({"repetition": rep, "target": target, "fitted": target in analysis.fitted_targets, "arm": arm,
                    "confidence": fitted[0].confidence if fitted else None, "rank": rank, "arms": len(means),
                    "regret": None if arm is None else means[best] - means[arm], "noise": noise, "best": best,
                    "exhaustive": means, "per_seed": by_arm, "pilot_share": analysis.pilot_share})
    return out


def realized_rows(validations: list[dict], values: dict[str, dict[str, list[float]]]) -> list[dict]:
    """Per validating run and target, the run the user gets against the exhaustive answer: the exhaustive best's
    mean over its seeds less the accuracy the run reached at F (one draw: its seed's luck is in it), beside the
    recommended arm's own exhaustive mean and the sd of one of its runs (the spread of its exhaustive seeds)."""
    out = []
    for v in validations:
        for check in v["checks"]:
            by_arm = values[check["target"]]
            means, best = exhaustive_best(by_arm)
            runs = by_arm[v["arm"]]
            out.append({"repetition": v["repetition"], "target": check["target"], "arm": v["arm"],
                        "reached": check["observed"], "arm_mean": means[v["arm"]],
                        "seed_sd": float(np.std(runs, ddof=1)) if len(runs) > 1 else None, "best": best,
                        "best_mean": means[best], "regret": means[best] - check["observed"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--grid", choices=["regret", "demo", "quick"], default="regret")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--exhaustive-seeds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--validate", type=int, default=1, metavar="N",
                        help="run the validating run (the winner's pilot continued to F) of the first N repetitions")
    args = parser.parse_args()
    grid = {"regret": REGRET, "demo": DEMO, "quick": QUICK}[args.grid]
    root: Path = args.out
    root.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    uses_rm = any(r.startswith("orm") for r in grid.rewards)
    reward_model = train_reward_model(root, grid, print) if uses_rm else None
    races = [design(root / f"race{rep}", grid, race_base(), reward_model,
                    f"benchmarks/race_regret.py --grid {args.grid}", first_seed=10 * rep)
             for rep in range(args.repetitions)]
    # the exhaustive sweep first: it does not depend on how RACE promotes or analyses, the races do
    values = exhaustive(root, races[0], [1000 + i for i in range(args.exhaustive_seeds)], args.jobs)
    analyses = []
    validations = []
    for rep, race in enumerate(races):
        folder = root / f"race{rep}"
        run_race(folder, jobs=args.jobs, log=print)
        analysis = analyze(race_input(race, folder, f"flopplan race analyze {folder}"))
        write_outputs(analysis, folder, plots=False)
        analyses.append(analysis)
        print(f"repetition {rep}: {[(r.target, r.arm, r.confidence) for r in analysis.recommendations]}",
              flush=True)
        if rep < args.validate:
            validation = run_validation(folder, analysis, cores=os.cpu_count() or 1)
            validations.append({"repetition": rep, **{k: validation[k] for k in VALIDATION_FIELDS}})
            print(f"repetition {rep} validation: {validations[-1]}", flush=True)
    rows = [row for rep, analysis in enumerate(analyses) for row in rows_for(rep, analysis, values)]
    realized = realized_rows(validations, values)
    atomic_write_json(root / "regret.json", {"grid": args.grid, "rows": rows, "validations": validations,
                                              "realized": realized, "seconds": round(time.monotonic() - start, 1)})
    print_tables([regret_table(rows), *([realized_table(realized)] if realized else [])], [
        f"exhaustive: every arm at F with {args.exhaustive_seeds} seeds; value = mean final accuracy; seed noise = "
        "the standard error of the regret (the best's and RACE's arm's standard errors over their seeds, in "
        "quadrature)",
        "exhaustive means: " + "; ".join(f"{t}: " + ", ".join(f"{a} {np.mean(v):.3f}" for a, v in by.items())
                                         for t, by in values.items()),
        f"took {(time.monotonic() - start) / 60:.1f} min (resumed runs count only the time of this call)"])
    print(json.dumps({"wrote": str(root / "regret.json")}))


if __name__ == "__main__":
    main()
