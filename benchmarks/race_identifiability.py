"""Two truths the pilots cannot tell apart, and what that does to any stated P(best).

A pair of truths draws the same random numbers: each arm a rise and a ceiling; the capped truth stops at the
ceiling, its twin goes on (to a pass rate of 1). Every repetition runs the protocol of
benchmarks/race_misspecification.py (4 arms, 3 seeds, 200 prompts, rungs F_P/4 and F_P, the halving, F = 2 F_P) on
both truths from the same generator state. Where no arm reaches its ceiling at any pilot evaluation, the two
repetitions' pilots are equal bit for bit (checked: a digest of every evaluation), and so are everything RACE
computes from them: the halving, the pick, the finalists and the stated P(best). Only the truth at F differs.

On those repetitions any rule that reads only the pilots states one number per repetition for both truths. If the
pick is the best finalist in a share h_c of them under the capped truth and h_u under its twin, the rule's mean
stated P(best) s is off by s - h_c on one and s - h_u on the other, so the larger of the two gaps is at least
|h_u - h_c| / 2, whatever the rule. Printed per pair: the share of repetitions with equal pilots; on those, RACE's
mean stated P(best), both hit rates and that least possible gap; on the other repetitions (some arm's ceiling
reached at a pilot evaluation, in at least one seed), RACE's stated P(best) and hit rate on the capped truth; on all
repetitions, stated and hit rate per truth; where the pick's own ceiling shows in its pilots (its pilots differ
between the two truths), the share, stated P(best) and hit rate, and the signal a rule would have to read there: the
pick's last gain over the one before (race_misspecification.bend), against where its ceiling does not show; and,
without pilots or RACE, the same law noise-free (:func:`noise_free`).

    python benchmarks/race_identifiability.py                     # every pair, 200 repetitions, seed 2026
    python benchmarks/race_identifiability.py --pairs linear-F --reps 50 --seed 7

Pairs: ``linear-F`` (the held-out shape of that name: a straight rise in F, slope U(0.05, 0.4) per F_P, ceiling
U(0.5, 0.9)) and ``ceiling`` (the held-out power law in F to a hard ceiling U(0.45, 0.9), reached anywhere from
F_P/4 to 8 F_P), each with its uncapped twin; ``tie`` (the sigmoid control, and a twin that leaves it after every
pilot evaluation to tie with the other arms at F within 0.01: :func:`tie_pair`); ``collapse`` (the sigmoid
control, and a twin half of whose arms collapse after every pilot evaluation: :func:`collapse_pair`). For ``tie``
and ``collapse`` the first truth plays the capped one's part in the columns.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from race_misspecification import repetition
from race_shapes import F_P, GENERATORS, TARGET, Curve, control

Draw = Callable[[np.random.Generator, float], tuple[Curve, Curve]]


def linear_pair(rng: np.random.Generator, r0: float) -> tuple[Curve, Curve]:
    slope, cap = rng.uniform(0.05, 0.4), rng.uniform(0.5, 0.9)  # the draws of race_shapes.linear_in_f
    return (lambda f: np.minimum(r0 + slope * np.maximum(f, 0.0) / F_P, cap),
            lambda f: np.minimum(r0 + slope * np.maximum(f, 0.0) / F_P, 1.0))


def power_pair(rng: np.random.Generator, r0: float) -> tuple[Curve, Curve]:
    alpha, cap = rng.uniform(0.15, 0.5), rng.uniform(0.45, 0.9)  # the draws of race_shapes.ceiling
    f_cap = F_P * 2.0 ** rng.uniform(-2, 3)
    return (lambda f: r0 + (cap - r0) * np.minimum((np.maximum(f, 0.0) / f_cap) ** alpha, 1.0),
            lambda f: np.minimum(r0 + (cap - r0) * (np.maximum(f, 0.0) / f_cap) ** alpha, 1.0))


SPLIT = 1.5 * F_P
"""Where the ``tie`` pair's twin leaves its sigmoid: beyond every pilot evaluation but a seed's shift of 3.9 sd
(F_P x 1.01 jitter x e^(0.1 N), race_misspecification.pilots), which the digest check catches."""


def smoothstep(f: np.ndarray, start: float, end: float) -> np.ndarray:
    """0 up to ``start``, 1 from ``end``, between them 3u^2 - 2u^3 of u = the share of the way in ln F: a change
    that begins after every pilot evaluation and ends by ``end``, smooth at both ends."""
    u = np.clip((np.log(np.maximum(f, 1e-300)) - np.log(start)) / (np.log(end) - np.log(start)), 0.0, 1.0)
    return u * u * (3 - 2 * u)


def tie_pair(rng: np.random.Generator, r0: float) -> tuple[Curve, Curve]:
    """The sigmoid control (race_shapes.control's draws) and a twin equal to it up to :data:`SPLIT`, then moving
    smoothly (a smoothstep in ln F) to a level shared by every arm of the repetition, r0 + 0.55, plus U(0, 0.01)
    of its own: the arms tie at F within 0.01, as round 26's ``tied`` and round 28's ``wiggletie`` families do,
    after pilots no different from the control's."""
    base = control(rng, r0)
    level = r0 + 0.55 + rng.uniform(0.0, 0.01)
    at_f = float(base(np.array([TARGET]))[0])

    def twin(f: np.ndarray) -> np.ndarray:
        return base(f) + (level - at_f) * smoothstep(f, SPLIT, TARGET)

    return base, twin


def collapse_pair(rng: np.random.Generator, r0: float) -> tuple[Curve, Curve]:
    """The sigmoid control and a twin equal to it up to :data:`SPLIT`; there, with probability 1/2, the twin
    collapses (a smoothstep in ln F, over to 1.9 F_P) by a share U(0.4, 0.9) of its gain over r0, as round 30's
    ``cliff`` family does after the largest pilot; otherwise it stays the control. Both draw every number."""
    base = control(rng, r0)
    falls, share = rng.random() < 0.5, rng.uniform(0.4, 0.9)
    end = 1.9 * F_P

    def twin(f: np.ndarray) -> np.ndarray:
        return base(f) - falls * share * (base(f) - r0) * smoothstep(f, SPLIT, end)

    return base, twin


PAIRS: dict[str, Draw] = {"linear-F": linear_pair, "ceiling": power_pair, "tie": tie_pair, "collapse": collapse_pair}
CEILINGS = ("linear-F", "ceiling")
"""The pairs whose first truth stops at a ceiling its twin goes past (the lines on the ceiling's signal)."""


def paired(pair: str, seed: list[int], n_replicates: int) -> tuple[dict[str, object], dict[str, object]]:
    """One repetition on each truth of ``pair`` from the same generator state."""
    rows = []
    for side in (0, 1):
        name = f"{pair}/{side}"
        GENERATORS[name] = lambda rng, r0, side=side: PAIRS[pair](rng, r0)[side]
        try:
            rows.append(repetition(name, np.random.default_rng(seed), "predicted", n_replicates))
        finally:
            del GENERATORS[name]
    return rows[0], rows[1]


def noise_free(pair: str, seed: int, n: int = 20_000) -> tuple[float, float, float, float]:
    """The mechanism without pilots or RACE, on ``n`` draws of the pair's law: the share of repetitions in which
    some arm's ceiling shows at its largest pilot (its capped and uncapped curves differ at F_P times the largest
    of three seeds' shifts e^(0.1 N) and the 1 % jitter, as race_misspecification.pilots draws them); among those,
    how often the arm highest at F_P (no noise) is one whose ceiling shows; how often it is the best at F = 2 F_P
    among those repetitions and among the others."""
    rng = np.random.default_rng([seed, 99])
    shows, leader_capped, leader_best = [], [], []
    for _ in range(n):
        r0 = rng.uniform(0.1, 0.3)
        arms = [PAIRS[pair](rng, r0) for _ in range(4)]
        reach = np.array([F_P * 1.01 * np.exp(0.1 * rng.standard_normal(3)).max()])
        seen = np.array([capped(reach)[0] != twin(reach)[0] for capped, twin in arms])
        at_p = [capped(np.array([F_P]))[0] for capped, _ in arms]
        at_f = [capped(np.array([2 * F_P]))[0] for capped, _ in arms]
        lead = int(np.argmax(at_p))
        shows.append(seen.any())
        leader_capped.append(seen[lead])
        leader_best.append(at_f[lead] >= max(at_f))
    shown, capped_lead, best = np.array(shows), np.array(leader_capped), np.array(leader_best)
    return float(shown.mean()), float(capped_lead[shown].mean()), float(best[shown].mean()), float(best[~shown].mean())


def mean(rows: list[dict[str, object]], key: str, stat: Callable[[list[float]], object] = np.mean) -> float:
    """``stat`` (the mean unless told) of ``key`` over the rows that have it; nan over none."""
    values = [float(r[key]) for r in rows if r[key] is not None]  # type: ignore[arg-type]
    return float(stat(values)) if values else float("nan")  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="paired repetitions per pair (default 200)")
    parser.add_argument("--replicates", type=int, default=100, help="bootstrap replicates per analysis")
    parser.add_argument("--pairs", nargs="*", choices=list(PAIRS), default=list(PAIRS))
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    print(f"# {args.reps} paired repetitions per pair, {args.replicates} bootstrap replicates, rng seed {args.seed}; "
          "the protocol of race_misspecification.py, F = 2 F_P; P(b) and right over fitted recommendations")
    print(f"{'pair':<9} {'equal':>6} | {'P(b)':>6} {'r_cap':>6} {'r_twin':>6} {'bound':>6} | {'P(b)c':>6} "
          f"{'r_cap':>6} | {'P(b)c':>6} {'r_cap':>6} {'P(b)t':>6} {'r_twin':>6}")
    print(f"{'':<9} {'':>6} | {'equal pilots':<27} | {'other':<13} | all")
    for pair in args.pairs:
        start = time.perf_counter()
        both = [paired(pair, [args.seed, list(PAIRS).index(pair), i], args.replicates) for i in range(args.reps)]
        same = [(c, t) for c, t in both if c["pilots"] == t["pilots"]]
        assert all(c["stated"] == t["stated"] for c, t in same), "equal pilots, different analyses"
        caps, twins = [c for c, _ in same], [t for _, t in same]
        other = [c for c, t in both if c["pilots"] != t["pilots"]]
        h_c, h_u = mean(caps, "right"), mean(twins, "right")
        print(f"{pair:<9} {len(same) / len(both):>6.3f} | {mean(caps, 'stated'):>6.3f} {h_c:>6.3f} {h_u:>6.3f} "
              f"{abs(h_u - h_c) / 2:>6.3f} | {mean(other, 'stated'):>6.3f} {mean(other, 'right'):>6.3f} | "
              f"{mean([c for c, _ in both], 'stated'):>6.3f} "
              f"{mean([c for c, _ in both], 'right'):>6.3f} {mean([t for _, t in both], 'stated'):>6.3f} "
              f"{mean([t for _, t in both], 'right'):>6.3f}   ({time.perf_counter() - start:.0f} s)", flush=True)
        if pair not in CEILINGS:
            continue
        shows = [(c, c["arm_pilots"][c["pick"]] != t["arm_pilots"][c["pick"]])  # type: ignore[index]
                 for c, t in both if c["pick"] is not None]  # the pick's own pilots differ: its ceiling shows
        own, rest = [c for c, s in shows if s], [c for c, s in shows if not s]
        print(f"{'':<9} the pick's own ceiling in its pilots: {len(own) / len(both):.3f} of the repetitions, stated "
              f"{mean(own, 'stated'):.3f}, right {mean(own, 'right'):.3f}, its last gain over the one before "
              f"{mean(own, 'pick_bend', np.median):.2f} (median; {mean(rest, 'pick_bend', np.median):.2f} where its "
              "ceiling does not show)", flush=True)
        shown, capped_lead, best_shown, best_hidden = noise_free(pair, args.seed)
        print(f"{'':<9} noise-free, 20,000 draws: a ceiling shows at the largest pilot in {shown:.3f}; there the "
              f"leader at F_P is an arm whose ceiling shows in {capped_lead:.3f}, and the best at F in "
              f"{best_shown:.3f} ({best_hidden:.3f} where no ceiling shows)", flush=True)


if __name__ == "__main__":
    main()
