"""How well RACE's stated P(best) is calibrated when the recommendations of many families are pooled: a reliability
table read from the rows the blind checks write (benchmarks/race_blind_check*.py, one JSON line per repetition).

Per-family figures (stated - right, the issue's bar) say how far the stated P(best) is from the hit rate in one
family; this table says whether, over every recommendation of the families given, a stated 0.8 is right about 80 %
of the time. Each fitted recommendation with a stated P(best) is one (stated, hit) pair; the pairs are binned by the
stated value, and each bin shows the mean stated, the share of hits and its 90 % Clopper-Pearson interval
(scipy.stats.binomtest; the repetitions are independent draws, so the hits in a bin are independent trials, though
the families in a bin are not equally represented). Beside it the same for the anchored P(best) alone and the
curves' own under "cannot tell" (the two a stated P(best) is pooled from, round 30), and per family stated - right
for the three, with how many families are more than 0.10 off.

    python benchmarks/race_pbest_reliability.py DIR [DIR ...] [--reps 100]     # DIR: a check's --out folder

What it does not show: a pooled table can be calibrated while single families are not (their errors of both signs
cancel in a bin); the per-family lines beside it show that.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

BINS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0 + 1e-9)


def read_family(path: Path, reps: int) -> dict[str, np.ndarray]:
    """The fitted recommendations with a stated P(best) among the first ``reps`` rows of one family's file."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:reps]
    rows = [r for r in rows if r.get("mode") == "fitted" and r.get("p_best") is not None]
    stated = np.array([r["p_best"] for r in rows], dtype=float)
    anchored = np.array([r.get("p_best_anchored", r["p_best"]) if r.get("p_best_anchored") is not None
                         else r["p_best"] for r in rows], dtype=float)
    curves = np.array([r.get("p_best_curves") if r.get("p_best_curves") is not None else r["p_best"]
                       for r in rows], dtype=float)
    cannot = np.array([r.get("confidence") == "cannot tell" for r in rows])
    return {"stated": stated, "anchored": anchored, "curves under cannot tell": np.where(cannot, curves, anchored),
            "hit": np.array([bool(r["hit"]) for r in rows], dtype=float)}


def reliability(p: np.ndarray, hit: np.ndarray) -> list[tuple[float, float, int, float, float, float, float]]:
    """Per bin of ``p``: (low, high, count, mean stated, hit rate, its 90 % Clopper-Pearson interval)."""
    out = []
    for low, high in itertools.pairwise(BINS):
        inside = (p >= low) & (p < high)
        n = int(inside.sum())
        if not n:
            continue
        k = int(hit[inside].sum())
        ci = binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact")
        out.append((low, min(high, 1.0), n, float(p[inside].mean()), k / n, ci.low, ci.high))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="folders of a check's rows (rows_FAMILY.jsonl)")
    parser.add_argument("--reps", type=int, default=100, help="the first REPS rows of each family")
    args = parser.parse_args()
    families = {}
    for folder in args.dirs:
        for path in sorted(folder.glob("rows_*.jsonl")):
            families[path.stem.removeprefix("rows_")] = read_family(path, args.reps)
    if not families:
        parser.error("no rows_FAMILY.jsonl in the folders given")
    kinds = ("stated", "anchored", "curves under cannot tell")
    pooled = {k: np.concatenate([f[k] for f in families.values()]) for k in (*kinds, "hit")}
    print(f"{len(families)} families, {len(pooled['hit'])} fitted recommendations")
    for kind in kinds:
        print(f"\n{kind} P(best), pooled: bin, n, mean, hit rate [90 % Clopper-Pearson]")
        for low, high, n, mean, rate, lo, hi in reliability(pooled[kind], pooled["hit"]):
            print(f"  [{low:.1f}, {high:.1f})  {n:5d}  {mean:.3f}  {rate:.3f} [{lo:.3f}, {hi:.3f}]  {mean - rate:+.3f}")
    print("\nper family, mean P(best) - hit rate:")
    print(f"  {'family':<12}" + "".join(f"{k:>26}" for k in kinds))
    errors = {k: [] for k in kinds}
    for name, f in families.items():
        line = f"  {name:<12}"
        for kind in kinds:
            e = float(f[kind].mean() - f["hit"].mean())
            errors[kind].append(e)
            line += f"{e:>+26.3f}"
        print(line)
    for kind in kinds:
        e = np.abs(errors[kind])
        print(f"  {kind}: {int((e > 0.10).sum())} of {len(e)} families more than 0.10 off, mean |error| {e.mean():.3f}")


if __name__ == "__main__":
    main()
