"""Synthetic RACE inputs the analysis tests share: arms whose pilots are drawn from known ScaleRL curves.

Pilots come from flopplan.race.curves.synthetic_scores: 0/1 scores on 200 shared prompts (Gaussian-copula prompt
difficulty), 3 seeds, seed sd 0.02 on A, step 0 plus 5 log-spaced evaluations up to the arm's last rung. Every draw
is seeded.
"""

from __future__ import annotations

import numpy as np

from flopplan.race.analysis import RaceInput
from flopplan.race.curves import synthetic_scores
from flopplan.race.pilot_data import ArmPilots, PilotData
from flopplan.race.results import ArmInfo

F_PILOT = 1e20
RUNGS = (F_PILOT / 4, F_PILOT)
SPLIT = {"rollout": 0.6, "learning": 0.4, "feedback": 0.0}
REPS = 200
TRUTH = {"a": 0.6, "b": 1.5, "f_mid": F_PILOT / 4, "r0": 0.2}


def info(name: str, params: int = 500_000_000, split: dict[str, float] | None = None, upfront: int = 0,
         **axes: str | int | float) -> ArmInfo:
    return ArmInfo(name, dict(axes), params, split or SPLIT, upfront)


def pilots(rng: np.random.Generator, eta: np.ndarray, name: str, reach: float = F_PILOT, **truth: float) -> ArmPilots:
    return ArmPilots.from_arrays(name, *synthetic_scores(rng, f_pilot=reach, prompt_latent=eta, **(TRUTH | truth)))


def race(pairs: list[tuple[ArmInfo, ArmPilots]], budget: float = 2 * F_PILOT, reached: dict[str, int] | None = None,
         extra: dict[str, PilotData] | None = None) -> RaceInput:
    targets = {"math": PilotData(tuple(a for _, a in pairs))} | (extra or {})
    reached = reached or {i.name: len(RUNGS) - 1 for i, _ in pairs}
    return RaceInput(tuple(i for i, _ in pairs), targets, ("math",), budget, RUNGS, reached, int(0.2 * budget),
                     "flopplan race analyze runs/demo")


def two_arms(seed: int, axis: str, weak: dict[str, object], strong: dict[str, object], a_weak: float = 0.45,
             a_strong: float = 0.75, **kw: object) -> RaceInput:
    rng = np.random.default_rng(seed)
    eta = rng.standard_normal(200)
    return race([(info("weak", **weak), pilots(rng, eta, "weak", a=a_weak)),  # type: ignore[arg-type]
                 (info("strong", **strong), pilots(rng, eta, "strong", a=a_strong))], **kw)  # type: ignore[arg-type]


def size_race_input() -> RaceInput:
    """Two arms that differ in policy size (A 0.45 and 0.75), the one race most tests read."""
    return two_arms(1, "policy", {"policy": "0.5B", "params": 500_000_000}, {"policy": "1.5B", "params": 1_500_000_000})
