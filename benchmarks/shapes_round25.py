"""Two held-out shapes written for round 25 (docs/results.md): grids where some arms learn nothing, as the CPU
demo's reward-model arms did (0.10-0.15 from start to end) and as an arm with too small a learning rate does. Run
them as shapes of your own:

    python benchmarks/race_misspecification.py --families --shape benchmarks/shapes_round25.py:some_stuck \
        --shape benchmarks/shapes_round25.py:slow_or_stuck

Each function draws one arm (see benchmarks/shapes_example.py for the contract); F_P = 1e20 is the benchmark's
largest pilot and F = 2 F_P its budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20  # the benchmark's largest pilot
Curve = Callable[[np.ndarray], np.ndarray]


def some_stuck(rng: np.random.Generator, r0: float) -> Curve:
    """Half the arms learn nothing (flat at R0 from start to end); the others rise as the sigmoid control does
    (A 0.45-0.85, slope 1-2.5 in ln F, midpoint F_P / 16 to F_P)."""
    if rng.random() < 0.5:
        return lambda f: np.full(np.shape(f), r0)
    a, b, f_mid = rng.uniform(0.45, 0.85), rng.uniform(1.0, 2.5), F_P * 2.0 ** rng.uniform(-4, 0)
    return lambda f: r0 + (a - r0) * expit(b * (np.log(np.maximum(f, 1e-300)) - np.log(f_mid)))


def slow_or_stuck(rng: np.random.Generator, r0: float) -> Curve:
    """Half the arms learn nothing; the others creep up a straight line in ln F from F_P / 256, 0.005-0.03 per
    e-fold (at most 0.2 by F): small gains beside flat arms, where a rise that noise invents in a flat arm decides."""
    if rng.random() < 0.5:
        return lambda f: np.full(np.shape(f), r0)
    k, f0 = rng.uniform(0.005, 0.03), F_P / 256
    return lambda f: np.clip(r0 + k * np.log(np.maximum(f, 1e-300) / f0), r0, 1.0)
