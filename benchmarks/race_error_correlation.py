"""How much of the arms' errors at F is common to the arms of one race, against what RACE's replicates assume.

Per repetition of the blind checks' protocol (benchmarks/race_blind_check.py and the families of rounds 31 and 32,
same seeds and streams as the check), after the analysis of the whole grid: (a) the mean correlation, over pairs of
arms, of the calibrated replicates at F (the draws the curves' P(best) is read from; the mixture's before the
conformal stretch beside it: the stretch scales each arm's draws about its point and keeps their correlation), and
(b) the correlation of the arms' standardised errors z = (truth - point) / sd, sd the 90 % interval's half-width /
1.645, estimated over the repetitions as mean(z_i z_j) / mean(z^2) over pairs of arms of one repetition. Where (b)
is above (a), part of what the pilots cannot show is shared by the arms (the same task and prompts, the same
misreading of the curve's shape), the differences between arms are surer than independent draws say, and the
curves' P(best) is pulled toward 1 / (number of arms). A diagnostic, not a decision: it reads the ensemble's draws by
wrapping flopplan.race.ensemble.model_average.

``--rows DIR`` reads a check's rows instead (race_blind_check.py --out DIR) and asks what a correlation would do to
the curves' P(best): per fitted recommendation, the pick's chance to be best among the finalists when their
predictions at F are Gaussian (each arm's point, sd from its 90 % interval) with a common correlation rho, beside the
curves' own P(best) (which rho = 0.15 tracks within 0.03) and the hit rate.

    python benchmarks/race_error_correlation.py --families zeroadv creep lrsched --reps 30 --seed 6262
    python benchmarks/race_error_correlation.py --rows race-blind-check --rho 0 0.15 0.3 0.5
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import race_blind_check as rbc
import race_blind_check_round32  # noqa: F401  (registers rounds 31's and 32's families, in their order)

from flopplan.race import analysis, ensemble

_CAPTURED: list[tuple[ensemble.EnsembleResult, list[int]]] = []
_MODEL_AVERAGE = ensemble.model_average


def _capture(*args, **kwargs):  # type: ignore[no-untyped-def]
    result = _MODEL_AVERAGE(*args, **kwargs)
    _CAPTURED.append((result, list(kwargs.get("target_col", args[5]))))
    return result


def _pair_corr(draws: np.ndarray) -> list[float]:
    return [float(np.corrcoef(draws[i], draws[j])[0, 1]) for i, j in itertools.combinations(range(len(draws)), 2)
            if draws[i].std() > 0 and draws[j].std() > 0]


def measure(family: str, reps: int, seed: int, n_replicates: int) -> tuple[float, float, float, int]:
    """(replicates' correlation, the mixture's, the errors' correlation, repetitions read) for one family."""
    idx = list(rbc.FAMILIES).index(family)
    reps_corr, mix_corr, products, squares, n = [], [], [], [], 0
    for rep in range(reps):
        _CAPTURED.clear()
        row = rbc.repetition(family, np.random.default_rng([seed, idx, rep]), n_replicates)
        if "preds" not in row or not _CAPTURED:
            continue
        n += 1
        result, cols = _CAPTURED[-1]  # the analysis of the whole grid
        arms = range(result.replicates.shape[0])
        reps_corr += _pair_corr(np.array([result.replicates[i, cols[i]] for i in arms]))
        mix_corr += _pair_corr(np.array([result.mixtures[i, cols[i]] for i in arms]))
        z = [(row["truth"][p["arm"]] - p["r"]) / ((p["hi"] - p["lo"]) / 2 / 1.645)
             for p in row["preds"] if p.get("usable") and p["hi"] > p["lo"]]
        products += [z[i] * z[j] for i, j in itertools.combinations(range(len(z)), 2)]
        squares += [x * x for x in z]
    return float(np.mean(reps_corr)), float(np.mean(mix_corr)), float(np.mean(products) / np.mean(squares)), n


def gaussian_p_best(rows_dir: Path, rhos: list[float], draws: int = 4000) -> None:
    """Per family of ``rows_dir``: the hit rate, and the curves' P(best) and the Gaussian one at each rho, each less
    the hit rate, over the fitted recommendations with two or more usable finalists."""
    rng = np.random.default_rng(0)
    heads = " ".join(f"{'rho ' + format(r, 'g'):>8}" for r in rhos)
    print(f"{'family':<11} {'n':>3} {'hit':>5} {'curves':>7} {heads}")
    for path in sorted(rows_dir.glob("rows_*.jsonl")):
        found: dict[float, list[float]] = {r: [] for r in rhos}
        curves, hits = [], []
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("mode") != "fitted" or row.get("p_best") is None or row.get("p_best_curves") is None:
                continue
            preds = {p["arm"]: p for p in row["preds"] if p.get("usable")}
            pool = [a for a in row["pool"] if a in preds]
            if row["rec_arm"] not in pool or len(pool) < 2:
                continue
            mu = np.array([preds[a]["r"] for a in pool])
            sd = np.array([(preds[a]["hi"] - preds[a]["lo"]) / 2 / 1.645 for a in pool])
            common, own = rng.standard_normal((draws, 1)), rng.standard_normal((draws, len(pool)))
            for rho in rhos:
                x = mu + sd * (np.sqrt(rho) * common + np.sqrt(1 - rho) * own)
                found[rho].append(float(np.mean(np.argmax(x, axis=1) == pool.index(row["rec_arm"]))))
            curves.append(row["p_best_curves"])
            hits.append(float(row["hit"]))
        if hits:
            hit = float(np.mean(hits))
            print(f"{path.stem[5:]:<11} {len(hits):>3} {hit:>5.3f} {np.mean(curves) - hit:>+7.3f} "
                  + " ".join(f"{np.mean(found[r]) - hit:>+8.3f}" for r in rhos))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=list(rbc.FAMILIES), choices=list(rbc.FAMILIES))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--seed", type=int, default=6262)
    ap.add_argument("--rows", type=Path, help="a check's rows folder: the Gaussian P(best) at each --rho instead")
    ap.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.15, 0.3, 0.5])
    args = ap.parse_args()
    if args.rows is not None:
        gaussian_p_best(args.rows, args.rho)
        return
    analysis.ensemble.model_average = _capture  # the analysis calls it through the module
    print(f"{'family':<11} {'reps':>4} {'replicates':>10} {'mixture':>8} {'errors':>7}")
    for family in args.families:
        r, m, e, n = measure(family, args.reps, args.seed, args.replicates)
        print(f"{family:<11} {n:>4} {r:>+10.2f} {m:>+8.2f} {e:>+7.2f}", flush=True)


if __name__ == "__main__":
    main()
