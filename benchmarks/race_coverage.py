"""Coverage of RACE's bootstrap intervals on synthetic truths: how often the 90 % interval of the predicted reward at
2 x the largest pilot budget contains the true value.

    python benchmarks/race_coverage.py --reps 500            # every setting, 500 synthetic data sets each
    python benchmarks/race_coverage.py --reps 100 --boot 200 --settings bent-mid unbent --seed-scheme resample

(On a busy machine OPENBLAS_NUM_THREADS=1 makes it faster: its matrix products are small.)

Each repetition draws a new data set from flopplan.race.curves.synthetic_scores: 3 seeds, 0/1 scores on 200 prompts
(Gaussian-copula prompt difficulty, rho 0.5), step 0 plus 5 evaluation points at F_pilot/16 .. F_pilot, seed-to-seed
noise on A (sd 0.02); then paired_bootstrap refits it --boot times. The truth is the mean over seeds and the prompt
population of R at 2 x F_pilot. Printed per setting and interval method (percentile, basic, bias-corrected): the
coverage over all repetitions (with its binomial standard error) and over the identified ones, the mean interval
width, the bias of the point prediction, the share flagged unidentified, and the seconds taken. The coverage is
that of the whole procedure, fit and identification flag included, on truths the curve family contains (except
"seed-fmid", whose seeds differ in F_mid, so that the seed mean is not a ScaleRL curve).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from flopplan.race.bootstrap import INTERVALS, paired_bootstrap
from flopplan.race.curves import scalerl_curve, synthetic_scores
from flopplan.race.pilot_data import ArmPilots, PilotData

F_PILOT = 1e20


@dataclass(frozen=True)
class Setting:
    name: str
    a: float
    b: float
    f_mid: float  # in units of F_pilot
    r0: float
    seed_sd: float = 0.02
    log_f_mid_sd: float = 0.0
    note: str = ""

    def truth(self, flops: float) -> float:
        """Mean over seeds of R(flops): Gauss-Hermite over ln F_mid when the seeds' F_mid vary."""
        nodes, weights = np.polynomial.hermite_e.hermegauss(41)
        f_mid = self.f_mid * F_PILOT * np.exp(self.log_f_mid_sd * nodes)
        return float(np.sum(weights * scalerl_curve(flops, self.a, self.b, f_mid, self.r0)) / weights.sum())


SETTINGS = (
    Setting("bent-mid", 0.60, 1.5, 1 / 4, 0.20, note="F_mid = F_pilot/4: 89 % of the gain reached at F_pilot"),
    Setting("bent-late", 0.70, 1.2, 1 / 2, 0.15, note="F_mid = F_pilot/2: 70 % of the gain reached"),
    Setting("bent-early", 0.55, 2.0, 1 / 10, 0.25, note="F_mid = F_pilot/10: saturated"),
    Setting("noisy-seeds", 0.60, 1.5, 1 / 4, 0.20, seed_sd=0.04, note="as bent-mid, seed sd on A 0.04"),
    Setting("seed-heavy", 0.60, 1.5, 1 / 4, 0.20, seed_sd=0.08, note="as bent-mid, seed sd on A 0.08: seeds dominate"),
    Setting("seed-fmid", 0.60, 1.5, 1 / 4, 0.20, log_f_mid_sd=0.3, note="seeds' F_mid vary (sd 0.3 in ln)"),
    Setting("unbent", 0.80, 1.0, 30.0, 0.20, note="F_mid = 30 x F_pilot: the curve has not bent"),
)


def run_setting(setting: Setting, reps: int, boot: int, seed: int, level: float, scheme: str) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    target = 2 * F_PILOT
    truth = setting.truth(target)
    points, bounds, identified = [], {m: [] for m in INTERVALS}, []
    start = time.perf_counter()
    for _ in range(reps):
        arm = ArmPilots.from_arrays("arm", *synthetic_scores(rng, a=setting.a, b=setting.b,
                                                             f_mid=setting.f_mid * F_PILOT, r0=setting.r0,
                                                             f_pilot=F_PILOT, seed_sd=setting.seed_sd,
                                                             log_f_mid_sd=setting.log_f_mid_sd))
        res = paired_bootstrap(PilotData((arm,)), [target], n_replicates=boot, level=level, rng=rng,
                               seed_scheme=scheme)
        points.append(res.points[0, 0])
        identified.append(res.arms[0].identified)
        for m in INTERVALS:
            bounds[m].append(res.intervals(m)[0, 0])
    seconds = time.perf_counter() - start
    ident = np.asarray(identified)
    rows = {}
    for m in INTERVALS:
        b = np.asarray(bounds[m])
        inside = (b[:, 0] <= truth) & (truth <= b[:, 1])
        rows[m] = (inside.mean(), inside[ident].mean() if ident.any() else float("nan"), (b[:, 1] - b[:, 0]).mean())
    return {"truth": truth, "bias": float(np.mean(points) - truth), "unidentified": float(1 - ident.mean()),
            "rows": rows, "seconds": seconds, "reps": reps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=500, help="synthetic data sets per setting (default 500)")
    parser.add_argument("--boot", type=int, default=200, help="bootstrap replicates per data set (default 200)")
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--seed-scheme", default="shrunk", choices=["shrunk", "resample"])
    parser.add_argument("--settings", nargs="*", default=[s.name for s in SETTINGS], choices=[s.name for s in SETTINGS])
    args = parser.parse_args()
    print(f"# coverage of {args.level:.0%} intervals of R(2 x F_pilot); {args.reps} data sets x {args.boot} "
          f"bootstrap replicates per setting; 3 seeds, 200 prompts, 5 points + step 0; rng seed {args.seed}")
    print(f"{'setting':<12} {'interval':<10} {'coverage':>14} {'cov|ident':>9} {'width':>7} {'bias':>8} "
          f"{'unident':>7} {'seconds':>8}  truth")
    total = 0.0
    for setting in (s for s in SETTINGS if s.name in args.settings):
        out = run_setting(setting, args.reps, args.boot, args.seed, args.level, args.seed_scheme)
        total += float(out["seconds"])  # type: ignore[arg-type]
        for m, (cov, cov_ident, width) in out["rows"].items():  # type: ignore[attr-defined]
            se = np.sqrt(cov * (1 - cov) / args.reps)
            print(f"{setting.name:<12} {m:<10} {cov:>7.3f} ±{se:.3f} {cov_ident:>9.3f} {width:>7.3f} "
                  f"{out['bias']:>+8.4f} {out['unidentified']:>7.3f} {out['seconds']:>8.1f}  {out['truth']:.4f}")
        print(f"{'':<12} ({setting.note})")
    print(f"total {total:.1f} s")


if __name__ == "__main__":
    main()
