"""The fall test: the arms whose pilots already fall at their largest pilot, for which the model average also fits
the steep-fall family (:data:`flopplan.race.families.FALL_FAMILY`, R = c0 + c1 u - c2 e^(g u) in u = ln F).

The test mirrors the acceleration test (:mod:`flopplan.race.acceleration`) on the same quadratic in ln F over the
arm's last four distinct positions, fitted to every bootstrap draw: the arm is *falling* when the quadratic's slope
at the largest pilot is below 0 in at least ``level`` of the draws (0.9 for 90 % intervals: a one-sided test, the
draws resampling seeds and prompts). An arm that is flat within its noise falls in about half the draws and is not
falling.

Why gated. A reward-model over-optimisation curve (Gao, Schulman and Hilton, arXiv 2210.10760) falls ever faster
in ln F; the four families every arm gets bend over at most as a quadratic does, and on simulated pilots of that
shape (benchmarks/shapes_round20.py's ``overoptimised``) the 90 % intervals held the truth at F 0.368 of the time
where the pilots showed the fall (docs/results.md, round 20). Fitted to every arm, the steep fall brought that
shape's coverage to 0.813, but on rising arms it is one more curve that bends over: it moved their mixtures, the
promotion and the stated P(best), and the crossing sigmoids at one seed went from 0.066 to 0.125 above their hit
rate (round 20's trial). Gated, it enters only where the pilots show what it models; the gated family's figures
are in docs/results.md, round 21.

What it does not see: a fall that starts after the largest pilot. No test on the pilots can.
"""

from __future__ import annotations

import numpy as np

from flopplan.race.acceleration import last_quadratic
from flopplan.race.families import ArmSample


def fall_share(sample: ArmSample) -> float | None:
    """The share of the bootstrap draws (rows 1..) whose quadratic in ln F over the last four distinct positions
    falls at the largest pilot (slope < 0 there); None with too few positions to test."""
    coef = last_quadratic(sample)
    return None if coef is None else float(np.mean(coef[:, 1] < 0))


def falling(share: float | None, level: float) -> bool:
    """The module's test: the slope is negative in at least ``level`` of the draws."""
    return share is not None and share >= level
