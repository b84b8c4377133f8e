"""Would a recalibration of the stated P(best), learnt from the blind checks, put more families within the issue's
0.10? Each candidate map is fitted on every check but one and scored on the one left out (leave one check out: a
check's five families were written together, so they are held out together), so every figure is out of sample for
the map, as the checks themselves are for round 30's rule.

Candidates, each applied to the stated P(best) p of a fitted recommendation among n comparable arms:
  stated        p as RACE states it (round 30's rule), the baseline;
  shrink        1/n + lam (p - 1/n): pulled toward "any of the n", lam in [0, 1] fitted to the least squared error
                of the families' mean P(best) against their hit rates (the issue's per-family bar);
  platt         sigmoid(a logit(p) + b), fitted by maximum likelihood on the recommendations (Platt scaling;
                scipy.optimize.minimize);
  isotonic      the monotone least-squares map of p to hits (scipy.optimize.isotonic_regression).
Per candidate: the families more than 0.10 off (mean P(best) - hit rate), the mean |error|, and the Brier score of
the recommendations, each over the held-out checks.

    python benchmarks/race_pbest_recalibration.py DIR30 DIR31 DIR32 DIR33 DIR34 DIR35   # each a check's --out

What it does not show: that a map learnt on these checks' families holds for a user's run; the checks share
RACE's protocol (4 arms, 3 seeds, F = 2 F_P), so a map would be learnt for that geometry only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.optimize import isotonic_regression, minimize, minimize_scalar
from scipy.special import expit, logit

BAR = 0.10


def read_check(folder: Path, reps: int) -> dict[str, dict[str, np.ndarray]]:
    """Per family of one check's folder: the stated P(best), the comparable arms' count and the hits of its fitted
    recommendations."""
    out = {}
    for path in sorted(folder.glob("rows_*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:reps]
        rows = [r for r in rows if r.get("mode") == "fitted" and r.get("p_best") is not None]
        out[path.stem.removeprefix("rows_")] = {
            "p": np.array([r["p_best"] for r in rows], dtype=float),
            "n": np.array([max(sum(1 for q in r["preds"] if q.get("comparable")), 1) for r in rows], dtype=float),
            "hit": np.array([bool(r["hit"]) for r in rows], dtype=float)}
    return out


def _shrink(families: list[dict[str, np.ndarray]]):
    def error(lam: float) -> float:
        return sum(float(np.mean(1 / f["n"] + lam * (f["p"] - 1 / f["n"])) - f["hit"].mean()) ** 2
                   for f in families)
    lam = float(minimize_scalar(error, bounds=(0.0, 1.0), method="bounded").x)
    return lambda f: 1 / f["n"] + lam * (f["p"] - 1 / f["n"])


def _platt(families: list[dict[str, np.ndarray]]):
    z = logit(np.clip(np.concatenate([f["p"] for f in families]), 1e-3, 1 - 1e-3))
    y = np.concatenate([f["hit"] for f in families])

    def loss(ab: np.ndarray) -> float:
        q = np.clip(expit(ab[0] * z + ab[1]), 1e-9, 1 - 1e-9)
        return -float(np.sum(y * np.log(q) + (1 - y) * np.log(1 - q)))
    a, b = minimize(loss, np.array([1.0, 0.0]), method="Nelder-Mead").x
    return lambda f: expit(a * logit(np.clip(f["p"], 1e-3, 1 - 1e-3)) + b)


def _isotonic(families: list[dict[str, np.ndarray]]):
    p = np.concatenate([f["p"] for f in families])
    y = np.concatenate([f["hit"] for f in families])
    order = np.argsort(p, kind="stable")
    xs, fitted = p[order], isotonic_regression(y[order]).x
    return lambda f: np.interp(f["p"], xs, fitted)


CANDIDATES = {"stated": lambda families: (lambda f: f["p"]), "shrink": _shrink, "platt": _platt,
              "isotonic": _isotonic}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="each check's --out folder (rows_FAMILY.jsonl)")
    parser.add_argument("--reps", type=int, default=100, help="the first REPS rows of each family")
    args = parser.parse_args()
    checks = [read_check(folder, args.reps) for folder in args.dirs]
    if sum(map(len, checks)) == 0 or len(checks) < 2:
        parser.error("give at least two checks' folders with rows_FAMILY.jsonl")
    print(f"{len(checks)} checks, {sum(map(len, checks))} families, leave one check out")
    print(f"  {'candidate':<10} {'families > 0.10 off':>20} {'mean |error|':>13} {'Brier':>7}   per family (held out)")
    for name, fit in CANDIDATES.items():
        errors, brier, lines = [], [], []
        for i, check in enumerate(checks):
            mapped = fit([f for j, c in enumerate(checks) if j != i for f in c.values()])
            for family, f in check.items():
                q = mapped(f)
                errors.append(float(q.mean() - f["hit"].mean()))
                brier.append(float(np.mean((q - f["hit"]) ** 2)))
                lines.append(f"{family} {errors[-1]:+.3f}")
        e = np.abs(errors)
        print(f"  {name:<10} {int((e > BAR).sum()):>20d} {e.mean():>13.3f} {np.mean(brier):>7.3f}   "
              + ", ".join(lines))


if __name__ == "__main__":
    main()
