"""A shape of your own for ``benchmarks/race_misspecification.py --shape``: what RACE's decisions are worth if your
learning curves look like this. A shape is a function of a random generator and the arms' starting reward R0 that
returns a curve: FLOPs (a numpy array) -> mean reward in [0, 1], equal to R0 at 0 FLOPs. The benchmark's largest
pilot is at F_P = 1e20 FLOPs and the budget F at 2 F_P; each call draws one arm, so draw its parameters from ``rng``.

    python benchmarks/race_misspecification.py --families --shape benchmarks/shapes_example.py:hacked_after_pilots
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20  # the benchmark's largest pilot


def hacked_after_pilots(rng: np.random.Generator, r0: float) -> Callable[[np.ndarray], np.ndarray]:
    """A sigmoid rise in ln F, then reward hacking that sets in between F_P/2 and 4 F_P and takes a share (up to
    half) of the reward gained: a collapse that mostly begins after the largest pilot, which no pilot can show
    (RACE's intervals say so in what they do not show)."""
    a, slope, f_mid = rng.uniform(0.5, 0.9), rng.uniform(1.0, 2.5), F_P * 2.0 ** rng.uniform(-4, 0)
    share, f_hack = rng.uniform(0.0, 0.5), F_P * 2.0 ** rng.uniform(-1, 2)

    def curve(f: np.ndarray) -> np.ndarray:
        ln_f = np.log(np.maximum(f, 1e-300))
        gain = (a - r0) * expit(slope * (ln_f - np.log(f_mid)))
        return r0 + gain * (1 - share * expit(4.0 * (ln_f - np.log(f_hack))))

    return curve
