"""The GRPO loss knobs as data (torch-free: the TRL and verl exports read them too)."""

from __future__ import annotations

from dataclasses import dataclass

AGGREGATIONS = ("token", "sequence")
SCALE_REWARDS = ("group", "none")


@dataclass(frozen=True)
class LossConfig:
    """The clipped surrogate's knobs: ``clip_low``/``clip_high`` are TRL's ``epsilon``/``epsilon_high``, ``beta``
    the KL coefficient (k3 estimator against the reference), ``aggregation`` how token losses are averaged
    (``token``: over all tokens of the optimizer batch, DAPO and TRL's default; ``sequence``: per sequence first, the
    GRPO paper), ``temperature`` the sampling temperature the logprobs are taken at."""

    clip_low: float = 0.2
    clip_high: float = 0.2
    beta: float = 0.0
    aggregation: str = "token"
    temperature: float = 1.0
