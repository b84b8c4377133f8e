"""The temporal holdout's records in the analysis (step 4 of :mod:`flopplan.race.analysis`): per surviving arm, the
refit on the first half of its FLOPs and the second half predicted (:func:`flopplan.race.bootstrap.temporal_holdout`),
and their summary over the arms."""

from __future__ import annotations

import numpy as np

from flopplan.errors import UserError
from flopplan.race.bootstrap import temporal_holdout
from flopplan.race.pilot_data import ArmPilots
from flopplan.race.results import HoldoutRecord, HoldoutSummary


def record(arm: ArmPilots, n_replicates: int, level: float, rng: np.random.Generator) -> HoldoutRecord:
    """One arm's temporal holdout; a holdout that cannot be fitted is recorded with its reason."""
    try:
        ho = temporal_holdout(arm, n_replicates=n_replicates, level=level, rng=rng)
    except UserError as exc:
        return HoldoutRecord(arm=arm.name, ok=False, reason=str(exc), split_flops=None, identified=None, points=(),
                             mean_abs_error=None, coverage=None, consistency=None)
    return HoldoutRecord(arm=arm.name, ok=True, reason="", split_flops=ho.split_flops, identified=ho.arm_fit.identified,
                         points=ho.points, mean_abs_error=ho.mean_abs_error, coverage=ho.coverage,
                         consistency=ho.consistency)


def summary(records: list[HoldoutRecord], n_replicates: int, level: float) -> HoldoutSummary | None:
    """The arms' held-out points together (None: none could be fitted)."""
    ok = [r for r in records if r.ok]
    pts = [p for r in ok for p in r.points]
    if not pts:
        return None
    err = np.abs([p.error for p in pts])
    method = (f"refit on the evaluation positions with FLOPs <= 0.5 x the arm's largest (+2 %), the rest predicted; "
              f"paired bootstrap of {n_replicates} replicates over prompts and seeds; coverage: share of held-out "
              f"observations inside the {level:.0%} percentile interval of the predicted curve (it leaves out the "
              f"point's own noise, so a calibrated fit covers less than {level:.0%}); consistency: share whose "
              f"{level:.0%} interval of observed - predicted contains 0 (calibrated: about {level:.0%})")
    return HoldoutSummary(n_arms=len(ok), n_points=len(pts), mean_abs_error=float(err.mean()),
                          max_abs_error=float(err.max()), coverage=float(np.mean([p.inside for p in pts])),
                          consistency=float(np.mean([p.consistent for p in pts])), method=method)
