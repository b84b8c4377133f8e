"""What a RACE design says before any pilot runs about the analysis its pilots will get: how far F extrapolates
beyond the largest pilot against the horizon the analysis was checked at, and what one seed per arm leaves
assumed. The design's table prints them (:func:`flopplan.race.design.design_race`); the analysis's horizon
caveat reads the same horizon (:func:`flopplan.race.persistence.horizon_caveat`)."""

from __future__ import annotations

MEASURED_HORIZON = 2.0  # F over the largest pilot in benchmarks/race_misspecification.py's default protocol
HORIZON_SLACK = 1.25  # a largest pilot's ledger falls short of its rung's budget: 2x by rungs reads a little more


def one_seed_note(sd: float) -> str:
    """What a design of one seed says before any pilot runs: the seeds' spread will be assumed (``--seed-sd``)."""
    return (f"one seed per arm: the analysis cannot measure how far an arm's seeds differ and assumes a seed sd of "
            f"{sd * 100:g} % of the gain (--seed-sd; flopplan.race.seed_pooling); on simulated truths, assuming 5 %, a "
            "one-seed grid's stated P(best) read up to 0.15 above how often its pick was best where curves crossed "
            "(0.08 since round 30's P(best) under 'cannot tell'), 0.20 where seeds differed twice as much as assumed "
            "(round 24, before it; docs/results.md): two seeds let the grid measure the spread")


def horizon_note(horizon: float, seeds: int = 3) -> str:
    """What a design's horizon (F over its largest pilot) means for the analysis, said before any pilot runs: the
    intervals and stated P(best) were checked against simulated truths at :data:`MEASURED_HORIZON`, the P(best)
    found off by up to 0.43 at 4x-8x (docs/results.md, rounds 6, 9 and 10); beyond it the analysis reads the
    P(best) as how strongly the pilots favour an arm (``persistence.horizon_caveat``). The largest pilot grows with
    the pilot fraction and a steeper ladder, and shrinks with the arms and seeds it is shared by (the default grid
    at F = 1e14: 59.1x; 29.8x at --pilot-fraction 0.5, 19.9x with one seed, 41.8x with four rungs, 31.5x at --eta
    4, 70.4x with one rung). One seed leaves the seeds' spread assumed, not measured (:func:`one_seed_note`), so
    the note names fewer seeds only to a design of more than two."""
    note = f"F is {horizon:.1f}x the largest pilot: predictions at F extrapolate that far"
    if horizon <= MEASURED_HORIZON * HORIZON_SLACK:
        return note
    fewer = "fewer arms or seeds (two at least)" if seeds > 2 else "fewer arms"
    return (f"{note}. RACE's intervals and P(best) were checked against simulated truths at {MEASURED_HORIZON:g}x "
            "(the anchored P(best) off by up to 0.43 at 4x-8x: docs/results.md), so the analysis will read the P(best) "
            "as how strongly the pilots favour an arm, not as the chance that it is best at F; a larger "
            f"--pilot-fraction, {fewer}, or a steeper ladder (more --rungs, a larger --eta) brings the largest pilot "
            "closer to F")


HOLDOUT_POSITIONS = 5  # the fewest evaluation positions after step 0 from which the model average holds one out
#                        (flopplan.race.ensemble; two from HOLDOUT_POSITIONS + 2)


def holdout_note(positions: int) -> str:
    """What a design whose top-rung pilots evaluate at too few positions leaves the analysis without: a held-out
    point, so the model average weighs its curve families equally and no split-conformal calibration from the
    pilots' own holdout widens its intervals. '' when there are enough."""
    if positions >= HOLDOUT_POSITIONS:
        return ""
    return (f"a top-rung pilot evaluates at about {positions} positions after step 0 (the --evals points and each "
            f"rung's end), fewer than the {HOLDOUT_POSITIONS} from which the analysis holds one out: its curve "
            "families will be weighted equally and its intervals not calibrated on the pilots' own held-out points; "
            "more --evals gives it them")


def few_positions_note(arms: list[str]) -> str:
    """What a design says of arms whose first-rung pilots evaluate at fewer than the 3 positions a curve is fitted
    from (the budget could not pay for the point that gives them a third: :mod:`flopplan.race.eval_points`): one the
    halving sets aside there is reported not fitted. '' when there are none."""
    if not arms:
        return ""
    return (f"{', '.join(arms)}: the first-rung pilots evaluate at fewer than the 3 positions a curve is fitted "
            "from (the evaluation points fall on too few of their steps, and the budget could not pay for one "
            "more), so an arm the halving sets aside there will be reported not fitted; a larger --budget or "
            "--pilot-fraction pays for it")
