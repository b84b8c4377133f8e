"""Held-out shapes written for round 41 (docs/results.md): pilots that fall, with and without the other arms falling
after them. They measure what the analysis' "another arm fell" rule (flopplan/race/grid_fall.py) buys where a fall
comes from the shared set-up and reaches each arm at its own time, and what it costs where the fall is one arm's
own. Neither is round 40's ``lenblow`` (the case the rule was written for): the falls here are placed in ln F per
arm, not tied to a group size, and they are drawn independently of the arm's rise. Run them as shapes of your own:

    python benchmarks/race_misspecification.py --families control \\
        --shape benchmarks/shapes_round41.py:own_fall --shape benchmarks/shapes_round41.py:staggered_fall

The functions draw one arm each (see benchmarks/shapes_example.py for the contract); F_P = 1e20 is the benchmark's
largest pilot and F = 2 F_P its budget; R0 is the benchmark's (0.1-0.3, shared by the arms).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20  # the benchmark's largest pilot
Curve = Callable[[np.ndarray], np.ndarray]


def _ln(f: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(f, 1e-300))


def _rise(rng: np.random.Generator, r0: float) -> Curve:
    """A sigmoid rise in ln F from R0 to A (0.4-0.9), slope 1-2.5, midpoint F_P / 16 to F_P."""
    a, slope, f_mid = rng.uniform(0.4, 0.9), rng.uniform(1.0, 2.5), F_P * 2.0 ** rng.uniform(-4, 0)
    return lambda f: r0 + (a - r0) * expit(slope * (_ln(f) - np.log(f_mid)))


def own_fall(rng: np.random.Generator, r0: float) -> Curve:
    """The cost case. One arm in four is unstable on its own (a learning rate or an update count too high for it):
    it rises as the others do, then diverges at F_d (F_P / 16 to F_P / 2, within the pilots) to a floor of 0-0.02
    within a factor of about 2 in FLOPs, and never recovers. The other arms rise as sigmoids and never fall."""
    rise = _rise(rng, r0)
    if rng.random() >= 0.25:
        return rise
    f_d, floor = F_P * 2.0 ** rng.uniform(-4, -1), rng.uniform(0.0, 0.02)

    def diverged(f: np.ndarray) -> np.ndarray:
        cut = expit(6.0 * (_ln(f) - np.log(f_d)))
        return np.where(f <= 0, r0, rise(f) * (1 - cut) + floor * cut)

    return diverged


def staggered_fall(rng: np.random.Generator, r0: float) -> Curve:
    """The case the rule is for. Every arm rises as a sigmoid and is cut at F_c, log-uniform from F_P / 8 to 8 F_P
    (so for some arms within the pilots, for others between the pilots and F or after F), to a floor of 0-0.02
    over a factor of about 2 in FLOPs: a shared mechanism (answers outgrowing the length limit, a reward the policy
    learns to game) that each arm reaches after its own number of updates. Half the arms repair it at F_c times
    2-8 (an overlong penalty that takes hold); the others stay cut."""
    rise = _rise(rng, r0)
    f_c, floor = F_P * 2.0 ** rng.uniform(-3, 3), rng.uniform(0.0, 0.02)
    f_r = f_c * 2.0 ** rng.uniform(1, 3) if rng.random() < 0.5 else np.inf

    def cut(f: np.ndarray) -> np.ndarray:
        d = expit(6.0 * (_ln(f) - np.log(f_c))) * (1 - expit(4.0 * (_ln(f) - np.log(f_r))))
        return np.where(f <= 0, r0, rise(f) * (1 - d) + floor * d)

    return cut
