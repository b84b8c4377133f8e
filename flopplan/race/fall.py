"""The fall test: the arms whose pilots already fall at their largest pilot, for which the model average also fits
the steep-fall family (:data:`flopplan.race.families.FALL_FAMILY`, R = c0 + c1 u - c2 e^(g u), u = ln(F / F_ref)).

The test mirrors the acceleration test (:mod:`flopplan.race.acceleration`) on the same quadratic in ln F over the
arm's last four distinct positions, fitted to every bootstrap draw: the arm is *falling* when the quadratic's slope
at the largest pilot is below 0 in at least ``level`` of the draws (0.9 for 90 % intervals: a one-sided test, the
draws resampling seeds and prompts). An arm that is flat within its noise falls in about half the draws and is not
falling.

Why gated. A reward-model over-optimisation curve (Gao, Schulman and Hilton, arXiv 2210.10760) falls ever faster
in ln F; the four families every arm gets bend over at most as a quadratic does, and on simulated pilots of that
shape (benchmarks/shapes_round20.py's ``overoptimised``) the 90 % intervals held the truth at F 0.368 of the time
where the pilots showed the fall (docs/results.md, round 20). Fitted to every arm, the steep fall is one more curve
that bends over on rising arms too, and moves their mixtures; round 20 measured it so on unpaired repetitions and
did not land it. Gated, it enters only where the pilots show what it models: on paired repetitions
(benchmarks/race_misspecification.py --paired; docs/results.md, round 21) the over-optimised shape's coverage
rose from 0.728 / 0.761 to 0.763 / 0.820 (two seeds), the collapse's and the decline's by 0.03 and 0.01, and no
cell of crossing sigmoids moved its stated P(best) by more than 0.007 or its hit rate by more than 0.005.

What it does not see: a fall that starts after the largest pilot. No test on the pilots can.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def fall_share(quadratic: NDArray[np.float64] | None) -> float | None:
    """The share of the bootstrap draws whose quadratic in ln F over the last four distinct positions falls at the
    largest pilot (slope c1 < 0 at u = 0), from the coefficients :func:`flopplan.race.acceleration.last_quadratic`
    fits (the acceleration test's, :attr:`~flopplan.race.acceleration.Acceleration.quadratic`); None with too few
    positions to test."""
    return None if quadratic is None else float(np.mean(quadratic[:, 1] < 0))


def falling(share: float | None, level: float) -> bool:
    """The module's test: the slope is negative in at least ``level`` of the draws."""
    return share is not None and share >= level
