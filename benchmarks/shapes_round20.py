"""Three held-out shapes written for round 20 (docs/results.md) before any figure was measured on them, from laws
in the literature that no rule of RACE was tuned on. Run them as shapes of your own:

    python benchmarks/race_misspecification.py --families --shape benchmarks/shapes_round20.py:richards \
        --shape benchmarks/shapes_round20.py:weibull --shape benchmarks/shapes_round20.py:overoptimised

Each function draws one arm (see benchmarks/shapes_example.py for the contract); F_P = 1e20 is the benchmark's
largest pilot and F = 2 F_P its budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

F_P = 1e20  # the benchmark's largest pilot
Curve = Callable[[np.ndarray], np.ndarray]


def richards(rng: np.random.Generator, r0: float) -> Curve:
    """Richards' generalised logistic in ln F (Richards, J. Exp. Bot. 10:290, 1959): R0 + (A - R0) /
    (1 + nu exp(-b (ln F - ln F_m)))^(1 / nu). The shape parameter nu (0.25-4) makes the rise asymmetric either
    way (nu = 1 is the logistic RACE's sigmoid family fits, nu -> 0 the Gompertz), so the bend before and after
    the midpoint differ; midpoints from F_P / 16 to 2 F_P."""
    a, b, nu = rng.uniform(0.45, 0.85), rng.uniform(1.0, 2.5), 2.0 ** rng.uniform(-2, 2)
    f_m = F_P * 2.0 ** rng.uniform(-4, 1)

    def curve(f: np.ndarray) -> np.ndarray:
        z = -b * (np.log(np.maximum(f, 1e-300)) - np.log(f_m))
        return r0 + (a - r0) * np.exp(-np.logaddexp(0.0, np.log(nu) + z) / nu)

    return curve


def weibull(rng: np.random.Generator, r0: float) -> Curve:
    """A stretched (or compressed) exponential approach to A in F: R0 + (A - R0) (1 - exp(-(F / lambda)^k)), k in
    0.3-1.5 (k = 1 is the exponential approach; k < 1 a long tail, k > 1 a late, sharp bend), lambda from F_P / 8
    to 8 F_P."""
    a, k, lam = rng.uniform(0.45, 0.85), rng.uniform(0.3, 1.5), F_P * 2.0 ** rng.uniform(-3, 3)
    return lambda f: r0 + (a - r0) * (1 - np.exp(-((np.maximum(f, 0.0) / lam) ** k)))


def overoptimised(rng: np.random.Generator, r0: float) -> Curve:
    """Reward-model over-optimisation as Gao, Schulman and Hilton measured it for RL (arXiv 2210.10760): the gold
    reward against d = sqrt(KL) follows d (alpha - beta ln d), a rise, a peak and a fall. Here d grows as a power
    of F, d = (F / F_pk)^g with g in 0.3-1, so the gold reward is R0 + h d (1 - ln d): its peak, h above R0 (0.15-0.5),
    at F_pk from F_P / 4 to 8 F_P, and a fall after it that is faster than any decline the pilots could show."""
    h, g, f_pk = rng.uniform(0.15, 0.5), rng.uniform(0.3, 1.0), F_P * 2.0 ** rng.uniform(-2, 3)

    def curve(f: np.ndarray) -> np.ndarray:
        d = (np.maximum(f, 0.0) / f_pk) ** g
        gain = np.where(d > 0, d * (1 - np.log(np.where(d > 0, d, 1.0))), 0.0)
        return np.clip(r0 + h * gain, 0.0, 1.0)

    return curve
