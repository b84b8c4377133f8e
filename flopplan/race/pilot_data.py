"""The pilots as RACE reads them: per arm, per seed, evaluation points of exact FLOPs spent so far and one score per
prompt of an evaluation set every arm shares (step 0, FLOPs = 0, measures R0). Checked on construction; the
bootstrap (:mod:`flopplan.race.bootstrap`), the checks and the analysis read them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from flopplan.errors import UserError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class EvalPoint:
    """One evaluation of a pilot run: FLOPs spent so far (0 at step 0) and one score per shared evaluation prompt."""

    flops: float
    scores: FloatArray

    def __post_init__(self) -> None:
        scores = np.asarray(self.scores, dtype=float)
        if scores.ndim != 1 or scores.size == 0 or not np.all((scores >= 0) & (scores <= 1)):  # NaN fails too
            raise UserError("EvalPoint.scores must be a non-empty 1-D array of pass rates in [0, 1] (a reward on "
                            "another scale: score 1 where it reaches a threshold, PilotSpec.meter(correct=...))")
        if not (np.isfinite(self.flops) and self.flops >= 0):
            raise UserError("EvalPoint.flops must be finite and >= 0")
        object.__setattr__(self, "scores", scores)


@dataclass(frozen=True)
class SeedRun:
    """One seed of one arm: its evaluation points (any order; at least one at FLOPs = 0)."""

    seed: int | str
    points: tuple[EvalPoint, ...]


@dataclass(frozen=True)
class ArmPilots:
    """The pilots of one allocation choice (policy size, group size G, mu, reward system): its seeds' runs."""

    name: str
    runs: tuple[SeedRun, ...]

    @classmethod
    def from_arrays(cls, name: str, flops: ArrayLike, scores: ArrayLike, seeds: tuple[int | str, ...] | None = None
                    ) -> ArmPilots:
        """From flops (S, T) and scores (S, T, Q) (e.g. :func:`flopplan.race.curves.synthetic_scores`)."""
        f, sc = np.asarray(flops, dtype=float), np.asarray(scores, dtype=float)
        ids = tuple(range(f.shape[0])) if seeds is None else seeds
        return cls(name, tuple(SeedRun(i, tuple(EvalPoint(float(x), y) for x, y in zip(fs, ss, strict=True)))
                               for i, fs, ss in zip(ids, f, sc, strict=True)))

    def check(self) -> int:
        """Refuse in one line what no analysis can read (no run, seed ids twice, a run without its step-0
        evaluation, evaluations of different prompt counts or too few prompts); the prompt count."""
        if not self.runs or len({run.seed for run in self.runs}) != len(self.runs):
            raise UserError(f"arm {self.name!r}: needs at least one run and unique seed ids")
        for run in self.runs:
            if not any(p.flops == 0 for p in run.points):
                raise UserError(f"arm {self.name!r}, seed {run.seed!r}: no step-0 evaluation (FLOPs = 0)")
        sizes = {p.scores.size for run in self.runs for p in run.points}
        if len(sizes) != 1:
            raise UserError(f"arm {self.name!r}: every evaluation must score the same shared prompts; got sizes "
                            f"{sorted(sizes)}")
        check_prompts(min(sizes), f"arm {self.name!r}: every evaluation scores")
        return sizes.pop()

    def evaluated(self) -> tuple[ArmPilots, tuple[int | str, ...]]:
        """The arm less its seeds with no evaluation after step 0 (a seed that stopped before its first), and their
        ids; the arm itself when every seed, or none, has one (with none, the arm cannot be fitted at all)."""
        kept = tuple(r for r in self.runs if any(p.flops > 0 for p in r.points))
        if not kept or len(kept) == len(self.runs):
            return self, ()
        return ArmPilots(self.name, kept), tuple(r.seed for r in self.runs if r not in kept)


MIN_PROMPTS = 2
"""The fewest evaluation prompts RACE can analyse: its bootstrap resamples them (one made the analysis index with
NaN). 100 or more give intervals worth stating."""


def check_prompts(n: int, what: str) -> None:
    """A one-line refusal of an evaluation on fewer than :data:`MIN_PROMPTS` prompts; ``what`` says whose."""
    if n < MIN_PROMPTS:
        raise UserError(f"{what} {n} prompt(s): RACE resamples the shared prompts, so it needs at least {MIN_PROMPTS} "
                        "(100 or more for intervals worth stating)")


@dataclass(frozen=True)
class PilotData:
    """The pilot grid: arms evaluated on one shared prompt set (every score array has the same length)."""

    arms: tuple[ArmPilots, ...]

    def __post_init__(self) -> None:
        if not self.arms or len({arm.name for arm in self.arms}) != len(self.arms):
            raise UserError("PilotData needs at least one arm and unique arm names")
        sizes = {p.scores.size for arm in self.arms for run in arm.runs for p in run.points}
        if len(sizes) != 1:
            raise UserError(f"every evaluation must score the same shared prompts; got sizes {sorted(sizes)}")
        for arm in self.arms:
            arm.check()

    def evaluated(self) -> tuple[PilotData, tuple[str, ...]]:
        """The grid less the seeds with no evaluation after step 0 (:meth:`ArmPilots.evaluated`: a seed that stopped
        before its first), and a warning per arm that lost one."""
        arms, warnings = [], []
        for arm in self.arms:
            kept, left_out = arm.evaluated()
            arms.append(kept)
            if left_out:
                ids = ", ".join(map(str, left_out))
                warnings.append(f"{arm.name}: seed{'s' if len(left_out) > 1 else ''} {ids} with no evaluation after "
                                "step 0 (stopped before the first) left out; the arms' seeds no longer alike, the "
                                "bootstrap resamples each arm's seeds on their own")
        return (PilotData(tuple(arms)) if warnings else self), tuple(warnings)

    @property
    def n_prompts(self) -> int:
        return int(self.arms[0].runs[0].points[0].scores.size)
