"""The stated P(best) of a recommendation: the curves at the budget, combined with the ranking seen at the largest
pilot (the persistence forecast).

Two forecasts of which finalist (an arm that reached the top rung) is best at the budget F:

* the curves: the share of the model average's calibrated replicates at F in which the arm is highest
  (:mod:`flopplan.race.ensemble`);
* persistence: the order seen at the largest pilot holds at F (the no-change forecast of time series, and the
  "single-scale ranking" that DataDecide (arXiv 2504.11393) found right about 80 % of the time pairwise, ahead
  of eight scaling-law methods): the share of the same paired bootstrap draws (prompts and seeds) in which the arm's
  seed-mean reward at its last evaluation is the highest (:func:`last_observed`). An arm the halving eliminated was
  not seen there: persistence gives it 0.

Stated P(best) = ``PERSISTENCE_WEIGHT`` x persistence + (1 - ``PERSISTENCE_WEIGHT``) x curves: a linear pool of the
two forecasts (Stone 1961; Bates & Granger 1969 on combining forecasts). Why both: on simulated pilots whose truths
are not the fitted curves (benchmarks/race_misspecification.py, 200 repetitions per family; docs/results.md), the
curves alone stated 0.11-0.14 less than how often the pick was right where curves saturate (their replicates
spread each arm's rise beyond the pilots more widely than the truths differ), and persistence alone stated up to
0.17 more where curves cross after the pilots. The weight 0.4 minimised the largest miss over the five families
the rules are tuned on (two seeds, 40-60 repetitions); on three seeds at 200 repetitions the pooled P(best) is
within 0.10 of the hit rate in 26 of 27 family-seed cells, 0.12 too high where curves cross at one. It is a
property of those simulations (4 arms, 3 seeds, 200 prompts, F twice the largest pilot), not a law: with F far
beyond the pilots persistence is the weaker forecast, and the weight is not re-estimated from a grid's own pilots
(a grid holds one ranking, too few to fit it).

The decision (which arm, and "cannot tell") still reads the curves (:mod:`flopplan.race.regime`); only the
probability stated for the recommended arm combines the two.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from flopplan.race.bootstrap import p_best
from flopplan.race.ensemble import seed_mean
from flopplan.race.families import ArmSample

FloatArray = NDArray[np.float64]
PERSISTENCE_WEIGHT = 0.4


def last_observed(sample: ArmSample) -> FloatArray:
    """Per row of ``sample`` (the original data, then each draw): the seed-mean reward at each seed slot's last
    evaluation (1 + k,); a slot with no evaluation in a row does not count."""
    valid = sample.w > 0
    last = (valid.shape[-1] - 1 - np.argmax(valid[..., ::-1], axis=-1))[..., None]  # (1 + k, S, 1)
    y = np.take_along_axis(sample.y, last, axis=-1)
    w = np.take_along_axis(sample.w, last, axis=-1) * valid.any(axis=-1, keepdims=True)
    return seed_mean(y, w)[..., 0]


def stated_p_best(curves: FloatArray, seen: FloatArray, finalist: NDArray[np.bool_]
                  ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per arm of a pool: (stated P(best), persistence's P(best), the curves' P(best)) from the curves' replicates
    at the budget ``curves`` (n, k), the draws' last observed means ``seen`` (n, k) and which arms are finalists
    (n,)."""
    persist = np.zeros(len(finalist))
    if finalist.any():
        persist[finalist] = p_best(seen[finalist])
    by_curves = p_best(curves)
    return PERSISTENCE_WEIGHT * persist + (1 - PERSISTENCE_WEIGHT) * by_curves, persist, by_curves
