"""How often each halving rule drops the true best arm at F, on the truths of race_misspecification.py.

Per family and repetition: 4 arms drawn as benchmarks/race_misspecification.py draws them, their rung-0 pilots
(3 seeds, evaluations at F_P/4 x 2^-4..2^0), one analysis of those pilots (the promotion's), and every rule keeps
2 of 4 from the same analysis, so the rules differ only in how they rank; the last rule is the runner's with the
design's default room (up to 4: the halving's 2, then every arm the evidence cannot rule out at F), printed with
the mean number of arms it kept. Printed per rule and family: the share
of repetitions whose true best at F = 2 F_P (8x beyond the rung) was not kept, and the mean shortfall of the best
kept arm's truth at F behind the true best.

    python benchmarks/race_halving.py --reps 200 --seed 7           # the five families
    python benchmarks/race_halving.py --reps 100 --holdout-families  # and the held-out shapes
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from race_misspecification import info, pilots
from race_shapes import EVALS, FAMILIES, GENERATORS, HOLDOUT, RUNGS, TARGET

from flopplan.race import promotion
from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.pilot_data import PilotData
from flopplan.race.results import ArmPrediction

Rule = Callable[[dict[str, ArmPrediction], dict[str, ArmPrediction], dict[str, promotion.Trend]], list[str]]


def by(key: Callable[[str], float], names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: (-key(n), n))[:2]


RULES: dict[str, Rule] = {
    "upper bound at F": lambda f, r1, t: by(lambda n: f[n].hi, list(f)),
    "point at F": lambda f, r1, t: by(lambda n: f[n].reward, list(f)),
    "point at next rung": lambda f, r1, t: by(lambda n: r1[n].reward, list(f)),
    "upper bound at next rung": lambda f, r1, t: by(lambda n: r1[n].hi, list(f)),
    "P(best) at next rung": lambda f, r1, t: by(lambda n: r1[n].p_best, list(f)),
    "observed": lambda f, r1, t: by(lambda n: t[n].observed, list(f)),
    "observed, then trend (keep)": lambda f, r1, t: promotion.keep(list(f.values()), 2, t, limit=2),
    "keep, room for 4": lambda f, r1, t: promotion.keep(list(f.values()), 2, t, limit=4),
}


def repetition(family: str, rng: np.random.Generator, n_replicates: int) -> dict[str, tuple[bool, float, int]]:
    r0 = rng.uniform(0.1, 0.3)
    curves = [GENERATORS[family](rng, r0) for _ in range(4)]
    names = [f"g{2 ** (i + 2)}" for i in range(4)]
    truth = {n: float(c(np.array([TARGET]))[0]) for n, c in zip(names, curves, strict=True)}
    eta = rng.standard_normal(200)
    arms = tuple(pilots(rng, n, c, eta, EVALS) for n, c in zip(names, curves, strict=True))
    inp = RaceInput(tuple(info(n, 2 ** (i + 2)) for i, n in enumerate(names)), {"math": PilotData(arms)}, ("math",),
                    TARGET, RUNGS, dict.fromkeys(names, 0), 0, "benchmark")
    t = analyze(inp, n_replicates=n_replicates, seed=int(rng.integers(2**31)), holdout=False).target("math")
    at_f = {p.arm: p for p in t.budgets[-1].predictions}
    nxt = {p.arm: p for p in t.budgets[1].predictions}
    obs = {c.arm: c.observations for c in t.curves}
    trends = {n: promotion.trend(obs[n], at_f[n].ledger_flops) or promotion.Trend(0.0, 0.0) for n in at_f}
    best = max(truth.values())
    out = {}
    for name, rule in RULES.items():
        kept = rule(at_f, nxt, trends)
        out[name] = (best not in [truth[n] for n in kept], best - max(truth[n] for n in kept), len(kept))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100, help="repetitions per family (default 100)")
    parser.add_argument("--replicates", type=int, default=50, help="bootstrap replicates per analysis (default 50)")
    parser.add_argument("--holdout-families", action="store_true", help="also the held-out shapes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    families = [*FAMILIES, *(HOLDOUT if args.holdout_families else ())]
    rows: dict[str, list[dict[str, tuple[bool, float, int]]]] = {}
    for family in families:
        rng = np.random.default_rng([args.seed, list(GENERATORS).index(family)])
        rows[family] = [repetition(family, rng, args.replicates) for _ in range(args.reps)]
    print(f"# {args.reps} repetitions per family, {args.replicates} bootstrap replicates, rng seed {args.seed}: "
          "dropped best (mean shortfall of the best kept arm)")
    print(f"{'rule':<28}" + "".join(f"{f:>18}" for f in families))
    for name in RULES:
        cells = [f"{np.mean([r[name][0] for r in rows[f]]):.3f} ({np.mean([r[name][1] for r in rows[f]]):.4f})"
                 for f in families]
        print(f"{name:<28}" + "".join(f"{c:>18}" for c in cells))
    room = "keep, room for 4"
    counts = [np.mean([r[room][2] for r in rows[f]]) for f in families]
    print(f"{'  arms it kept (mean)':<28}" + "".join(f"{c:>18.2f}" for c in counts))


if __name__ == "__main__":
    main()
