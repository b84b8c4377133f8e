"""A held-out shape written for round 39 (docs/results.md): arms that fall to 0 on every prompt at once and stay
there until a take-off, as the CPU demo's tiny-l + rule arm did (1 prompt of 100 solved on one seed at step 0, 0 at
every evaluation of its pilots, 0.93-1.00 at F in the exhaustive sweep), beside arms that rise from the same start.
Zero-reward plateaus before a sudden rise are what small policies show on tasks they cannot yet answer in the
expected form. Run it as a shape of your own:

    python benchmarks/race_misspecification.py --families --shape benchmarks/shapes_round39.py:floored_takeoff

The function draws one arm (see benchmarks/shapes_example.py for the contract); F_P = 1e20 is the benchmark's
largest pilot and F = 2 F_P its budget. The start R0 is the shape's own (0.002-0.01: a prompt or two of 200), not
the benchmark's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20  # the benchmark's largest pilot
Curve = Callable[[np.ndarray], np.ndarray]


def floored_takeoff(rng: np.random.Generator, r0: float) -> Curve:
    """Half the arms drop to 0 after step 0 and take off at F_t (F_P / 2 to 2 F_P, so mostly after the pilots) to
    A (0.6-0.95) as A (1 - e^(-k ln(F / F_t))), k 1.5-4; the others rise from the start as a sigmoid in ln F (A
    0.3-0.7, slope 1-2.5, midpoint F_P / 16 to F_P)."""
    start = rng.uniform(0.002, 0.01)
    if rng.random() < 0.5:
        a, k, f_t = rng.uniform(0.6, 0.95), rng.uniform(1.5, 4.0), F_P * 2.0 ** rng.uniform(-1, 1)

        def floored(f: np.ndarray) -> np.ndarray:
            x = np.log(np.maximum(f, 1e-300) / f_t)
            return np.where(f <= 0, start, np.where(x > 0, a * (1 - np.exp(-k * np.maximum(x, 0.0))), 0.0))

        return floored
    a, b, f_mid = rng.uniform(0.3, 0.7), rng.uniform(1.0, 2.5), F_P * 2.0 ** rng.uniform(-4, 0)
    return lambda f: start + (a - start) * expit(b * (np.log(np.maximum(f, 1e-300)) - np.log(f_mid)))
