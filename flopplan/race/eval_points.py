"""Where a race's pilots evaluate: the training FLOPs after which every pilot evaluates (besides step 0 and its
last step at each rung), and the positions those give each arm.

A pilot evaluates after the first step whose training FLOPs reach each point (``flopplan train --eval-at-flops``;
a TRL script's pilot the same, :mod:`flopplan.engines.trl_points`) and after its last step at every rung. The
points are shared by every arm: ``--evals`` of them, log-spaced from the cheapest arm's first step up to the top
rung (:func:`log_points`). An arm whose steps are dear takes few steps in its first rung, and the points can fall
between two of them, so several land on one step: the demo's tiny-l arms took 3 steps at the first rung and
evaluated after steps 1 and 3 only. A curve needs positions at 3 distinct FLOPs
(:func:`flopplan.race.curves.fit_curve`), so an arm the halving then set aside could not be fitted at all.
:func:`evaluation_points` adds, for such an arm, the point halfway in ln FLOPs between its first step and its first
rung's end, ``s sqrt(n)`` for n steps of s FLOPs: the lowest point (the cheapest arm's first step) falls on its
step 1, this one on a step between (step 2 of 3; 18 of 306), the rung's end on step n, each more than 10 % from the
next.

The positions are counted as the analysis counts them (:func:`flopplan.race.families.distinct_positions`: more
than 10 % apart in FLOPs), at the planner's worst-case step FLOPs; a step that costs less than priced moves a point
to a later step and gives the pilot more steps (its training FLOPs are capped at the rung, not its steps).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from flopplan.race.families import CURVE_POSITIONS, distinct_positions


def log_points(low: float, high: float, n: int) -> tuple[int, ...]:
    """``n`` training-FLOP points log-spaced from ``low`` up to, not at, ``high`` (rounded, each once): ``low
    (high / low)^(i / n)`` for i < n, the last a step of the log spacing below ``high``. A pilot's training stops
    at or before its rung (``--train-flops``) and evaluates there anyway, so a point at the top rung (as before
    2026-12-07) was never reached: ``--evals N`` gave N - 1 points. ``low`` alone when the span is empty."""
    if high <= low:
        return (round(low),)
    return tuple(sorted({round(low * (high / low) ** (i / n)) for i in range(n)}))


def evaluated_steps(points: Iterable[int], step_flops: int, ends: Sequence[int], budget: int) -> list[int]:
    """The steps (1-based) after which a pilot evaluates, each step of ``step_flops`` training FLOPs, having ended
    its rungs so far after ``ends`` steps (the last its own, within ``budget`` training FLOPs): the first step
    reaching each point, and each rung's last."""
    return sorted({min(ends[-1], math.ceil(p / step_flops)) for p in points if p <= budget} | set(ends))


def positions(points: Iterable[int], step_flops: int, ends: Sequence[int], budget: int) -> int:
    """How many distinct positions (as the analysis counts them) those evaluations are at; 0 for a pilot of no
    step (a budget the design then refuses)."""
    if not ends or ends[-1] < 1 or step_flops < 1:
        return 0
    flops = np.array(evaluated_steps(points, step_flops, ends, budget), dtype=float) * step_flops
    return int(distinct_positions(np.log(flops)).size)


def evaluation_points(low: int, top: int, n: int, arms: Sequence[tuple[int, int]], first_rung: int) -> tuple[int, ...]:
    """The race's points: ``n`` log-spaced from ``low`` to ``top``, and for each arm (its first rung's ``(step
    FLOPs, steps)``) whose first rung of ``first_rung`` training FLOPs they give fewer than :data:`CURVE_POSITIONS`
    positions, the point halfway in ln FLOPs between its first step and its first rung's end (module docstring)."""
    points = set(log_points(low, top, n))
    for step_flops, steps in arms:
        if positions(points, step_flops, (steps,), first_rung) < CURVE_POSITIONS:
            points.add(round(step_flops * math.sqrt(steps)))
    return tuple(sorted(points))
